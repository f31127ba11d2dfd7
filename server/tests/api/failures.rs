//! A harness that prints garbage, exits mid-turn, never answers, or fails the prompt: an
//! `error` event, the turn ends, and the next prompt restarts the harness and restores the
//! session (load, else resume, else a new session with a notice that the context was reset).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, assert_gap_free, of_type, texts};

const TURN: Duration = Duration::from_secs(90);

fn errors(events: &[Value]) -> Vec<String> {
    of_type(events, "error").iter().filter_map(|e| e["payload"]["code"].as_str().map(str::to_owned)).collect()
}

fn stop_reasons(events: &[Value]) -> Vec<String> {
    of_type(events, "turn_end").iter().filter_map(|e| e["payload"]["stop_reason"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn garbage_and_crashes_end_the_turn_and_the_next_prompt_restarts_the_harness() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;

    server.prompt(&session, "text before garbage\ngarbage\ntext never").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(errors(&events), ["HARNESS_PROTOCOL_ERROR"]);
    assert_eq!(stop_reasons(&events), ["error"]);

    server.prompt(&session, "text before crash\ncrash 7").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(errors(&events), ["HARNESS_PROTOCOL_ERROR", "HARNESS_EXITED"]);
    let exited = of_type(&events, "error")[1]["payload"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(exited.contains("code 7"), "{exited}");

    // The restarted harness loads the session (fakeagent keeps history on disk): the history it
    // replays is not stored again, and no context reset is announced.
    server.prompt(&session, "text recovered").await;
    let events = server.wait_turns(&session, 3, TURN).await;
    assert_gap_free(&events);
    assert_eq!(stop_reasons(&events), ["error", "error", "end_turn"]);
    assert!(of_type(&events, "notice").is_empty());
    let texts = texts(&events);
    assert_eq!(
        texts.iter().filter(|t| *t == "before garbage").count(),
        1,
        "replayed history is not stored again: {texts:?}"
    );
    assert_eq!(texts.last().map(String::as_str), Some("recovered"));
    assert!(!texts.contains(&"never".to_owned()));
}

#[tokio::test]
async fn without_load_the_session_is_resumed_and_without_either_the_context_reset_is_noted() {
    let server = TestServer::start().await;
    for (caps, expect_notice) in [("resume", false), ("none", true)] {
        let agent = server.create_agent(json!({"env": {"FAKEAGENT_CAPS": caps}})).await;
        let session = server.create_session(&agent).await;
        server.prompt(&session, "text one\ncrash").await;
        server.wait_turns(&session, 1, TURN).await;
        server.prompt(&session, "text two").await;
        let events = server.wait_turns(&session, 2, TURN).await;
        assert_gap_free(&events);
        assert_eq!(stop_reasons(&events), ["error", "end_turn"], "caps {caps}");
        let notices: Vec<&Value> = of_type(&events, "notice");
        assert_eq!(notices.len(), usize::from(expect_notice), "caps {caps}: {notices:?}");
        if expect_notice {
            assert_eq!(notices[0]["payload"]["code"], "CONTEXT_RESET");
        }
    }
}

#[tokio::test]
async fn a_harness_that_never_answers_times_out() {
    let server =
        TestServer::start_with(&[("AGENTHOLD_TURN_TIMEOUT_SECS", "4"), ("AGENTHOLD_HARNESS_TIMEOUT_SECS", "4")]).await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text waiting\nhang").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(errors(&events), ["TURN_TIMEOUT"]);
    // The limit cancels the turn first: the harness stops it and lives on for the next one.
    server.prompt(&session, "text next").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_eq!(stop_reasons(&events), ["cancelled", "end_turn"]);

    let mute = server.create_agent(json!({"env": {"FAKEAGENT_HANG_ON": "initialize"}})).await;
    let session = server.create_session(&mute).await;
    server.prompt(&session, "text never").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(errors(&events), ["HARNESS_TIMEOUT"]);
}

#[tokio::test]
async fn a_failed_prompt_is_an_error_event() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text partial\nerror model overloaded").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(errors(&events), ["HARNESS_ERROR"]);
    assert_eq!(of_type(&events, "error")[0]["payload"]["message"], "model overloaded");
    assert_eq!(stop_reasons(&events), ["error"]);
}

#[tokio::test]
async fn a_command_harness_that_does_not_exist_fails_the_turn_clearly() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"harness": "command", "command": ["no-such-acp-agent", "--acp"]})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "hello").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(errors(&events), ["HARNESS_START_FAILED"]);

    // Any ACP program works: here the shipped fakeagent, started as a plain command.
    let tools = if crate::support::driver() == "docker" {
        "/opt/agenthold".to_owned()
    } else {
        std::path::Path::new(env!("CARGO_BIN_EXE_agenthold"))
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let agent = server.create_agent(json!({"harness": "command", "command": [format!("{tools}/fakeagent")]})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text via command").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(texts(&events), ["via command"]);
}
