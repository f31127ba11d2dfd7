//! The server-wide limit on running turns and the per-agent turn time limit (issue 10, part 5),
//! against the running server: with `AGENTHOLD_MAX_RUNNING_TURNS=1`, a prompt to a second agent
//! waits while another agent's turn runs — visibly, with a `TURN_QUEUED` notice — and runs once
//! that turn ends; a turn waiting for a person's answer does not hold the slot, and its answer
//! lets it go on at once. An agent's `limits.turn_seconds` replaces the server's limit.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestServer, of_type};

const TURN: Duration = Duration::from_secs(120);

fn turn_end_at(events: &[Value]) -> chrono::DateTime<chrono::Utc> {
    let end = of_type(events, "turn_end");
    let at = end.last().expect("a turn_end")["created_at"].as_str().expect("created_at").to_owned();
    at.parse().expect("a time")
}

async fn wait_for(server: &TestServer, session: &str, what: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let events = server.events(session).await;
        if what(&events) {
            return events;
        }
        assert!(started.elapsed() < TURN, "waited too long: {events:?}\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_prompt_beyond_the_server_s_limit_waits_its_turn_and_a_question_does_not_hold_a_slot() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_RUNNING_TURNS", "1")]).await;
    let asking = server.create_agent(json!({"posture": "approval"})).await;
    let busy = server.create_agent(json!({})).await;
    let queued = server.create_agent(json!({})).await;
    let (asking_s, busy_s, queued_s) = (
        server.create_session(&asking).await,
        server.create_session(&busy).await,
        server.create_session(&queued).await,
    );
    // A turn that waits for a person holds no slot: another agent's turn runs meanwhile.
    server.prompt(&asking_s, "ask execute make deploy\ntext deployed").await;
    let events = wait_for(&server, &asking_s, |e| !of_type(e, "permission").is_empty()).await;
    let permission_id = of_type(&events, "permission")[0]["payload"]["permission_id"].as_str().expect("id").to_owned();
    server.prompt(&busy_s, "text one").await;
    let events = server.wait_turns(&busy_s, 1, TURN).await;
    assert!(of_type(&events, "notice").is_empty(), "nothing queued while the other turn waits: {events:?}");

    // One turn runs (4 s); a prompt to another agent waits for it, and says so.
    server.prompt(&busy_s, "sleep 4000\ntext two").await;
    // (It takes its slot as soon as its supervisor reads the prompt.)
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.prompt(&queued_s, "text after").await;
    let events = wait_for(&server, &queued_s, |e| !of_type(e, "notice").is_empty()).await;
    let notice = &of_type(&events, "notice")[0]["payload"];
    assert_eq!((notice["code"].as_str(), notice["limit"].as_i64()), (Some("TURN_QUEUED"), Some(1)), "{notice}");
    assert!(of_type(&events, "turn_end").is_empty(), "it ran past the limit: {events:?}");
    let busy_events = server.wait_turns(&busy_s, 2, TURN).await;
    let queued_events = server.wait_turns(&queued_s, 1, TURN).await;
    assert!(turn_end_at(&queued_events) >= turn_end_at(&busy_events), "the queued turn ended first");
    assert_eq!(of_type(&queued_events, "turn_end")[0]["payload"]["stop_reason"], "end_turn");

    // The answer lets the waiting turn go on at once.
    let answer = format!("/api/v1/permissions/{permission_id}/answer");
    let (status, body) = server.post(&answer, json!({"decision": "allow"})).await;
    assert_eq!(status, 200, "{body}");
    let events = server.wait_turns(&asking_s, 1, TURN).await;
    assert_eq!(of_type(&events, "turn_end")[0]["payload"]["stop_reason"], "end_turn", "{events:?}");
}

