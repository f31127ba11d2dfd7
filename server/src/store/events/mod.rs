//! The `events` and `event_payloads` tables: appending (seq assigned in the storing transaction)
//! and reading ranges of a session's log. `event_payloads` (the side table) holds the exact
//! payload, as JSON text, of every event whose inline payload is a changed copy (cut to the
//! budget, or with U+0000 replaced: see [`budget`]).

pub mod budget;
pub mod stored;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use agenthold_core::events::{EventKind, NewEvent};

use self::stored::{SharedEvent, StoredEvent};
use crate::ids::{Seq, SessionId};

/// Events appended inside a transaction. Watchers may see them only once it has committed, so
/// they are reached only through [`Appended::commit`], which commits first: no write path can
/// publish before its commit, or forget to commit what it publishes.
#[must_use = "appended events reach watchers only through Appended::commit"]
#[derive(Debug)]
pub struct Appended(Vec<(StoredEvent, String)>);

impl Appended {
    /// Nothing appended.
    pub fn none() -> Self {
        Self(Vec::new())
    }

    /// How many events were stored (those of deleted sessions are not).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Commits `tx`, then hands the stored events — in the order given, each with its payload's
    /// JSON text — to `publish`.
    pub async fn commit<R>(
        self,
        tx: sqlx::Transaction<'_, sqlx::Postgres>,
        publish: impl FnOnce(Vec<(StoredEvent, String)>) -> R,
    ) -> sqlx::Result<R> {
        tx.commit().await?;
        Ok(publish(self.0))
    }
}

