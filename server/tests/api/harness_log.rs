//! The harness's stderr while it runs (issue 31, items 4 and 7): readable by the agent's admins
//! (`GET /api/v1/agents/{id}/harness-log`; the roles matrix checks the others' 403), its tail in
//! the error of a session the harness could not start, bounded whatever the harness writes; and
//! the Node heap a harness is told to keep under the sandbox's memory limit.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::secrets::{admin, call, make_user};
use crate::support::{TestServer, last_run_output, of_type};

const TURN: Duration = Duration::from_secs(120);

/// The harness log of `agent` as the server's admin reads it.
async fn harness_log(server: &TestServer, agent: &str) -> Value {
    let (status, log) = admin(server, "GET", &format!("/api/v1/agents/{agent}/harness-log"), json!({})).await;
    assert_eq!(status, 200, "{log}");
    log
}

/// Polls the harness log until `done` holds (or fails at the deadline).
async fn wait_log(server: &TestServer, agent: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let log = harness_log(server, agent).await;
        if done(&log) {
            return log;
        }
        assert!(started.elapsed() < TURN, "the harness log never got there: {log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_harness_stderr_is_readable_by_admins_while_it_runs_and_node_sees_the_memory_limit() {
    let server = TestServer::start().await;
    let env = json!({"FAKEAGENT_STDERR_LINES": "5"});
    let agent = server.create_agent(json!({"env": env, "limits": {"memory_mib": 512}})).await;
    let before = harness_log(&server, &agent).await;
    assert_eq!((before["text"].as_str(), before["generation"].is_null()), (Some(""), true), "{before}");
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run printenv NODE_OPTIONS").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(last_run_output(&events).trim(), "--max-old-space-size=384", "{events:?}");

    // The harness still runs: its stderr is there to read.
    let log = wait_log(&server, &agent, |log| log["text"].as_str().is_some_and(|t| t.contains("line 5 of 5"))).await;
    let text = log["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("fakeagent: stderr line 1 of 5\n"), "{log}");
    assert!(log["generation"].as_i64().is_some_and(|g| g > 0), "{log}");
    assert_eq!((log["dropped_bytes"].as_u64(), log["live"].as_bool()), (Some(0), Some(true)), "{log}");
    assert_eq!(log["ring_bytes"], 64 * 1024, "{log}");

    // Operators of its workspace may prompt it, not read what its harness prints.
    let (_, me) = admin(&server, "GET", "/api/v1/me", json!({})).await;
    let workspace = me["workspaces"][0]["workspace_id"].as_str().expect("workspace").to_owned();
    let operator = make_user(&server, "hlop").await;
    let path = format!("/api/v1/workspaces/{workspace}/members/{}", operator.id);
    assert_eq!(call(&server, "PUT", &path, &server.token, json!({"role": "operator"})).await.0, 204);
    let (status, refused) =
        call(&server, "GET", &format!("/api/v1/agents/{agent}/harness-log"), &operator.token, json!({})).await;
    assert_eq!(status, 403, "{refused}");

    // The agent's own NODE_OPTIONS wins.
    let own = json!({"FAKEAGENT_STDERR_LINES": "1", "NODE_OPTIONS": "--enable-source-maps"});
    let other = server.create_agent(json!({ "env": own })).await;
    let session = server.create_session(&other).await;
    server.prompt(&session, "run printenv NODE_OPTIONS").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(last_run_output(&events).trim(), "--enable-source-maps", "{events:?}");
}

/// The "done when": a harness that writes to stderr and then cannot start the session
/// fails the turn with the end of its stderr in the error, while it still runs.
#[tokio::test]
async fn a_session_the_harness_cannot_start_fails_with_the_end_of_its_stderr() {
    let server = TestServer::start().await;
    let env = json!({"FAKEAGENT_REQUIRE_AUTH": "fake-key", "FAKEAGENT_STDERR_LINES": "3"});
    let agent = server.create_agent(json!({ "env": env })).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text never").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let error = events.iter().find(|e| e["type"] == "error").expect("an error");
    assert_eq!(error["payload"]["code"], "SESSION_START_FAILED", "{events:?}");
    let message = error["payload"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("authentication required"), "{message}");
    assert!(message.contains("\nstderr: ") && message.ends_with("fakeagent: stderr line 3 of 3"), "{message}");
    let log = harness_log(&server, &agent).await;
    assert!(log["text"].as_str().is_some_and(|t| t.contains("line 3 of 3")), "{log}");
}

/// A harness writing stderr without end: sandboxd sends at most its rate, the server keeps the
/// newest 64 KiB and counts the rest as dropped, the harness is never blocked (its turns run)
/// and the server's memory stays bounded.
#[tokio::test]
async fn a_harness_flooding_stderr_leaves_the_log_and_server_memory_bounded() {
    let server = TestServer::start().await;
    let before = server.rss_kib().expect("server rss");
    let env = json!({"FAKEAGENT_STDERR_LINES": "3000000"});
    let agent = server.create_agent(json!({ "env": env })).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text still here").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let end = of_type(&events, "turn_end");
    assert_eq!(end.first().map(|e| &e["payload"]["stop_reason"]), Some(&json!("end_turn")), "{events:?}");
    let mut peak = 0;
    let log = wait_log(&server, &agent, |log| {
        peak = peak.max(server.rss_kib().unwrap_or(0));
        log["dropped_bytes"].as_u64().is_some_and(|d| d > 1_000_000)
    })
    .await;
    let text = log["text"].as_str().unwrap_or_default();
    assert!(text.len() <= 64 * 1024 && text.len() > 16 * 1024, "{} bytes", text.len());
    assert!(text.contains("fakeagent: stderr line"), "{}", &text[..200.min(text.len())]);
    let (dropped, rotated) = (&log["dropped_bytes"], &log["rotated_bytes"]);
    println!(
        "server rss: before {before} KiB, peak while flooded {peak} KiB; stderr dropped {dropped} B, rotated {rotated} B"
    );
    // The bound of the other floods (hardening.rs): bounded queues everywhere.
    assert!(peak < 256 * 1024, "server rss grew from {before} KiB to {peak} KiB");
}
