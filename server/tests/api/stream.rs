//! The cursor stream: stored events after the cursor, then live ones, no gap, no duplicate —
//! across reconnects mid-turn and for a watcher that lags behind.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestServer, assert_gap_free, seqs};

const STALL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn reconnecting_mid_turn_with_the_last_seq_continues_without_gap_or_duplicate() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "flood 400 200").await;

    let mut first = server.watch(&session, "0").await;
    let mut seen = Vec::new();
    while seen.len() < 60 {
        seen.push(first.next(STALL).await.expect("an event before the reload"));
    }
    drop(first); // a browser reload, mid-turn
    let last = seen.last().and_then(|e| e["seq"].as_i64()).expect("seq");

    let mut second = server.watch(&session, &last.to_string()).await;
    seen.extend(second.until("turn_end", STALL).await);
    assert_gap_free(&seen);
    let stored = server.events(&session).await;
    assert_eq!(seqs(&seen), seqs(&stored), "the stream and the log agree");
    let floods = seen.iter().filter(|e| e["payload"]["_meta"]["fakeagent"]["i"].is_number()).count();
    assert_eq!(floods, 400);
}

#[tokio::test]
async fn a_lagging_watcher_is_caught_up_from_postgres() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    // A watcher that does not read while 12,000 events are stored (more than the live buffer).
    let mut slow = server.watch(&session, "0").await;
    server.prompt(&session, "flood 12000 0").await;
    server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    let events = slow.until("turn_end", STALL).await;
    assert_gap_free(&events);
    assert_eq!(events.len(), 12_002, "the prompt, 12,000 updates, the turn_end");
}

#[tokio::test]
async fn a_cursor_at_or_beyond_the_end_gets_only_new_events() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text one").await;
    let first = server.wait_turns(&session, 1, STALL).await;
    let end = first.len();

    let mut at_end = server.watch(&session, &end.to_string()).await;
    let mut beyond = server.watch(&session, "1000000").await;
    assert!(at_end.next(Duration::from_millis(300)).await.is_none(), "nothing stored after the end");
    server.prompt(&session, "text two").await;
    let new = at_end.until("turn_end", STALL).await;
    assert_eq!(new.first().and_then(|e| e["seq"].as_i64()), Some(end as i64 + 1));
    let from_beyond = beyond.until("turn_end", STALL).await;
    assert_eq!(seqs(&from_beyond), seqs(&new), "a cursor beyond the end is taken as the end");
}
