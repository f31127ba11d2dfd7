//! One sandboxd connection: a writer task draining outgoing messages into the socket, and a
//! reader that routes terminal output to terminal watchers and everything else to the agent's
//! supervisor. Everything is bounded by bytes and nothing outside can stall the reader: the
//! outgoing queue holds at most [`OUTGOING_QUEUE_BYTES`] (past that the link is dropped and
//! sandboxd reconnects), each terminal's output queue at most [`TERMINAL_QUEUE_BYTES`] (past that
//! the terminal is closed), and a tunnel silent for the configured time is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataFrame, DataKind, PROTOCOL_VERSION};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::byte_queue::ByteQueue;
use crate::ids::AgentId;

/// How long sandboxd has to say hello after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Tunnel messages a supervisor may have unread before the socket stops being read: with
/// [`MAX_MESSAGE_BYTES`], at most 64 MiB per sandbox (4 MiB with sandboxd's 64 KiB chunks).
const INBOX_DEPTH: usize = 64;
/// Largest message sandboxd may send.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// Most bytes waiting to be written to sandboxd; a message past that drops the link.
pub const OUTGOING_QUEUE_BYTES: usize = 32 << 20;
/// Terminal input waits while the outgoing queue holds more than this, so a browser pasting
/// fast slows itself down and never fills the queue the supervisor's messages need.
pub const TERMINAL_INPUT_LIMIT: usize = OUTGOING_QUEUE_BYTES / 4;
/// Most output bytes one terminal may have waiting for its browser; past that it is closed.
pub const TERMINAL_QUEUE_BYTES: usize = 1 << 20;
/// What a queued control message or terminal event weighs besides its bytes.
const OVERHEAD_BYTES: usize = 64;
/// Close code sent to a sandboxd that speaks another protocol version (1002: protocol error).
const CLOSE_PROTOCOL: u16 = 1002;

static NEXT_LINK_ID: AtomicU64 = AtomicU64::new(1);

/// What arrives from sandboxd for the supervisor (everything but terminal traffic).
#[derive(Debug)]
pub enum Incoming {
    /// A control message.
    Control(Control),
    /// stdout or stderr bytes.
    Data(DataFrame),
}

/// What a terminal watcher receives.
#[derive(Debug)]
pub enum TerminalEvent {
    /// Output bytes.
    Output(Bytes),
    /// The shell ended, or the terminal could not start (with why).
    Closed(Option<String>),
}

impl TerminalEvent {
    fn weight(&self) -> usize {
        match self {
            Self::Output(bytes) => bytes.len() + OVERHEAD_BYTES,
            Self::Closed(reason) => reason.as_ref().map_or(0, String::len) + OVERHEAD_BYTES,
        }
    }
}

/// A terminal's output as its watcher reads it. When the watcher falls more than
/// [`TERMINAL_QUEUE_BYTES`] behind, the queue is dropped ([`ByteQueue::was_dropped`]) and the
/// terminal closed.
pub type TerminalOutput = Arc<ByteQueue<TerminalEvent>>;

enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
}

impl Outgoing {
    fn weight(&self) -> usize {
        OVERHEAD_BYTES
            + match self {
                Self::Text(text) => text.len(),
                Self::Binary(bytes) => bytes.len(),
            }
    }
}

/// A handle to one live sandboxd connection. Cheap to clone; sends fail quietly once it is gone
/// (the supervisor learns of that from its inbox closing).
#[derive(Clone)]
pub struct Link {
    /// Unique per connection (within this server process).
    pub id: u64,
    out: Arc<ByteQueue<Outgoing>>,
    terminals: Arc<Mutex<HashMap<u32, TerminalOutput>>>,
}

impl Link {
    fn new() -> Self {
        Self {
            id: NEXT_LINK_ID.fetch_add(1, Ordering::Relaxed),
            out: Arc::new(ByteQueue::new(OUTGOING_QUEUE_BYTES)),
            terminals: Arc::default(),
        }
    }

    /// Sends a control message. False if the link is gone, or was just dropped because sandboxd
    /// is not reading (over [`OUTGOING_QUEUE_BYTES`] waiting).
    pub fn send(&self, message: &Control) -> bool {
        match serde_json::to_string(message) {
            Ok(text) => self.enqueue(Outgoing::Text(text)),
            Err(_) => false,
        }
    }

