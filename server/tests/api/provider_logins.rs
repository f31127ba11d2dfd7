//! Provider logins on the account (issue 9, parts 1, 2, 4, 6): a login is checked with the
//! provider on connect (a loopback stand-in, through the test-only upstream override), sealed,
//! listed without its value and disconnected; whose logins an agent uses follows seed 003's rules;
//! and, with a real sandbox and the real egress proxy, the login reaches the harness as a
//! placeholder only while the proxy puts the real value into the provider's header.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::login::Providers;
use crate::support::proxy::{DEADLINE, Proxy};
use crate::support::secrets::{admin, call, make_user, personal_workspace, where_in_database};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(120);

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agenthold-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

fn key(tag: &str) -> String {
    format!("sk-ant-api03-{tag}-{}", uuid::Uuid::new_v4().simple())
}

async fn audit_actions(server: &TestServer, workspace: &str) -> Vec<String> {
    let (status, log) = admin(server, "GET", &format!("/api/v1/workspaces/{workspace}/audit"), json!({})).await;
    assert_eq!(status, 200, "{log}");
    log["records"].as_array().into_iter().flatten().filter_map(|r| r["action"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn a_login_is_checked_with_the_provider_sealed_and_listed_without_its_value() {
    let dir = temp_dir("logins");
    let providers = Providers::start(&dir).await;
    let server =
        TestServer::start_with(&[("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &providers.overrides().to_string())])
            .await;
    let connect = |body: Value| admin(&server, "POST", "/api/v1/me/providers", body);

    let (status, body) = connect(json!({"kind": "github", "value": key("x")})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("UNKNOWN_LOGIN_KIND")), "{body}");
    let (status, body) = connect(json!({"kind": "anthropic_api_key", "value": "not a key at all"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_LOGIN")), "{body}");
    assert!(!body.to_string().contains("not a key at all"), "the value is never echoed: {body}");
    let revoked = key("revoked");
    let (status, body) = connect(json!({"kind": "anthropic_api_key", "value": revoked})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("LOGIN_REJECTED")), "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("invalid x-api-key") && !message.contains(&revoked), "{message}");
    assert!(providers.seen().iter().any(|s| s.api_key.as_deref() == Some(revoked.as_str())), "asked the provider");

    let agent = server.create_agent(json!({})).await;
    let value = key("good");
    let (status, login) = connect(json!({"kind": "anthropic_api_key", "value": value})).await;
    assert_eq!(status, 201, "{login}");
    assert_eq!((login["kind"].as_str(), login["state"].as_str()), (Some("anthropic_api_key"), Some("ok")));
    assert_eq!(login["env_name"], "ANTHROPIC_API_KEY");
    assert_eq!(login["agents"][0]["agent_id"], json!(agent), "the creator's agent uses it: {login}");
    assert!(!login.to_string().contains(&value), "{login}");
    let seen = providers.seen();
    let check = seen.last().expect("the check");
    assert_eq!((check.line.as_str(), check.api_key.as_deref()), ("GET /v1/models HTTP/1.1", Some(value.as_str())));
    // A subscription token goes in the Authorization header.
    let oat = format!("sk-ant-oat01-{}", uuid::Uuid::new_v4().simple());
    assert_eq!(connect(json!({"kind": "claude_subscription", "value": oat})).await.0, 201);
    assert_eq!(providers.seen().last().and_then(|s| s.authorization.clone()), Some(format!("Bearer {oat}")));

    let (_, listed) = admin(&server, "GET", "/api/v1/me/providers", json!({})).await;
    let kinds: Vec<&str> =
        listed["logins"].as_array().expect("logins").iter().filter_map(|l| l["kind"].as_str()).collect();
    assert_eq!(kinds, ["anthropic_api_key", "claude_subscription"], "{listed}");
    assert!(!listed.to_string().contains(&value) && !listed.to_string().contains(&oat));
    assert!(where_in_database(&server, &value).await.is_empty(), "sealed at rest");
    assert!(!server.log().contains(&value), "never logged");

    // Connecting the same kind again replaces it.
    let (status, again) = connect(json!({"kind": "anthropic_api_key", "value": key("newer")})).await;
    assert_eq!((status, again["id"].clone()), (201, login["id"].clone()), "{again}");
    let id = login["id"].as_str().expect("id");
    assert_eq!(admin(&server, "DELETE", &format!("/api/v1/me/providers/{id}"), json!({})).await.0, 204);
    assert_eq!(admin(&server, "DELETE", &format!("/api/v1/me/providers/{id}"), json!({})).await.0, 404);
    let (_, listed) = admin(&server, "GET", "/api/v1/me/providers", json!({})).await;
    assert_eq!(listed["logins"].as_array().map(Vec::len), Some(1), "{listed}");
    // Someone else cannot see or remove it.
    let other = make_user(&server, "lo").await;
    let (_, theirs) = call(&server, "GET", "/api/v1/me/providers", &other.token, json!({})).await;
    assert_eq!(theirs["logins"].as_array().map(Vec::len), Some(0), "{theirs}");
    let oat_id = listed["logins"][0]["id"].as_str().expect("id");
    assert_eq!(
        call(&server, "DELETE", &format!("/api/v1/me/providers/{oat_id}"), &other.token, json!({})).await.0,
        404
    );

    let actions = audit_actions(&server, &personal_workspace(&server).await).await;
    for action in ["provider_login.connected", "provider_login.replaced", "provider_login.disconnected"] {
        assert!(actions.iter().any(|a| a == action), "{action} in {actions:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn whose_logins_an_agent_uses_follows_the_rules() {
    let server = TestServer::start().await;
    let (_, team) = admin(&server, "POST", "/api/v1/workspaces", json!({"name": "logins"})).await;
    let ws = team["id"].as_str().expect("id").to_owned();
    let owner = make_user(&server, "lown").await;
    let operator = make_user(&server, "lop").await;
    for (user, role) in [(&owner, "admin"), (&operator, "operator")] {
        let path = format!("/api/v1/workspaces/{ws}/members/{}", user.id);
        assert_eq!(admin(&server, "PUT", &path, json!({"role": role})).await.0, 204);
    }
    // A new agent uses its creator's logins.
    let agent = server.create_agent(json!({"workspace_id": ws})).await;
    let (_, me) = admin(&server, "GET", "/api/v1/me", json!({})).await;
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["login_user_id"], me["id"], "{view}");
    let logins = format!("/api/v1/agents/{agent}/logins");

    // Only an admin of the agent can make it use their logins; an operator cannot.
    assert_eq!(call(&server, "PUT", &logins, &operator.token, json!({})).await.0, 403);
    let (status, body) = call(&server, "PUT", &logins, &owner.token, json!({})).await;
    assert_eq!((status, body["login_user_id"].as_str()), (200, Some(owner.id.as_str())), "{body}");
    // The owner's list shows the agent once they connect a login (no provider needed for the
    // check here: an unknown kind is refused before anything is sent).
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["login_user_id"].as_str(), Some(owner.id.as_str()));

    // The owner can stop it even without being an admin any more; an operator cannot.
    assert_eq!(call(&server, "DELETE", &logins, &operator.token, json!({})).await.0, 403);
    let path = format!("/api/v1/workspaces/{ws}/members/{}", owner.id);
    assert_eq!(admin(&server, "PUT", &path, json!({"role": "operator"})).await.0, 204);
    assert_eq!(call(&server, "DELETE", &logins, &owner.token, json!({})).await.0, 204);
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["login_user_id"], Value::Null, "{view}");

    // Leaving the workspace detaches one's logins from its agents.
    assert_eq!(admin(&server, "PUT", &path, json!({"role": "admin"})).await.0, 204);
    assert_eq!(call(&server, "PUT", &logins, &owner.token, json!({})).await.0, 200);
    assert_eq!(admin(&server, "DELETE", &path, json!({})).await.0, 204);
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["login_user_id"], Value::Null, "detached when they left: {view}");
    // And they cannot touch it any more.
    assert_eq!(call(&server, "PUT", &logins, &owner.token, json!({})).await.0, 404);

    let actions = audit_actions(&server, &ws).await;
    assert!(actions.iter().filter(|a| *a == "agent.logins_attached").count() >= 2, "{actions:?}");
    assert!(actions.iter().any(|a| a == "agent.logins_detached"), "{actions:?}");
}

#[tokio::test]
async fn an_account_login_reaches_the_sandbox_as_a_placeholder_and_the_proxy_injects_it() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let dir = temp_dir("login-proxy");
    let providers = Providers::start(&dir).await;
    let config = dir.join("proxy.json");
    let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
    let proxy_addr = format!("host.docker.internal:{}", proxy.port());
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &providers.overrides().to_string()),
        ("AGENTHOLD_PROXY_ADDR", &proxy_addr),
        ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
    ])
    .await;
    let agent = server.create_agent(json!({})).await;
    let value = key("delivered");
    let (status, login) =
        admin(&server, "POST", "/api/v1/me/providers", json!({"kind": "anthropic_api_key", "value": value})).await;
    assert_eq!(status, 201, "{login}");

    // Inside the sandbox: a placeholder only — in the environment, in files, in /proc.
    let session = server.create_session(&agent).await;
    // (The value is searched for in two halves joined by the shell, so the script's own text,
    // which the harness records in its history, does not count.)
    let (head, tail) = value.split_at(value.len() / 2);
    let script = format!(
        "run env | grep -v -i -E '^https?_proxy=' | sort; v='{head}''{tail}'; \
         echo in-files=$(grep -r -l -F \"$v\" /home /tmp /etc 2>/dev/null | wc -l); \
         echo in-proc=$(cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -F \"$v\")"
    );
    server.prompt(&session, &script).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let output = last_run_output(&events);
    let placeholder =
        output.lines().find_map(|l| l.strip_prefix("ANTHROPIC_API_KEY=")).expect("the login's variable").to_owned();
    assert!(placeholder.starts_with("sk-ant-api03-agenthold-login-"), "shaped as an Anthropic key: {output}");
    assert!(!output.contains(&value), "the value is not in the sandbox: {output}");
    assert!(output.contains("in-files=0") && output.contains("in-proc=0"), "{output}");

    // Through the real proxy, the provider gets the real value.
    let fetch = "fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY";
    server.prompt(&session, fetch).await;
    let events = server.wait_turns(&session, 2, TURN).await;
    assert!(
        providers
            .seen()
            .iter()
            .any(|s| s.line.starts_with("GET /v1/messages") && s.api_key.as_deref() == Some(value.as_str())),
        "{:?}\n{events:?}\nproxy log:\n{}",
        providers.seen(),
        proxy.log()
    );

    // Disconnected: the proxy's file loses it within seconds, and the next harness has no variable.
    let id = login["id"].as_str().expect("id");
    assert_eq!(admin(&server, "DELETE", &format!("/api/v1/me/providers/{id}"), json!({})).await.0, 204);
    let started = Instant::now();
    while std::fs::read_to_string(&config).unwrap_or_default().contains(&placeholder) {
        assert!(started.elapsed() < DEADLINE, "the proxy file still holds the login");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.prompt(&session, "run env | grep -c ANTHROPIC_API_KEY || true").await;
    let events = server.wait_turns(&session, 3, TURN).await;
    assert_eq!(last_run_output(&events).trim(), "0", "the restarted harness has no login");
    let used = audit_actions(&server, &personal_workspace(&server).await).await;
    assert!(used.iter().any(|a| a == "login.used"), "{used:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
