//! An agent's observed `state` beside its desired one: `asleep` when made, `awake` once its
//! sandbox connected, `asleep` again after a sleep, and `error` with a reason when its harness
//! cannot start (cleared by a sleep) — the same in the list and in the agent's own answer.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;

const TURN: Duration = Duration::from_secs(90);

/// The agent as `GET /api/v1/agents/{id}` and as the list show it.
async fn both(server: &TestServer, agent: &str) -> (Value, Value) {
    let (status, one) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(status, 200, "{one}");
    let (_, list) = server.get("/api/v1/agents").await;
    let listed = list["agents"].as_array().expect("agents").iter().find(|a| a["id"] == agent).cloned();
    (one, listed.expect("listed"))
}

/// Waits until the agent's observed state is `state`; returns the agent.
async fn until_state(server: &TestServer, agent: &str, state: &str) -> Value {
    let started = Instant::now();
    loop {
        let (one, listed) = both(server, agent).await;
        if one["state"] == state && listed["state"] == state {
            return one;
        }
        assert!(started.elapsed() < TURN, "never {state}: {one}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_observed_state_follows_wake_sleep_and_failures() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let (one, listed) = both(&server, &agent).await;
    for shown in [&one, &listed] {
        assert_eq!((shown["state"].as_str(), &shown["state_reason"]), (Some("asleep"), &Value::Null), "{shown}");
    }

    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/wake"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(["starting", "awake"].contains(&body["state"].as_str().unwrap_or_default()), "{body}");
    let awake = until_state(&server, &agent, "awake").await;
    assert_eq!(awake["desired_state"], "awake");
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!((status, body["state"].as_str()), (200, Some("asleep")), "a sleep answers once stopped: {body}");

    // A harness that cannot start: `error`, with why (the turn failed the same way).
    let broken = server.create_agent(json!({"harness": "command", "command": ["no-such-acp-agent"]})).await;
    let session = server.create_session(&broken).await;
    server.prompt(&session, "hello").await;
    server.wait_turns(&session, 1, TURN).await;
    let failed = until_state(&server, &broken, "error").await;
    let reason = failed["state_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("HARNESS_START_FAILED: "), "{failed}");
    // The other agent is not affected; a sleep clears the error.
    assert_eq!(both(&server, &agent).await.0["state"], "asleep");
    let (status, body) = server.post(&format!("/api/v1/agents/{broken}/sleep"), json!({})).await;
    assert_eq!((status, body["state"].as_str(), &body["state_reason"]), (200, Some("asleep"), &Value::Null), "{body}");
}
