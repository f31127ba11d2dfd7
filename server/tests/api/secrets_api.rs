//! Secrets through the real server: roles, write-only values (never in an answer, an event, the
//! audit log, the server's log or the database in clear), attach and detach with their audit
//! records and placeholders, the agent's view, and the checks at the edge.

use std::time::Duration;

use agenthold_server::ids::AgentId;
use agenthold_server::secrets::{self, master_key::MasterKey};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::secrets::{
    admin, call, create_secret, database, make_user, personal_workspace, unique_value, where_in_database,
};

/// A proxy CA directory for the server (`AGENTHOLD_PROXY_CA_DIR`), made as `agenthold-proxy ca
/// init --with-presets --host …` makes it. Removed on drop.
struct CaDir(std::path::PathBuf);

impl CaDir {
    fn new(hosts: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("agenthold-test-ca-{}", uuid::Uuid::new_v4().simple()));
        let this = Self(dir);
        this.remake(hosts);
        this
    }

    /// Replaces the CA with one covering the presets plus `hosts` (an operator's new CA).
    fn remake(&self, hosts: &[&str]) {
        let _ = std::fs::remove_dir_all(&self.0);
        let mut all: Vec<String> = agenthold_proxy::ca::PRESET_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        all.extend(hosts.iter().map(|h| (*h).to_owned()));
        agenthold_proxy::ca::init(&self.0, &all).expect("making the CA");
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for CaDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn codes(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["error"]["code"].as_str())
}

async fn audit_actions(server: &TestServer, workspace: &str) -> Vec<Value> {
    let (status, audit) = admin(server, "GET", &format!("/api/v1/workspaces/{workspace}/audit"), json!({})).await;
    assert_eq!(status, 200, "{audit}");
    audit["records"].as_array().expect("records").clone()
}

#[tokio::test]
async fn secrets_are_for_workspace_admins_and_invisible_to_other_workspaces() {
    let server = TestServer::start().await;
    let viewer = make_user(&server, "sv").await;
    let operator = make_user(&server, "so").await;
    let team_admin = make_user(&server, "sa").await;
    let outsider = make_user(&server, "sx").await;
    let (status, team) = admin(&server, "POST", "/api/v1/workspaces", json!({"name": "team"})).await;
    assert_eq!(status, 201);
    let ws = team["id"].as_str().expect("id").to_owned();
    for (user, role) in [(&viewer, "viewer"), (&operator, "operator"), (&team_admin, "admin")] {
        let path = format!("/api/v1/workspaces/{ws}/members/{}", user.id);
        assert_eq!(admin(&server, "PUT", &path, json!({"role": role})).await.0, 204);
    }
    let agent = server.create_agent(json!({"workspace_id": ws})).await;
    let body = |name: &str| json!({"name": name, "preset": "openai", "value": unique_value()});
    let secrets = format!("/api/v1/workspaces/{ws}/secrets");

    // Viewers and operators see a 403, members of other workspaces a 404, for every route.
    for (user, expected) in [(&viewer, 403), (&operator, 403), (&outsider, 404)] {
        let token = &user.token;
        assert_eq!(call(&server, "POST", &secrets, token, body("x")).await.0, expected);
        assert_eq!(call(&server, "POST", &secrets, token, json!({})).await.0, expected, "role before body");
        assert_eq!(call(&server, "GET", &secrets, token, json!({})).await.0, expected);
    }
    let (status, created) = call(&server, "POST", &secrets, &team_admin.token, body("openai")).await;
    assert_eq!(status, 201, "{created}");
    let secret = created["id"].as_str().expect("id").to_owned();
    let attach = format!("/api/v1/agents/{agent}/secrets/OPENAI_API_KEY");
    for (user, expected) in [(&viewer, 403), (&operator, 403), (&outsider, 404)] {
        let token = &user.token;
        assert_eq!(call(&server, "DELETE", &format!("{secrets}/{secret}"), token, json!({})).await.0, expected);
        assert_eq!(call(&server, "PUT", &attach, token, json!({"secret_id": secret})).await.0, expected);
        assert_eq!(call(&server, "DELETE", &attach, token, json!({})).await.0, expected);
    }
    assert_eq!(call(&server, "PUT", &attach, &team_admin.token, json!({"secret_id": secret})).await.0, 200);
    // Viewers see which secret an agent uses (never the value); outsiders see no agent.
    let (status, view) = call(&server, "GET", &format!("/api/v1/agents/{agent}"), &viewer.token, json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        view["secrets"],
        json!([{"env_name": "OPENAI_API_KEY", "secret_id": secret, "secret_name": "openai", "preset": "openai"}])
    );

    // The outsider's own agent cannot use the team's secret: it does not exist for them.
    let (status, own) =
        call(&server, "POST", "/api/v1/agents", &outsider.token, json!({"name": "own", "harness": "fake"})).await;
    assert_eq!(status, 201, "{own}");
    let own = own["id"].as_str().expect("id").to_owned();
    let theirs = call(
        &server,
        "PUT",
        &format!("/api/v1/agents/{own}/secrets/OPENAI_API_KEY"),
        &outsider.token,
        json!({"secret_id": secret}),
    )
    .await;
    assert_eq!(codes(&theirs), (404, Some("NOT_FOUND")));
    // Nor can the team's admin attach it to an agent of a workspace the secret is not in.
    let (status, mine) = admin(&server, "POST", "/api/v1/agents", json!({"name": "mine", "harness": "fake"})).await;
    assert_eq!(status, 201, "{mine}");
    let mine = mine["id"].as_str().expect("id").to_owned();
    let elsewhere =
        admin(&server, "PUT", &format!("/api/v1/agents/{mine}/secrets/OPENAI_API_KEY"), json!({"secret_id": secret}))
            .await;
    assert_eq!(codes(&elsewhere), (404, Some("NOT_FOUND")));

    assert_eq!(call(&server, "DELETE", &format!("{secrets}/{secret}"), &team_admin.token, json!({})).await.0, 204);
    assert_eq!(call(&server, "DELETE", &format!("{secrets}/{secret}"), &team_admin.token, json!({})).await.0, 404);
}

