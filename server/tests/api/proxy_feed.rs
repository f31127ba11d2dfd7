//! The server feeds the egress proxy: with the real server, real Postgres and the proxy crate's
//! own parser and policy, the file on disk follows attaching and detaching a secret, egress
//! changes and deleting the agent, within seconds, and stays 0600.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::secrets::{admin, create_secret, database, personal_workspace, unique_value};

/// How long the proxy's file may lag behind a change.
const WITHIN: Duration = Duration::from_secs(5);

/// The file as the proxy reads it, if it exists and the proxy would load it; also its JSON.
fn load(path: &Path) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    let parsed: agenthold_proxy::config::ConfigFile =
        serde_json::from_slice(&bytes).expect("the proxy parses the file");
    agenthold_proxy::policy::Policy::compile(parsed, None).expect("the proxy accepts the file");
    Some(serde_json::from_slice(&bytes).expect("json"))
}

/// The agent's entry in the file.
fn sandbox<'a>(file: &'a Value, agent: &str) -> Option<&'a Value> {
    file["sandboxes"].as_array()?.iter().find(|s| s["id"] == agent)
}

/// Waits until `check` holds for the file; returns it and how long that took.
async fn wait_for(path: &Path, what: &str, check: impl Fn(&Value) -> bool) -> (Value, Duration) {
    let start = Instant::now();
    loop {
        if let Some(file) = load(path)
            && check(&file)
        {
            return (file, start.elapsed());
        }
        assert!(start.elapsed() < WITHIN, "the proxy file did not show {what} within {WITHIN:?}: {:?}", load(path));
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn the_proxy_file_follows_attach_detach_egress_and_deletion() {
    let server = TestServer::start().await;
    let path = server.data_dir.join("proxy.json");
    let agent = server.create_agent(json!({"egress": {"allow": ["Example.com:8443"]}})).await;

    // The agent is in the file with an identity and its allow-list, before any secret.
    let (file, _) = wait_for(&path, "the new agent", |f| sandbox(f, &agent).is_some()).await;
    let entry = sandbox(&file, &agent).expect("entry");
    assert_eq!(entry["allow"], json!(["example.com:8443"]));
    let username = entry["username"].as_str().expect("username").to_owned();
    assert!(username.starts_with("sbx-"));
    let pool = database(&server).await;
    let stored: (String, Vec<u8>) =
        sqlx::query_as("SELECT username, ciphertext FROM proxy_identities WHERE agent_id = $1::uuid")
            .bind(&agent)
            .fetch_one(&pool)
            .await
            .expect("the identity is stored");
    assert_eq!(stored.0, username);
    let password = entry["password"].as_str().expect("password").to_owned();
    assert!(password.len() >= 32);
    assert!(!stored.1.windows(password.len()).any(|w| w == password.as_bytes()), "the password is stored sealed");
    assert_eq!(std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777, 0o600);

    // Attach a secret: its rule, placeholder and value appear.
    let workspace = personal_workspace(&server).await;
    let value = unique_value();
    let secret =
        create_secret(&server, &workspace, json!({"name": "anthropic", "preset": "anthropic", "value": value})).await;
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(&server, "PUT", &attach, json!({"secret_id": secret})).await.0, 200);
    let (file, took) = wait_for(&path, "the secret's rule", |f| {
        sandbox(f, &agent).is_some_and(|s| s["inject"].as_array().is_some_and(|r| !r.is_empty()))
    })
    .await;
    println!("attach reached the proxy file in {took:?}");
    let entry = sandbox(&file, &agent).expect("entry");
    let placeholder: String = sqlx::query_scalar("SELECT placeholder FROM agent_secrets WHERE agent_id = $1::uuid")
        .bind(&agent)
        .fetch_one(&pool)
        .await
        .expect("placeholder");
    assert_eq!(
        entry["inject"],
        json!([{"host": "api.anthropic.com", "port": 443, "path_prefix": "/v1/", "header": "x-api-key",
                "format": "raw", "placeholder": placeholder, "value": value}])
    );
    assert_eq!(entry["username"], username.as_str(), "the identity is kept");
    assert_eq!(std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777, 0o600);

    // Change the allow-list.
    let (status, view) = admin(
        &server,
        "PATCH",
        &format!("/api/v1/agents/{agent}"),
        json!({"egress": {"allow": ["pypi.org"], "presets": ["package_registries"]}}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["egress"], json!({"allow": ["pypi.org"], "presets": ["package_registries"]}));
    let (file, took) = wait_for(&path, "the new allow-list", |f| {
        sandbox(f, &agent)
            .is_some_and(|s| s["allow"].as_array().is_some_and(|a| a.contains(&json!("registry.npmjs.org"))))
    })
    .await;
    println!("an egress change reached the proxy file in {took:?}");
    assert!(
        !sandbox(&file, &agent).expect("entry")["allow"]
            .as_array()
            .expect("allow")
            .contains(&json!("example.com:8443"))
    );

    // Detach: the rule (and the value) are gone.
    assert_eq!(admin(&server, "DELETE", &attach, json!({})).await.0, 204);
    let (_, took) =
        wait_for(&path, "the rule gone", |f| sandbox(f, &agent).is_some_and(|s| s["inject"] == json!([]))).await;
    println!("detach reached the proxy file in {took:?}");
    assert!(!std::fs::read_to_string(&path).expect("file").contains(&value), "the value left the file");

    // Delete the agent: its entry is gone.
    assert_eq!(admin(&server, "DELETE", &format!("/api/v1/agents/{agent}"), json!({})).await.0, 204);
    let (_, took) = wait_for(&path, "the agent gone", |f| sandbox(f, &agent).is_none()).await;
    println!("deleting the agent reached the proxy file in {took:?}");

    // Nothing secret in the server's log.
    let log = server.log();
    for needle in [value.as_str(), password.as_str()] {
        assert!(!log.contains(needle), "the server log holds a secret");
    }
}

#[tokio::test]
async fn bad_egress_is_refused_and_a_new_agent_has_none() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post("/api/v1/agents", json!({"name": "bad-egress", "harness": "fake", "egress": {"allow": ["*.com"]}}))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_EGRESS")), "{body}");
    let agent = server.create_agent(json!({})).await;
    let (status, view) = server.get(&format!("/api/v1/agents/{agent}")).await;
    assert_eq!(status, 200);
    assert_eq!(view["egress"], json!({"allow": [], "presets": []}));
    for bad in
        [json!({"egress": {"presets": ["everything"]}}), json!({"egress": {"allow": ["a b"]}}), json!({"name": "x"})]
    {
        let (status, body) = admin(&server, "PATCH", &format!("/api/v1/agents/{agent}"), bad).await;
        assert_eq!(status, 400, "{body}");
    }
}

/// Waits until the server's log contains `needle`.
async fn wait_for_log(server: &TestServer, needle: &str) {
    let start = Instant::now();
    while !server.log().contains(needle) {
        assert!(start.elapsed() < WITHIN, "the server never logged {needle:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn a_database_failure_keeps_the_last_file_and_a_secret_that_does_not_open_injects_nothing() {
    let server = TestServer::start().await;
    let path = server.data_dir.join("proxy.json");
    let pool = database(&server).await;
    let workspace = personal_workspace(&server).await;
    let (a, b) = (server.create_agent(json!({})).await, server.create_agent(json!({})).await);
    wait_for(&path, "both agents", |f| sandbox(f, &a).is_some() && sandbox(f, &b).is_some()).await;
    let before = std::fs::read(&path).expect("file");

    // The feed's read fails (a table it reads is gone): a change meanwhile does not reach the
    // file, and the file is left as it was.
    sqlx::query("ALTER TABLE agent_egress RENAME TO agent_egress_away").execute(&pool).await.expect("rename");
    let value_a = unique_value();
    let secret_a =
        create_secret(&server, &workspace, json!({"name": "key-a", "preset": "anthropic", "value": value_a})).await;
    let attach_a = format!("/api/v1/agents/{a}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(&server, "PUT", &attach_a, json!({"secret_id": secret_a})).await.0, 200);
    wait_for_log(&server, "the proxy feed could not read the database").await;
    assert_eq!(std::fs::read(&path).expect("file"), before, "the last file is kept");
    sqlx::query("ALTER TABLE agent_egress_away RENAME TO agent_egress").execute(&pool).await.expect("rename back");

    // Back: the next change brings everything in.
    let value_b = unique_value();
    let secret_b =
        create_secret(&server, &workspace, json!({"name": "key-b", "preset": "anthropic", "value": value_b})).await;
    let attach_b = format!("/api/v1/agents/{b}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(&server, "PUT", &attach_b, json!({"secret_id": secret_b})).await.0, 200);
    let has_rule = |f: &Value, agent: &str| {
        sandbox(f, agent).is_some_and(|s| s["inject"].as_array().is_some_and(|r| r.len() == 1))
    };
    wait_for(&path, "both rules", |f| has_rule(f, &a) && has_rule(f, &b)).await;

    // A's secret no longer opens (tampered with): A gets no rule, B keeps its own.
    sqlx::query(
        "UPDATE secrets SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE id = $1::uuid",
    )
    .bind(&secret_a)
    .execute(&pool)
    .await
    .expect("tamper");
    let (status, _) =
        admin(&server, "PATCH", &format!("/api/v1/agents/{b}"), json!({"egress": {"allow": ["pypi.org"]}})).await;
    assert_eq!(status, 200);
    let (file, _) =
        wait_for(&path, "B's new allow-list", |f| sandbox(f, &b).is_some_and(|s| s["allow"] == json!(["pypi.org"])))
            .await;
    let entry_a = sandbox(&file, &a).expect("A keeps its identity");
    assert_eq!(entry_a["inject"], json!([]), "nothing is injected for A");
    assert_eq!(sandbox(&file, &b).expect("B")["inject"][0]["value"], value_b.as_str());
    assert!(!std::fs::read_to_string(&path).expect("file").contains(&value_a));
    assert!(server.log().contains("nothing is injected for this agent"));
}

#[tokio::test]
async fn each_of_many_agents_gets_its_own_secrets_from_one_read() {
    let server = TestServer::start().await;
    let path = server.data_dir.join("proxy.json");
    let workspace = personal_workspace(&server).await;
    // The feed reads every agent's attachments in one statement: each entry must still hold its
    // own agent's values and no one else's (a third of them hold two, a third none).
    let mut agents = Vec::new();
    for i in 0..12 {
        let agent = server.create_agent(json!({})).await;
        let mut values = Vec::new();
        for (n, env) in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"].iter().enumerate().take(i % 3) {
            let value = unique_value();
            let preset = if n == 0 { "anthropic" } else { "openai" };
            let body = json!({"name": format!("k-{i}-{n}"), "preset": preset, "value": value});
            let secret = create_secret(&server, &workspace, body).await;
            let attach = format!("/api/v1/agents/{agent}/secrets/{env}");
            assert_eq!(admin(&server, "PUT", &attach, json!({"secret_id": secret})).await.0, 200);
            values.push(value);
        }
        agents.push((agent, values));
    }
    let injected = |f: &Value, agent: &str| -> Vec<String> {
        let Some(rules) = sandbox(f, agent).and_then(|s| s["inject"].as_array()) else { return Vec::new() };
        let mut values: Vec<String> = rules.iter().filter_map(|r| r["value"].as_str().map(str::to_owned)).collect();
        values.sort();
        values.dedup();
        values
    };
    let (file, _) = wait_for(&path, "every agent with its secrets", |f| {
        agents.iter().all(|(agent, values)| sandbox(f, agent).is_some() && injected(f, agent).len() == values.len())
    })
    .await;
    for (agent, values) in &agents {
        let mut expected = values.clone();
        expected.sort();
        assert_eq!(injected(&file, agent), expected, "agent {agent} holds exactly its own values");
    }
    let usernames: std::collections::HashSet<&str> = agents
        .iter()
        .map(|(agent, _)| sandbox(&file, agent).expect("entry")["username"].as_str().expect("name"))
        .collect();
    assert_eq!(usernames.len(), agents.len(), "one identity per agent");
}
