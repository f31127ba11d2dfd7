//! Appending with group commit: every writer hands its events to one task that stores whatever
//! has queued up in one transaction (seqs assigned inside it), then hands the committed batch to
//! the publisher ([`super::publisher`]), which publishes it to the live feed and tells each
//! writer (a large batch while the next is being stored). A harness streaming hundreds of chunks
//! per second costs a few transactions, not hundreds.
//!
//! When many sessions trickle, a small batch waits a moment for the others' events
//! ([`super::gather`]), so their commits are fewer and larger.
//!
//! A request may carry side effects that must commit atomically with its events: how far the
//! harness's stdout has been stored (so a restarted server neither loses nor repeats output),
//! and the end of a turn (with its `turn_end`).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

use super::gather::{self, Siblings};
use super::hub::Hub;
use super::publisher::{Outcome, Publisher};
use super::{EventKind, NewEvent, SharedEvent};
use crate::ids::{AgentId, Seq};
use crate::store;

/// Most events stored in one transaction: half what the live feed holds, so a watcher still
/// sending one batch when the next is published does not lag (and read it again from Postgres).
const MAX_BATCH_EVENTS: usize = super::hub::CHANNEL_CAPACITY / 2;
/// Requests that may wait for the appender before writers are slowed down.
const QUEUE_DEPTH: usize = 8192;

/// What a request stores besides its events (the types are the core's).
pub use agenthold_core::events::side_effects::{AnsweredPermission, GrantScope, SideEffect};

/// Storing failed; nothing of the request was stored.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the event log could not store the events: {message}")]
pub struct AppendFailed {
    /// Why, for logs.
    pub message: String,
    /// The database refused the content itself (SQLSTATE class 22, data exception): storing it
    /// again cannot succeed.
    pub rejected: bool,
}

impl AppendFailed {
    pub(super) fn stopped() -> Self {
        Self { message: "the appender has stopped".to_owned(), rejected: false }
    }
}

/// The stored stdout offset was not where a request's chain expected it.
#[derive(Debug, thiserror::Error)]
#[error("the stored stdout offset moved (expected {expected})")]
struct OffsetMoved {
    expected: u64,
}

/// The committed events of a request, in order.
pub type Committed = Result<Vec<Arc<SharedEvent>>, AppendFailed>;

pub(super) struct Request {
    pub(super) events: Vec<NewEvent>,
    effects: Vec<SideEffect>,
    /// Each event's payload as the JSON text stored as it is, when every one is stored as it is
    /// and the only side effects are stdout offsets: the request can take the one-statement
    /// path. Encoded by the writer's task, before the request queues, not by the appender.
    pub(super) as_is: Option<Vec<String>>,
    pub(super) done: oneshot::Sender<Committed>,
}

impl Request {
    pub(super) fn new(events: Vec<NewEvent>, effects: Vec<SideEffect>, done: oneshot::Sender<Committed>) -> Self {
        let only_offsets = effects.iter().all(|effect| matches!(effect, SideEffect::StdoutStored { .. }));
        let as_is = only_offsets
            .then(|| events.iter().map(|event| super::budget::as_is_json(&event.payload)).collect::<Option<Vec<_>>>())
            .flatten();
        Self { events, effects, as_is, done }
    }
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
        if let Err(mpsc::error::SendError(request)) = self.tx.send(Request::new(events, effects, done)).await {
            let _ = request.done.send(Err(AppendFailed::stopped()));
        }
        receiver
    }

    /// Stores events and waits for the commit.
    pub async fn append(&self, events: Vec<NewEvent>, effects: Vec<SideEffect>) -> Committed {
        self.submit(events, effects).await.await.unwrap_or_else(|_| Err(AppendFailed::stopped()))
    }
}

