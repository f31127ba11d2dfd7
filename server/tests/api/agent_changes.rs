//! Changing an agent (issue 8, part 5): `PATCH /api/v1/agents/{id}` checks every field before it
//! writes anything; switching the harness between two turns of one session keeps the session's
//! log, and the next turn says in a `CONTEXT_RESET` notice that the new harness could not load
//! the old context; the change is audited with its fields; `rebuild` makes a new container
//! around the same home. The `fake` harness exists only outside production mode.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::secrets::{admin, personal_workspace};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output, texts};

const TURN: Duration = Duration::from_secs(120);

fn code(answer: &(u16, Value)) -> (u16, &str) {
    (answer.0, answer.1["error"]["code"].as_str().unwrap_or_default())
}

#[tokio::test]
async fn a_patch_is_checked_whole_before_anything_changes() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let path = format!("/api/v1/agents/{agent}");
    let before = admin(&server, "GET", &path, json!({})).await.1;
    for (body, expected) in [
        (json!({"harness": "nope"}), "UNKNOWN_HARNESS"),
        (json!({"harness": "command"}), "INVALID_COMMAND"),
        (json!({"model": "has space"}), "INVALID_MODEL"),
        (json!({"env": {"OPENAI_API_KEY": "x"}}), "USE_A_SECRET"),
        (json!({"image": "two words"}), "INVALID_IMAGE"),
        (json!({"limits": {"cpus": 0}}), "INVALID_LIMITS"),
        // A valid model with a bad env: nothing is written.
        (json!({"model": "fine-model", "env": {"AGENTHOLD_X": "1"}}), "INVALID_ENV"),
        (json!({"colour": "blue"}), "INVALID_BODY"),
    ] {
        let answer = admin(&server, "PATCH", &path, body.clone()).await;
        assert_eq!(code(&answer), (400, expected), "{body}: {}", answer.1);
    }
    assert_eq!(admin(&server, "GET", &path, json!({})).await.1, before, "a refused patch changed the agent");

    let answer =
        admin(&server, "PATCH", &path, json!({"model": "anthropic/some-model", "limits": {"cpus": 1.5}})).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["model"], "anthropic/some-model");
    assert_eq!(answer.1["limits"]["cpus"], 1.5);
    let cleared = admin(&server, "PATCH", &path, json!({"model": ""})).await;
    assert_eq!((cleared.0, &cleared.1["model"]), (200, &Value::Null));
    let created =
        admin(&server, "POST", "/api/v1/agents", json!({"name": "with-model", "harness": "fake", "model": "m-1"}))
            .await;
    assert_eq!((created.0, &created.1["model"]), (201, &json!("m-1")));

    let workspace = personal_workspace(&server).await;
    let (_, audit) = admin(&server, "GET", &format!("/api/v1/workspaces/{workspace}/audit"), json!({})).await;
    let changed: Vec<&Value> = audit["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["action"] == "agent.changed" && r["resource_id"] == agent.as_str())
        .collect();
    assert_eq!(changed.len(), 2, "{audit}");
    let fields: Vec<Value> = changed.iter().map(|r| r["detail"]["changed"].clone()).collect();
    assert!(fields.iter().any(|f| f["model"] == "anthropic/some-model" && f["limits"]["cpus"] == 1.5), "{fields:?}");
    assert!(fields.iter().any(|f| f["model"].is_null() && f.get("model").is_some()), "{fields:?}");
}

#[tokio::test]
async fn switching_the_harness_between_two_turns_keeps_the_log_and_says_the_context_was_reset() {
    if skip_unless_docker("the command harness path below is the Docker sandbox's") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text before the switch").await;
    server.wait_turns(&session, 1, TURN).await;
    // What the running harness advertised, as it sent it.
    let (_, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(view["advertised"]["agentCapabilities"]["loadSession"], true, "{view}");

    // The same scripted agent, as a `command` harness that cannot load sessions.
    let patch = json!({
        "harness": "command",
        "command": ["/opt/agenthold/fakeagent"],
        "env": {"FAKEAGENT_CAPS": "none"},
    });
    let answer = admin(&server, "PATCH", &format!("/api/v1/agents/{agent}"), patch).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(answer.1["harness"], "command");

    server.prompt(&session, "text after the switch").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    let said = texts(&events);
    assert!(said.iter().any(|t| t == "before the switch") && said.iter().any(|t| t == "after the switch"), "{said:?}");
    let resets: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "notice" && e["payload"]["code"] == "CONTEXT_RESET").collect();
    assert_eq!(resets.len(), 1, "{events:?}");
    // The new harness runs with the new environment.
    server.prompt(&session, "run echo caps=$FAKEAGENT_CAPS").await;
    let events = server.wait_turns(&session, 3, TURN).await;
    assert!(last_run_output(&events).contains("caps=none"), "{}", last_run_output(&events));
}

#[tokio::test]
async fn rebuild_makes_a_new_container_around_the_same_home() {
    if skip_unless_docker("a rebuild makes a new container") {
        return;
    }
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "write kept.txt still here").await;
    server.wait_turns(&session, 1, TURN).await;
    let container_id =
        |name: String| async move { crate::support::docker::docker(&["inspect", "--format", "{{.Id}}", &name]).1 };
    let before = container_id(server.container(&agent)).await;
    let answer = admin(&server, "POST", &format!("/api/v1/agents/{agent}/rebuild"), json!({})).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    let after = container_id(server.container(&agent)).await;
    assert!(!after.is_empty() && after != before, "the container was not made again");
    server.prompt(&session, "run cat kept.txt").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(last_run_output(&events).trim(), "still here");
}

#[tokio::test]
async fn the_fake_harness_is_refused_in_production_mode() {
    let key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let server = TestServer::start_with(&[("AGENTHOLD_MODE", "production"), ("AGENTHOLD_MASTER_KEY", key)]).await;
    let answer = admin(&server, "POST", "/api/v1/agents", json!({"name": "f", "harness": "fake"})).await;
    assert_eq!(code(&answer), (400, "UNKNOWN_HARNESS"), "{}", answer.1);
    assert!(answer.1["error"]["message"].as_str().unwrap_or_default().contains("development"), "{}", answer.1);
    for harness in ["claude-code", "codex", "opencode"] {
        let answer = admin(&server, "POST", "/api/v1/agents", json!({"name": harness, "harness": harness})).await;
        assert_eq!(answer.0, 201, "{harness}: {}", answer.1);
    }
}
