//! Agents prompting agents through the real egress proxy (Docker only: local sandboxes do not
//! use the proxy; `agents_prompting` covers the rest on the local driver). The asker's harness,
//! in a real sandbox, is offered agenthold's MCP server at `https://mcp.agenthold.internal`
//! with a placeholder bearer; its `mcp` calls go through the real `agenthold-proxy`, which knows
//! the sandbox by its proxy credentials, swaps the placeholder for the agent's credential and
//! sends them to the server. The asker prompts the helper and reports its answer; the credential
//! appears nowhere in the sandbox's events or the logs.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::proxy::{DEADLINE, Proxy};
use crate::support::skip::skip_unless_docker;

const TURN: Duration = Duration::from_secs(120);

fn text_of(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["payload"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|e| e["payload"]["content"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_sandboxed_fake_agent_prompts_another_through_the_real_proxy() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agenthold-mcp-proxy-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let config = dir.join("proxy.json");
    let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
    let proxy_addr = format!("host.docker.internal:{}", proxy.port());
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
        ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
    ])
    .await;
    let started = Instant::now();
    while !config.exists() {
        assert!(started.elapsed() < DEADLINE, "the server never wrote {}", config.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asker = server.create_agent(json!({"name": "asker"})).await;
    let helper = server.create_agent(json!({"name": "helper"})).await;
    let (status, body) = server.put_json(&format!("/api/v1/agents/{asker}/prompt-targets/{helper}"), json!({})).await;
    assert_eq!(status, 200, "{body}");

    let session = server.create_session(&asker).await;
    let script = [
        format!("mcp prompt_agent {}", json!({"agent": "helper", "text": "text the answer is 42"})),
        "mcp wait_turn {\"turn_id\": \"$last.turn_id\", \"timeout_secs\": 90}".to_owned(),
    ]
    .join("\n");
    server.prompt(&session, &script).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let said = text_of(&events);
    let wait_line = said
        .lines()
        .find(|l| l.starts_with("mcp wait_turn:"))
        .unwrap_or_else(|| panic!("{said}\n\nproxy log:\n{}", proxy.log()));
    let answer: Value = serde_json::from_str(wait_line.trim_start_matches("mcp wait_turn: ")).expect("JSON");
    assert_eq!(answer["message"], "the answer is 42", "{said}");
    let helper_events = server.events(answer["session_id"].as_str().expect("session")).await;
    let prompt = helper_events.iter().find(|e| e["type"] == "prompt").expect("a prompt");
    assert_eq!(prompt["payload"]["origin"], json!({"kind": "agent", "id": asker, "depth": 1}));

    // The proxy put the credential in (the sandbox only had the placeholder); nothing logged it.
    let log = proxy.log();
    assert!(
        log.lines().any(|l| l.contains("mcp.agenthold.internal") && l.contains("injected=1")),
        "the proxy injected on the MCP host:\n{log}"
    );
    let all = serde_json::to_string(&server.events(&session).await).expect("json");
    for (what, text) in [("the asker's events", &all), ("the proxy's log", &log), ("the server's log", &server.log())] {
        assert!(!text.contains("ahmcp1."), "an MCP credential in {what}");
    }
    drop(server);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}