async fn run(pool: PgPool, hub: Arc<Hub>, mut rx: mpsc::Receiver<Request>) {
    let publisher = Publisher::spawn(hub);
    // The appender's own connection, kept between batches: taking one from the pool and giving
    // it back costs two round trips (sqlx pings on acquire and on release) per transaction.
    // After a failed transaction it is given back (the pool drops it if it is broken).
    let mut connection: Option<PoolConnection<Postgres>> = None;
    let mut batch: Vec<Request> = Vec::new();
    // A request taken from the queue that did not fit the last batch: the next one's first.
    let mut carried: Option<Request> = None;
    let mut siblings = Siblings::default();
    loop {
        let first = match carried.take() {
            Some(request) => request,
            None => match rx.recv().await {
                Some(request) => request,
                None => break,
            },
        };
        let arrived = std::time::Instant::now();
        let mut queued = first.events.len();
        batch.push(first);
        take_queued(&mut rx, &mut batch, &mut queued, &mut carried);
        // Many sessions trickling: a small batch waits a moment for theirs (`gather`).
        if carried.is_none() && siblings.should_wait(queued, arrived) {
            tokio::time::sleep_until(tokio::time::Instant::from_std(arrived + gather::GATHER_WAIT)).await;
            take_queued(&mut rx, &mut batch, &mut queued, &mut carried);
        }
        let started = std::time::Instant::now();
        siblings.stored(batch.iter().flat_map(|request| request.events.iter().map(|event| event.session_id)), started);
        match write(&pool, &mut connection, &mut batch).await {
            Ok(written) => {
                let seconds = started.elapsed().as_secs_f64();
                publisher.publish(Outcome::Stored { requests: std::mem::take(&mut batch), written, seconds }).await;
            }
            Err(error) if batch.len() > 1 => {
                // One bad request must not fail the others: retry one by one.
                tracing::warn!(%error, requests = batch.len(), "group commit failed; retrying singly");
                for request in batch.drain(..) {
                    let mut single = vec![request];
                    let started = std::time::Instant::now();
                    let outcome = match write(&pool, &mut connection, &mut single).await {
                        Ok(written) => {
                            Outcome::Stored { requests: single, written, seconds: started.elapsed().as_secs_f64() }
                        }
                        Err(error) => Outcome::failed(single, &error),
                    };
                    publisher.publish(outcome).await;
                }
            }
            Err(error) => publisher.publish(Outcome::failed(std::mem::take(&mut batch), &error)).await,
        }
    }
    // Every writer is gone: the publisher answers what it holds, then ends.
    publisher.finish().await;
}

/// Adds whatever requests are queued to the batch, up to [`MAX_BATCH_EVENTS`] events: a request
/// that would take it past them (one carries a frame's lines, up to 512 events) is `carried` to
/// the next batch. A batch over the live feed's capacity (`hub::CHANNEL_CAPACITY`) would make
/// every watcher of a flooding session lag and read it from Postgres.
fn take_queued(
    rx: &mut mpsc::Receiver<Request>,
    batch: &mut Vec<Request>,
    queued: &mut usize,
    carried: &mut Option<Request>,
) {
    while *queued < MAX_BATCH_EVENTS && carried.is_none() {
        match rx.try_recv() {
            Ok(request) if *queued + request.events.len() > MAX_BATCH_EVENTS => *carried = Some(request),
            Ok(request) => {
                *queued += request.events.len();
                batch.push(request);
            }
            Err(_) => break,
        }
    }
}

/// Stores a batch in one transaction on the appender's connection (taken from the pool when it
/// has none; given back when the transaction fails).
async fn write(
    pool: &PgPool,
    connection: &mut Option<PoolConnection<Postgres>>,
    batch: &mut [Request],
) -> sqlx::Result<Written> {
    let conn = match connection {
        Some(conn) => conn,
        None => connection.insert(pool.acquire().await?),
    };
    let stored = write_on(conn, batch).await;
    if stored.is_err() {
        *connection = None;
    }
    stored
}

/// What a committed batch stored, for the publisher to hand each request.
pub(super) enum Written {
    /// The one-statement path: each event's seq and commit time, in the batch's order (`None`:
    /// its session was deleted and the event dropped); the payloads are the requests' `as_is`.
    Streamed(Vec<Option<(Seq, DateTime<Utc>)>>),
    /// The transaction: each request's stored events.
    Events(Vec<Vec<Arc<SharedEvent>>>),
}

/// Stores a batch atomically. A streamed batch whose text Postgres refuses as it came (a payload
/// `serde_json` reads only as a string, such as a lone surrogate escape) takes the transaction,
/// which stores each payload as its value — the same event whichever path the batch took.
async fn write_on(connection: &mut sqlx::PgConnection, batch: &mut [Request]) -> sqlx::Result<Written> {
    match write_streamed(connection, batch).await {
        Ok(Some(slots)) => return Ok(Written::Streamed(slots)),
        Ok(None) => {}
        Err(error) if is_data_exception(&error) => {
            tracing::warn!(%error, "a streamed batch's text was refused as it came; storing it as values");
        }
        Err(error) => return Err(error),
    }
    let mut tx = sqlx::Connection::begin(connection).await?;
    // State changes first: a turn already ended takes its `turn_end` (and the errors naming it)
    // out of the request, so no session ever gets two ends for one turn.
    for request in batch.iter_mut() {
        let mut already_ended = Vec::new();
        for effect in &request.effects {
            if !apply(&mut tx, effect).await?
                && let SideEffect::EndTurn { turn_id, .. } = effect
            {
                already_ended.push(turn_id.0.to_string());
            }
        }
        if !already_ended.is_empty() {
            request.events.retain(|event| !names_turn(event, &already_ended));
        }
    }
    let chains = stdout_chains(batch)?;
    if !store::sandboxes::advance_stdout_offsets(&mut tx, &chains).await? {
        return Err(offset_moved(&chains));
    }
    let mut all = Vec::new();
    let mut sizes = Vec::with_capacity(batch.len());
    for request in batch.iter() {
        sizes.push(request.events.len());
        all.extend(request.events.iter().cloned());
    }
    let stored = store::events::append(&mut tx, all).await?.commit(tx, |stored| stored).await?;

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
    Ok(Written::Events(per_request))
}