#[tokio::test]
async fn a_value_is_write_only_encrypted_at_rest_and_never_logged_or_in_an_event() {
    // The custom secret's host is one the operator's CA was made to cover.
    let ca = CaDir::new(&["llm.example.com"]);
    let server = TestServer::start_with(&[("AGENTHOLD_PROXY_CA_DIR", ca.path())]).await;
    let ws = personal_workspace(&server).await;
    let value = unique_value();
    let custom_value = format!("custom-{}", uuid::Uuid::new_v4().simple());
    let bad_value = format!("{}\r\nx-evil: 1", unique_value());

    let secrets_path = format!("/api/v1/workspaces/{ws}/secrets");
    let (status, created) =
        admin(&server, "POST", &secrets_path, json!({"name": "anthropic", "preset": "anthropic", "value": value}))
            .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["rule"],
        json!({"host": "api.anthropic.com", "port": 443, "path_prefix": "/v1/", "header": "x-api-key", "format": "{secret}"})
    );
    let secret = created["id"].as_str().expect("id").to_owned();
    let custom_body = json!({"name": "internal", "preset": "custom", "value": custom_value, "host": "llm.example.com",
        "header": "X-Api-Token", "format": "Token {secret}", "path_prefix": "/v2/"});
    let (status, custom) = admin(&server, "POST", &secrets_path, custom_body).await;
    assert_eq!(status, 201, "{custom}");
    assert_eq!(
        custom["rule"],
        json!({"host": "llm.example.com", "port": 443, "path_prefix": "/v2/", "header": "x-api-token", "format": "Token {secret}"})
    );
    let custom_id = custom["id"].as_str().expect("id").to_owned();
    let refused =
        admin(&server, "POST", &secrets_path, json!({"name": "bad", "preset": "anthropic", "value": bad_value})).await;
    assert_eq!(codes(&refused), (400, Some("INVALID_SECRET_VALUE")));
    assert_eq!(where_in_database(&server, &value).await, Vec::<String>::new(), "the value is stored in clear");

    let agent = server.create_agent(json!({})).await;
    let (status, attached) = admin(
        &server,
        "PUT",
        &format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY"),
        json!({"secret_id": secret}),
    )
    .await;
    assert_eq!(status, 200, "{attached}");
    let (status, _) =
        admin(&server, "PUT", &format!("/api/v1/agents/{agent}/secrets/LLM_TOKEN"), json!({"secret_id": custom_id}))
            .await;
    assert_eq!(status, 200);

    // The proxy's view has the values; the sandbox's only placeholders.
    let pool = database(&server).await;
    let key = MasterKey::from_file(&server.data_dir.join("master.key")).expect("the test mode key");
    let agent_id = AgentId(agent.parse().expect("uuid"));
    let attached = secrets::for_agent(&pool, &key, agent_id).await.expect("opens");
    let summary: Vec<(&str, &str, &str)> =
        attached.iter().map(|a| (a.env_name.as_str(), a.value.expose(), a.rule.header.as_str())).collect();
    assert_eq!(
        summary,
        vec![("ANTHROPIC_API_KEY", value.as_str(), "x-api-key"), ("LLM_TOKEN", custom_value.as_str(), "x-api-token")]
    );
    let env = secrets::sandbox_env(&pool, agent_id).await.expect("env");
    assert_eq!(env.len(), 2);
    assert!(env[0].1.starts_with("sk-ant-agenthold-") && env[1].1.starts_with("agenthold-"), "{env:?}");
    assert_eq!(env[0].1, attached[0].placeholder);
    assert!(format!("{attached:?}").find(&value).is_none(), "Debug redacts values");

    // A full turn on the agent: the harness sees the placeholder (its length and prefix, so that
    // neither it nor the value lands in an event), then every answer, event and record is
    // searched for the values.
    let session = server.create_session(&agent).await;
    server.prompt(&session, "run echo \"[${#ANTHROPIC_API_KEY}:${ANTHROPIC_API_KEY%%agenthold-*}]\"").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    let printed: String =
        events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect();
    assert_eq!(printed.trim(), format!("[{}:sk-ant-]", env[0].1.len()), "the harness's environment: {events:?}");
    let (_, listed) = admin(&server, "GET", &secrets_path, json!({})).await;
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    let (_, agents) = admin(&server, "GET", "/api/v1/agents", json!({})).await;
    let audit = audit_actions(&server, &ws).await;
    assert_eq!(view["credentials_inside_sandbox"], json!(false));
    assert_eq!(view["secrets"].as_array().map(Vec::len), Some(2), "{view}");
    assert_eq!(listed["secrets"][0]["used_by"][0]["env_name"], json!("ANTHROPIC_API_KEY"), "{listed}");
    let answers = [created, custom, listed, view, agents, json!(events), json!(audit)];
    for answer in &answers {
        let text = answer.to_string();
        for (what, needle) in [("value", value.as_str()), ("custom value", &custom_value), ("placeholder", &env[0].1)] {
            assert!(!text.contains(needle), "the {what} is in an answer: {text}");
        }
    }
    let actions: Vec<&str> = answers[6].as_array().into_iter().flatten().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(actions.iter().filter(|a| **a == "secret.created").count(), 2, "{actions:?}");
    assert_eq!(actions.iter().filter(|a| **a == "secret.attached").count(), 2, "{actions:?}");

    // In the database the values exist only sealed.
    for needle in [&value, &custom_value, &bad_value] {
        assert_eq!(where_in_database(&server, needle).await, Vec::<String>::new(), "a value is stored in clear");
    }
    assert_eq!(
        where_in_database(&server, &env[0].1).await,
        vec!["agent_secrets".to_owned()],
        "placeholders are stored"
    );

    // Detach and delete, both audited; the agent then has nothing.
    let detach =
        admin(&server, "DELETE", &format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY"), json!({})).await;
    assert_eq!(detach.0, 204);
    assert_eq!(
        admin(&server, "DELETE", &format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY"), json!({})).await.0,
        404
    );
    assert_eq!(admin(&server, "DELETE", &format!("{secrets_path}/{custom_id}"), json!({})).await.0, 204);
    assert!(secrets::for_agent(&pool, &key, agent_id).await.expect("reads").is_empty());
    let audit = audit_actions(&server, &ws).await;
    let detached: Vec<&Value> = audit.iter().filter(|r| r["action"] == "secret.detached").collect();
    assert_eq!(detached.len(), 2, "one by hand, one by deleting the secret: {audit:?}");
    assert_eq!(detached[0]["detail"]["reason"], json!("secret deleted"));
    assert_eq!(detached[1]["detail"]["env_name"], json!("ANTHROPIC_API_KEY"));
    assert_eq!(detached[1]["resource_id"], json!(agent));
    assert!(audit.iter().any(|r| r["action"] == "secret.deleted" && r["resource_id"] == json!(custom_id)));
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["secrets"], json!([]));

    // The server logged none of them.
    let log = server.log();
    assert!(log.contains("master key"), "the log is the server's: {log}");
    for needle in [value.as_str(), custom_value.as_str(), "x-evil"] {
        assert!(!log.contains(needle), "a value is in the server log");
    }
}

