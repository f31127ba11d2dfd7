//! The ChatGPT login (issue 9, parts 2 and 3): the `auth.json` `codex login` writes is taken over
//! on connect (refreshed once), refreshed by the server only — each rotated refresh token used
//! once — and marked "connect again" when the provider refuses (`refresh_token_reused`), with no
//! retry storm afterwards. In a real sandbox the harness finds `~/.codex/auth.json` holding
//! placeholders only, the real proxy swaps the access-token placeholder for the current token
//! on `chatgpt.com/backend-api/`, and answers the sandbox's own refresh request itself — which
//! makes the server refresh the login at once, at most once a minute.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::login::{Providers, jwt};
use crate::support::proxy::Proxy;
use crate::support::secrets::{admin, personal_workspace, where_in_database};
use crate::support::skip::skip_unless_docker;
use crate::support::{TestServer, last_run_output};

const TURN: Duration = Duration::from_secs(120);

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agenthold-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// An `auth.json` as `codex login` writes it, its refresh token `rt-0`.
fn auth_json() -> String {
    let exp = chrono::Utc::now().timestamp() + 600;
    json!({"auth_mode": "chatgpt", "OPENAI_API_KEY": null, "tokens": {
        "id_token": jwt(&json!({"email": "dev@example.com", "exp": exp})),
        "access_token": jwt(&json!({"exp": exp, "n": 0})),
        "refresh_token": "rt-0",
        "account_id": "acct-42"}, "last_refresh": "2026-11-29T12:34:56.789Z"})
    .to_string()
}

/// The refresh tokens the stand-in was sent, in order.
fn refreshes(providers: &Providers) -> Vec<String> {
    providers
        .seen()
        .iter()
        .filter(|s| s.line.starts_with("POST /oauth/token"))
        .filter_map(|s| serde_json::from_str::<Value>(&s.body).ok())
        .filter_map(|b| b["refresh_token"].as_str().map(str::to_owned))
        .collect()
}

