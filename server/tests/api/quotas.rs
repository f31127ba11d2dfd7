//! Quotas on what users create (issue 29, part 1): sessions per agent, schedules and webhooks per
//! workspace, API tokens per user and stored event bytes per agent — each refused with
//! `409 QUOTA_EXCEEDED` naming its setting, nothing written; deleting a session frees its bytes
//! and its place; a schedule whose run would open a session over the quota skips it, saying why.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::secrets::{call, make_user};
use crate::support::{TestServer, of_type};

const TURN: Duration = Duration::from_secs(120);

fn quota_refusal(status: u16, body: &Value, setting: &str) {
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("QUOTA_EXCEEDED")), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(setting), "the refusal names {setting}: {body}");
}

#[tokio::test]
async fn sessions_schedules_webhooks_and_tokens_stop_at_their_quotas() {
    let server = TestServer::start_with(&[
        ("AGENTHOLD_MAX_SESSIONS_PER_AGENT", "2"),
        ("AGENTHOLD_MAX_SCHEDULES_PER_WORKSPACE", "1"),
        ("AGENTHOLD_MAX_WEBHOOKS_PER_WORKSPACE", "1"),
        ("AGENTHOLD_MAX_TOKENS_PER_USER", "2"),
        ("AGENTHOLD_SCHEDULER_TICK_MS", "100"),
    ])
    .await;
    let agent = server.create_agent(json!({})).await;
    let other_agent = server.create_agent(json!({})).await;

    // Sessions: two, then refused; deleting one makes room.
    let first = server.create_session(&agent).await;
    server.create_session(&agent).await;
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/sessions"), json!({})).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_SESSIONS_PER_AGENT");
    let (_, list) = server.get(&format!("/api/v1/agents/{agent}/sessions")).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "nothing written: {list}");
    // Another agent has its own quota.
    server.create_session(&other_agent).await;
    let (status, body) = server.delete(&format!("/api/v1/sessions/{first}")).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(server.get(&format!("/api/v1/sessions/{first}")).await.0, 404);
    server.create_session(&agent).await;

    // A schedule that opens a session per run skips its runs once the agent holds its quota.
    let (status, schedule) = server
        .post(
            &format!("/api/v1/agents/{agent}/schedules"),
            json!({"name": "tick", "cron": "* * * * * *", "time_zone": "UTC", "prompt": "text tick"}),
        )
        .await;
    assert_eq!(status, 201, "{schedule}");
    let schedule_id = schedule["id"].as_str().expect("id").to_owned();
    let runs = format!("/api/v1/schedules/{schedule_id}/runs");
    let started = Instant::now();
    let skipped = loop {
        let (_, body) = server.get(&runs).await;
        let listed = body["runs"].as_array().cloned().unwrap_or_default();
        if let Some(run) = listed.iter().find(|r| r["outcome"] == "skipped") {
            break run.clone();
        }
        assert!(started.elapsed() < TURN, "no run was skipped: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let reason = skipped["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("AGENTHOLD_MAX_SESSIONS_PER_AGENT"), "{skipped}");
    let (_, list) = server.get(&format!("/api/v1/agents/{agent}/sessions")).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2), "no session over the quota: {list}");
    let (status, body) = server.delete(&format!("/api/v1/schedules/{schedule_id}")).await;
    assert!(status == 204 || status == 200, "{body}");

    // Schedules and webhooks: one per workspace (the other agent is in the same workspace).
    let schedule = json!({"name": "daily", "cron": "0 9 * * *", "time_zone": "UTC", "prompt": "text hi"});
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/schedules"), schedule.clone()).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server.post(&format!("/api/v1/agents/{other_agent}/schedules"), schedule).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_SCHEDULES_PER_WORKSPACE");
    let hook = json!({"name": "hook", "template": "{{ body }}"});
    let (status, body) = server.post(&format!("/api/v1/agents/{agent}/webhooks"), hook.clone()).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server.post(&format!("/api/v1/agents/{other_agent}/webhooks"), hook).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_WEBHOOKS_PER_WORKSPACE");
    // A session a webhook prompts into is not deleted behind its back.
    let target = server.create_session(&other_agent).await;
    let (_, hooks) = server.get(&format!("/api/v1/agents/{agent}/webhooks")).await;
    let hook_id = hooks["webhooks"][0]["id"].as_str().expect("webhook id").to_owned();
    let (status, body) = server.delete(&format!("/api/v1/webhooks/{hook_id}")).await;
    assert!(status == 204 || status == 200, "{body}");
    let (status, body) = server
        .post(
            &format!("/api/v1/agents/{other_agent}/webhooks"),
            json!({"name": "into", "template": "x", "session_id": target}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server.delete(&format!("/api/v1/sessions/{target}")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("SESSION_IN_USE")), "{body}");

    // Tokens: a user holds two (make_user made one).
    let user = make_user(&server, "token-hoarder").await;
    let (status, body) = call(&server, "POST", "/api/v1/tokens", &user.token, json!({"name": "second"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(&server, "POST", "/api/v1/tokens", &user.token, json!({"name": "third"})).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_TOKENS_PER_USER");
    let (_, tokens) = call(&server, "GET", "/api/v1/tokens", &user.token, json!({})).await;
    assert_eq!(tokens["tokens"].as_array().map(Vec::len), Some(2), "{tokens}");
}

#[tokio::test]
async fn an_agent_over_its_stored_event_bytes_starts_no_turn_until_a_session_is_deleted() {
    let server = TestServer::start_with(&[("AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT", "16384")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    // ~200 chunks of ~100 bytes each: over 16 KiB. The running turn finishes.
    server.prompt(&session, "flood 200 0\ntext done").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(of_type(&events, "turn_end")[0]["payload"]["stop_reason"], "end_turn");
    let (status, body) = server.post(&format!("/api/v1/sessions/{session}/prompt"), json!({"text": "text more"})).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT");
    assert_eq!(server.events(&session).await.len(), events.len(), "nothing written");
    // Another session of the same agent is held to the same total.
    let second = server.create_session(&agent).await;
    let (status, body) = server.post(&format!("/api/v1/sessions/{second}/prompt"), json!({"text": "text more"})).await;
    quota_refusal(status, &body, "AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT");
    // Deleting the big session frees its bytes.
    let (status, body) = server.delete(&format!("/api/v1/sessions/{session}")).await;
    assert_eq!(status, 204, "{body}");
    server.prompt(&second, "text after").await;
    let events = server.wait_turns(&second, 1, TURN).await;
    assert_eq!(of_type(&events, "turn_end")[0]["payload"]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn a_session_with_a_running_turn_is_not_deleted() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "sleep 3000\ntext done").await;
    let (status, body) = server.delete(&format!("/api/v1/sessions/{session}")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("TURN_IN_PROGRESS")), "{body}");
    server.wait_turns(&session, 1, TURN).await;
    assert_eq!(server.delete(&format!("/api/v1/sessions/{session}")).await.0, 204);
}
