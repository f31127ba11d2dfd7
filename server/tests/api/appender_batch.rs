//! The appender against a real Postgres with many sessions and harnesses in one transaction:
//! each session's seqs continue its own log, every harness's stdout offset moves in the one
//! statement, and a request whose offset chain does not match fails alone while the others of
//! its batch are stored. Streaming batches take the one-statement path, any other the
//! transaction: both are checked, and against what the API reads back.

use std::sync::Arc;

use serde_json::json;
use sqlx::Connection;

use agenthold_server::events::appender::{Appender, SideEffect};
use agenthold_server::events::hub::Hub;
use agenthold_server::events::{EventKind, NewEvent};
use agenthold_server::ids::{AgentId, SessionId};

use crate::support::TestServer;

struct Harness {
    agent_id: AgentId,
    session_id: SessionId,
}

async fn harnesses(server: &TestServer, db: &mut sqlx::PgConnection, count: usize) -> Vec<Harness> {
    let mut all = Vec::new();
    for _ in 0..count {
        let agent = server.create_agent(json!({})).await;
        let session = server.create_session(&agent).await;
        let agent_id: AgentId = agent.parse().expect("agent id");
        let updated =
            sqlx::query("UPDATE sandboxes SET harness_generation = 1, harness_stdout_offset = 0 WHERE agent_id = $1")
                .bind(agent_id.0)
                .execute(&mut *db)
                .await
                .expect("setting the harness generation");
        assert_eq!(updated.rows_affected(), 1, "the agent has a sandbox record");
        all.push(Harness { agent_id, session_id: session.parse().expect("session id") });
    }
    all
}

fn line(harness: &Harness, from: u64, to: u64, text: &str) -> (Vec<NewEvent>, Vec<SideEffect>) {
    let event = NewEvent::new(harness.session_id, EventKind::Notice, json!({"code": "TEST", "message": text}));
    let effect = SideEffect::StdoutStored { agent_id: harness.agent_id, generation: 1, from, to };
    (vec![event], vec![effect])
}

async fn offset(db: &mut sqlx::PgConnection, agent_id: AgentId) -> i64 {
    sqlx::query_scalar("SELECT harness_stdout_offset FROM sandboxes WHERE agent_id = $1")
        .bind(agent_id.0)
        .fetch_one(db)
        .await
        .expect("reading the offset")
}

async fn seqs(db: &mut sqlx::PgConnection, session_id: SessionId) -> Vec<i64> {
    sqlx::query_scalar("SELECT seq FROM events WHERE session_id = $1 AND type = 'notice' ORDER BY seq")
        .bind(session_id.0)
        .fetch_all(db)
        .await
        .expect("reading seqs")
}

