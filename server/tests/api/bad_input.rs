//! Bad input gets a clear error with a stable code and loses nothing.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestServer, assert_gap_free, of_type};

#[tokio::test]
async fn malformed_requests_get_400_404_401_with_codes() {
    let server = TestServer::start().await;
    let (status, body) = server.raw("POST", "/api/v1/agents", "{not json").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_BODY")));
    let (status, body) = server.post("/api/v1/agents", json!({"name": "x", "harness": "fake", "colour": "red"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_BODY")), "unknown fields are rejected");
    let (status, body) = server.post("/api/v1/agents", json!({"name": "Bad Name", "harness": "fake"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_NAME")));
    let (status, body) = server.post("/api/v1/agents", json!({"name": "x", "harness": "nope"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("UNKNOWN_HARNESS")));
    let (status, body) = server.post("/api/v1/agents", json!({"name": "x", "harness": "command"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_COMMAND")));
    let (status, body) = server
        .post("/api/v1/agents", json!({"name": "x", "harness": "fake", "env": {"AGENTHOLD_SANDBOX_TOKEN": "x"}}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_ENV")));

    let agent = server.create_agent(json!({"name": "dup"})).await;
    let (status, body) = server.post("/api/v1/agents", json!({"name": "dup", "harness": "fake"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("NAME_TAKEN")));

    let unknown = uuid::Uuid::new_v4();
    for path in [
        format!("/api/v1/agents/{unknown}"),
        format!("/api/v1/sessions/{unknown}"),
        "/api/v1/agents/not-a-uuid".to_owned(),
    ] {
        let (status, body) = server.get(&path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")), "{path}");
    }
    let (status, _) = server.post(&format!("/api/v1/sessions/{unknown}/prompt"), json!({"text": "hi"})).await;
    assert_eq!(status, 404);

    let session = server.create_session(&agent).await;
    for (query, code) in [("after=-1", "INVALID_CURSOR"), ("after=abc", "INVALID_QUERY"), ("limit=0", "INVALID_LIMIT")]
    {
        let (status, body) = server.get(&format!("/api/v1/sessions/{session}/events?{query}")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some(code)), "{query}");
    }
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_PROMPT")));
    let (status, body) =
        server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"prompt": [{"type": "nope"}]})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_PROMPT")));
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/cancel"), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("NO_TURN_IN_PROGRESS")));

    assert_eq!(server.anonymous("GET", "/api/v1/agents").await, 401);
    assert_eq!(server.anonymous("GET", &format!("/api/v1/sessions/{session}/stream?after=0")).await, 401);
    assert_eq!(server.anonymous("GET", "/healthz").await, 200);
    assert!(server.events(&session).await.is_empty(), "nothing was stored by the bad requests");
}

#[tokio::test]
async fn a_prompt_during_a_turn_is_refused_and_cancel_ends_the_turn() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text started\nsleep 30000\ntext never").await;
    let mut watcher = server.watch(&session, "0").await;
    while watcher.next(Duration::from_secs(60)).await.is_some_and(|e| e["payload"]["content"]["text"] != "started") {}

    let (status, body) =
        server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "text second"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("TURN_IN_PROGRESS")));
    let (status, _) = server.post(&format!("/api/v1/agents/{agent}/sleep"), json!({})).await;
    assert_eq!(status, 409, "an agent with a running turn does not sleep");

    let (status, _) = server.post(&format!("/api/v1/sessions/{session}/cancel"), json!({})).await;
    assert_eq!(status, 202);
    let events = server.wait_turns(&session, 1, Duration::from_secs(20)).await;
    assert_gap_free(&events);
    assert_eq!(events.last().map(|e| e["payload"]["stop_reason"].clone()), Some(json!("cancelled")));
    assert_eq!(of_type(&events, "prompt").len(), 1, "the refused prompt stored nothing");

    // The session takes prompts again.
    server.prompt(&session, "text second").await;
    server.wait_turns(&session, 2, Duration::from_secs(60)).await;
}
