//! Every route's refusals, in-process (`support::in_process`: no server process, a database of its own):
//! the authorization matrix generated from the OpenAPI document's access requirements — each
//! operation for every role (none, i.e. a member of another workspace; viewer; operator; admin)
//! and without credentials — plus unknown and malformed ids (404) and malformed bodies
//! (400), each answer listed in the document with the API's error shape. The document lists
//! exactly the router's routes (both come from `api::operations`): the 401 sweep shows each is
//! routed.

use std::time::Duration;

use agenthold_server::api::openapi::Access as Need;
use serde_json::{Value, json};

use crate::support::in_process::{ADMIN_TOKEN, InProcess};

const PASSWORD: &str = "a long enough password";

/// Every operation of the OpenAPI document: (METHOD, path, what it needs).
fn operations() -> Vec<(String, String, Need)> {
    let document = agenthold_server::api::openapi::document();
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let access = operation["x-agenthold-access"].as_str().expect("access");
            let need = Need::parse(access).unwrap_or_else(|| panic!("unknown access {access}"));
            operations.push((method.to_uppercase(), path.clone(), need));
        }
    }
    operations.sort();
    operations
}

#[test]
fn every_route_is_in_the_openapi_document_with_its_security() {
    // The router and the document come from one list (`api::operations`, utoipa-axum): a route
    // added to the router by hand would bypass it.
    let source = include_str!("../../src/api/mod.rs");
    assert!(!source.contains(".route("), "route handlers through api::operations (routes!), not Router::route");
    assert!(operations().len() > 60, "{} operations", operations().len());
    let document = agenthold_server::api::openapi::document();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let public = operation["security"] == json!([]);
            let need = Need::parse(operation["x-agenthold-access"].as_str().expect("access"));
            assert_eq!(public, need == Some(Need::Public), "{method} {path}: security requirements match the access");
        }
    }
}

/// Asserts the document lists `status` among the answers of `METHOD template`, and that an
/// error answer has the API's error shape.
fn assert_documented(method: &str, template: &str, status: u16, body: &Value) {
    let document = agenthold_server::api::openapi::document();
    let responses = &document["paths"][template][method.to_lowercase()]["responses"];
    assert!(
        responses.get(status.to_string()).is_some(),
        "{method} {template} answered {status}, which the OpenAPI document does not list: {body}"
    );
    if status >= 400 {
        assert!(body["error"]["code"].is_string(), "{method} {template} {status}: not the error shape: {body}");
    }
}

/// Whether the route is a WebSocket.
fn websocket(template: &str) -> bool {
    template.ends_with("/stream") || template.ends_with("/terminal")
}

/// A signed-in user of the test: an API token made through a browser login (with its CSRF token).
struct User {
    id: String,
    token: String,
}

async fn make_user(server: &InProcess, name: &str) -> User {
    let (status, created) =
        server.admin("POST", "/api/v1/users", json!({"username": name, "password": PASSWORD})).await;
    assert_eq!(status, 201, "{created}");
    let body = json!({"username": name, "password": PASSWORD}).to_string();
    let login = server.request("POST", "/api/v1/auth/login", &[], Some(&body)).await;
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.headers["set-cookie"].to_str().expect("cookie").split(';').next().expect("cookie").to_owned();
    let csrf = login.body["csrf_token"].as_str().expect("csrf").to_owned();
    let body = json!({"name": "cli"}).to_string();
    // Without the CSRF header a cookie cannot change anything…
    let refused = server.request("POST", "/api/v1/tokens", &[("cookie", cookie.clone())], Some(&body)).await;
    assert_eq!(refused.status, 403);
    // …with it, it can.
    let headers = [("cookie", cookie), ("x-csrf-token", csrf)];
    let token = server.request("POST", "/api/v1/tokens", &headers, Some(&body)).await;
    assert_eq!(token.status, 201, "{}", token.body);
    User {
        id: created["id"].as_str().expect("id").to_owned(),
        token: token.body["token"].as_str().expect("token").to_owned(),
    }
}