/// The streaming batch — events and stdout offsets, nothing else, every payload stored as it
/// is — in one statement ([`store::events::append_streamed`]): one round trip where the
/// transaction takes five (`BEGIN`, offsets, seqs, events, `COMMIT`). `None` for any other
/// batch, which takes the transaction.
async fn write_streamed(
    connection: &mut sqlx::PgConnection,
    batch: &[Request],
) -> sqlx::Result<Option<Vec<Option<(Seq, DateTime<Utc>)>>>> {
    if batch.iter().any(|request| request.as_is.is_none()) {
        return Ok(None);
    }
    let chains = stdout_chains(batch)?;
    let events: Vec<store::events::AsIsEvent<'_>> = batch
        .iter()
        .flat_map(|r| r.events.iter().zip(r.as_is.iter().flatten()))
        .map(|(event, json)| store::events::AsIsEvent {
            session_id: event.session_id,
            kind: event.kind,
            payload_json: json,
        })
        .collect();
    match store::events::append_streamed(connection, &chains, &events).await? {
        store::events::Streamed::Stored(slots) => Ok(Some(slots)),
        store::events::Streamed::OffsetMoved => Err(offset_moved(&chains)),
    }
}

/// Only the furthest stdout offset of each harness matters: one compare-and-set per harness,
/// over a chain of contiguous lines (a flooding harness queues thousands per transaction), and
/// one statement for every harness of the batch. A gap inside the batch is an error.
fn stdout_chains(batch: &[Request]) -> sqlx::Result<Vec<store::sandboxes::StdoutChain>> {
    let mut chains: HashMap<(AgentId, i64), (u64, u64)> = HashMap::new();
    for effect in batch.iter().flat_map(|r| r.effects.iter()) {
        if let SideEffect::StdoutStored { agent_id, generation, from, to } = effect {
            match chains.get_mut(&(*agent_id, *generation)) {
                None => {
                    chains.insert((*agent_id, *generation), (*from, *to));
                }
                Some((_, end)) if *end == *from => *end = *to,
                Some((_, end)) => return Err(sqlx::Error::Protocol(OffsetMoved { expected: *end }.to_string())),
            }
        }
    }
    Ok(chains
        .into_iter()
        .map(|((agent_id, generation), (from, to))| store::sandboxes::StdoutChain {
            agent_id,
            generation,
            from: i64::try_from(from).unwrap_or(i64::MAX),
            to: i64::try_from(to).unwrap_or(i64::MAX),
        })
        .collect())
}

/// The error of a batch whose stdout offsets were not where its chains start.
fn offset_moved(chains: &[store::sandboxes::StdoutChain]) -> sqlx::Error {
    let expected = chains.first().map_or(0, |chain| chain.from as u64);
    sqlx::Error::Protocol(OffsetMoved { expected }.to_string())
}

