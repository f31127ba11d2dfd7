//! People and boundaries against a real server process: the last admin, revoked tokens, logins
//! and their throttling, browser sessions. (The authorization matrix of every route runs
//! in-process: `routes_matrix`.)

use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::TestServer;

const PASSWORD: &str = "a long enough password";

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