/// A secret whose host the proxy's CA does not cover could never be injected: it is refused when
/// stored, and an existing one when attached after the CA was replaced by one that no longer
/// covers it; a covered host (a preset's, a subdomain inside the constraints) is accepted.
#[tokio::test]
async fn a_secret_whose_host_the_proxy_ca_does_not_cover_is_refused_at_the_door() {
    let ca = CaDir::new(&["llm.example.com"]);
    let server = TestServer::start_with(&[("AGENTHOLD_PROXY_CA_DIR", ca.path())]).await;
    let ws = personal_workspace(&server).await;
    let path = format!("/api/v1/workspaces/{ws}/secrets");
    let custom = |name: &str, host: &str| json!({"name": name, "preset": "custom", "value": "tok-1", "host": host, "header": "x-api-token"});
    let refused = admin(&server, "POST", &path, custom("other", "llm.other.example")).await;
    assert_eq!(codes(&refused), (400, Some("HOST_NOT_COVERED")), "{}", refused.1);
    let message = refused.1["error"]["message"].as_str().expect("message");
    for needle in [
        "llm.other.example",
        "--host llm.other.example",
        "AGENTHOLD_PROXY_CA_DIR",
        "docs/proxy.md#secrets-for-other-hosts",
    ] {
        assert!(message.contains(needle), "the refusal names {needle}: {message}");
    }
    let (_, listed) = admin(&server, "GET", &path, json!({})).await;
    assert_eq!(listed["secrets"], json!([]), "nothing was stored");
    // Covered: the host the CA was made for, a preset, a subdomain of a preset's host.
    let covered = create_secret(&server, &ws, custom("internal", "llm.example.com")).await;
    create_secret(&server, &ws, json!({"name": "anthropic", "preset": "anthropic", "value": "sk-1"})).await;
    create_secret(&server, &ws, custom("eu", "eu.openrouter.ai")).await;

    // The operator replaces the CA with one that no longer covers llm.example.com: the stored
    // secret can no longer be attached (no restart needed for the check).
    ca.remake(&[]);
    let agent = server.create_agent(json!({})).await;
    let attach = format!("/api/v1/agents/{agent}/secrets/LLM_TOKEN");
    let refused = admin(&server, "PUT", &attach, json!({"secret_id": covered})).await;
    assert_eq!(codes(&refused), (400, Some("HOST_NOT_COVERED")), "{}", refused.1);
    assert!(refused.1["error"]["message"].as_str().is_some_and(|m| m.contains("llm.example.com")), "{}", refused.1);
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!(view["secrets"], json!([]), "nothing was attached: {view}");
    // Covered again: attached.
    ca.remake(&["llm.example.com"]);
    let (status, attached) = admin(&server, "PUT", &attach, json!({"secret_id": covered})).await;
    assert_eq!(status, 200, "{attached}");
}

