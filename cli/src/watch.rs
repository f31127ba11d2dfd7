//! `watch`: follows a session's event stream (`/api/v1/sessions/{id}/stream?after=N`) and
//! prints every event as one JSON line, until a stop condition, the server closing, or a
//! timeout.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::anyhow;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use crate::api::{Client, Socket};
use crate::endpoint::segment;
use crate::error::Failure;

/// When to stop watching.
#[derive(Debug, Clone, Default)]
pub struct StopWhen {
    /// After the first event of this type (`turn_end`, …).
    pub until: Option<String>,
    /// After this many events.
    pub count: Option<u64>,
    /// Give up (exit code 3) after this long.
    pub timeout: Option<Duration>,
}

/// The part of an event `watch` looks at.
#[derive(Debug, Deserialize)]
struct EventHead {
    #[serde(rename = "type")]
    kind: String,
}

/// Prints the session's events after `after` to `out`, one per line, until `stop` says so.
/// Returns how many events were printed.
pub async fn watch(
    client: &Client,
    session: &str,
    after: u64,
    stop: &StopWhen,
    out: &mut dyn Write,
) -> Result<u64, Failure> {
    let path = format!("/api/v1/sessions/{}/stream?after={after}", segment(session));
    let deadline = stop.timeout.map(|t| Instant::now() + t);
    let connect = client.websocket(&path);
    let mut socket = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, connect).await.map_err(|_| timed_out(stop, 0))??,
        None => connect.await?,
    };
    let mut seen = 0u64;
    if stop.count == Some(0) {
        close(&mut socket).await;
        return Ok(0);
    }
    loop {
        let next = socket.next();
        let message = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, next).await {
                Ok(message) => message,
                Err(_) => {
                    close(&mut socket).await;
                    return Err(timed_out(stop, seen));
                }
            },
            None => next.await,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(frame))) => {
                let why = frame.map(|f| format!(" ({} {})", f.code, f.reason)).unwrap_or_default();
                return Err(anyhow!("the server closed the stream{why} after {seen} events").into());
            }
            Some(Ok(_)) => continue,
            Some(Err(error)) => {
                return Err(anyhow::Error::new(error)
                    .context(format!("reading the stream after {seen} events"))
                    .into());
            }
            None => return Err(anyhow!("the stream ended after {seen} events").into()),
        };
        let head: EventHead = serde_json::from_str(text.as_str())
            .map_err(|e| anyhow!("the stream sent a message that is not an event ({e}): {}", text.as_str()))?;
        seen += 1;
        if let Err(error) = writeln!(out, "{}", text.as_str()).and_then(|()| out.flush()) {
            close(&mut socket).await;
            // Whoever reads our output has gone away: nothing left to do.
            if error.kind() == io::ErrorKind::BrokenPipe {
                return Ok(seen);
            }
            return Err(anyhow::Error::new(error).context("writing to stdout").into());
        }
        let reached_type = stop.until.as_deref().is_some_and(|until| head.kind == until);
        let reached_count = stop.count.is_some_and(|count| seen >= count);
        if reached_type || reached_count {
            close(&mut socket).await;
            return Ok(seen);
        }
    }
}

fn timed_out(stop: &StopWhen, seen: u64) -> Failure {
    let waited = stop.timeout.unwrap_or_default();
    let goal = match (&stop.until, stop.count) {
        (Some(until), Some(count)) => format!("a {until} event or {count} events"),
        (Some(until), None) => format!("a {until} event"),
        (None, Some(count)) => format!("{count} events"),
        (None, None) => "the end of the stream".to_owned(),
    };
    Failure::Timeout(format!("waited {waited:?} for {goal}; saw {seen} events"))
}

/// Says goodbye politely, but never waits long for it.
pub async fn close(socket: &mut Socket) {
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
}

/// Sends a message, mapping errors.
pub async fn send(socket: &mut Socket, message: Message) -> Result<(), Failure> {
    socket.send(message).await.map_err(|e| anyhow::Error::new(e).context("sending on the WebSocket").into())
}
