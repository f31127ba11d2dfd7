//! A turn end to end: prompt → harness in a real sandbox → events in the log, in order.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestServer, assert_gap_free, of_type, texts};

const TURN: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_turn_edits_files_and_runs_commands_in_the_sandbox() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    let accepted = server
        .prompt(&session, "text hello\nthink pondering\nwrite notes/a.txt first line\nrun cat notes/a.txt; echo; id -un\nplan one | two\nask edit Edit a.txt\nunknown\nusage 10 5")
        .await;
    assert_eq!(accepted["seq"], 1);
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_gap_free(&events);

    assert_eq!(events[0]["type"], "prompt");
    assert_eq!(events[0]["payload"]["turn_id"], accepted["turn_id"]);
    assert_eq!(texts(&events)[0], "hello");
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["payload"]["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"agent_thought_chunk") && kinds.contains(&"plan"), "{kinds:?}");

    let diff = events
        .iter()
        .find(|e| e["payload"]["sessionUpdate"] == "tool_call_update" && e["payload"]["content"][0]["type"] == "diff")
        .expect("a diff update");
    assert!(diff["payload"]["content"][0]["path"].as_str().is_some_and(|p| p.ends_with("notes/a.txt")));
    assert_eq!(diff["payload"]["content"][0]["newText"], "first line");

    let run_output = events
        .iter()
        .find(|e| e["payload"]["rawOutput"]["exitCode"] == 0)
        .and_then(|e| e["payload"]["content"][0]["content"]["text"].as_str())
        .expect("the run's output");
    assert!(run_output.contains("first line"), "{run_output}");
    if crate::support::driver() == "docker" {
        assert!(run_output.contains("agent"), "the harness runs as the agent user: {run_output}");
    }

    // Auto-approve: the harness's one-time allow option, chosen by kind, logged.
    let asked = of_type(&events, "permission");
    let resolved = of_type(&events, "permission_resolved");
    assert_eq!((asked.len(), resolved.len()), (1, 1));
    assert_eq!(resolved[0]["payload"]["outcome"], json!({"outcome": "selected", "optionId": "allow-once"}));
    assert!(texts(&events).contains(&"permission: allow-once".to_owned()));

    // An update variant newer than our schema is forwarded raw, not dropped.
    assert!(kinds.contains(&"fakeagent_future_variant"), "{kinds:?}");

    let end = events.last().expect("events");
    assert_eq!(end["type"], "turn_end");
    assert_eq!(end["payload"]["stop_reason"], "end_turn");
    assert_eq!(end["payload"]["usage"]["inputTokens"], 10);

    // A second turn in the same session reuses the running harness.
    server.prompt(&session, "text again").await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert_gap_free(&events);
    assert_eq!(texts(&events).last().map(String::as_str), Some("again"));
    assert!(of_type(&events, "notice").is_empty(), "no context reset while the harness runs");
}

#[tokio::test]
async fn sessions_of_one_agent_share_one_harness_and_run_concurrently() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let first = server.create_session(&agent).await;
    let second = server.create_session(&agent).await;
    server.prompt(&first, "sleep 1500\nrun echo $PPID > ppid-1").await;
    server.prompt(&second, "sleep 1500\nrun echo $PPID > ppid-2").await;
    let a = server.wait_turns(&first, 1, TURN).await;
    let b = server.wait_turns(&second, 1, TURN).await;
    assert_eq!(a.last().map(|e| &e["payload"]["stop_reason"]), Some(&json!("end_turn")));
    assert_eq!(b.last().map(|e| &e["payload"]["stop_reason"]), Some(&json!("end_turn")));
    // Both ran in the same harness process: the shells' parent is the same fakeagent.
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run cat ppid-1 ppid-2").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let output =
        events.iter().find_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).expect("output").to_owned();
    let pids: Vec<&str> = output.split_whitespace().collect();
    assert_eq!(pids.len(), 2, "{output}");
    assert_eq!(pids[0], pids[1], "one harness process serves all sessions of an agent");
}

#[tokio::test]
async fn an_oversized_update_is_excerpted_and_kept_whole() {
    let server = TestServer::start().await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "big 500000\ntext after").await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let big = events.iter().find(|e| e["payload"]["truncated"] == true).expect("an excerpted event");
    assert_eq!(big["type"], "update");
    assert_eq!(big["payload"]["sessionUpdate"], "agent_message_chunk");
    let link = big["payload"]["full_payload"].as_str().expect("a marker saying where the payload is");
    let (status, full) = server.get(link).await;
    assert_eq!(status, 200);
    assert_eq!(full["content"]["text"].as_str().map(str::len), Some(500_000));
    assert_eq!(texts(&events).last().map(String::as_str), Some("after"));
}