#[tokio::test]
async fn placeholders_are_per_agent_and_secret_and_reattaching_changes_nothing() {
    let server = TestServer::start().await;
    let ws = personal_workspace(&server).await;
    let a = create_secret(&server, &ws, json!({"name": "a", "preset": "openrouter", "value": unique_value()})).await;
    let b = create_secret(&server, &ws, json!({"name": "b", "preset": "openai", "value": unique_value()})).await;
    let first = server.create_agent(json!({})).await;
    let second = server.create_agent(json!({})).await;
    let put = |agent: &str, env: &str, secret: &str| {
        let (path, body) = (format!("/api/v1/agents/{agent}/secrets/{env}"), json!({"secret_id": secret}));
        let server = &server;
        async move { admin(server, "PUT", &path, body).await.0 }
    };
    let mut changes = sqlx::postgres::PgListener::connect(&server.database_url).await.expect("listener");
    changes.listen(agenthold_server::store::secrets::CHANGED_CHANNEL).await.expect("listen");
    assert_eq!(put(&first, "OPENROUTER_API_KEY", &a).await, 200);
    let told = tokio::time::timeout(Duration::from_secs(10), changes.recv()).await.expect("told in time");
    assert_eq!(told.expect("notification").payload(), first, "attaching is announced with the agent's id");
    assert_eq!(put(&first, "OPENROUTER_API_KEY", &a).await, 200, "idempotent");
    assert_eq!(put(&first, "OTHER_NAME", &a).await, 200);
    assert_eq!(put(&second, "OPENROUTER_API_KEY", &a).await, 200);
    let pool = database(&server).await;
    let env = |agent: &str| {
        let (pool, agent) = (pool.clone(), AgentId(agent.parse().expect("uuid")));
        async move { secrets::sandbox_env(&pool, agent).await.expect("env") }
    };
    let first_env = env(&first).await;
    let second_env = env(&second).await;
    assert_eq!(first_env[0].0, "OPENROUTER_API_KEY");
    assert_eq!(first_env[0].1, first_env[1].1, "one placeholder per (agent, secret)");
    assert!(first_env[0].1.starts_with("sk-or-v1-agenthold-"), "{first_env:?}");
    assert_ne!(first_env[0].1, second_env[0].1, "another agent gets another placeholder");
    // Another secret under the same variable: a new placeholder, the replacement audited.
    assert_eq!(put(&first, "OPENROUTER_API_KEY", &b).await, 200);
    let replaced = env(&first).await;
    assert!(replaced[0].1.starts_with("sk-agenthold-") && replaced[0].1 != first_env[0].1, "{replaced:?}");
    assert_eq!(
        admin(&server, "DELETE", &format!("/api/v1/agents/{second}/secrets/OPENROUTER_API_KEY"), json!({})).await.0,
        204
    );
    // The announcements so far: the other three attachments and the detachment, nothing for the no-op.
    let mut told = Vec::new();
    while told.len() < 4 {
        let next = tokio::time::timeout(Duration::from_secs(10), changes.recv()).await.expect("told in time");
        told.push(next.expect("notification").payload().to_owned());
    }
    assert_eq!(told, vec![first.clone(), second.clone(), first.clone(), second.clone()]);
    let audit = audit_actions(&server, &ws).await;
    let attached: Vec<&Value> = audit.iter().filter(|r| r["action"] == "secret.attached").collect();
    assert_eq!(attached.len(), 4, "re-attaching the same secret records nothing: {attached:?}");
    assert_eq!(attached[0]["detail"]["replaced_secret_id"], json!(a));
}