#[tokio::test]
async fn many_sessions_in_one_batch_keep_their_own_logs_and_offsets() {
    let server = TestServer::start().await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let harnesses = harnesses(&server, &mut db, 4).await;
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("pool");
    let (appender, _task) = Appender::spawn(pool, Arc::new(Hub::default()));

    // Ten lines of every harness, queued before any commit is awaited: batches mix sessions.
    let mut pending = Vec::new();
    for n in 0..10u64 {
        for harness in &harnesses {
            let (events, effects) = line(harness, n * 10, n * 10 + 10, &format!("line {n}"));
            pending.push(appender.submit(events, effects).await);
        }
    }
    for receiver in pending {
        let committed = receiver.await.expect("an answer").expect("stored");
        assert_eq!(committed.len(), 1);
    }
    for harness in &harnesses {
        assert_eq!(offset(&mut db, harness.agent_id).await, 100, "every line's offset is stored");
        let stored = seqs(&mut db, harness.session_id).await;
        assert_eq!(stored.len(), 10, "each session has its own ten events");
        assert!(stored.windows(2).all(|w| w[1] == w[0] + 1), "gapless in each session: {stored:?}");
    }

    // A chain that does not start at the stored offset fails alone; its neighbours are stored.
    let (good_a, good_b, bad) = (&harnesses[0], &harnesses[1], &harnesses[2]);
    let (events, effects) = line(good_a, 100, 110, "a");
    let a = appender.submit(events, effects).await;
    let (events, effects) = line(bad, 90, 95, "stale");
    let stale = appender.submit(events, effects).await;
    let (events, effects) = line(good_b, 100, 110, "b");
    let b = appender.submit(events, effects).await;
    assert!(a.await.expect("an answer").is_ok());
    assert!(stale.await.expect("an answer").is_err(), "a chain from a moved offset is refused");
    assert!(b.await.expect("an answer").is_ok());
    assert_eq!(offset(&mut db, good_a.agent_id).await, 110);
    assert_eq!(offset(&mut db, good_b.agent_id).await, 110);
    assert_eq!(offset(&mut db, bad.agent_id).await, 100, "the refused chain moved nothing");
    assert_eq!(seqs(&mut db, bad.session_id).await.len(), 10, "and stored nothing");

    // A deleted session's events are dropped; the others of the batch keep their seqs.
    let (gone, kept) = (&harnesses[3], &harnesses[0]);
    let last_kept = *seqs(&mut db, kept.session_id).await.last().expect("events");
    sqlx::query("DELETE FROM sessions WHERE id = $1").bind(gone.session_id.0).execute(&mut db).await.expect("deleting");
    let gone_event = NewEvent::new(gone.session_id, EventKind::Notice, json!({"code": "TEST", "message": "gone"}));
    let kept_event = NewEvent::new(kept.session_id, EventKind::Notice, json!({"code": "TEST", "message": "kept"}));
    let committed = appender.append(vec![gone_event, kept_event], Vec::new()).await.expect("stored");
    assert_eq!(committed.len(), 1, "only the existing session's event is stored");
    assert_eq!(committed[0].session_id, kept.session_id);
    assert_eq!(committed[0].seq, last_kept + 1);

    // A payload the budget must change (U+0000) sends its batch down the transaction's path;
    // the next streaming batch takes the one statement again. Both read back as they were sent.
    let (events, effects) = line(kept, 110, 120, "plain");
    let plain = appender.submit(events, effects).await;
    let nul = NewEvent::new(kept.session_id, EventKind::Notice, json!({"code": "TEST", "message": "a\u{0}b"}));
    let with_nul = appender
        .submit(
            vec![nul],
            vec![SideEffect::StdoutStored { agent_id: kept.agent_id, generation: 1, from: 120, to: 130 }],
        )
        .await;
    let (events, effects) = line(kept, 130, 140, "after");
    let after = appender.submit(events, effects).await;
    let mut sent = Vec::new();
    for receiver in [plain, with_nul, after] {
        sent.extend(receiver.await.expect("an answer").expect("stored"));
    }
    assert_eq!(offset(&mut db, kept.agent_id).await, 140, "every offset moved, on either path");
    let seqs_sent: Vec<i64> = sent.iter().map(|event| event.seq).collect();
    assert_eq!(seqs_sent, vec![last_kept + 2, last_kept + 3, last_kept + 4], "one log, gapless across the paths");
    let (status, page) =
        server.get(&format!("/api/v1/sessions/{}/events?after={}", kept.session_id, last_kept + 1)).await;
    assert_eq!(status, 200, "{page}");
    let read: Vec<serde_json::Value> = page["events"].as_array().expect("events").clone();
    assert_eq!(read.len(), 3, "{page}");
    for (event, stored) in sent.iter().zip(&read) {
        let live: serde_json::Value = serde_json::from_str(&event.json).expect("the live event is JSON");
        assert_eq!(&live, stored, "watchers get what the log keeps");
    }
    assert_eq!(read[1]["payload"]["nul_replaced"], json!(true));
    assert_eq!(read[1]["payload"]["message"], json!("a\u{2400}b"));
}

/// Two appenders on their own connections (as two replicas have) write to the same sessions at
/// once, each with its own harness's stdout chain: the one statement's row locks order them, so
/// every session's seqs stay unique and gapless and each chain lands whole.
#[tokio::test]
async fn two_appenders_writing_the_same_sessions_at_once_keep_one_gapless_log() {
    let server = TestServer::start().await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let harnesses = harnesses(&server, &mut db, 2).await;
    let shared = [harnesses[0].session_id, harnesses[1].session_id];
    let mut appenders = Vec::new();
    for _ in 0..2 {
        let pool = sqlx::PgPool::connect(&server.database_url).await.expect("pool");
        appenders.push(Appender::spawn(pool, Arc::new(Hub::default())));
    }
    const LINES: u64 = 200;
    let writers = appenders.iter().zip(&harnesses).map(|((appender, _), harness)| async move {
        let mut pending = Vec::new();
        for n in 0..LINES {
            // Each line: one event in each shared session, its harness's offset moving by 10.
            let events = shared
                .iter()
                .map(|session| NewEvent::new(*session, EventKind::Notice, json!({"code": "TEST", "message": n})))
                .collect();
            let effect =
                SideEffect::StdoutStored { agent_id: harness.agent_id, generation: 1, from: n * 10, to: n * 10 + 10 };
            pending.push(appender.submit(events, vec![effect]).await);
        }
        for receiver in pending {
            assert_eq!(receiver.await.expect("an answer").expect("stored").len(), 2);
        }
    });
    futures_util::future::join_all(writers).await;
    for harness in &harnesses {
        assert_eq!(offset(&mut db, harness.agent_id).await, (LINES * 10) as i64, "each chain landed whole");
    }
    for session in shared {
        let stored = seqs(&mut db, session).await;
        assert_eq!(stored.len(), 2 * LINES as usize, "both writers' events, each once");
        assert!(stored.windows(2).all(|w| w[1] == w[0] + 1), "gapless: {stored:?}");
    }
}

