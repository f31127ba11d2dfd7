//! Pooled harnesses (docs/design.md, "Pooled harnesses"), against a real engine and the real
//! egress proxy: the warm pool starts a harness (`fake`, profile `fake:ANTHROPIC_API_KEY`)
//! under pool placeholders and a proxy identity nobody owns; an agent created with its
//! Anthropic secret takes it running — its first prompt starts no harness — and the harness's
//! fetch through the proxy reaches the stand-in with *that agent's* real key, never another
//! agent's; before the claim the proxy lets the pooled harness reach agenthold's MCP route only
//! (the session opened ahead lists its tools, none runs); an agent whose start differs takes the
//! sandbox, says why and starts its own harness.
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

/// A server with a pooled `fake` harness, its sandboxes using the real proxy on the host, with
/// `api.anthropic.com` mapped to a loopback stand-in.
struct Setup {
    server: TestServer,
    proxy: Proxy,
    stand_in: StandIn,
    dir: std::path::PathBuf,
}

impl Setup {
    async fn start(extra: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("agenthold-pooled-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let stand_in = StandIn::start(&dir, STAND_IN_BODY).await;
        let overrides = json!({"api.anthropic.com:443": {"addr": stand_in.addr.to_string(), "ca_cert": stand_in.root}});
        let config = dir.join("proxy.json");
        let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
        let proxy_addr = format!("host.docker.internal:{}", proxy.port());
        let overrides = overrides.to_string();
        let mut env = vec![
            ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", overrides.as_str()),
            ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
            ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
            ("AGENTHOLD_WARM_POOL_SIZE", "0"),
            ("AGENTHOLD_WARM_POOL_HARNESSES", "fake:ANTHROPIC_API_KEY"),
            ("RUST_LOG", "info,agenthold_server=debug"),
        ];
        env.extend_from_slice(extra);
        let server = TestServer::start_with(&env).await;
        let started = Instant::now();
        while !config.exists() {
            assert!(started.elapsed() < DEADLINE, "the server never wrote {}", config.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { server, proxy, stand_in, dir }
    }
}

#[tokio::test]
async fn an_agent_takes_a_running_pooled_harness_bound_to_its_own_key_and_never_another_s() {
    if skip_unless_docker("the warm pool and the egress proxy are the Docker driver's") {
        return;
    }
    let Setup { server, proxy, stand_in, dir } = Setup::start(&[]).await;
    let workspace = personal_workspace(&server).await;
    wait_log(&server, "a pooled harness answered `initialize`", 1).await;

    // Before any claim the proxy knows the pooled harness's sandbox with agenthold's MCP route
    // only; the route lists its tools for that id's credential but runs none of them.
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.join("proxy.json")).expect("the proxy's file")).expect("json");
    let pooled = file["sandboxes"].as_array().expect("sandboxes").last().expect("the pooled sandbox").clone();
    assert_eq!(pooled["allow"], json!([]), "{pooled}");
    assert_eq!(pooled["source_addrs"].as_array().map(Vec::len), Some(1), "admitted from its address: {pooled}");
    let rules = pooled["inject"].as_array().expect("inject");
    assert_eq!(rules.len(), 1, "the MCP route's rule only: {pooled}");
    assert_eq!(rules[0]["host"], "mcp.agenthold.internal");
    let pooled_id = pooled["id"].as_str().expect("id").to_owned();
    let bearer = mcp_credential(&server, &pooled_id);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (status, listed) = mcp_rpc(&server, &bearer, list.clone()).await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed.to_string().contains("list_agents"), "{listed}");
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}});
    let (status, called) = mcp_rpc(&server, &bearer, call).await;
    assert_eq!(status, 200, "{called}");
    assert!(
        called["error"]["message"].as_str().is_some_and(|m| m.contains("no agent has taken this sandbox")),
        "{called}"
    );
    let nobody = mcp_credential(&server, &uuid::Uuid::new_v4().to_string());
    let (status, _) = mcp_rpc(&server, &nobody, list).await;
    assert_eq!(status, 401, "neither an agent's nor a pooled sandbox's id");

    // The first agent takes the running harness: the session opened ahead listed agenthold's
    // MCP tools (through the proxy, before the claim), the agent calls one, and its fetch
    // carries its own key.
    let (first, first_key) = agent_with_key(&server, &workspace, json!({})).await;
    assert_eq!(first, pooled_id, "the agent takes the pooled sandbox's id");
    wait_log(&server, "the agent took a running harness from the warm pool", 1).await;
    let session = server.create_session(&first).await;
    server.prompt(&session, &format!("mcp-tools\nmcp list_agents\n{FETCH}")).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(fetch_status(&events), Some(json!(200)), "{events:?}\n\nproxy log:\n{}", proxy.log());
    let said: String = events
        .iter()
        .filter(|e| e["payload"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|e| e["payload"]["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("mcp tools at session start: ") && said.contains("list_agents, "),
        "the session opened ahead reached agenthold's MCP server: {said}\n\nproxy log:\n{}",
        proxy.log()
    );
    assert!(said.contains("mcp list_agents: "), "the agent's own call: {said}");
    // The pool ran its warm-up turn (a throwaway session of its own, before the spare session);
    // nothing of it is the agent's.
    let log = plain(&server.log());
    let warmed = log.lines().find(|l| l.contains("a pooled harness answered `initialize`")).unwrap_or_default();
    assert!(warmed.contains("warm_up_ms=") && !warmed.contains("warm_up_ms=none"), "{warmed}");
    assert!(!Value::Array(events.clone()).to_string().contains("starting this harness ahead"), "{events:?}");
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

/// The MCP credential of `id` (an agent's, or the one a pooled sandbox's agent will have), as the
/// server derives it.
fn mcp_credential(server: &TestServer, id: &str) -> String {
    let key = agenthold_server::secrets::master_key::MasterKey::from_file(&server.data_dir.join("master.key"))
        .expect("the server's master key");
    let id = agenthold_server::ids::AgentId(id.parse().expect("uuid"));
    agenthold_server::mcp::credential::token(&key, id).expose().to_owned()
}

/// One JSON-RPC message to the MCP route with `bearer`: status and body.
async fn mcp_rpc(server: &TestServer, bearer: &str, message: Value) -> (u16, Value) {
    let (status, _, body) = server.raw_with_headers("POST", "/api/v1/mcp", Some(bearer), &[], message).await;
    (status, body)
}

/// `text` without its terminal colours.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Running sandbox containers named for `agent` (not its network holder).
fn containers_of(agent: &str) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["ps", "-a", "--filter", &format!("label=agenthold.agent={agent}")])
        .args(["--format", "{{.Names}} {{.Label \"agenthold.role\"}}"])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, role)| role.is_empty())
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[tokio::test]
async fn a_server_killed_between_binding_a_pooled_harness_and_recording_the_claim_leaves_it_bound_to_no_one_else() {
    if skip_unless_docker("the warm pool and the egress proxy are the Docker driver's") {
        return;
    }
    let Setup { mut server, proxy, stand_in, dir } =
        Setup::start(&[("AGENTHOLD_TEST_CRASH_AT", "pooled-claim-bound")]).await;
    let workspace = personal_workspace(&server).await;
    wait_log(&server, "a pooled harness answered `initialize`", 1).await;
    let pooled: String = plain(&server.log())
        .lines()
        .find(|l| l.contains("a pooled harness answered `initialize`"))
        .and_then(|l| l.split("agent.id=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the pooled sandbox's id in the log")
        .to_owned();

    // The creation binds the pooled harness (secrets under its placeholders, its identity) and the
    // server dies before the claim is recorded.
    let value = unique_value();
    let secret =
        create_secret(&server, &workspace, json!({"name": "crash", "preset": "anthropic", "value": value})).await;
    let body = json!({"name": "crashy", "harness": "fake", "secrets": {"ANTHROPIC_API_KEY": secret}});
    let answer = server.try_post("/api/v1/agents", body).await;
    assert!(answer.is_err(), "the server answered although it should have crashed: {answer:?}");
    assert!(server.exited_within(Duration::from_secs(10)), "the server did not crash");
    assert!(server.log().contains("crashing at pooled-claim-bound"), "{}", server.log());

    // Started again (no crash point): the agent exists with the pooled sandbox's id; the pool's
    // record of it is gone, so no later agent can claim it.
    server.set_env("AGENTHOLD_TEST_CRASH_AT", None);
    server.restart().await;
    let (status, agents) = admin(&server, "GET", "/api/v1/agents", json!({})).await;
    assert_eq!(status, 200, "{agents}");
    let agent = agents["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["name"] == "crashy")
        .and_then(|a| a["id"].as_str())
        .expect("the agent was created before the crash")
        .to_owned();
    assert_eq!(agent, pooled, "the agent has the pooled sandbox's id");
    let db = crate::support::secrets::database(&server).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let records: i64 = sqlx::query_scalar("SELECT count(*) FROM pooled_sandboxes WHERE agent_id = $1::uuid")
            .bind(&agent)
            .fetch_one(&db)
            .await
            .expect("pooled_sandboxes");
        if records == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the pool still records the claimed sandbox");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The new pool makes a sandbox of another id; the agent's first prompt gets it a harness of its
    // own (its sandbox made again), with its own key.
    wait_log(&server, "a pooled harness answered `initialize`", 2).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, FETCH).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    assert_eq!(fetch_status(&events), Some(json!(200)), "{events:?}\n\nproxy log:\n{}", proxy.log());
    assert_eq!(stand_in.seen.lock().expect("seen").clone(), [Some(value)], "its own key");
    assert_eq!(containers_of(&agent).len(), 1, "one sandbox for the agent: {:?}", containers_of(&agent));
    let last_pooled = server
        .log()
        .lines()
        .rev()
        .find(|l| l.contains("a pooled harness answered `initialize`"))
        .map(str::to_owned)
        .expect("a pooled harness");
    assert!(!last_pooled.contains(&agent), "the new pool's sandbox is another: {last_pooled}");
    let _ = std::fs::remove_dir_all(&dir);
}
