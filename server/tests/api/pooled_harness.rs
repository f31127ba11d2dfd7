//! Pooled harnesses (docs/design.md, "Pooled harnesses"), against a real engine and the real
//! egress proxy: the warm pool starts a harness (`fake`, profile `fake:ANTHROPIC_API_KEY`)
//! under pool placeholders and a proxy identity nobody owns; an agent created with its
//! Anthropic secret takes it running — its first prompt starts no harness — and the harness's
//! fetch through the proxy reaches the stand-in with *that agent's* real key, never another
//! agent's; an agent whose start differs takes the sandbox, says why and starts its own harness.
//! Docker driver only: local sandboxes have no pool and do not use the proxy.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::proxy::{DEADLINE, Proxy, StandIn};
use crate::support::secrets::{admin, create_secret, personal_workspace, unique_value};
use crate::support::skip::skip_unless_docker;

const TURN: Duration = Duration::from_secs(120);
const STAND_IN_BODY: &str = "stand-in for the pooled harness";
const FETCH: &str = "fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY";

/// Waits until the log says `what` at least `times` times.
async fn wait_log(server: &TestServer, what: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while server.log().matches(what).count() < times {
        assert!(Instant::now() < deadline, "waited for {times} × {what:?}; log:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The status of the last `fetch` tool call's result in `events`.
fn fetch_status(events: &[Value]) -> Option<Value> {
    let id = events
        .iter()
        .rev()
        .find(|e| e["payload"]["sessionUpdate"] == "tool_call" && e["payload"]["kind"] == "fetch")
        .map(|e| &e["payload"]["toolCallId"])?;
    events
        .iter()
        .rev()
        .find(|e| e["payload"]["sessionUpdate"] == "tool_call_update" && &e["payload"]["toolCallId"] == id)
        .map(|e| e["payload"]["rawOutput"]["status"].clone())
}

/// An agent created with an Anthropic secret of its own (a fresh value): (agent, value).
async fn agent_with_key(server: &TestServer, workspace: &str, extra: Value) -> (String, String) {
    let value = unique_value();
    let secret = create_secret(
        server,
        workspace,
        json!({"name": format!("k{}", &value[19..31]), "preset": "anthropic", "value": value}),
    )
    .await;
    let mut body = json!({"secrets": {"ANTHROPIC_API_KEY": secret}});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    (server.create_agent(body).await, value)
}

#[tokio::test]
async fn an_agent_takes_a_running_pooled_harness_bound_to_its_own_key_and_never_another_s() {
    if skip_unless_docker("the warm pool and the egress proxy are the Docker driver's") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("agenthold-pooled-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let stand_in = StandIn::start(&dir, STAND_IN_BODY).await;
    let overrides = json!({"api.anthropic.com:443": {"addr": stand_in.addr.to_string(), "ca_cert": stand_in.root}});
    let config = dir.join("proxy.json");
    let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
    let proxy_addr = format!("host.docker.internal:{}", proxy.port());
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &overrides.to_string()),
        ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
        ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
        ("AGENTHOLD_WARM_POOL_SIZE", "0"),
        ("AGENTHOLD_WARM_POOL_HARNESSES", "fake:ANTHROPIC_API_KEY"),
        ("RUST_LOG", "info,agenthold_server=debug"),
    ])
    .await;
    let started = Instant::now();
    while !config.exists() {
        assert!(started.elapsed() < DEADLINE, "the server never wrote {}", config.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let workspace = personal_workspace(&server).await;
    wait_log(&server, "a pooled harness answered `initialize`", 1).await;

    // The first agent takes the running harness; its fetch carries its own key.
    let (first, first_key) = agent_with_key(&server, &workspace, json!({})).await;
    wait_log(&server, "the agent took a running harness from the warm pool", 1).await;
    let session = server.create_session(&first).await;
    server.prompt(&session, FETCH).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(fetch_status(&events), Some(json!(200)), "{events:?}\n\nproxy log:\n{}", proxy.log());
    let starts =
        |agent: &str| server.log().lines().filter(|l| l.contains("starting the harness") && l.contains(agent)).count();
    assert_eq!(starts(&first), 0, "the first prompt started no harness: {}", server.log());
    assert_eq!(stand_in.seen.lock().expect("seen").clone(), [Some(first_key.clone())], "the first agent's real key");

    // The pool makes another; the second agent's fetch carries the second key only.
    wait_log(&server, "a pooled harness answered `initialize`", 2).await;
    let (second, second_key) = agent_with_key(&server, &workspace, json!({})).await;
    wait_log(&server, "the agent took a running harness from the warm pool", 2).await;
    let session = server.create_session(&second).await;
    server.prompt(&session, FETCH).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(fetch_status(&events), Some(json!(200)), "{events:?}");
    assert_eq!(starts(&second), 0, "the second agent's first prompt started no harness either");
    assert_eq!(
        stand_in.seen.lock().expect("seen").clone(),
        [Some(first_key.clone()), Some(second_key.clone())],
        "each agent's own key, never the other's"
    );
    // The claims are audited, with no value in them.
    let (status, audit) = admin(&server, "GET", &format!("/api/v1/workspaces/{workspace}/audit"), json!({})).await;
    assert_eq!(status, 200, "{audit}");
    let claims: Vec<&Value> = audit["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|e| e["action"] == "agent.pooled_harness_claimed")
        .collect();
    assert_eq!(claims.len(), 2, "{audit}");
    assert!(claims.iter().all(
        |c| c["detail"]["harness_taken"] == true && c["detail"]["bound_variables"] == json!(["ANTHROPIC_API_KEY"])
    ));
    assert!(!audit.to_string().contains(&first_key) && !audit.to_string().contains("sk-ant-agenthold-"));

    // An agent whose start differs (a plain variable of its own) takes the sandbox, says why,
    // and its first prompt starts its own harness — with its own key.
    wait_log(&server, "a pooled harness answered `initialize`", 3).await;
    let (third, third_key) = agent_with_key(&server, &workspace, json!({"env": {"GREETING": "hello"}})).await;
    wait_log(&server, "it took the sandbox, and its first prompt starts its own harness", 1).await;
    assert!(server.log().contains("variables the pooled harness lacks: GREETING"), "{}", server.log());
    let session = server.create_session(&third).await;
    server.prompt(&session, FETCH).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(fetch_status(&events), Some(json!(200)), "{events:?}");
    assert_eq!(starts(&third), 1, "its own harness started");
    assert_eq!(stand_in.seen.lock().expect("seen").last().cloned(), Some(Some(third_key)));
    let _ = std::fs::remove_dir_all(&dir);
}
