//! People and boundaries: users, logins, tokens, workspaces and roles. The authorization matrix
//! is generated from the OpenAPI document's access requirements, which must list every route of
//! the router (read from its source, so a new route without an entry fails), and checks each for
//! every role: none (a member of another workspace), viewer, operator, admin — and that the document
//! lists every status the matrix sees.

use std::time::Duration;

use agenthold_server::api::openapi::Access as Need;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::TestServer;

const PASSWORD: &str = "a long enough password";

/// Every operation of the OpenAPI document: (METHOD, path, what it needs).
fn operations() -> Vec<(String, String, Need)> {
    let document = agenthold_server::api::openapi::document();
    let mut operations = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let access = operation["x-agenthold-access"].as_str().expect("access");
            let need = Need::parse(access).unwrap_or_else(|| panic!("unknown access {access}"));
            let public = operation["security"] == json!([]);
            assert_eq!(public, need == Need::Public, "{method} {path}: security requirements match the access");
            operations.push((method.to_uppercase(), path.clone(), need));
        }
    }
    operations.sort();
    operations
}

/// Asserts the document lists `status` among the answers of `METHOD template`.
fn assert_documented(method: &str, template: &str, status: u16) {
    let document = agenthold_server::api::openapi::document();
    let responses = &document["paths"][template][method.to_lowercase()]["responses"];
    assert!(
        responses.get(status.to_string()).is_some(),
        "{method} {template} answered {status}, which the OpenAPI document does not list"
    );
}

/// The routes the router declares: `(METHOD, path)` pairs read from its source.
fn declared_routes() -> Vec<(String, String)> {
    let source = include_str!("../../src/api/mod.rs");
    let mut routes = Vec::new();
    // Whitespace-insensitive: rustfmt may break a `.route(` call over lines.
    let joined = source.split_whitespace().collect::<Vec<_>>().join(" ").replace(".route( ", ".route(");
    for chunk in joined.split(".route(\"").skip(1) {
        let Some((path, rest)) = chunk.split_once('"') else { continue };
        let until_next = rest.split(".route(").next().unwrap_or(rest);
        for method in ["get", "post", "put", "delete", "patch"] {
            if until_next.contains(&format!("{method}(")) {
                routes.push((method.to_uppercase(), path.to_owned()));
            }
        }
    }
    routes.sort();
    routes
}

#[test]
fn every_route_is_in_the_openapi_document_with_its_security() {
    let documented: Vec<(String, String)> = operations().into_iter().map(|(m, p, _)| (m, p)).collect();
    assert_eq!(
        declared_routes(),
        documented,
        "annotate new handlers with #[utoipa::path] and list them in api/openapi.rs (the matrix reads it)"
    );
}

/// A signed-in user of the test: an API token got through a browser login.
pub(crate) struct User {
    pub(crate) id: String,
    pub(crate) token: String,
}

pub(crate) async fn make_user(server: &TestServer, name: &str) -> User {
    let (status, created) = server.post("/api/v1/users", json!({"username": name, "password": PASSWORD})).await;
    assert_eq!(status, 201, "{created}");
    let (status, headers, login) = server.login(name, PASSWORD).await;
    assert_eq!(status, 200, "{login}");
    let cookie = headers.split(';').next().unwrap_or_default().to_owned();
    let csrf = login["csrf_token"].as_str().expect("csrf").to_owned();
    // Without the CSRF header a cookie cannot change anything…
    let (status, _) = server.with_cookie("POST", "/api/v1/tokens", &cookie, None, json!({"name": "cli"})).await;
    assert_eq!(status, 403);
    // …with it, it can.
    let (status, token) =
        server.with_cookie("POST", "/api/v1/tokens", &cookie, Some(&csrf), json!({"name": "cli"})).await;
    assert_eq!(status, 201, "{token}");
    User {
        id: created["id"].as_str().expect("id").to_owned(),
        token: token["token"].as_str().expect("token").to_owned(),
    }
}