async fn count_events(db: &mut sqlx::PgConnection, session_id: SessionId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events WHERE session_id = $1")
        .bind(session_id.0)
        .fetch_one(db)
        .await
        .expect("counting events")
}

/// `events` has no foreign key to `sessions` (migration 0039): a deleted session's events go
/// with it by a trigger, and the appender stores nothing for a session that is gone.
#[tokio::test]
async fn a_deleted_session_takes_its_events_and_gets_none_after() {
    let server = TestServer::start().await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let harnesses = harnesses(&server, &mut db, 2).await;
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("pool");
    let (appender, _task) = Appender::spawn(pool, Arc::new(Hub::default()));
    for harness in &harnesses {
        let (events, effects) = line(harness, 0, 10, "before");
        appender.append(events, effects).await.expect("stored");
    }
    let (gone, kept) = (&harnesses[0], &harnesses[1]);
    let kept_before = count_events(&mut db, kept.session_id).await;
    assert!(count_events(&mut db, gone.session_id).await >= 1);

    sqlx::query("DELETE FROM sessions WHERE id = $1").bind(gone.session_id.0).execute(&mut db).await.expect("deleting");
    assert_eq!(count_events(&mut db, gone.session_id).await, 0, "the session's events went with it");
    assert_eq!(count_events(&mut db, kept.session_id).await, kept_before, "another session's stayed");

    // Both paths: the streaming statement (events and offsets only) and the transaction.
    let (events, effects) = line(gone, 10, 20, "after");
    let streamed = appender.append(events, effects).await.expect("nothing to store is no failure");
    assert!(streamed.is_empty(), "{streamed:?}");
    let mut events = line(gone, 20, 30, "after").0;
    events.push(NewEvent::new(gone.session_id, EventKind::TurnEnd, json!({"stop_reason": "end_turn"})));
    let transacted = appender
        .append(events, vec![SideEffect::StdoutStored { agent_id: gone.agent_id, generation: 1, from: 20, to: 30 }])
        .await
        .expect("nothing to store is no failure");
    assert!(transacted.is_empty(), "{transacted:?}");
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = e.session_id)",
    )
    .fetch_one(&mut db)
    .await
    .expect("counting orphans");
    assert_eq!(orphans, 0);
    assert_eq!(offset(&mut db, gone.agent_id).await, 30, "its harness's stdout still moved on");
}

/// A harness's update kept as the text it printed is stored as that JSON and reaches the
/// watchers byte for byte (no tree built, no encoding again).
#[tokio::test]
async fn an_update_kept_as_text_is_stored_and_sent_as_it_came() {
    let server = TestServer::start().await;
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("connecting");
    let harnesses = harnesses(&server, &mut db, 1).await;
    let harness = &harnesses[0];
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("pool");
    let (appender, _task) = Appender::spawn(pool, Arc::new(Hub::default()));
    let text = r#"{"sessionUpdate": "agent_message_chunk", "content": {"type":"text", "text":"h\u00e9"}}"#;
    let raw = serde_json::value::RawValue::from_string(text.to_owned()).expect("JSON");
    let effect = SideEffect::StdoutStored { agent_id: harness.agent_id, generation: 1, from: 0, to: 100 };
    let committed =
        appender.append(vec![NewEvent::update_text(harness.session_id, raw)], vec![effect]).await.expect("stored");
    assert_eq!(committed.len(), 1);
    assert!(committed[0].json.contains(&format!(r#""payload":{text},"#)), "{}", committed[0].json);
    let stored: serde_json::Value = sqlx::query_scalar("SELECT payload FROM events WHERE session_id = $1 AND seq = $2")
        .bind(harness.session_id.0)
        .bind(committed[0].seq)
        .fetch_one(&mut db)
        .await
        .expect("reading the payload");
    assert_eq!(stored, json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hé"}}));
}