    /// Sends bytes of a channel (same bound as [`Self::send`]).
    pub fn send_data(&self, kind: DataKind, channel: u32, offset: u64, payload: Bytes) -> bool {
        let frame = DataFrame { kind, channel, offset, payload };
        self.enqueue(Outgoing::Binary(frame.encode()))
    }

    fn enqueue(&self, message: Outgoing) -> bool {
        let weight = message.weight();
        if self.out.try_push(message, weight).is_ok() {
            return true;
        }
        if !self.out.is_closed() {
            tracing::warn!(
                link.id = self.id,
                queued_bytes = self.out.queued_bytes(),
                "sandboxd is not reading its tunnel: dropping the link"
            );
            self.out.drop_all();
        }
        false
    }

    /// Sends terminal input, waiting while the outgoing queue is over [`TERMINAL_INPUT_LIMIT`]
    /// (bound the wait with a timeout). False once the link is gone.
    pub async fn send_terminal_input(&self, channel: u32, offset: u64, payload: Bytes) -> bool {
        let frame = DataFrame { kind: DataKind::TerminalInput, channel, offset, payload };
        let message = Outgoing::Binary(frame.encode());
        let weight = message.weight();
        self.out.push_below(message, weight, TERMINAL_INPUT_LIMIT).await.is_ok()
    }

    /// Ends the connection (sandboxd dials again); what is queued for it is dropped.
    pub fn close(&self) {
        self.out.drop_all();
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        !self.out.is_closed()
    }

    /// Routes a terminal channel's output to a new queue, which the caller reads.
    pub fn watch_terminal(&self, channel: u32) -> TerminalOutput {
        let output = Arc::new(ByteQueue::new(TERMINAL_QUEUE_BYTES));
        if self.out.is_closed() {
            let _ = output.try_push(TerminalEvent::Closed(Some("the sandbox disconnected".to_owned())), 0);
            output.close();
        }
        self.terminals.lock().insert(channel, Arc::clone(&output));
        output
    }

    /// Stops routing a terminal channel.
    pub fn unwatch_terminal(&self, channel: u32) {
        self.terminals.lock().remove(&channel);
    }

    /// Delivers terminal traffic without ever waiting; returns the message back if it is not for
    /// a terminal. A terminal whose watcher is too far behind is closed (here and in sandboxd).
    fn route_terminal(&self, incoming: Incoming) -> Option<Incoming> {
        let (channel, event) = match incoming {
            Incoming::Data(frame) if frame.kind == DataKind::TerminalOutput => {
                (frame.channel, TerminalEvent::Output(frame.payload))
            }
            Incoming::Control(Control::TerminalClosed { channel }) => (channel, TerminalEvent::Closed(None)),
            Incoming::Control(Control::StartFailed { channel, message })
                if self.terminals.lock().contains_key(&channel) =>
            {
                (channel, TerminalEvent::Closed(Some(message)))
            }
            other => return Some(other),
        };
        let output = self.terminals.lock().get(&channel).cloned();
        if let Some(output) = output {
            let weight = event.weight();
            if output.try_push(event, weight).is_err() && !output.is_closed() {
                tracing::info!(
                    link.id = self.id,
                    terminal.channel = channel,
                    "a terminal's reader fell over {TERMINAL_QUEUE_BYTES} bytes behind: closing the terminal"
                );
                self.unwatch_terminal(channel);
                output.drop_all();
                self.send(&Control::CloseTerminal { channel });
            }
        }
        None
    }
}

/// What becomes of an accepted connection once sandboxd said hello: given the link, the hello
/// and the inbox, whether someone took it (the accepting side decides who: an agent's
/// supervisor, or the warm pool).
pub type HandOver =
    Box<dyn FnOnce(Link, Control, mpsc::Receiver<Incoming>) -> futures_util::future::BoxFuture<'static, bool> + Send>;

