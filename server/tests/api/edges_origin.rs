//! Cross-site WebSocket hijacking: a cookie-authenticated upgrade must come from the server's own
//! origin; scripts with a bearer token are not affected.

use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::support::TestServer;

const PASSWORD: &str = "a long enough password";
const PUBLIC_URL: &str = "http://agenthold.test:8080";

/// The status of a WebSocket handshake (101 when it succeeds) with the given headers.
async fn handshake(server: &TestServer, path: &str, headers: &[(&'static str, &str)]) -> u16 {
    let url = format!("{}{path}", server.url.replace("http://", "ws://"));
    let mut request = url.into_client_request().expect("request");
    for (name, value) in headers {
        request.headers_mut().insert(*name, value.parse().expect("header"));
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("handshake: {other}"),
    }
}

#[tokio::test]
async fn cookie_upgrades_from_a_foreign_origin_are_refused_and_from_the_public_origin_accepted() {
    let server = TestServer::start_with(&[("AGENTHOLD_PUBLIC_URL", PUBLIC_URL)]).await;
    let (status, body) = server.post("/api/v1/users", json!({"username": "judy", "password": PASSWORD})).await;
    assert_eq!(status, 201, "{body}");
    let login = json!({"username": "judy", "password": PASSWORD});
    let (status, cookie, session) = server.raw_with_headers("POST", "/api/v1/auth/login", None, &[], login).await;
    assert_eq!(status, 200, "{session}");
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    let csrf = session["csrf_token"].as_str().expect("csrf").to_owned();
    let as_browser = [("cookie", cookie.clone()), ("x-csrf-token", csrf)];
    let create = json!({"name": "web", "harness": "fake"});
    let (status, _, agent) = server.raw_with_headers("POST", "/api/v1/agents", None, &as_browser, create).await;
    assert_eq!(status, 201, "{agent}");
    let agent = agent["id"].as_str().expect("id").to_owned();
    let path = format!("/api/v1/agents/{agent}/sessions");
    let (status, _, session) = server.raw_with_headers("POST", &path, None, &as_browser, json!({})).await;
    assert_eq!(status, 201, "{session}");
    let session = session["id"].as_str().expect("id").to_owned();

    let (status, _, token) =
        server.raw_with_headers("POST", "/api/v1/tokens", None, &as_browser, json!({"name": "script"})).await;
    assert_eq!(status, 201, "{token}");
    let bearer = format!("Bearer {}", token["token"].as_str().expect("token"));
    for path in [format!("/api/v1/sessions/{session}/stream?after=0"), format!("/api/v1/agents/{agent}/terminal")] {
        let evil = [("cookie", cookie.as_str()), ("origin", "http://evil.example:8080")];
        assert_eq!(handshake(&server, &path, &evil).await, 403, "{path}: a foreign origin");
        let no_origin = [("cookie", cookie.as_str())];
        assert_eq!(handshake(&server, &path, &no_origin).await, 403, "{path}: no origin");
        let host_only = [("cookie", cookie.as_str()), ("origin", server.url.as_str())];
        assert_eq!(
            handshake(&server, &path, &host_only).await,
            403,
            "{path}: the Host's origin, not the configured one"
        );
        let public = [("cookie", cookie.as_str()), ("origin", PUBLIC_URL)];
        assert_eq!(handshake(&server, &path, &public).await, 101, "{path}: the configured origin");
        let script = [("authorization", bearer.as_str()), ("origin", "http://evil.example:8080")];
        assert_eq!(handshake(&server, &path, &script).await, 101, "{path}: a bearer token is not checked");
    }
}