/// The HTTP status of a WebSocket handshake (101 when it succeeds).
async fn ws_status(server: &TestServer, path: &str, token: &str) -> u16 {
    let url = format!("{}{path}", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    if !token.is_empty() {
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().expect("header"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("handshake: {other}"),
    }
}

/// The id of the session's first question still waiting for a person.
async fn wait_question(server: &TestServer, session: &str) -> String {
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

#[tokio::test]
async fn roles_decide_what_members_may_do_and_other_workspaces_are_invisible() {
    let server = TestServer::start().await;
    let outsider = make_user(&server, "dave").await;
    let viewer = make_user(&server, "alice").await;
    let operator = make_user(&server, "bob").await;
    let admin = make_user(&server, "carol").await;
    let target = make_user(&server, "zoe").await; // whose membership the member routes change

    let (status, workspace) = server.post("/api/v1/workspaces", json!({"name": "team"})).await;
    assert_eq!(status, 201);
    let ws = workspace["id"].as_str().expect("id").to_owned();
    for (user, role) in [(&viewer, "viewer"), (&operator, "operator"), (&admin, "admin"), (&target, "viewer")] {
        let (status, body) =
            server.put(&format!("/api/v1/workspaces/{ws}/members/{}", user.id), json!({"role": role})).await;
        assert_eq!(status, 204, "{body}");
    }
    let agent = server.create_agent(json!({"workspace_id": ws})).await;
    // An agent the first may be allowed to prompt (the prompt-targets routes).
    let prompted = server.create_agent(json!({"workspace_id": ws})).await;
    // Secrets: one the DELETE route deletes, one attached (detached, then attached again).
    let mut secret_ids = Vec::new();
    for name in ["doomed", "kept"] {
        let body = json!({"name": name, "preset": "anthropic", "value": "sk-ant-matrix"});
        let (status, secret) = server.post(&format!("/api/v1/workspaces/{ws}/secrets"), body).await;
        assert_eq!(status, 201, "{secret}");
        secret_ids.push(secret["id"].as_str().expect("id").to_owned());
    }
    let (doomed, kept) = (secret_ids[0].clone(), secret_ids[1].clone());
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(server.put(&attach, json!({"secret_id": kept})).await.0, 200);
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text hello").await;
    server.wait_turns(&session, 1, Duration::from_secs(90)).await;
    // A session grant in that session (the grants routes): approved for the session while the
    // agent asked, then the agent back to its default posture.
    let posture = format!("/api/v1/agents/{agent}");
    assert_eq!(server.as_user("PATCH", &posture, &server.token, json!({"posture": "approval"})).await.0, 200);
    server.prompt(&session, "ask execute make").await;
    let grant = wait_question(&server, &session).await;
    let answered =
        server.post(&format!("/api/v1/permissions/{grant}/answer"), json!({"decision": "allow_for_session"})).await;
    assert_eq!(answered.0, 200, "{}", answered.1);
    server.wait_turns(&session, 2, Duration::from_secs(90)).await;
    assert_eq!(server.as_user("PATCH", &posture, &server.token, json!({"posture": ""})).await.0, 200);
    // A question waiting for a person, in the workspace (an agent asking for approval).
    let asking = server.create_agent(json!({"workspace_id": ws, "posture": "approval"})).await;
    let asking_session = server.create_session(&asking).await;
    server.prompt(&asking_session, "ask execute make").await;
    let permission = wait_question(&server, &asking_session).await;

    // A schedule (paused) and a webhook of the agent's.
    let body = json!({"name": "nightly", "cron": "0 3 * * *", "prompt": "text hi", "paused": true});
    let (status, schedule) = server.post(&format!("/api/v1/agents/{agent}/schedules"), body).await;
    assert_eq!(status, 201, "{schedule}");
    let schedule = schedule["id"].as_str().expect("id").to_owned();
    let body = json!({"name": "hook", "template": "text {{ . }}"});
    let (status, webhook) = server.post(&format!("/api/v1/agents/{agent}/webhooks"), body).await;
    assert_eq!(status, 201, "{webhook}");
    let webhook = webhook["webhook"]["id"].as_str().expect("id").to_owned();

    let roles =
        [(Need::Public, &outsider), (Need::Viewer, &viewer), (Need::Operator, &operator), (Need::Admin, &admin)];
    let operations = operations();
    for (method, template, need) in operations.iter().filter(|(_, _, n)| (Need::Viewer..=Need::Admin).contains(n)) {
        let (method, template, need) = (method.as_str(), template.as_str(), *need);
        let destructive = matches!(
            template,
            "/api/v1/agents/{id}" | "/api/v1/sessions/{id}" | "/api/v1/schedules/{id}" | "/api/v1/webhooks/{id}"
        ) && method == "DELETE";
        if destructive || template.ends_with("/sleep") {
            continue; // destructive: checked below, after the others
        }
        for (level, user) in roles {
            let path = template
                .replace("/agents/{id}", &format!("/agents/{agent}"))
                .replace("/sessions/{id}", &format!("/sessions/{session}"))
                .replace("/permissions/{id}", &format!("/permissions/{permission}"))
                .replace("/workspaces/{id}", &format!("/workspaces/{ws}"))
                .replace("/schedules/{id}", &format!("/schedules/{schedule}"))
                .replace("/webhooks/{id}", &format!("/webhooks/{webhook}"))
                .replace("{user_id}", &target.id)
                .replace("{target_id}", &prompted)
                .replace("{secret_id}", &doomed)
                .replace("{grant_id}", &grant)
                .replace("{source_id}", &prompted)
                .replace("{env_name}", "ANTHROPIC_API_KEY")
                .replace("{seq}", "1");
            let status = if template.ends_with("/stream") || template.ends_with("/terminal") {
                ws_status(&server, &format!("{path}?after=0"), &user.token).await
            } else {
                let body = match template {
                    t if t.ends_with("/prompt") => json!({"text": "text again"}),
                    t if t.ends_with("/members/{user_id}") && method == "PUT" => json!({"role": "viewer"}),
                    t if t.ends_with("/secrets/{env_name}") && method == "PUT" => json!({"secret_id": kept}),
                    t if t.ends_with("/answer") => json!({"decision": "allow"}),
                    _ => json!({}),
                };
                server.as_user(method, &path, &user.token, body).await.0
            };
            assert_documented(method, template, status);
            let expected_denial = if level == Need::Public { 404 } else { 403 };
            if level >= need {
                assert!(
                    ![401, 403, 404].contains(&status) && status < 500,
                    "{method} {template} as {level:?}: {status}"
                );
            } else {
                assert_eq!(status, expected_denial, "{method} {template} as {level:?}");
            }
        }
    }

    // Without credentials, every route but the public ones answers 401.
    for (method, template, need) in &operations {
        if *need == Need::Public {
            continue;
        }
        let path = template
            .replace("{id}", &agent)
            .replace("{user_id}", &target.id)
            .replace("{target_id}", &prompted)
            .replace("{secret_id}", &doomed)
            .replace("{env_name}", "ANTHROPIC_API_KEY")
            .replace("{seq}", "1");
        let status = if template.ends_with("/stream") || template.ends_with("/terminal") {
            ws_status(&server, &format!("{path}?after=0"), "").await
        } else {
            server.raw_with_headers(method, &path, None, &[], json!({})).await.0
        };
        assert_eq!(status, 401, "{method} {template} without credentials");
        assert_documented(method, template, status);
    }

    // Prompt targets: putting an agent on another's list needs the admin role for both (issue
    // 15: someone who administers both). An admin of the prompting agent who only operates the
    // other (a second workspace holds it) cannot; an operator of the first cannot either.
    let (status, other_ws) = server.post("/api/v1/workspaces", json!({"name": "elsewhere"})).await;
    assert_eq!(status, 201);
    let other_ws = other_ws["id"].as_str().expect("id").to_owned();
    let elsewhere = server.create_agent(json!({"workspace_id": other_ws})).await;
    let path = format!("/api/v1/agents/{agent}/prompt-targets/{elsewhere}");
    assert_eq!(server.as_user("PUT", &path, &admin.token, json!({})).await.0, 404, "cannot see the other");
    let (status, _) =
        server.put(&format!("/api/v1/workspaces/{other_ws}/members/{}", admin.id), json!({"role": "operator"})).await;
    assert_eq!(status, 204);
    assert_eq!(server.as_user("PUT", &path, &admin.token, json!({})).await.0, 403, "administers one of the two only");
    assert_eq!(server.as_user("PUT", &path, &operator.token, json!({})).await.0, 403, "operates the first only");
    let (status, body) = server.put_json(&path, json!({})).await;
    assert_eq!(status, 200, "the server admin administers both: {body}");
    assert_eq!(
        server.as_user("DELETE", &path, &operator.token, json!({})).await.0,
        403,
        "an operator cannot take it off"
    );
    assert_eq!(
        server.as_user("DELETE", &path, &admin.token, json!({})).await.0,
        204,
        "an admin of the first takes it off"
    );

    // The outsider's own listing shows nothing of the team's.
    let (_, listed) = server.as_user("GET", "/api/v1/agents", &outsider.token, json!({})).await;
    assert_eq!(listed["agents"], json!([]));

    // Sessions, schedules and webhooks: their operators delete them.
    let spare_session = server.create_session(&agent).await;
    for (path, kind) in [
        (format!("/api/v1/schedules/{schedule}"), "schedule"),
        (format!("/api/v1/webhooks/{webhook}"), "webhook"),
        (format!("/api/v1/sessions/{spare_session}"), "session"),
    ] {
        assert_eq!(server.as_user("DELETE", &path, &outsider.token, json!({})).await.0, 404, "{kind}");
        assert_eq!(server.as_user("DELETE", &path, &viewer.token, json!({})).await.0, 403, "{kind}");
        assert_eq!(server.as_user("DELETE", &path, &operator.token, json!({})).await.0, 204, "{kind}");
        assert_eq!(server.as_user("GET", &path, &admin.token, json!({})).await.0, 404, "{kind} deleted");
    }

    // Sleep and delete: admins only.
    for (level, user) in roles {
        let status = server.as_user("POST", &format!("/api/v1/agents/{agent}/sleep"), &user.token, json!({})).await.0;
        let expected = if level == Need::Public {
            404
        } else if level < Need::Admin {
            403
        } else {
            200
        };
        assert_eq!(status, expected, "sleep as {level:?}");
    }
    assert_eq!(server.as_user("DELETE", &format!("/api/v1/agents/{agent}"), &operator.token, json!({})).await.0, 403);
    assert_eq!(server.as_user("DELETE", &format!("/api/v1/agents/{agent}"), &admin.token, json!({})).await.0, 204);

    // Server-admin only.
    let status =
        server.as_user("POST", "/api/v1/users", &admin.token, json!({"username": "x1", "password": PASSWORD})).await.0;
    assert_eq!(status, 403);

    // The audit log recorded who did what.
    let (status, audit) =
        server.as_user("GET", &format!("/api/v1/workspaces/{ws}/audit"), &admin.token, json!({})).await;
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
}

#[tokio::test]
async fn the_last_admin_stays_and_revoked_tokens_stop_at_once() {
    let server = TestServer::start().await;
    let user = make_user(&server, "erin").await;
    let (_, me) = server.as_user("GET", "/api/v1/me", &user.token, json!({})).await;
    let personal = me["workspaces"][0]["workspace_id"].as_str().expect("personal workspace").to_owned();
    let status = server
        .as_user("DELETE", &format!("/api/v1/workspaces/{personal}/members/{}", user.id), &user.token, json!({}))
        .await;
    assert_eq!((status.0, status.1["error"]["code"].as_str()), (409, Some("LAST_ADMIN")));

    // A stream open with a token closes once the token is revoked.
    let agent_body = json!({"name": "mine", "harness": "fake"});
    let (status, agent) = server.as_user("POST", "/api/v1/agents", &user.token, agent_body).await;
    assert_eq!(status, 201);
    let agent = agent["id"].as_str().expect("id").to_owned();
    let (status, session) =
        server.as_user("POST", &format!("/api/v1/agents/{agent}/sessions"), &user.token, json!({})).await;
    assert_eq!(status, 201);
    let session = session["id"].as_str().expect("id").to_owned();
    let mut watcher = server.watch_as(&session, &user.token).await;
    let (_, tokens) = server.as_user("GET", "/api/v1/tokens", &user.token, json!({})).await;
    let token_id = tokens["tokens"][0]["id"].as_str().expect("token id").to_owned();
    assert!(tokens.to_string().find(&user.token).is_none(), "token values are never listed");
    let (status, _) = server.as_user("DELETE", &format!("/api/v1/tokens/{token_id}"), &user.token, json!({})).await;
    assert_eq!(status, 204);
    assert_eq!(server.as_user("GET", "/api/v1/me", &user.token, json!({})).await.0, 401);
    assert!(watcher.closes_within(Duration::from_secs(10)).await, "the open stream is closed");
}

#[tokio::test]
async fn logins_fail_alike_for_unknown_users_and_wrong_passwords_and_are_throttled() {
    let server = TestServer::start().await;
    make_user(&server, "frank").await;
    let (unknown, _, body_unknown) = server.login("nobody", PASSWORD).await;
    let (wrong, _, body_wrong) = server.login("frank", "not the password at all").await;
    assert_eq!((unknown, wrong), (401, 401));
    assert_eq!(body_unknown, body_wrong, "no user enumeration");
    let (status, body) = server.post("/api/v1/users", json!({"username": "grace", "password": "short"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("WEAK_PASSWORD")));
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(server.login("frank", "still not the password").await.0);
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert_eq!(server.login("frank", PASSWORD).await.0, 429, "throttled even with the right password");
}

#[tokio::test]
async fn a_browser_session_streams_by_cookie_and_logout_or_expiry_ends_it() {
    let server = TestServer::start_with(&[("AGENTHOLD_SESSION_TTL_SECS", "4")]).await;
    make_user(&server, "hana").await;
    let (status, cookie, login) = server.login("hana", PASSWORD).await;
    assert_eq!(status, 200);
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    let csrf = login["csrf_token"].as_str().expect("csrf").to_owned();

    // The browser's way: the cookie, no token anywhere in a URL.
    let (status, agent) = server
        .with_cookie("POST", "/api/v1/agents", &cookie, Some(&csrf), json!({"name": "web", "harness": "fake"}))
        .await;
    assert_eq!(status, 201, "{agent}");
    let agent = agent["id"].as_str().expect("id").to_owned();
    let (_, session) =
        server.with_cookie("POST", &format!("/api/v1/agents/{agent}/sessions"), &cookie, Some(&csrf), json!({})).await;
    let session = session["id"].as_str().expect("id").to_owned();
    let url = format!("{}/api/v1/sessions/{session}/stream?after=0", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("cookie", cookie.parse().expect("header"));
    // A browser sends its page's origin; a cookie upgrade must come from the server's own.
    request.headers_mut().insert("origin", server.url.parse().expect("header"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("a stream by cookie");

    // Logging out ends the session: the open stream closes, the cookie stops working.
    let (status, _) = server.with_cookie("POST", "/api/v1/auth/logout", &cookie, Some(&csrf), json!({})).await;
    assert_eq!(status, 204);
    let closed = async {
        use futures_util::StreamExt;
        loop {
            match socket.next().await {
                None | Some(Err(_)) | Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    };
    assert!(tokio::time::timeout(Duration::from_secs(10), closed).await.is_ok(), "the stream closes on logout");
    assert_eq!(server.with_cookie("GET", "/api/v1/me", &cookie, None, json!({})).await.0, 401);

    // A session also ends by itself.
    let (_, cookie, _) = server.login("hana", PASSWORD).await;
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    assert_eq!(server.with_cookie("GET", "/api/v1/me", &cookie, None, json!({})).await.0, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while server.with_cookie("GET", "/api/v1/me", &cookie, None, json!({})).await.0 != 401 {
        assert!(tokio::time::Instant::now() < deadline, "the session did not expire");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl TestServer {
    async fn login(&self, username: &str, password: &str) -> (u16, String, Value) {
        self.raw_with_headers(
            "POST",
            "/api/v1/auth/login",
            None,
            &[],
            json!({"username": username, "password": password}),
        )
        .await
    }

    pub(crate) async fn with_cookie(
        &self,
        method: &str,
        path: &str,
        cookie: &str,
        csrf: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let mut headers = vec![("cookie", cookie.to_owned())];
        if let Some(csrf) = csrf {
            headers.push(("x-csrf-token", csrf.to_owned()));
        }
        let (status, _, body) = self.raw_with_headers(method, path, None, &headers, body).await;
        (status, body)
    }

    pub(crate) async fn as_user(&self, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
        let (status, _, body) = self.raw_with_headers(method, path, Some(token), &[], body).await;
        (status, body)
    }

    pub(crate) async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        let token = self.token.clone();
        self.as_user("PUT", path, &token, body).await
    }
}