#[tokio::test]
async fn an_agent_s_own_turn_limit_replaces_the_server_s() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"limits": {"turn_seconds": 2}})).await;
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["limits"]["turn_seconds"], 2, "{view}");
    let session = server.create_session(&agent).await;
    server.prompt(&session, "sleep 30000\ntext never").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let errors = of_type(&events, "error");
    assert_eq!(errors.first().map(|e| e["payload"]["code"].clone()), Some(json!("TURN_TIMEOUT")), "{events:?}");

    // Changed, then back to the server's; out of range is refused.
    let path = format!("/api/v1/agents/{agent}");
    let (status, body) = server.raw("PATCH", &path, r#"{"limits": {"turn_seconds": 0}}"#).await;
    assert_eq!((status, body["limits"]["turn_seconds"].clone()), (200, Value::Null), "{body}");
    let (status, body) = server.raw("PATCH", &path, r#"{"limits": {"turn_seconds": -5}}"#).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_LIMITS")), "{body}");
    let (status, body) = server
        .post("/api/v1/agents", json!({"name": "x", "harness": "fake", "limits": {"turn_seconds": 99999999}}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_LIMITS")), "{body}");
    // Without its own limit, the next turn runs past 2 s.
    server.prompt(&session, "sleep 3000\ntext done").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(of_type(&events, "turn_end")[1]["payload"]["stop_reason"], "end_turn", "{events:?}");
}

#[tokio::test]
async fn a_workspace_at_its_running_turn_limit_waits_without_holding_up_another_workspace() {
    let server = TestServer::start_with(&[
        ("AGENTHOLD_MAX_RUNNING_TURNS", "8"),
        ("AGENTHOLD_MAX_RUNNING_TURNS_PER_WORKSPACE", "1"),
        ("AGENTHOLD_MAX_RUNNING_TURNS_PER_USER", "0"),
    ])
    .await;
    let (status, other) = server.post("/api/v1/workspaces", json!({"name": "other team"})).await;
    assert_eq!(status, 201, "{other}");
    let other = other["id"].as_str().expect("id").to_owned();
    let busy = server.create_agent(json!({})).await;
    let same_workspace = server.create_agent(json!({})).await;
    let other_workspace = server.create_agent(json!({"workspace_id": other})).await;
    let (busy_s, same_s, other_s) = (
        server.create_session(&busy).await,
        server.create_session(&same_workspace).await,
        server.create_session(&other_workspace).await,
    );
    server.prompt(&busy_s, "sleep 4000\ntext long").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.prompt(&same_s, "text waits").await;
    server.prompt(&other_s, "text runs at once").await;
    // The other workspace's turn ends while the long one still runs.
    let other_events = server.wait_turns(&other_s, 1, TURN).await;
    assert!(of_type(&other_events, "notice").is_empty(), "{other_events:?}");
    let busy_events = server.events(&busy_s).await;
    assert!(of_type(&busy_events, "turn_end").is_empty(), "the long turn ended first: {busy_events:?}");
    // The same workspace's waits, says which limit holds it, and runs once the long turn ends.
    let events = wait_for(&server, &same_s, |e| !of_type(e, "notice").is_empty()).await;
    let notice = &of_type(&events, "notice")[0]["payload"];
    assert_eq!(
        (notice["code"].as_str(), notice["scope"].as_str(), notice["limit"].as_i64()),
        (Some("TURN_QUEUED"), Some("workspace"), Some(1)),
        "{notice}"
    );
    let same_events = server.wait_turns(&same_s, 1, TURN).await;
    let busy_events = server.wait_turns(&busy_s, 1, TURN).await;
    assert!(turn_end_at(&same_events) >= turn_end_at(&busy_events), "it ran past its workspace's limit");
}

#[tokio::test]
async fn a_turn_limit_over_the_server_s_maximum_is_refused_naming_it() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_TURN_SECS", "600")]).await;
    let (status, body) = server
        .post("/api/v1/agents", json!({"name": "long", "harness": "fake", "limits": {"turn_seconds": 601}}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("LIMIT_TOO_HIGH")), "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("600")), "{body}");
    let agent = server.create_agent(json!({"limits": {"turn_seconds": 600}})).await;
    let (status, body) =
        server.raw("PATCH", &format!("/api/v1/agents/{agent}"), r#"{"limits": {"turn_seconds": 700}}"#).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("LIMIT_TOO_HIGH")), "{body}");
}