#[tokio::test]
async fn bad_secrets_variables_and_credential_looking_env_are_refused_with_codes() {
    let server = TestServer::start().await;
    let ws = personal_workspace(&server).await;
    let path = format!("/api/v1/workspaces/{ws}/secrets");
    let post = |body: Value| {
        let (server, path) = (&server, path.clone());
        async move { admin(server, "POST", &path, body).await }
    };
    let long = "x".repeat(8193);
    for value in ["", "a\nb", "a\rb", "a\tb", "a\u{7f}b", "ä-key", " padded", long.as_str()] {
        let answer = post(json!({"name": "v", "preset": "openai", "value": value})).await;
        assert_eq!(codes(&answer), (400, Some("INVALID_SECRET_VALUE")), "{value:?}");
        assert!(value.len() < 3 || !answer.1.to_string().contains(value), "the answer repeats the value");
    }
    let nul = post(json!({"name": "v", "preset": "openai", "value": "a\u{0}b"})).await;
    assert_eq!(codes(&nul), (400, Some("NUL_CHARACTER")));
    for body in [
        json!({"name": "v", "preset": "custom", "value": "x"}),
        json!({"name": "v", "preset": "custom", "value": "x", "host": "127.0.0.1", "header": "x-key"}),
        json!({"name": "v", "preset": "custom", "value": "x", "host": "example.com", "header": "host"}),
        json!({"name": "v", "preset": "custom", "value": "x", "host": "example.com", "header": "x", "format": "{secret}!"}),
        json!({"name": "v", "preset": "openai", "value": "x", "host": "evil.example.com"}),
    ] {
        assert_eq!(codes(&post(body.clone()).await), (400, Some("INVALID_RULE")), "{body}");
    }
    assert_eq!(codes(&post(json!({"name": "v", "preset": "nope", "value": "x"})).await), (400, Some("INVALID_BODY")));
    assert_eq!(
        codes(&post(json!({"name": "a b", "preset": "openai", "value": "x"})).await),
        (400, Some("INVALID_NAME"))
    );
    assert_eq!(post(json!({"name": "dup", "preset": "openai", "value": "x"})).await.0, 201);
    assert_eq!(codes(&post(json!({"name": "dup", "preset": "openai", "value": "y"})).await), (409, Some("NAME_TAKEN")));
    let unknown = uuid::Uuid::new_v4();
    assert_eq!(admin(&server, "DELETE", &format!("{path}/{unknown}"), json!({})).await.0, 404);
    assert_eq!(admin(&server, "DELETE", &format!("{path}/not-a-uuid"), json!({})).await.0, 404);

    // Attaching: the variable's shape, a reserved name, an unknown secret, a name the plain env has.
    let secret = create_secret(&server, &ws, json!({"name": "k", "preset": "anthropic", "value": "sk-1"})).await;
    let agent = server.create_agent(json!({"env": {"FAKEAGENT_CAPS": "{}"}})).await;
    let attach = |env: &str, body: Value| {
        let (server, path) = (&server, format!("/api/v1/agents/{agent}/secrets/{env}"));
        async move { admin(server, "PUT", &path, body).await }
    };
    for env in ["lower_case", "1ABC", "A-B", "AGENTHOLD_SANDBOX_TOKEN", "HTTPS_PROXY", "NODE_EXTRA_CA_CERTS"] {
        assert_eq!(codes(&attach(env, json!({"secret_id": secret})).await), (400, Some("INVALID_ENV_NAME")), "{env}");
    }
    assert_eq!(codes(&attach("ANTHROPIC_API_KEY", json!({"secret_id": unknown})).await), (404, Some("NOT_FOUND")));
    assert_eq!(codes(&attach("ANTHROPIC_API_KEY", json!({})).await), (400, Some("INVALID_BODY")));
    assert_eq!(codes(&attach("FAKEAGENT_CAPS", json!({"secret_id": secret})).await), (409, Some("ENV_NAME_TAKEN")));
    let detach =
        admin(&server, "DELETE", &format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY"), json!({})).await;
    assert_eq!(detach.0, 404);

    // The plain env refuses credential-looking names, and says where they belong.
    for name in
        ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "PGPASSWORD"]
    {
        let answer =
            admin(&server, "POST", "/api/v1/agents", json!({"name": "c", "harness": "fake", "env": {name: "sk-x"}}))
                .await;
        assert_eq!(codes(&answer), (400, Some("USE_A_SECRET")), "{name}");
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("secret") && message.contains(name) && !message.contains("sk-x"), "{message}");
    }
    let fine = json!({"TOKENIZERS_PARALLELISM": "false", "MAX_TOKENS": "10", "PUBLIC_KEY_PATH": "/k"});
    let agent = server.create_agent(json!({"env": fine})).await;
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    assert_eq!((view["secrets"].clone(), view["credentials_inside_sandbox"].clone()), (json!([]), json!(false)));
}