/// Appends `events` inside `tx`, in order. Each session's seqs continue from its `last_seq`
/// (the row lock taken here orders concurrent writers). Events of sessions that no longer
/// exist are dropped. The stored events (each payload's JSON text encoded once, here) are
/// [`Appended`]: published by its commit.
pub async fn append(tx: &mut sqlx::PgConnection, events: Vec<NewEvent>) -> sqlx::Result<Appended> {
    let mut counts: BTreeMap<Uuid, (i64, bool)> = BTreeMap::new();
    for event in &events {
        let (count, question) = counts.entry(event.session_id.0).or_default();
        *count += 1;
        *question |= matches!(event.kind, EventKind::Permission | EventKind::PermissionResolved);
    }
    // Next seq and commit time per session, for every session of the batch in one statement;
    // the rows are locked in id order first (concurrent writers lock in the same order). The
    // same statement tells the other replicas, on commit, what each session got
    // ([`super::notify`]).
    let (session_ids, (session_counts, questions)): (Vec<Uuid>, (Vec<i64>, Vec<bool>)) = counts.into_iter().unzip();
    let rows = sqlx::query!(
        r#"WITH locked AS (SELECT id FROM sessions WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE),
           bumped AS (
               UPDATE sessions s SET last_seq = s.last_seq + v.n
               FROM UNNEST($1::uuid[], $2::int8[], $4::bool[]) AS v(id, n, q)
               WHERE s.id = v.id AND s.id IN (SELECT id FROM locked)
               RETURNING s.id, s.last_seq, v.n, v.q)
           SELECT id AS "id!", last_seq AS "last_seq!", n AS "n!", now() AS "now!",
                  pg_notify($5, concat_ws(' ', $3::text, id::text, (last_seq - n + 1)::text, last_seq::text,
                                          CASE WHEN q THEN 'q' ELSE '-' END))::text AS "notified"
           FROM bumped"#,
        &session_ids,
        &session_counts,
        super::notify::sender_tag(),
        &questions,
        super::notify::CHANNEL,
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut next: HashMap<Uuid, (Seq, DateTime<Utc>)> =
        rows.into_iter().map(|row| (row.id, (row.last_seq - row.n + 1, row.now))).collect();

    let mut stored = Vec::with_capacity(events.len());
    let (mut ids, mut seqs, mut kinds, mut payloads, mut times) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut side_ids, mut side_seqs, mut side_payloads) = (vec![], vec![], vec![]);
    for event in events {
        let Some((seq_slot, now)) = next.get_mut(&event.session_id.0) else { continue };
        let seq = *seq_slot;
        *seq_slot += 1;
        let budgeted = budget::apply(event.session_id, seq, event.payload.into_value());
        if let Some(full) = budgeted.full {
            side_ids.push(event.session_id.0);
            side_seqs.push(seq);
            side_payloads.push(full);
        }
        ids.push(event.session_id.0);
        seqs.push(seq);
        kinds.push(event.kind.as_str());
        payloads.push(budgeted.inline_json.clone());
        times.push(*now);
        let stored_event = StoredEvent {
            session_id: event.session_id,
            seq,
            kind: event.kind,
            payload: budgeted.inline,
            created_at: *now,
        };
        stored.push((stored_event, budgeted.inline_json));
    }
    // The bytes each session now stores (its agent's quota, `AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT`).
    let mut bytes: BTreeMap<Uuid, i64> = BTreeMap::new();
    for (id, payload) in ids.iter().zip(&payloads) {
        *bytes.entry(*id).or_default() += i64::try_from(payload.len()).unwrap_or(i64::MAX);
    }
    for (id, payload) in side_ids.iter().zip(&side_payloads) {
        *bytes.entry(*id).or_default() += i64::try_from(payload.len()).unwrap_or(i64::MAX);
    }
    let (byte_sessions, byte_counts): (Vec<Uuid>, Vec<i64>) = bytes.into_iter().unzip();
    if ids.is_empty() {
        return Ok(Appended(stored));
    }
    sqlx::query!(
        r#"WITH counted AS (
               UPDATE sessions s SET stored_bytes = s.stored_bytes + b.bytes
               FROM UNNEST($6::uuid[], $7::int8[]) AS b(id, bytes) WHERE s.id = b.id)
           INSERT INTO events (session_id, seq, type, payload, created_at)
           SELECT id, seq, kind, payload::jsonb, at
           FROM UNNEST($1::uuid[], $2::int8[], $3::text[], $4::text[], $5::timestamptz[]) AS t(id, seq, kind, payload, at)"#,
        &ids,
        &seqs,
        &kinds as &[&str],
        &payloads,
        &times,
        &byte_sessions,
        &byte_counts
    )
    .execute(&mut *tx)
    .await?;
    if !side_ids.is_empty() {
        sqlx::query!(
            r#"INSERT INTO event_payloads (session_id, seq, payload)
               SELECT id, seq, payload FROM UNNEST($1::uuid[], $2::int8[], $3::text[]) AS t(id, seq, payload)"#,
            &side_ids,
            &side_seqs,
            &side_payloads
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(Appended(stored))
}

/// An event whose payload is stored as it is (see [`budget::as_is_json`]).
pub struct AsIsEvent<'a> {
    /// Its session.
    pub session_id: SessionId,
    /// Its type.
    pub kind: EventKind,
    /// Its payload's JSON text.
    pub payload_json: &'a str,
}

/// What [`append_streamed`] did.
pub enum Streamed {
    /// Stored: each event's seq and commit time, in the order given (`None`: its session no
    /// longer exists, and the event was dropped).
    Stored(Vec<Option<(Seq, DateTime<Utc>)>>),
    /// A harness's stored stdout offset was not at its chain's `from`: nothing was stored.
    OffsetMoved,
}