/// Serves one accepted sandboxd connection until it closes, or stays silent for `silent`.
pub async fn serve(socket: WebSocket, agent_id: AgentId, hand_over: HandOver, silent: Duration) {
    let (mut sink, mut stream) = socket.split();
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, next_incoming(&mut stream, silent)).await {
        Ok(Next::Message(Incoming::Control(hello @ Control::Hello { .. }))) => hello,
        _ => {
            tracing::warn!(agent.id = %agent_id, "sandboxd connected without a hello");
            return;
        }
    };
    if let Control::Hello { protocol, version, .. } = &hello
        && *protocol != PROTOCOL_VERSION
    {
        tracing::warn!(
            agent.id = %agent_id,
            sandboxd.protocol = protocol,
            sandboxd.version = %version,
            "refusing sandboxd: it speaks tunnel protocol {protocol}, this server speaks {PROTOCOL_VERSION}"
        );
        let reason = format!("tunnel protocol {protocol} is not supported; this server speaks {PROTOCOL_VERSION}");
        let close = CloseFrame { code: CLOSE_PROTOCOL, reason: reason.into() };
        let _ = tokio::time::timeout(HELLO_TIMEOUT, sink.send(Message::Close(Some(close)))).await;
        return;
    }
    let link = Link::new();
    let (inbox, inbox_rx) = mpsc::channel(INBOX_DEPTH);
    let attached = hand_over(link.clone(), hello, inbox_rx).await;
    if !attached {
        return;
    }
    tracing::info!(agent.id = %agent_id, link.id = link.id, "sandboxd connected");

    let writer = async {
        while let Some(message) = link.out.pop().await {
            let message = match message {
                Outgoing::Text(text) => Message::Text(text.into()),
                Outgoing::Binary(bytes) => Message::Binary(bytes.into()),
            };
            if sink.send(message).await.is_err() {
                break;
            }
        }
        let _ = tokio::time::timeout(HELLO_TIMEOUT, sink.close()).await;
    };
    let reader = async {
        loop {
            match next_incoming(&mut stream, silent).await {
                Next::Message(incoming) => {
                    if let Some(incoming) = link.route_terminal(incoming)
                        && inbox.send(incoming).await.is_err()
                    {
                        break;
                    }
                }
                Next::Closed => break,
                Next::Silent => {
                    tracing::warn!(
                        agent.id = %agent_id,
                        link.id = link.id,
                        silent_secs = silent.as_secs(),
                        "sandboxd sent nothing (not even a ping) for too long: dropping the tunnel"
                    );
                    break;
                }
            }
        }
    };
    // Either side ending, or the outgoing queue overflowing, ends the connection; the
    // supervisor sees its inbox close.
    tokio::select! {
        () = writer => {}
        () = reader => {}
        () = link.out.dropped() => {}
        // The supervisor let go of this connection (it dropped the link).
        () = inbox.closed() => {}
    }
    link.out.drop_all();
    for (_, output) in link.terminals.lock().drain() {
        let closed = TerminalEvent::Closed(Some("the sandbox disconnected".to_owned()));
        if output.try_push(closed, 0).is_err() {
            output.drop_all();
        }
        output.close();
    }
    tracing::info!(agent.id = %agent_id, link.id = link.id, "sandboxd disconnected");
}

/// What the reader got next.
enum Next {
    Message(Incoming),
    Closed,
    Silent,
}

/// The next well-formed message; malformed ones are logged and skipped. Any frame (a ping too)
/// proves the tunnel alive; none for `silent` is [`Next::Silent`].
async fn next_incoming(stream: &mut futures_util::stream::SplitStream<WebSocket>, silent: Duration) -> Next {
    loop {
        let message = match tokio::time::timeout(silent, stream.next()).await {
            Err(_) => return Next::Silent,
            Ok(None | Some(Err(_))) => return Next::Closed,
            Ok(Some(Ok(message))) => message,
        };
        match message {
            Message::Text(text) => match serde_json::from_str::<Control>(text.as_str()) {
                Ok(control) => return Next::Message(Incoming::Control(control)),
                Err(error) => tracing::warn!(%error, "malformed control message from sandboxd"),
            },
            Message::Binary(bytes) => match DataFrame::decode(bytes) {
                Ok(frame) => return Next::Message(Incoming::Data(frame)),
                Err(error) => tracing::warn!(%error, "malformed data frame from sandboxd"),
            },
            Message::Close(_) => return Next::Closed,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
}
