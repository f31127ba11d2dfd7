//! What the API's WebSockets (stream, terminal) share: every send to a client has a deadline,
//! and the close codes a client can act on (docs/api.md lists them).

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{FutureExt as _, SinkExt, StreamExt};
use tokio::sync::oneshot;

/// Bytes each read from a WebSocket's connection takes at most. tungstenite zeroes its read
/// buffer up to this size before every read (also one that finds nothing), so its default of
/// 128 KiB cost a 128 KiB `memset` per message: 11 % of the server's CPU with 30 agents
/// streaming (docs/benchmarks.md). A larger message is read in several reads.
pub const READ_BUFFER_BYTES: usize = 8 << 10;

/// The sending half of a client's socket.
pub type Sink = SplitSink<WebSocket, Message>;

/// The token or browser session was revoked or expired: sign in again.
pub const CLOSE_REVOKED: u16 = 4401;
/// The user was removed from the resource's workspace, or lost the role it needs.
pub const CLOSE_ACCESS_ENDED: u16 = 4403;
/// The session was deleted.
pub const CLOSE_DELETED: u16 = 4404;
/// The client did not take a message within the send timeout: reconnect (a stream resumes from
/// its cursor).
pub const CLOSE_TOO_SLOW: u16 = 4408;
/// A terminal's output got too far ahead of its client: the terminal was closed.
pub const CLOSE_OUTPUT_OVERFLOW: u16 = 4429;
/// The sandbox went away or stopped taking input.
pub const CLOSE_SANDBOX_GONE: u16 = 4502;
/// The server could not go on (a database error); reconnect later.
pub const CLOSE_INTERNAL: u16 = 1011;
/// The server is shutting down (or restarting): reconnect (with the cursor) shortly.
pub const CLOSE_RESTARTING: u16 = 1012;

/// Why a send failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The client is gone.
    Gone,
    /// The client did not take the message in time.
    TooSlow,
}

/// Sends one message (or flushes, with `None`) within `timeout`.
pub async fn send(sink: &mut Sink, message: Message, timeout: Duration) -> Result<(), SendError> {
    match tokio::time::timeout(timeout, sink.send(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(SendError::Gone),
        Err(_) => Err(SendError::TooSlow),
    }
}

/// Queues one message within `timeout` (sent by the next [`flush`]). A message the sink takes at
/// once (its buffer has room: nearly every one of a batch) arms no timer — a flood feeds each
/// watcher thousands per batch, and a timer each cost a clock read and a registration.
pub async fn feed(sink: &mut Sink, message: Message, timeout: Duration) -> Result<(), SendError> {
    let mut feeding = std::pin::pin!(sink.feed(message));
    let taken = match feeding.as_mut().now_or_never() {
        Some(taken) => taken,
        // Polled once and waiting: the timer bounds the rest of the wait.
        None => match tokio::time::timeout(timeout, feeding).await {
            Ok(taken) => taken,
            Err(_) => return Err(SendError::TooSlow),
        },
    };
    taken.map_err(|_| SendError::Gone)
}

/// Flushes what was fed within `timeout`.
pub async fn flush(sink: &mut Sink, timeout: Duration) -> Result<(), SendError> {
    match tokio::time::timeout(timeout, sink.flush()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(SendError::Gone),
        Err(_) => Err(SendError::TooSlow),
    }
}

/// Closes with a code and a reason (best effort: a stalled client gets a short grace, then the
/// connection is dropped).
pub async fn close(sink: &mut Sink, code: u16, reason: &str) {
    let frame = CloseFrame { code, reason: reason.to_owned().into() };
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(Message::Close(Some(frame)))).await;
}

/// Completes the close handshake a client began: its Close was read, and the reply the protocol
/// queued for it is flushed (at most a second) before the socket goes.
pub async fn answer_close(sink: &mut Sink) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = sink.flush().await;
        let _ = sink.close().await;
    })
    .await;
}

/// Closes a client that did not keep up (after a [`SendError::TooSlow`]); logs it.
pub async fn close_too_slow(sink: &mut Sink, what: &'static str) {
    tracing::info!(socket = what, "closing a WebSocket whose client did not read in time");
    close(sink, CLOSE_TOO_SLOW, "the client did not read in time; reconnect").await;
}

/// How a client's side of a socket ended (see [`ClientWatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEnd {
    /// It sent a Close: answer it ([`answer_close`]).
    Closed,
    /// The connection broke, or the client's frames could not be read.
    Dropped,
}

/// Reads a client's frames on a task of their own, dropping all but its Close, for a socket the
/// server mostly writes to (the event stream). Polling the reading half in the writer's loop cost a
/// zeroed read buffer and a readiness check per event sent, per watcher; the task wakes only when
/// the client sends. Dropping the watch ends the task (and with it the reading half, so the socket
/// goes once its writer is done).
pub struct ClientWatch {
    end: oneshot::Receiver<ClientEnd>,
    ended: Option<ClientEnd>,
}

impl ClientWatch {
    /// Starts reading the client's side.
    pub fn spawn(mut incoming: SplitStream<WebSocket>) -> Self {
        let (mut tx, end) = oneshot::channel();
        tokio::spawn(async move {
            let end = loop {
                tokio::select! {
                    () = tx.closed() => return,
                    message = incoming.next() => match message {
                        None | Some(Err(_)) => break ClientEnd::Dropped,
                        Some(Ok(Message::Close(_))) => break ClientEnd::Closed,
                        Some(Ok(_)) => {}
                    },
                }
            };
            let _ = tx.send(end);
        });
        Self { end, ended: None }
    }

    /// Resolves when the client's side has ended (at once if it had).
    pub async fn ended(&mut self) -> ClientEnd {
        if let Some(end) = self.ended {
            return end;
        }
        // A reading task that is gone without a word counts as a dropped connection.
        let end = (&mut self.end).await.unwrap_or(ClientEnd::Dropped);
        self.ended = Some(end);
        end
    }
}

/// Resolves once the server begins to shut down (or is gone).
pub async fn server_stopping(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stopping| *stopping).await;
}