/// The streaming path in ONE statement, atomic by itself (no `BEGIN`/`COMMIT` round trips):
/// the compare-and-set of every harness's stdout offset ([`super::sandboxes::advance_stdout_offsets`]),
/// then each session's seqs and the other replicas' notification (as [`append`]), then the
/// events. Rows are locked in the same order as the transaction's path (sandboxes by agent id,
/// then sessions by id). If any offset is not at its `from`, nothing is changed.
pub async fn append_streamed(
    conn: &mut sqlx::PgConnection,
    chains: &[super::sandboxes::StdoutChain],
    events: &[AsIsEvent<'_>],
) -> sqlx::Result<Streamed> {
    let chain_agents: Vec<Uuid> = chains.iter().map(|c| c.agent_id.0).collect();
    let chain_generations: Vec<i64> = chains.iter().map(|c| c.generation).collect();
    let chain_froms: Vec<i64> = chains.iter().map(|c| c.from).collect();
    let chain_tos: Vec<i64> = chains.iter().map(|c| c.to).collect();
    // Per session: how many events, their bytes, and whether one is a question (the
    // notification says so).
    let mut counts: BTreeMap<Uuid, (i64, i64, bool)> = BTreeMap::new();
    let mut ordinals = Vec::with_capacity(events.len());
    for event in events {
        let (count, bytes, question) = counts.entry(event.session_id.0).or_default();
        *count += 1;
        *bytes += i64::try_from(event.payload_json.len()).unwrap_or(i64::MAX);
        *question |= matches!(event.kind, EventKind::Permission | EventKind::PermissionResolved);
        ordinals.push(*count);
    }
    let mut session_ids = Vec::with_capacity(counts.len());
    let (mut session_counts, mut session_bytes, mut questions) = (vec![], vec![], vec![]);
    for (id, (count, bytes, question)) in counts {
        session_ids.push(id);
        session_counts.push(count);
        session_bytes.push(bytes);
        questions.push(question);
    }
    let event_sessions: Vec<Uuid> = events.iter().map(|e| e.session_id.0).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let payloads: Vec<&str> = events.iter().map(|e| e.payload_json).collect();
    let rows = sqlx::query!(
        r#"WITH chain AS (
               SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::int8[], $4::int8[])
                   AS c(agent_id, generation, from_offset, to_offset)),
           held AS (
               SELECT agent_id, harness_generation, harness_stdout_offset FROM sandboxes
               WHERE agent_id = ANY($1::uuid[]) ORDER BY agent_id FOR UPDATE),
           verdict AS (
               SELECT count(*) = cardinality($1::uuid[]) AS ok
               FROM held h JOIN chain c ON h.agent_id = c.agent_id
                   AND h.harness_generation = c.generation AND h.harness_stdout_offset = c.from_offset),
           moved AS (
               UPDATE sandboxes s SET harness_stdout_offset = c.to_offset
               FROM chain c, verdict
               WHERE verdict.ok AND s.agent_id = c.agent_id AND s.harness_generation = c.generation
                 AND s.harness_stdout_offset = c.from_offset
               RETURNING s.agent_id),
           sessions_held AS (
               SELECT id FROM sessions WHERE id = ANY($5::uuid[]) AND (SELECT ok FROM verdict)
               ORDER BY id FOR UPDATE),
           bumped AS (
               UPDATE sessions s SET last_seq = s.last_seq + v.n, stored_bytes = s.stored_bytes + v.b
               FROM UNNEST($5::uuid[], $6::int8[], $7::bool[], $14::int8[]) AS v(id, n, q, b)
               WHERE s.id = v.id AND s.id IN (SELECT id FROM sessions_held)
               RETURNING s.id, s.last_seq, v.n, v.q),
           announced AS (
               SELECT id, last_seq, n,
                      pg_notify($9, concat_ws(' ', $8::text, id::text, (last_seq - n + 1)::text, last_seq::text,
                                              CASE WHEN q THEN 'q' ELSE '-' END))::text AS notified
               FROM bumped),
           stored AS (
               INSERT INTO events (session_id, seq, type, payload, created_at)
               SELECT e.session_id, b.last_seq - b.n + e.ordinal, e.kind, e.payload::jsonb, now()
               FROM UNNEST($10::uuid[], $11::int8[], $12::text[], $13::text[]) AS e(session_id, ordinal, kind, payload)
               JOIN bumped b ON b.id = e.session_id)
           SELECT verdict.ok AS "ok!", a.id AS "id?", a.last_seq AS "last_seq?", a.n AS "n?", now() AS "now!",
                  a.notified AS "notified?"
           FROM verdict LEFT JOIN announced a ON true"#,
        &chain_agents,
        &chain_generations,
        &chain_froms,
        &chain_tos,
        &session_ids,
        &session_counts,
        &questions,
        super::notify::sender_tag(),
        super::notify::CHANNEL,
        &event_sessions,
        &ordinals,
        &kinds as &[&str],
        &payloads as &[&str],
        &session_bytes,
    )
    .fetch_all(&mut *conn)
    .await?;
    if !rows.first().is_some_and(|row| row.ok) {
        return Ok(Streamed::OffsetMoved);
    }
    let first_seqs: HashMap<Uuid, (Seq, DateTime<Utc>)> =
        rows.iter().filter_map(|row| Some((row.id?, (row.last_seq? - row.n? + 1, row.now)))).collect();
    let stored = events
        .iter()
        .zip(ordinals)
        .map(|(event, ordinal)| first_seqs.get(&event.session_id.0).map(|(first, now)| (first + ordinal - 1, *now)))
        .collect();
    Ok(Streamed::Stored(stored))
}

