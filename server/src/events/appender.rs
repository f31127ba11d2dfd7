//! Appending with group commit: every writer hands its events to one task that stores whatever
//! has queued up in one transaction (seqs assigned inside it), then publishes the committed
//! events to the live feed and tells each writer. A harness streaming hundreds of chunks per
//! second costs a few transactions, not hundreds.
//!
//! A request may carry side effects that must commit atomically with its events: how far the
//! harness's stdout has been stored (so a restarted server neither loses nor repeats output),
//! and the end of a turn (with its `turn_end`).

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::hub::Hub;
use super::{NewEvent, SharedEvent};
use crate::ids::{AgentId, TurnId};
use crate::store;

/// Most events stored in one transaction.
const MAX_BATCH_EVENTS: usize = 4096;
/// Requests that may wait for the appender before writers are slowed down.
const QUEUE_DEPTH: usize = 8192;

/// State changes stored in the same transaction as a request's events.
#[derive(Debug, Clone)]
pub enum SideEffect {
    /// The harness's stdout is stored up to `offset`.
    StdoutStored {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation the offset belongs to.
        generation: i64,
        /// The offset.
        offset: i64,
    },
    /// A turn ended.
    EndTurn {
        /// The turn.
        turn_id: TurnId,
        /// Its stop reason (`end_turn`, `cancelled`, `error`, …).
        stop_reason: String,
    },
}

/// Storing failed; nothing of the request was stored.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the event log could not store the events: {0}")]
pub struct AppendFailed(String);

/// The committed events of a request, in order.
pub type Committed = Result<Vec<Arc<SharedEvent>>, AppendFailed>;

struct Request {
    events: Vec<NewEvent>,
    effects: Vec<SideEffect>,
    done: oneshot::Sender<Committed>,
}

/// Hands events to the group-commit task. Cheap to clone.
#[derive(Clone)]
pub struct Appender {
    tx: mpsc::Sender<Request>,
}

impl Appender {
    /// Starts the group-commit task; it ends when every `Appender` is dropped.
    pub fn spawn(pool: PgPool, hub: Arc<Hub>) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let task = tokio::spawn(run(pool, hub, rx));
        (Self { tx }, task)
    }

    /// Queues events (and side effects); the receiver resolves once they are committed and
    /// published. Requests are committed in the order they were queued.
    pub async fn submit(&self, events: Vec<NewEvent>, effects: Vec<SideEffect>) -> oneshot::Receiver<Committed> {
        let (done, receiver) = oneshot::channel();
        if let Err(mpsc::error::SendError(request)) = self.tx.send(Request { events, effects, done }).await {
            let _ = request.done.send(Err(AppendFailed("the appender has stopped".to_owned())));
        }
        receiver
    }

    /// Stores events and waits for the commit.
    pub async fn append(&self, events: Vec<NewEvent>, effects: Vec<SideEffect>) -> Committed {
        self.submit(events, effects)
            .await
            .await
            .unwrap_or_else(|_| Err(AppendFailed("the appender has stopped".to_owned())))
    }
}

async fn run(pool: PgPool, hub: Arc<Hub>, mut rx: mpsc::Receiver<Request>) {
    let mut batch: Vec<Request> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut queued = first.events.len();
        batch.push(first);
        while queued < MAX_BATCH_EVENTS {
            match rx.try_recv() {
                Ok(request) => {
                    queued += request.events.len();
                    batch.push(request);
                }
                Err(_) => break,
            }
        }
        match write(&pool, &mut batch).await {
            Ok(stored) => finish(&hub, batch.drain(..), stored),
            Err(error) if batch.len() > 1 => {
                // One bad request must not fail the others: retry one by one.
                tracing::warn!(%error, requests = batch.len(), "group commit failed; retrying singly");
                for request in batch.drain(..) {
                    let mut single = vec![request];
                    match write(&pool, &mut single).await {
                        Ok(stored) => finish(&hub, single.drain(..), stored),
                        Err(error) => fail(single.drain(..), &error),
                    }
                }
            }
            Err(error) => fail(batch.drain(..), &error),
        }
    }
}

/// Stores a batch in one transaction; returns each request's stored events.
async fn write(pool: &PgPool, batch: &mut [Request]) -> sqlx::Result<Vec<Vec<Arc<SharedEvent>>>> {
    let mut tx = pool.begin().await?;
    let mut all = Vec::new();
    let mut sizes = Vec::with_capacity(batch.len());
    for request in batch.iter() {
        sizes.push(request.events.len());
        all.extend(request.events.iter().cloned());
    }
    let stored = store::events::append(&mut tx, all).await?;
    // Only the furthest stdout offset of each harness matters: one UPDATE per harness, not one
    // per request (a flooding harness queues thousands of requests per transaction).
    let mut furthest: HashMap<(AgentId, i64), i64> = HashMap::new();
    for request in batch.iter() {
        for effect in &request.effects {
            match effect {
                SideEffect::StdoutStored { agent_id, generation, offset } => {
                    let slot = furthest.entry((*agent_id, *generation)).or_insert(*offset);
                    *slot = (*slot).max(*offset);
                }
                SideEffect::EndTurn { turn_id, stop_reason } => {
                    store::sessions::end_turn(&mut tx, *turn_id, stop_reason).await?
                }
            }
        }
    }
    for ((agent_id, generation), offset) in furthest {
        store::sandboxes::set_stdout_offset(&mut tx, agent_id, generation, offset).await?;
    }
    tx.commit().await?;

    // Events of deleted sessions were dropped: hand each request the stored ones among its own.
    let mut stored = stored.iter().map(|(event, json)| SharedEvent::from_stored(event, json)).peekable();
    let mut per_request = Vec::with_capacity(batch.len());
    for (request, size) in batch.iter().zip(sizes) {
        let mut mine = Vec::with_capacity(size);
        for event in &request.events {
            if let Some(next) = stored.peek()
                && next.session_id == event.session_id
                && next.kind == event.kind
                && let Some(next) = stored.next()
            {
                mine.push(next);
            }
        }
        per_request.push(mine);
    }
    Ok(per_request)
}

fn finish(hub: &Hub, requests: impl Iterator<Item = Request>, stored: Vec<Vec<Arc<SharedEvent>>>) {
    for (request, events) in requests.zip(stored) {
        hub.publish(&events);
        let _ = request.done.send(Ok(events));
    }
}

fn fail(requests: impl Iterator<Item = Request>, error: &sqlx::Error) {
    tracing::error!(%error, "storing events failed");
    for request in requests {
        let _ = request.done.send(Err(AppendFailed("database error".to_owned())));
    }
}
