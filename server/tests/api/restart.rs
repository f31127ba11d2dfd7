//! Killing the server (SIGKILL) mid-turn loses nothing: the harness keeps running in its
//! sandbox, sandboxd reconnects and resends, the turn finishes with `turn_end`, and the log has
//! every update exactly once.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestServer, assert_gap_free, of_type};

#[tokio::test]
async fn a_server_killed_mid_turn_loses_and_repeats_nothing() {
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "flood 600 150\ntext done").await;

    let mut watcher = server.watch(&session, "0").await;
    let mut seen = 0;
    while seen < 100 {
        watcher.next(Duration::from_secs(60)).await.expect("events before the kill");
        seen += 1;
    }
    server.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await; // the harness keeps flooding meanwhile
    server.restart().await;

    let events = server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    assert_gap_free(&events);
    let indices: Vec<i64> = events.iter().filter_map(|e| e["payload"]["_meta"]["fakeagent"]["i"].as_i64()).collect();
    assert_eq!(indices, (1..=600).collect::<Vec<i64>>(), "every update exactly once, in order");
    assert_eq!(of_type(&events, "turn_end").len(), 1);
    assert_eq!(events.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("end_turn")));
    assert!(of_type(&events, "error").is_empty(), "{:?}", of_type(&events, "error"));

    // The taken-over harness keeps serving the session.
    server.prompt(&session, "text after restart").await;
    let events = server.wait_turns(&session, 2, Duration::from_secs(60)).await;
    assert_gap_free(&events);
    assert!(of_type(&events, "notice").is_empty());
}

#[tokio::test]
async fn a_server_killed_while_a_turn_waits_for_its_harness_still_runs_the_turn() {
    let mut server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text quick").await;
    server.kill(); // maybe before the sandbox even exists
    server.restart().await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(120)).await;
    assert_gap_free(&events);
    assert_eq!(of_type(&events, "turn_end").len(), 1);
}