/// Up to `limit` events of a session with seq greater than `after`, in order, encoded as the
/// API and the stream send them: payloads come from Postgres as JSON text and are not parsed.
pub async fn after_encoded(
    pool: &PgPool,
    session_id: SessionId,
    after: Seq,
    limit: i64,
) -> sqlx::Result<Vec<Arc<SharedEvent>>> {
    let rows = sqlx::query!(
        r#"SELECT seq, type, payload::text AS "payload!", created_at FROM events
           WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"#,
        session_id.0,
        after,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let kind = EventKind::parse(&r.r#type).unwrap_or(EventKind::Notice);
            SharedEvent::with_payload_json(session_id, r.seq, kind, r.created_at, &r.payload)
        })
        .collect())
}

/// The exact payload of one event: from the side table when the event holds a changed copy.
pub async fn full_payload(pool: &PgPool, session_id: SessionId, seq: Seq) -> sqlx::Result<Option<serde_json::Value>> {
    let row = sqlx::query!(
        r#"SELECT e.payload::text AS "inline!", p.payload AS "full?"
           FROM events e LEFT JOIN event_payloads p ON p.session_id = e.session_id AND p.seq = e.seq
           WHERE e.session_id = $1 AND e.seq = $2"#,
        session_id.0,
        seq
    )
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let text = row.full.unwrap_or(row.inline);
    serde_json::from_str(&text).map(Some).map_err(|error| sqlx::Error::Decode(Box::new(error)))
}

/// A page of encoded events: bounded by a count and by bytes.
#[derive(Debug)]
pub struct Page {
    /// The events, in order.
    pub events: Vec<Arc<SharedEvent>>,
    /// Whether more events may follow (the page stopped at its count or its byte budget).
    pub more: bool,
}

/// Up to `limit` events after `after`, encoded as [`after_encoded`] does, stopping once their
/// payloads reach `max_bytes` (the first event always comes, however large: one event is capped
/// by the item budget anyway). The rows are read as they arrive and the read is dropped at the
/// byte budget, so at most `max_bytes` and one event are held; the query is the plain ordered
/// read (a running sum in SQL made Postgres, the catch-up's bottleneck, do twice the work).
pub async fn page_encoded(
    pool: &PgPool,
    session_id: SessionId,
    after: Seq,
    limit: i64,
    max_bytes: i64,
) -> sqlx::Result<Page> {
    use futures_util::TryStreamExt;
    let mut rows = sqlx::query!(
        r#"SELECT seq, type, payload::text AS "payload!", created_at FROM events
           WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"#,
        session_id.0,
        after,
        limit
    )
    .fetch(pool);
    let budget = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let (mut events, mut bytes, mut more) = (Vec::new(), 0usize, false);
    while let Some(r) = rows.try_next().await? {
        bytes = bytes.saturating_add(r.payload.len());
        let kind = EventKind::parse(&r.r#type).unwrap_or(EventKind::Notice);
        events.push(SharedEvent::with_payload_json(session_id, r.seq, kind, r.created_at, &r.payload));
        if bytes >= budget {
            more = true;
            break;
        }
    }
    more |= events.len() as i64 >= limit;
    Ok(Page { events, more })
}