/// Applies one state change; `false` when it found nothing to change that must exist (a turn
/// already ended).
async fn apply(tx: &mut sqlx::PgConnection, effect: &SideEffect) -> sqlx::Result<bool> {
    match effect {
        SideEffect::StdoutStored { .. } => Ok(true),
        SideEffect::EndTurn { turn_id, stop_reason, tokens, session_cost } => {
            store::sessions::end_turn(tx, *turn_id, stop_reason, tokens.as_ref(), session_cost.as_ref()).await
        }
        SideEffect::MarkSent { turn_id, request_id, generation, stdin_end, deadline_at } => {
            store::sessions::mark_sent(tx, *turn_id, request_id, *generation, *stdin_end, *deadline_at).await?;
            Ok(true)
        }
        SideEffect::SessionOpened { agent_id, generation, session_id, acp_session_id } => {
            store::sessions::set_acp_session_id(tx, *session_id, acp_session_id).await?;
            store::sandboxes::add_harness_session(tx, *agent_id, *generation, *session_id, acp_session_id).await?;
            Ok(true)
        }
        SideEffect::SpareUpdate { agent_id, generation, acp_session_id, update } => {
            store::sandboxes::add_spare_update(tx, *agent_id, *generation, acp_session_id, update).await?;
            Ok(true)
        }
        SideEffect::HarnessInit { agent_id, generation, init } => {
            store::sandboxes::set_harness_init(tx, *agent_id, *generation, init).await?;
            Ok(true)
        }
        SideEffect::ClearHarness { agent_id, generation } => {
            store::sandboxes::clear_harness(tx, *agent_id, *generation).await?;
            Ok(true)
        }
        SideEffect::BumpChannel { agent_id, above } => {
            store::sandboxes::bump_next_channel(tx, *agent_id, *above).await?;
            Ok(true)
        }
        SideEffect::PermissionAnswered(answered) => {
            let AnsweredPermission {
                permission_id,
                session_id,
                turn_id,
                request_id,
                generation,
                tool_call,
                options,
                outcome,
                elicitation,
            } = answered.as_ref();
            let kind = if *elicitation { "elicitation" } else { "permission" };
            let question = store::sessions::Question { request_id, generation: *generation, tool_call, options, kind };
            store::permissions::record(tx, *permission_id, *session_id, *turn_id, &question, outcome.as_ref()).await?;
            Ok(true)
        }
        SideEffect::TurnDeadline { turn_id, deadline_at } => {
            store::sessions::set_deadline(tx, *turn_id, *deadline_at).await?;
            Ok(true)
        }
        SideEffect::PermissionResolved { permission_id, outcome, grant } => {
            store::permissions::resolve(tx, *permission_id, outcome, *grant).await?;
            Ok(true)
        }
        SideEffect::GrantRevoked { permission_id, revoked_by } => {
            store::permissions::revoke_grant(tx, *permission_id, *revoked_by).await?;
            Ok(true)
        }
        SideEffect::GrantUsed { permission_id } => {
            store::permissions::use_grant(tx, *permission_id).await?;
            Ok(true)
        }
        SideEffect::ParkTurn { turn_id } => {
            store::sessions::park_turn(tx, *turn_id).await?;
            Ok(true)
        }
        SideEffect::UnparkTurn { turn_id, prompt } => {
            store::sessions::unpark_turn(tx, *turn_id, prompt).await?;
            Ok(true)
        }
        SideEffect::PendingStdin { agent_id, generation, offset, bytes, written } => {
            let offset = i64::try_from(*offset).unwrap_or(i64::MAX);
            let written = i64::try_from(*written).unwrap_or(i64::MAX);
            store::sandboxes::journal_stdin(tx, *agent_id, *generation, offset, bytes, written).await?;
            Ok(true)
        }
    }
}

/// Whether an event is the `turn_end` of, or an `error` naming, one of these turns.
fn names_turn(event: &NewEvent, turns: &[String]) -> bool {
    matches!(event.kind, EventKind::TurnEnd | EventKind::Error)
        && event.payload.value().get("turn_id").and_then(|t| t.as_str()).is_some_and(|t| turns.iter().any(|x| x == t))
}

/// SQLSTATE class 22 (data exception): the content itself is refused (e.g. `\u0000` in jsonb).
pub(super) fn is_data_exception(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => db.code().is_some_and(|code| code.starts_with("22")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ids::SessionId;

    fn request(events: usize) -> Request {
        let session = SessionId::new();
        let events = (0..events).map(|i| NewEvent::new(session, EventKind::Update, json!({"i": i}))).collect();
        Request::new(events, Vec::new(), oneshot::channel().0)
    }

    #[test]
    fn a_batch_never_passes_the_live_feeds_capacity_and_the_request_that_would_is_carried() {
        let (tx, mut rx) = mpsc::channel(64);
        for _ in 0..20 {
            tx.try_send(request(300)).expect("queued");
        }
        let (mut batch, mut carried) = (vec![request(300)], None);
        let mut queued = 300;
        take_queued(&mut rx, &mut batch, &mut queued, &mut carried);
        let events: usize = batch.iter().map(|r| r.events.len()).sum();
        assert_eq!(events, 6 * 300, "the most whole requests under {MAX_BATCH_EVENTS}");
        assert_eq!(queued, events);
        assert!(carried.as_ref().is_some_and(|r| r.events.len() == 300), "the next one waits, not lost");
        // The next batch starts with the carried request, then takes as many more as fit.
        let mut next = vec![carried.take().expect("carried")];
        let mut queued = 300;
        take_queued(&mut rx, &mut next, &mut queued, &mut carried);
        assert_eq!(next.len(), 6, "the carried one and the next 5");
        assert!(carried.is_some(), "and the one after it waits in turn");
    }
}
