//! One sandboxd connection: a writer task draining outgoing messages into the socket, and a
//! reader that routes terminal output to terminal watchers and everything else to the agent's
//! supervisor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, DataFrame, DataKind};
use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use crate::ids::AgentId;
use crate::supervisor::Supervisors;

/// How long sandboxd has to say hello after connecting.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Tunnel messages a supervisor may have unread before the socket stops being read.
const INBOX_DEPTH: usize = 1024;

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

enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
}

/// A handle to one live sandboxd connection. Cheap to clone; sends fail quietly once it is gone
/// (the supervisor learns of that from its inbox closing).
#[derive(Clone)]
pub struct Link {
    /// Unique per connection (within this server process).
    pub id: u64,
    out: mpsc::UnboundedSender<Outgoing>,
    terminals: Arc<Mutex<HashMap<u32, mpsc::Sender<TerminalEvent>>>>,
}

impl Link {
    /// Sends a control message.
    pub fn send(&self, message: &Control) -> bool {
        match serde_json::to_string(message) {
            Ok(text) => self.out.send(Outgoing::Text(text)).is_ok(),
            Err(_) => false,
        }
    }

    /// Sends bytes of a channel.
    pub fn send_data(&self, kind: DataKind, channel: u32, offset: u64, payload: Bytes) -> bool {
        let frame = DataFrame { kind, channel, offset, payload };
        self.out.send(Outgoing::Binary(frame.encode())).is_ok()
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        !self.out.is_closed()
    }

    /// Routes a terminal channel's output to `watcher`.
    pub fn watch_terminal(&self, channel: u32, watcher: mpsc::Sender<TerminalEvent>) {
        self.lock_terminals().insert(channel, watcher);
    }

    /// Stops routing a terminal channel.
    pub fn unwatch_terminal(&self, channel: u32) {
        self.lock_terminals().remove(&channel);
    }

    fn lock_terminals(&self) -> std::sync::MutexGuard<'_, HashMap<u32, mpsc::Sender<TerminalEvent>>> {
        self.terminals.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Delivers terminal traffic; returns the message back if it is not for a terminal.
    async fn route_terminal(&self, incoming: Incoming) -> Option<Incoming> {
        let (channel, event) = match incoming {
            Incoming::Data(frame) if frame.kind == DataKind::TerminalOutput => {
                (frame.channel, TerminalEvent::Output(frame.payload))
            }
            Incoming::Control(Control::TerminalClosed { channel }) => (channel, TerminalEvent::Closed(None)),
            Incoming::Control(Control::StartFailed { channel, message })
                if self.lock_terminals().contains_key(&channel) =>
            {
                (channel, TerminalEvent::Closed(Some(message)))
            }
            other => return Some(other),
        };
        let watcher = self.lock_terminals().get(&channel).cloned();
        if let Some(watcher) = watcher {
            // A slow browser slows this sandbox's tunnel down rather than losing output.
            let _ = watcher.send(event).await;
        }
        None
    }
}

/// Serves one accepted sandboxd connection until it closes.
pub async fn serve(socket: WebSocket, agent_id: AgentId, supervisors: Arc<Supervisors>) {
    let (mut sink, mut stream) = socket.split();
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, next_incoming(&mut stream)).await {
        Ok(Some(Incoming::Control(hello @ Control::Hello { .. }))) => hello,
        _ => {
            tracing::warn!(agent.id = %agent_id, "sandboxd connected without a hello");
            return;
        }
    };
    let (out, mut out_rx) = mpsc::unbounded_channel::<Outgoing>();
    let link = Link { id: NEXT_LINK_ID.fetch_add(1, Ordering::Relaxed), out, terminals: Arc::default() };
    let (inbox, inbox_rx) = mpsc::channel(INBOX_DEPTH);
    if !supervisors.attach(agent_id, link.clone(), hello, inbox_rx).await {
        return;
    }
    tracing::info!(agent.id = %agent_id, link.id = link.id, "sandboxd connected");

    let writer = async {
        while let Some(message) = out_rx.recv().await {
            let message = match message {
                Outgoing::Text(text) => Message::Text(text.into()),
                Outgoing::Binary(bytes) => Message::Binary(bytes.into()),
            };
            if sink.send(message).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    };
    let reader = async {
        while let Some(incoming) = next_incoming(&mut stream).await {
            if let Some(incoming) = link.route_terminal(incoming).await
                && inbox.send(incoming).await.is_err()
            {
                break;
            }
        }
    };
    // Either side ending ends the connection; the supervisor sees its inbox close.
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
    for (_, watcher) in link.lock_terminals().drain() {
        let _ = watcher.try_send(TerminalEvent::Closed(Some("the sandbox disconnected".to_owned())));
    }
    tracing::info!(agent.id = %agent_id, link.id = link.id, "sandboxd disconnected");
}

/// The next well-formed message; malformed ones are logged and skipped. `None` when closed.
async fn next_incoming(stream: &mut futures_util::stream::SplitStream<WebSocket>) -> Option<Incoming> {
    while let Some(message) = stream.next().await {
        match message.ok()? {
            Message::Text(text) => match serde_json::from_str::<Control>(text.as_str()) {
                Ok(control) => return Some(Incoming::Control(control)),
                Err(error) => tracing::warn!(%error, "malformed control message from sandboxd"),
            },
            Message::Binary(bytes) => match DataFrame::decode(bytes) {
                Ok(frame) => return Some(Incoming::Data(frame)),
                Err(error) => tracing::warn!(%error, "malformed data frame from sandboxd"),
            },
            Message::Close(_) => return None,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    None
}