/// The id of the session's first question still waiting for a person.
async fn wait_question(server: &InProcess, session: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let events = server.events(session).await;
        let answered: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "permission_resolved")
            .filter_map(|e| e["payload"]["permission_id"].as_str())
            .collect();
        if let Some(id) = events
            .iter()
            .filter(|e| e["type"] == "permission")
            .filter_map(|e| e["payload"]["permission_id"].as_str())
            .find(|id| !answered.contains(id))
        {
            return id.to_owned();
        }
        assert!(started.elapsed() < Duration::from_secs(90), "no question: {events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The resources of one workspace the matrix acts on.
struct Fixture {
    ws: String,
    agent: String,
    prompted: String,
    session: String,
    permission: String,
    grant: String,
    schedule: String,
    webhook: String,
    doomed: String,
    kept: String,
    target: User,
}

impl Fixture {
    /// `template` with its parameters filled with the fixture's resources.
    fn fill(&self, template: &str) -> String {
        template
            .replace("/agents/{id}", &format!("/agents/{}", self.agent))
            .replace("/sessions/{id}", &format!("/sessions/{}", self.session))
            .replace("/permissions/{id}", &format!("/permissions/{}", self.permission))
            .replace("/workspaces/{id}", &format!("/workspaces/{}", self.ws))
            .replace("/schedules/{id}", &format!("/schedules/{}", self.schedule))
            .replace("/webhooks/{id}", &format!("/webhooks/{}", self.webhook))
            .replace("{user_id}", &self.target.id)
            .replace("{target_id}", &self.prompted)
            .replace("{secret_id}", &self.doomed)
            .replace("{grant_id}", &self.grant)
            .replace("{source_id}", &self.prompted)
            .replace("{env_name}", "ANTHROPIC_API_KEY")
            .replace("{seq}", "1")
    }

    /// A body the operation accepts from a caller allowed to make it.
    fn body(&self, method: &str, template: &str) -> Value {
        body(method, template, &self.kept)
    }
}

/// A body `METHOD template` accepts (`secret`: the secret an attachment names).
fn body(method: &str, template: &str, secret: &str) -> Value {
    match template {
        t if t.ends_with("/prompt") => json!({"text": "text again"}),
        t if t.ends_with("/members/{user_id}") && method == "PUT" => json!({"role": "viewer"}),
        t if t.ends_with("/secrets/{env_name}") && method == "PUT" => json!({"secret_id": secret}),
        t if t.ends_with("/answer") => json!({"decision": "allow"}),
        _ => json!({}),
    }
}

async fn fixture(server: &InProcess, target: User) -> Fixture {
    let (status, workspace) = server.admin("POST", "/api/v1/workspaces", json!({"name": "team"})).await;
    assert_eq!(status, 201);
    let ws = workspace["id"].as_str().expect("id").to_owned();
    let agent = server.create_agent(json!({"workspace_id": ws})).await;
    let prompted = server.create_agent(json!({"workspace_id": ws})).await;
    let mut secret_ids = Vec::new();
    for name in ["doomed", "kept"] {
        let body = json!({"name": name, "preset": "anthropic", "value": "sk-ant-matrix"});
        let (status, secret) = server.admin("POST", &format!("/api/v1/workspaces/{ws}/secrets"), body).await;
        assert_eq!(status, 201, "{secret}");
        secret_ids.push(secret["id"].as_str().expect("id").to_owned());
    }
    let (doomed, kept) = (secret_ids[0].clone(), secret_ids[1].clone());
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(server.admin("PUT", &attach, json!({"secret_id": kept})).await.0, 200);
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    // A session grant (the grants routes): approved for the session while the agent asked.
    let posture = format!("/api/v1/agents/{agent}");
    assert_eq!(server.admin("PATCH", &posture, json!({"posture": "approval"})).await.0, 200);
    server.prompt(&session, "ask execute make").await;
    let grant = wait_question(server, &session).await;
    let answered = server
        .admin("POST", &format!("/api/v1/permissions/{grant}/answer"), json!({"decision": "allow_for_session"}))
        .await;
    assert_eq!(answered.0, 200, "{}", answered.1);
    server.wait_turns(&session, 2, Duration::from_secs(90)).await;
    assert_eq!(server.admin("PATCH", &posture, json!({"posture": ""})).await.0, 200);
    // A question waiting for a person.
    let asking = server.create_agent(json!({"workspace_id": ws, "posture": "approval"})).await;
    let asking_session = server.create_session(&asking).await;
    server.prompt(&asking_session, "ask execute make").await;
    let permission = wait_question(server, &asking_session).await;
    let body = json!({"name": "nightly", "cron": "0 3 * * *", "prompt": "text hi", "paused": true});
    let (status, schedule) = server.admin("POST", &format!("/api/v1/agents/{agent}/schedules"), body).await;
    assert_eq!(status, 201, "{schedule}");
    let body = json!({"name": "hook", "template": "text {{ . }}"});
    let (status, webhook) = server.admin("POST", &format!("/api/v1/agents/{agent}/webhooks"), body).await;
    assert_eq!(status, 201, "{webhook}");
    Fixture {
        ws,
        agent,
        prompted,
        session,
        permission,
        grant,
        schedule: schedule["id"].as_str().expect("id").to_owned(),
        webhook: webhook["webhook"]["id"].as_str().expect("id").to_owned(),
        doomed,
        kept,
        target,
    }
}

#[tokio::test]
async fn every_route_refuses_callers_below_its_access_and_serves_those_at_or_above() {
    let server = InProcess::start().await;
    let outsider = make_user(&server, "dave").await;
    let viewer = make_user(&server, "alice").await;
    let operator = make_user(&server, "bob").await;
    let admin = make_user(&server, "carol").await;
    let target = make_user(&server, "zoe").await; // whose membership the member routes change
    let f = fixture(&server, target).await;
    for (user, role) in [(&viewer, "viewer"), (&operator, "operator"), (&admin, "admin"), (&f.target, "viewer")] {
        let path = format!("/api/v1/workspaces/{}/members/{}", f.ws, user.id);
        let (status, body) = server.admin("PUT", &path, json!({"role": role})).await;
        assert_eq!(status, 204, "{body}");
    }
    let roles =
        [(Need::Public, &outsider), (Need::Viewer, &viewer), (Need::Operator, &operator), (Need::Admin, &admin)];
    let mut checked = 0;
    for (method, template, need) in operations().iter().filter(|(_, _, n)| (Need::Viewer..=Need::Admin).contains(n)) {
        let (method, template, need) = (method.as_str(), template.as_str(), *need);
        let destructive = matches!(
            template,
            "/api/v1/agents/{id}" | "/api/v1/sessions/{id}" | "/api/v1/schedules/{id}" | "/api/v1/webhooks/{id}"
        ) && method == "DELETE";
        if destructive || template.ends_with("/sleep") {
            continue; // destructive: checked below, after the others
        }
        let path = f.fill(template);
        let path = if websocket(template) { format!("{path}?after=0") } else { path };
        for (level, user) in roles {
            let (status, body) = server.as_user(method, &path, &user.token, f.body(method, template)).await;
            checked += 1;
            if level >= need {
                let expected_ok = ![401, 403, 404].contains(&status) && status < 500;
                assert!(expected_ok, "{method} {template} as {level:?}: {status} {body}");
                if !websocket(template) {
                    assert_documented(method, template, status, &body); // (101 is not an answer the document lists)
                }
            } else {
                let expected = if level == Need::Public { 404 } else { 403 };
                assert_eq!(status, expected, "{method} {template} as {level:?}: {body}");
                assert_documented(method, template, status, &body);
            }
        }
    }
    assert!(checked > 150, "the matrix covered {checked} calls");

    // Prompt targets: putting an agent on another's list needs the admin role for both.
    let (status, other_ws) = server.admin("POST", "/api/v1/workspaces", json!({"name": "elsewhere"})).await;
    assert_eq!(status, 201);
    let other_ws = other_ws["id"].as_str().expect("id").to_owned();
    let elsewhere = server.create_agent(json!({"workspace_id": other_ws})).await;
    let path = format!("/api/v1/agents/{}/prompt-targets/{elsewhere}", f.agent);
    assert_eq!(server.as_user("PUT", &path, &admin.token, json!({})).await.0, 404, "cannot see the other");
    let membership = format!("/api/v1/workspaces/{other_ws}/members/{}", admin.id);
    assert_eq!(server.admin("PUT", &membership, json!({"role": "operator"})).await.0, 204);
    assert_eq!(server.as_user("PUT", &path, &admin.token, json!({})).await.0, 403, "administers one of the two only");
    assert_eq!(server.as_user("PUT", &path, &operator.token, json!({})).await.0, 403, "operates the first only");
    let (status, body) = server.admin("PUT", &path, json!({})).await;
    assert_eq!(status, 200, "the server admin administers both: {body}");
    assert_eq!(server.as_user("DELETE", &path, &operator.token, json!({})).await.0, 403, "an operator cannot");
    assert_eq!(server.as_user("DELETE", &path, &admin.token, json!({})).await.0, 204, "an admin of the first can");

    // The outsider's own listing shows nothing of the team's.
    let (_, listed) = server.as_user("GET", "/api/v1/agents", &outsider.token, json!({})).await;
    assert_eq!(listed["agents"], json!([]));

    // Sessions, schedules and webhooks: their operators delete them.
    let spare_session = server.create_session(&f.agent).await;
    for (path, kind) in [
        (format!("/api/v1/schedules/{}", f.schedule), "schedule"),
        (format!("/api/v1/webhooks/{}", f.webhook), "webhook"),
        (format!("/api/v1/sessions/{spare_session}"), "session"),
    ] {
        assert_eq!(server.as_user("DELETE", &path, &outsider.token, json!({})).await.0, 404, "{kind}");
        assert_eq!(server.as_user("DELETE", &path, &viewer.token, json!({})).await.0, 403, "{kind}");
        assert_eq!(server.as_user("DELETE", &path, &operator.token, json!({})).await.0, 204, "{kind}");
        assert_eq!(server.as_user("GET", &path, &admin.token, json!({})).await.0, 404, "{kind} deleted");
    }

    // Sleep and delete: admins only.
    for (level, user) in roles {
        let status =
            server.as_user("POST", &format!("/api/v1/agents/{}/sleep", f.agent), &user.token, json!({})).await.0;
        let expected = match level {
            Need::Public => 404,
            level if level < Need::Admin => 403,
            _ => 200,
        };
        assert_eq!(status, expected, "sleep as {level:?}");
    }
    let agent_path = format!("/api/v1/agents/{}", f.agent);
    assert_eq!(server.as_user("DELETE", &agent_path, &operator.token, json!({})).await.0, 403);
    assert_eq!(server.as_user("DELETE", &agent_path, &admin.token, json!({})).await.0, 204);

    // Server-admin only.
    let body = json!({"username": "x1", "password": PASSWORD});
    assert_eq!(server.as_user("POST", "/api/v1/users", &admin.token, body).await.0, 403);

    // The audit log recorded who did what.
    let (status, audit) =
        server.as_user("GET", &format!("/api/v1/workspaces/{}/audit", f.ws), &admin.token, json!({})).await;
    assert_eq!(status, 200);
    let actions: Vec<&str> =
        audit["records"].as_array().expect("records").iter().filter_map(|r| r["action"].as_str()).collect();
    for action in [
        "agent.deleted",
        "agent.slept",
        "agent.created",
        "member.added",
        "workspace.created",
        "agent.prompt_target_added",
        "agent.prompt_target_removed",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    server.stop().await;
}

/// `template` with every parameter an id no resource has (`{env_name}`, `{seq}`: valid values).
fn unknown(template: &str) -> String {
    let mut path = template.replace("{env_name}", "SOME_VARIABLE").replace("{seq}", "1");
    while let Some(start) = path.find('{') {
        let end = path[start..].find('}').map_or(path.len(), |e| start + e + 1);
        path.replace_range(start..end, &uuid::Uuid::new_v4().to_string());
    }
    path
}

#[tokio::test]
async fn without_credentials_every_protected_route_answers_401_and_unknown_or_malformed_ids_404() {
    let server = InProcess::start().await;
    let operations = operations();
    for (method, template, need) in &operations {
        let path = unknown(template);
        if *need != Need::Public {
            let (status, body) = server.as_user(method, &path, "", json!({})).await;
            assert_eq!(status, 401, "{method} {template} without credentials: {body}");
            assert_documented(method, template, status, &body);
        }
        if !template.contains('{') {
            continue;
        }
        // Unknown ids, as the server admin (who sees everything there is): 404.
        let valid = body(method, template, &uuid::Uuid::new_v4().to_string());
        let (status, answer) = server.as_user(method, &path, ADMIN_TOKEN, valid.clone()).await;
        assert_eq!(status, 404, "{method} {template} with unknown ids: {answer}");
        assert_documented(method, template, status, &answer);
        // A malformed id names no resource either: 404, as an unknown one (no route tells them apart).
        for name in ["id", "user_id", "secret_id", "grant_id", "source_id", "target_id"] {
            let placeholder = format!("{{{name}}}");
            if !template.contains(&placeholder) {
                continue;
            }
            let path = unknown(&template.replace(&placeholder, "not-an-id"));
            let (status, answer) = server.as_user(method, &path, ADMIN_TOKEN, valid.clone()).await;
            assert_eq!(status, 404, "{method} {template} with {name} malformed: {answer}");
            assert_documented(method, template, status, &answer);
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_is_not_json_or_not_the_operations_shape_answers_400_on_every_route_that_takes_one() {
    let server = InProcess::start().await;
    let target = make_user(&server, "zoe").await;
    let f = fixture(&server, target).await;
    let document = agenthold_server::api::openapi::document();
    let mut checked = 0;
    for (method, template, _) in operations() {
        let operation = &document["paths"][&template][method.to_lowercase()];
        let Some(content) = operation["requestBody"]["content"].as_object() else { continue };
        // A webhook's body is the sender's own, checked against its signature; the MCP route
        // answers only a harness's own credential (401 before any body is read).
        if !content.contains_key("application/json")
            || ["/api/v1/hooks/{id}", "/api/v1/mcp"].contains(&template.as_str())
        {
            continue;
        }
        let path = f.fill(&template);
        let headers = [("authorization", format!("Bearer {ADMIN_TOKEN}"))];
        for (what, body) in [("not JSON", "{\"unclosed"), ("of the wrong type", "[1, 2, 3]")] {
            let reply = server.request(&method, &path, &headers, Some(body)).await;
            assert_eq!(reply.status, 400, "{method} {template} with a body {what}: {}", reply.body);
            assert_documented(&method, &template, reply.status, &reply.body);
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked} bodies checked");
    server.stop().await;
}