#[tokio::test]
async fn a_workspace_and_an_agent_hold_a_bounded_number_of_secrets() {
    use agenthold_server::store::secrets::{MAX_PER_AGENT, MAX_PER_WORKSPACE};
    let server = TestServer::start().await;
    let ws = personal_workspace(&server).await;
    let mut ids = Vec::new();
    for i in 0..MAX_PER_WORKSPACE {
        ids.push(create_secret(&server, &ws, json!({"name": format!("s{i}"), "preset": "openai", "value": "v"})).await);
    }
    let path = format!("/api/v1/workspaces/{ws}/secrets");
    let over = admin(&server, "POST", &path, json!({"name": "one-more", "preset": "openai", "value": "v"})).await;
    assert_eq!(codes(&over), (409, Some("TOO_MANY_SECRETS")));
    let taken = admin(&server, "POST", &path, json!({"name": "s0", "preset": "openai", "value": "v"})).await;
    assert_eq!(codes(&taken), (409, Some("NAME_TAKEN")), "a taken name is still told apart");

    let agent = server.create_agent(json!({})).await;
    let attach = |env: String, secret: &str| {
        let (server, body) = (&server, json!({"secret_id": secret}));
        let path = format!("/api/v1/agents/{agent}/secrets/{env}");
        async move { admin(server, "PUT", &path, body).await }
    };
    for (i, id) in ids.iter().take(MAX_PER_AGENT as usize).enumerate() {
        assert_eq!(attach(format!("V{i}"), id).await.0, 200);
    }
    let last = &ids[MAX_PER_AGENT as usize];
    assert_eq!(codes(&attach("ONE_MORE".into(), last).await), (409, Some("TOO_MANY_SECRETS")));
    assert_eq!(attach("V0".into(), last).await.0, 200, "replacing at the limit is fine");
}

