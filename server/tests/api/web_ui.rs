//! The browser UI: the built files are served at `/` with a strict Content-Security-Policy, the
//! UI's own routes get `index.html`, unknown API routes stay JSON 404s, and a browser session can
//! ask `GET /api/v1/me` for its CSRF token after a reload (an API token gets none).

use std::io::{Read, Write};

use serde_json::json;

use crate::support::TestServer;

const PASSWORD: &str = "a long enough password";

/// A plain `GET` over HTTP/1.1: the status line and headers (lower-cased names), and the body.
fn get(url: &str, path: &str) -> (String, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    (head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test]
async fn the_ui_is_served_with_a_strict_policy_and_api_routes_stay_json() {
    let dist = std::env::temp_dir().join(format!("ah-web-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dist.join("assets")).expect("dist");
    std::fs::write(
        dist.join("index.html"),
        "<!doctype html><title>agenthold ui</title><meta property=csp-nonce nonce=\"__CSP_NONCE__\">",
    )
    .expect("index");
    std::fs::write(dist.join("assets/app-1234.js"), "console.log(1)").expect("asset");
    let server = TestServer::start_with(&[("AGENTHOLD_WEB_DIR", dist.to_str().expect("utf-8"))]).await;
    let url = server.url.clone();
    let (head, body) = tokio::task::spawn_blocking(move || {
        let root = get(&url, "/");
        let again = get(&url, "/index.html");
        let route = get(&url, "/agents/abc/sessions/def");
        let asset = get(&url, "/assets/app-1234.js");
        let missing = get(&url, "/assets/nope.js");
        let api = get(&url, "/api/v1/nope");
        let escape = get(&url, "/../../etc/passwd");
        ((root.0, route.0, asset.0, missing.0, api.0, escape.0), (root.1, route.1, asset.1, api.1, escape.1, again.1))
    })
    .await
    .expect("requests");
    let (root, route, asset, missing, api, escape) = head;
    for (what, head) in [("/", &root), ("a UI route", &route), ("an asset", &asset)] {
        assert!(head.starts_with("http/1.1 200"), "{what}: {head}");
        assert!(
            head.contains("content-security-policy: default-src 'self'; script-src 'self'; style-src 'self'"),
            "{what}: {head}"
        );
        assert!(head.contains("x-content-type-options: nosniff"), "{what}: {head}");
    }
    assert!(root.contains("content-type: text/html"), "{root}");
    assert!(asset.contains("content-type: text/javascript") && asset.contains("immutable"), "{asset}");
    for head in [&root, &route, &asset] {
        assert!(
            head.contains("img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'"),
            "{head}"
        );
    }
    // index.html: a fresh nonce per answer, in the page and in the policy (for the terminal's
    // run-time <style> elements); scripts never get one.
    let nonce = |body: &str| body.split("nonce=\"").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_owned);
    let (first, second) = (nonce(&body.0).expect("a nonce"), nonce(&body.1).expect("a nonce"));
    assert!(first.len() == 32 && first != second && !body.0.contains("__CSP_NONCE__"), "{first} {second}");
    assert!(root.contains(&format!("style-src 'self' 'nonce-{first}';")), "{root}");
    assert!(!root.contains("script-src 'self' 'nonce"), "{root}");
    assert!(body.5.starts_with("<!doctype html><title>agenthold ui</title>"), "/index.html: {}", body.5);
    assert!(body.0.starts_with("<!doctype html><title>agenthold ui</title>"), "{}", body.0);
    assert!(body.1.starts_with("<!doctype html><title>agenthold ui</title>"), "the UI's routes get index.html");
    assert_eq!(body.2, "console.log(1)");
    assert!(missing.starts_with("http/1.1 404"), "{missing}");
    assert!(api.starts_with("http/1.1 404") && api.contains("application/json"), "{api}");
    assert!(body.3.contains("NOT_FOUND"), "{}", body.3);
    assert!(!body.4.contains("root:"), "{}", body.4);
    assert!(escape.starts_with("http/1.1 200") || escape.starts_with("http/1.1 404"), "{escape}");
    let _ = std::fs::remove_dir_all(dist);
}

#[tokio::test]
async fn a_browser_session_reads_its_csrf_token_from_me_and_a_token_does_not() {
    let server = TestServer::start().await;
    let (status, body) = server.post("/api/v1/users", json!({"username": "wendy", "password": PASSWORD})).await;
    assert_eq!(status, 201, "{body}");
    let login = json!({"username": "wendy", "password": PASSWORD});
    let (status, cookie, session) = server.raw_with_headers("POST", "/api/v1/auth/login", None, &[], login).await;
    assert_eq!(status, 200, "{session}");
    let cookie = cookie.split(';').next().unwrap_or_default().to_owned();
    let csrf = session["csrf_token"].as_str().expect("csrf").to_owned();

    // After a reload the page has only the cookie.
    let (status, _, me) =
        server.raw_with_headers("GET", "/api/v1/me", None, &[("cookie", cookie.clone())], json!(null)).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["username"], "wendy");
    assert_eq!(me["csrf_token"], csrf, "{me}");
    // ... and with it, changes work.
    let as_browser =
        [("cookie", cookie.clone()), ("x-csrf-token", me["csrf_token"].as_str().expect("csrf").to_owned())];
    let (status, _, token) =
        server.raw_with_headers("POST", "/api/v1/tokens", None, &as_browser, json!({"name": "script"})).await;
    assert_eq!(status, 201, "{token}");

    let (status, me) = server.get("/api/v1/me").await;
    assert_eq!(status, 200, "{me}");
    assert!(me.get("csrf_token").is_none(), "an API token has no CSRF token: {me}");
}