async fn login_of(server: &TestServer, kind: &str) -> Value {
    let (_, listed) = admin(server, "GET", "/api/v1/me/providers", json!({})).await;
    listed["logins"].as_array().into_iter().flatten().find(|l| l["kind"] == kind).cloned().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_chatgpt_login_is_taken_over_and_refreshed_by_the_server_only() {
    let dir = temp_dir("chatgpt");
    let providers = Providers::start(&dir).await;
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &providers.overrides().to_string()),
        // Every second, and every token is "about to expire": each round refreshes.
        ("AGENTHOLD_LOGIN_REFRESH_EVERY_SECS", "1"),
        ("AGENTHOLD_LOGIN_REFRESH_BEFORE_SECS", "86400"),
    ])
    .await;
    let connect = |value: String| {
        admin(&server, "POST", "/api/v1/me/providers", json!({"kind": "chatgpt_login", "value": value}))
    };
    let (status, body) = connect("{not json".to_owned()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_LOGIN")), "{body}");
    let api_key = json!({"auth_mode": "apikey", "OPENAI_API_KEY": "sk-not-this-way-000000"}).to_string();
    let (status, body) = connect(api_key).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_LOGIN")), "{body}");
    assert!(!body.to_string().contains("sk-not-this-way"), "{body}");

    let agent = server.create_agent(json!({})).await;
    let (status, login) = connect(auth_json()).await;
    assert_eq!(status, 201, "{login}");
    assert_eq!(refreshes(&providers).first().map(String::as_str), Some("rt-0"), "taken over at once");
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["logins"]["delivered"], json!(["chatgpt_login"]), "{view}");
    assert!(login["expires_at"].is_string(), "{login}");
    assert!(where_in_database(&server, "rt-0").await.is_empty() && where_in_database(&server, "rt-1").await.is_empty());

    // The server keeps refreshing, each time with the refresh token it got last: never one twice.
    let started = Instant::now();
    while refreshes(&providers).len() < 4 {
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", refreshes(&providers));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let used = refreshes(&providers);
    for (n, token) in used.iter().enumerate() {
        assert_eq!(token, &format!("rt-{n}"), "rotated tokens in order, each once: {used:?}");
    }
    assert!(login_of(&server, "chatgpt_login").await["refreshed_at"].is_string());

    // The provider refuses: "connect again", and no more attempts.
    providers.reject_refresh.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = Instant::now();
    let refused = loop {
        let login = login_of(&server, "chatgpt_login").await;
        if login["state"] == "connect_again" {
            break login;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{login}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(refused["failure"].as_str().is_some_and(|f| f.contains("refresh_token_reused")), "{refused}");
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["logins"]["connect_again"], json!(["chatgpt_login"]), "marked on the agent: {view}");
    assert_eq!(view["logins"]["delivered"], json!([]), "no longer delivered: {view}");
    let attempts = refreshes(&providers).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(refreshes(&providers).len(), attempts, "no retry storm");
    let (_, log) =
        admin(&server, "GET", &format!("/api/v1/workspaces/{}/audit", personal_workspace(&server).await), json!({}))
            .await;
    assert!(log["records"].as_array().into_iter().flatten().any(|r| r["action"] == "provider_login.refresh_failed"));
    // Connecting again makes it work again.
    providers.reject_refresh.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, again) = connect(auth_json()).await;
    assert_eq!((status, again["state"].as_str()), (201, Some("ok")), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_sandbox_gets_a_placeholder_auth_json_and_the_proxy_puts_the_current_token_in() {
    if skip_unless_docker("local sandboxes do not use the egress proxy") {
        return;
    }
    let dir = temp_dir("chatgpt-proxy");
    let providers = Providers::start(&dir).await;
    let config = dir.join("proxy.json");
    let proxy = Proxy::start(&config, "0.0.0.0:0", dir.join("proxy.log"));
    let server = TestServer::start_with(&[
        ("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &providers.overrides().to_string()),
        ("AGENTHOLD_PROXY_ADDR", &format!("host.docker.internal:{}", proxy.port())),
        ("AGENTHOLD_PROXY_CONFIG_FILE", config.to_str().expect("utf-8 path")),
    ])
    .await;
    let agent = server.create_agent(json!({})).await;
    let session = server.create_session(&agent).await;
    // A login made inside the sandbox before: kept as the backup.
    server.prompt(&session, "run mkdir -p ~/.codex && echo '{\"mine\": true}' > ~/.codex/auth.json").await;
    server.wait_turns(&session, 1, TURN).await;
    let (status, login) =
        admin(&server, "POST", "/api/v1/me/providers", json!({"kind": "chatgpt_login", "value": auth_json()})).await;
    assert_eq!(status, 201, "{login}");

    server
        .prompt(
            &session,
            "run cat ~/.codex/auth.json; echo; cat ~/.codex/auth.json.agenthold-backup; stat -c %a ~/.codex/auth.json",
        )
        .await;
    let events = server.wait_turns(&session, 2, TURN).await;
    let output = last_run_output(&events);
    let file: Value = serde_json::from_str(output.lines().next().unwrap_or_default()).expect("auth.json is JSON");
    assert_eq!((file["auth_mode"].as_str(), file["tokens"]["account_id"].as_str()), (Some("chatgpt"), Some("acct-42")));
    let access = file["tokens"]["access_token"].as_str().expect("access token").to_owned();
    assert!(
        access.ends_with(&access[access.rfind('.').unwrap_or(0)..]) && access.contains("agenthold-login-"),
        "{access}"
    );
    assert!(file["tokens"]["refresh_token"].as_str().is_some_and(|r| r.starts_with("agenthold-login-")), "{file}");
    assert!(output.contains("{\"mine\": true}") && output.trim_end().ends_with("600"), "{output}");

    // The proxy follows within seconds: its file holds the rule, and it polls the file every second.
    let started = Instant::now();
    while !std::fs::read_to_string(&config).unwrap_or_default().contains(&access) {
        assert!(started.elapsed() < Duration::from_secs(15), "the proxy file never got the login");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The harness's request with the placeholder reaches ChatGPT with the real, current token.
    server
        .prompt(
            &session,
            &format!("fetch https://chatgpt.com/backend-api/codex/models authorization:Bearer\\s{access}"),
        )
        .await;
    let events = server.wait_turns(&session, 3, TURN).await;
    let fetched = events.iter().rev().find(|e| e["payload"]["sessionUpdate"] == "tool_call_update").cloned();
    let sent =
        providers.seen().into_iter().rev().find(|s| s.line.contains("/backend-api/codex/models")).unwrap_or_else(
            || {
                panic!(
                    "the request never came: {fetched:?}\nproxy log:\n{}\nfile:\n{}",
                    proxy.log(),
                    std::fs::read_to_string(&config).unwrap_or_default().split("\"value\"").next().unwrap_or_default()
                )
            },
        );
    let real = sent.authorization.unwrap_or_default();
    assert!(real.starts_with("Bearer ") && !real.contains("agenthold-login-"), "{real}\nproxy log:\n{}", proxy.log());
    // It is the token the server got at its refresh on connect (`n: 1`).
    let claims = real.trim_start_matches("Bearer ").split('.').nth(1).map(str::to_owned).unwrap_or_default();
    use base64::Engine;
    let claims: Value =
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(claims).unwrap_or_default())
            .unwrap_or(Value::Null);
    assert_eq!(claims["n"], 1, "{claims}");

    // Codex refreshing on its own: the proxy answers with the same placeholders; the provider
    // never sees a sandbox's refresh token. The ask makes the server refresh the real login at
    // once (its token may have been refused), with the refresh token only it holds — at most once
    // a minute, however often sandboxes ask.
    let before = refreshes(&providers);
    server.prompt(&session, "fetch https://auth.openai.com/oauth/token").await;
    let events = server.wait_turns(&session, 4, TURN).await;
    let answered = events.iter().rev().find(|e| e["payload"]["sessionUpdate"] == "tool_call_update").cloned();
    let text =
        answered.as_ref().and_then(|e| e["payload"]["content"][0]["content"]["text"].as_str()).unwrap_or_default();
    assert!(text.starts_with("HTTP/1.1 200") && text.contains(&access), "{text}");
    let asked = Instant::now();
    while refreshes(&providers).len() == before.len() {
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "the sandbox's ask made no refresh\nproxy log:\n{}",
            proxy.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = refreshes(&providers);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    let used = after.last().cloned().unwrap_or_default();
    assert!(
        !used.contains("agenthold-login-") && !before.contains(&used),
        "the server's current refresh token: {after:?}"
    );
    server.prompt(&session, "fetch https://auth.openai.com/oauth/token").await;
    server.wait_turns(&session, 5, TURN).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(refreshes(&providers).len(), after.len(), "a second ask within the minute refreshes nothing");
    let _ = std::fs::remove_dir_all(&dir);
}
