//! Issue 31 (items 1 and 2): any ACP program run by the `command` harness signs in and keeps its
//! sessions, and the history a load replays is never stored twice. The agent here is the shipped
//! fakeagent started as a plain command (no adapter knows it) that refuses sessions until it is
//! `authenticate`d with `acme-login` (named on the agent as `auth_method`), replays a loaded
//! session's history only after answering `session/load`, and logs every request on stderr.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, last_run_output, of_type, texts};

const TURN: Duration = Duration::from_secs(120);

/// Where fakeagent is inside the agent's sandbox.
fn tools_dir() -> String {
    if crate::support::driver() == "docker" {
        "/opt/agenthold".to_owned()
    } else {
        std::path::Path::new(env!("CARGO_BIN_EXE_agenthold"))
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

fn notices(events: &[Value], code: &str) -> usize {
    of_type(events, "notice").iter().filter(|e| e["payload"]["code"] == code).count()
}

#[tokio::test]
async fn an_acp_agent_that_must_sign_in_and_replays_late_keeps_its_session_across_sleep() {
    let server = TestServer::start().await;
    let env = json!({"FAKEAGENT_REQUIRE_AUTH": "acme-login", "FAKEAGENT_REPLAY_LATE": "1", "FAKEAGENT_STDERR": "1"});
    let command = json!([format!("{}/fakeagent", tools_dir())]);
    let body = json!({"harness": "command", "command": command, "env": env, "auth_method": "acme-login"});
    let agent = server.create_agent(body).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["auth_method"], "acme-login", "{view}");

    let session = server.create_session(&agent).await;
    server.prompt(&session, "text one\nthink pondering one").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(notices(&events, "AUTHENTICATED"), 1, "signed in for session/new: {events:?}");
    server.prompt(&session, "text two\nplan first step | second step").await;
    server.wait_turns(&session, 2, TURN).await;

    // While its harness runs, a method it does not advertise is refused, naming those it does.
    let path = format!("/api/v1/agents/{agent}");
    let (status, body) = server.raw("PATCH", &path, &json!({"auth_method": "sso"}).to_string()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("UNKNOWN_AUTH_METHOD")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("acme-login")), "{body}");

    // Sleep and wake: a new harness process must sign in before it loads the session.
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/wake"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    server.prompt(&session, "text three\nrun ls ~/.fakeagent/sessions | wc -l").await;
    let events = server.wait_turns(&session, 3, TURN).await;

    let stops: Vec<&Value> = of_type(&events, "turn_end").iter().map(|e| &e["payload"]["stop_reason"]).collect();
    assert_eq!(stops, [&json!("end_turn"); 3], "{events:?}");
    assert_eq!(notices(&events, "CONTEXT_RESET"), 0, "the session was loaded, not replaced: {events:?}");
    assert_eq!(notices(&events, "AUTHENTICATED"), 2, "signed in again after the wake: {events:?}");
    assert_eq!(last_run_output(&events).trim(), "1", "the harness knows one session: {events:?}");

    // The history the load replayed after its answer was not stored again: each update once.
    assert_eq!(texts(&events), ["one", "two", "three"], "{events:?}");
    let updates: Vec<String> = of_type(&events, "update").iter().map(|e| e["payload"].to_string()).collect();
    let unique: HashSet<&String> = updates.iter().collect();
    assert_eq!(unique.len(), updates.len(), "an update stored twice: {updates:#?}");
    let kinds: Vec<&str> =
        of_type(&events, "update").iter().filter_map(|e| e["payload"]["sessionUpdate"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "agent_thought_chunk",
            "agent_message_chunk",
            "plan",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update"
        ],
        "{updates:#?}"
    );
}

#[tokio::test]
async fn an_auth_method_is_checked_and_changing_it_restarts_nothing() {
    let server = TestServer::start().await;
    let (status, body) =
        server.post("/api/v1/agents", json!({"name": "long", "harness": "fake", "auth_method": "x".repeat(129)})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("UNKNOWN_AUTH_METHOD")), "{body}");

    // Before any harness ran nothing is known: any well-formed id is taken.
    let agent = server.create_agent(json!({"auth_method": "later", "env": {"FAKEAGENT_STDERR": "1"}})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run echo $PPID").await;
    let before = last_run_output(&server.wait_turns(&session, 1, TURN).await);
    // fakeagent advertises no method `authenticate` takes here (only its terminal login).
    let path = format!("/api/v1/agents/{agent}");
    let (status, body) = server.raw("PATCH", &path, &json!({"auth_method": "other"}).to_string()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("UNKNOWN_AUTH_METHOD")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.ends_with("none")), "{body}");
    // Clearing it is a change that restarts nothing: the next turn runs in the same harness.
    let (status, body) = server.raw("PATCH", &path, &json!({"auth_method": ""}).to_string()).await;
    assert_eq!((status, &body["auth_method"]), (200, &Value::Null), "{body}");
    server.prompt(&session, "run echo $PPID").await;
    let after = last_run_output(&server.wait_turns(&session, 2, TURN).await);
    assert!(!before.trim().is_empty(), "fakeagent's pid");
    assert_eq!(before, after, "the same fakeagent process ran both commands");
}
