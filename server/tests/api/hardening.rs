//! The foundation under fire (the hardening issue, against the real stack): output a database
//! cannot take as is, and harnesses that print without end, leave the log whole and the server's
//! memory bounded.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, of_type};

const TURN: Duration = Duration::from_secs(60);

fn error_codes(events: &[serde_json::Value]) -> Vec<String> {
    of_type(events, "error").iter().filter_map(|e| e["payload"]["code"].as_str().map(str::to_owned)).collect()
}

/// Server RSS must stay under this while a harness floods it (docs/design.md, "Memory bounds":
/// a 16 MiB line limit per harness, bounded queues everywhere).
const RSS_BOUND_KIB: u64 = 256 * 1024;

/// Samples the server's RSS until `done` says stop (or the deadline); returns the peak.
async fn peak_rss_while(server: &TestServer, deadline: Duration, mut done: impl AsyncFnMut() -> bool) -> u64 {
    let end = Instant::now() + deadline;
    let mut peak = 0;
    while Instant::now() < end {
        peak = peak.max(server.rss_kib().unwrap_or(0));
        if done().await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    peak
}

#[tokio::test]
async fn a_harness_printing_blank_lines_or_one_endless_line_leaves_server_memory_bounded() {
    let server = TestServer::start_with(&[("AGENTHOLD_HARNESS_TIMEOUT_SECS", "8")]).await;
    let before = server.rss_kib().expect("server rss");

    let blank = server.create_agent(json!({"harness": "command", "command": ["sh", "-c", "yes ''"]})).await;
    let session = server.create_session(&blank).await;
    server.prompt(&session, "hello").await;
    let peak_blank =
        peak_rss_while(&server, TURN, async || !of_type(&server.events(&session).await, "turn_end").is_empty()).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(error_codes(&events), ["HARNESS_TIMEOUT"], "{events:?}");

    let endless = json!({"harness": "command", "command": ["sh", "-c", "head -c 1000000000 /dev/zero | tr '\\0' x"]});
    let long = server.create_agent(endless).await;
    let session = server.create_session(&long).await;
    server.prompt(&session, "hello").await;
    let peak_long =
        peak_rss_while(&server, TURN, async || !of_type(&server.events(&session).await, "turn_end").is_empty()).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(error_codes(&events), ["HARNESS_PROTOCOL_ERROR"], "{events:?}");
    println!(
        "server rss: before {before} KiB, blank-line flood peak {peak_blank} KiB, endless line peak {peak_long} KiB"
    );
    assert!(peak_blank < RSS_BOUND_KIB, "blank lines: {peak_blank} KiB");
    assert!(peak_long < RSS_BOUND_KIB, "one endless line: {peak_long} KiB");
}

#[tokio::test]
async fn a_harness_killed_for_want_of_memory_ends_its_turn_with_out_of_memory() {
    if skip_unless_docker("the local driver sets no memory limit") {
        return;
    }
    let server = TestServer::start().await;
    // `tail` keeps the last 600 MiB of its input before printing any: far past the 64 MiB limit.
    let hog = json!({
        "harness": "command",
        "command": ["sh", "-c", "head -c 600m /dev/zero | exec tail -c 600m"],
        "limits": {"memory_mib": 64},
    });
    let agent = server.create_agent(hog).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "hello").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(error_codes(&events), ["OUT_OF_MEMORY"], "{events:?}");
    let message = of_type(&events, "error")[0]["payload"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("64 MiB"), "{message}");
}

#[tokio::test]
async fn a_harness_printing_an_endless_line_of_nul_bytes_fails_its_turn() {
    let server = TestServer::start().await;
    let nul = json!({"harness": "command", "command": ["sh", "-c", "exec cat /dev/zero"]});
    let agent = server.create_agent(nul).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "hello").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(error_codes(&events), ["HARNESS_PROTOCOL_ERROR"], "{events:?}");
}

#[tokio::test]
async fn a_permission_question_is_recorded_with_its_answer() {
    use sqlx::Connection;
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "ask execute run the tests\ntext done").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(of_type(&events, "permission_resolved").len(), 1, "{events:?}");
    let mut db = sqlx::PgConnection::connect(&server.database_url).await.expect("database");
    let session_id = uuid::Uuid::parse_str(&session).expect("uuid");
    let rows: Vec<(serde_json::Value, Option<uuid::Uuid>)> =
        sqlx::query_as("SELECT outcome, turn_id FROM permission_requests WHERE session_id = $1")
            .bind(session_id)
            .fetch_all(&mut db)
            .await
            .expect("permission rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0["outcome"], "selected", "{:?}", rows[0].0);
    assert!(rows[0].1.is_some(), "the row names its turn");
}