#[tokio::test]
async fn secrets_named_on_create_are_attached_at_once_or_refused_whole_with_nothing_stored() {
    let server = TestServer::start().await;
    let ws = personal_workspace(&server).await;
    let key = create_secret(&server, &ws, json!({"name": "k", "preset": "anthropic", "value": unique_value()})).await;
    let create = |name: &str, extra: Value| {
        let mut body = json!({"name": name, "harness": "fake"});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let server = &server;
        async move { admin(server, "POST", "/api/v1/agents", body).await }
    };
    // Refused whole: a bad variable, a variable the plain env sets too, a secret of nobody's
    // workspace, too many; no agent is made.
    let missing = uuid::Uuid::new_v4().to_string();
    let many: serde_json::Map<String, Value> = (0..33).map(|i| (format!("K{i}"), json!(key))).collect();
    for (extra, wanted) in [
        (json!({"secrets": {"1BAD": key}}), (400, Some("INVALID_ENV_NAME"))),
        (json!({"secrets": {"MY_SETTING": key}, "env": {"MY_SETTING": "plain"}}), (409, Some("ENV_NAME_TAKEN"))),
        (json!({"secrets": {"MY_KEY": missing}}), (404, Some("NOT_FOUND"))),
        (json!({"secrets": many}), (409, Some("TOO_MANY_SECRETS"))),
        (json!({"secrets": {"MY_KEY": 7}}), (400, Some("INVALID_BODY"))),
    ] {
        let answer = create("refused", extra.clone()).await;
        assert_eq!(codes(&answer), wanted, "{extra}: {}", answer.1);
    }
    let (_, agents) = admin(&server, "GET", "/api/v1/agents", json!({})).await;
    assert!(!agents.to_string().contains("\"refused\""), "nothing stored: {agents}");

    // Accepted: attached as PUT would, audited, placeholders in the sandbox only.
    let answer = create("keyed", json!({"secrets": {"ANTHROPIC_API_KEY": key, "OTHER_KEY": key}})).await;
    assert_eq!(answer.0, 201, "{}", answer.1);
    let agent = answer.1["id"].as_str().expect("id").to_owned();
    assert_eq!(answer.1["secrets"].as_array().map(Vec::len), Some(2), "the answer shows them: {}", answer.1);
    let (_, view) = admin(&server, "GET", &format!("/api/v1/agents/{agent}"), json!({})).await;
    let attached: Vec<&str> =
        view["secrets"].as_array().expect("secrets").iter().filter_map(|s| s["env_name"].as_str()).collect();
    assert_eq!(attached, ["ANTHROPIC_API_KEY", "OTHER_KEY"], "{view}");
    let attaches = audit_actions(&server, &ws)
        .await
        .into_iter()
        .filter(|r| r["action"] == "secret.attached" && r["resource_id"] == agent.as_str())
        .count();
    assert_eq!(attaches, 2);
}
