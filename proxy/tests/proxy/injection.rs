//! Injection: the real value arrives in exactly the right header, nowhere else; responses
//! stream; reflected values are scrubbed; redirects are passed through, not followed;
//! WebSocket handshakes are injected, frames are not.

use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

async fn anthropic_proxy() -> (TestProxy, StandIn) {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com", "api.openai.com"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&[]), sandbox_b()],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si), "api.openai.com:443": setup.over(&si) }
    });
    (TestProxy::start(setup, &config).await, si)
}

#[tokio::test]
async fn the_placeholder_becomes_the_value_in_its_header_only() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let got = send(
        &mut client,
        get(
            "api.anthropic.com",
            &format!("/v1/messages?beta=true&k={A_PLACEHOLDER}"),
            &[("x-api-key", A_PLACEHOLDER), ("x-other", A_PLACEHOLDER), ("anthropic-version", "2023-06-01")],
        ),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    let seen = si.requests();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.one("x-api-key").as_deref(), Some(A_SECRET));
    assert_eq!(request.one("x-other").as_deref(), Some(A_PLACEHOLDER), "other headers untouched");
    assert!(request.path.contains(A_PLACEHOLDER) && !request.path.contains(A_SECRET), "query untouched");
    assert_eq!(request.one("host").as_deref(), Some("api.anthropic.com"));
    assert!(request.all("proxy-authorization").is_empty());

    // Keep-alive: a second request on the same tunnel, bearer format on the other host.
    let got = send(&mut client, get("api.anthropic.com", "/v1/models", &[])).await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests()[1].all("x-api-key").len(), 0, "no header, nothing added");

    let mut openai = intercepted(&proxy, "api.openai.com:443", "api.openai.com", (A_USER, A_PASS)).await;
    let got = send(
        &mut openai,
        get("api.openai.com", "/v1/responses", &[("authorization", &format!("Bearer {A_PLACEHOLDER}"))]),
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests()[2].one("authorization"), Some(format!("Bearer {A_SECRET}")));
    proxy.stop().await;
}

#[tokio::test]
async fn a_body_is_never_substituted() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let req = hyper::Request::post("/v1/messages")
        .header("host", "api.anthropic.com")
        .header("x-api-key", A_PLACEHOLDER)
        .body(http_body_util::Full::new(bytes::Bytes::from(format!("{{\"k\":\"{A_PLACEHOLDER}\"}}"))))
        .expect("request");
    let got = send(&mut client, req).await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests()[0].one("x-api-key").as_deref(), Some(A_SECRET));
    proxy.stop().await;
}

#[tokio::test]
async fn reflected_values_are_scrubbed_from_response_headers() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let got = send(&mut client, get("api.anthropic.com", "/v1/reflect", &[("x-api-key", A_PLACEHOLDER)])).await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests()[0].one("x-api-key").as_deref(), Some(A_SECRET), "the upstream got the value");
    assert_eq!(got.headers["x-echo-x-api-key"], A_PLACEHOLDER, "and the sandbox got the placeholder back");
    for value in got.headers.values() {
        assert!(!String::from_utf8_lossy(value.as_bytes()).contains(A_SECRET));
    }
    proxy.stop().await;
}

#[tokio::test]
async fn redirects_are_passed_through_not_followed() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let got = send(&mut client, get("api.anthropic.com", "/v1/../redirect", &[])).await;
    assert_eq!(got.status, 400, "dot segments are refused");
    let got = send(&mut client, get("api.anthropic.com", "/redirect", &[])).await;
    assert_eq!(got.status, 302);
    assert_eq!(got.headers["location"], "https://evil.example/steal");
    assert_eq!(si.requests().len(), 1, "only the one request reached an upstream");
    assert!(proxy.network.dials().iter().all(|a| *a == si.addr), "nothing but the stand-in was dialled");
    proxy.stop().await;
}

#[tokio::test]
async fn server_sent_events_stream_through() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let response = tokio::time::timeout(DEADLINE, client.send_request(get("api.anthropic.com", "/sse", &[])))
        .await
        .expect("head in time")
        .expect("response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    // The first event arrives while the stand-in still holds back the second one.
    let first =
        tokio::time::timeout(DEADLINE, body.frame()).await.expect("first event in time").expect("frame").expect("ok");
    assert_eq!(first.into_data().expect("data").as_ref(), b"data: one\n\n");
    si.sse_release.send(()).await.expect("release");
    let second =
        tokio::time::timeout(DEADLINE, body.frame()).await.expect("second event in time").expect("frame").expect("ok");
    assert_eq!(second.into_data().expect("data").as_ref(), b"data: two\n\n");
    proxy.stop().await;
}

#[tokio::test]
async fn websocket_handshake_is_injected_frames_are_not() {
    let (proxy, si) = anthropic_proxy().await;
    let mut client = intercepted(&proxy, "api.openai.com:443", "api.openai.com", (A_USER, A_PASS)).await;
    let req = get(
        "api.openai.com",
        "/v1/ws",
        &[("authorization", &format!("Bearer {A_PLACEHOLDER}")), ("upgrade", "websocket"), ("connection", "upgrade")],
    );
    let response = tokio::time::timeout(DEADLINE, client.send_request(req)).await.expect("in time").expect("response");
    assert_eq!(response.status(), 101);
    let upgraded =
        tokio::time::timeout(DEADLINE, hyper::upgrade::on(response)).await.expect("in time").expect("upgraded");
    let mut io = hyper_util::rt::TokioIo::new(upgraded);
    io.write_all(A_PLACEHOLDER.as_bytes()).await.expect("write frame");
    let mut echoed = vec![0u8; A_PLACEHOLDER.len()];
    tokio::time::timeout(DEADLINE, io.read_exact(&mut echoed)).await.expect("echo in time").expect("echo");
    assert_eq!(echoed, A_PLACEHOLDER.as_bytes(), "frames pass untouched");
    assert_eq!(si.requests()[0].one("authorization"), Some(format!("Bearer {A_SECRET}")), "handshake injected");
    proxy.stop().await;
}

/// A request the proxy answers itself (a token refresh only the server may make): the configured
/// body, never sent upstream; other paths of the same host go on as usual; another sandbox is not
/// answered.
#[tokio::test]
async fn a_configured_answer_is_given_by_the_proxy_and_never_sent_upstream() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["chatgpt.com"]).await;
    let mut a = sandbox_a(&[]);
    a["answer"] =
        json!([{ "host": "chatgpt.com", "path": "/oauth/token", "body": "{\"access_token\":\"placeholder\"}" }]);
    let mut b = sandbox_b();
    b["allow"] = json!(["chatgpt.com"]);
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [a, b],
        "upstream_overrides": { "chatgpt.com:443": setup.over(&si) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    for _ in 0..50 {
        let mut client = intercepted(&proxy, "chatgpt.com:443", "chatgpt.com", (A_USER, A_PASS)).await;
        let got = send(&mut client, get("chatgpt.com", "/oauth/token", &[])).await;
        assert_eq!((got.status, got.body.as_str()), (200, "{\"access_token\":\"placeholder\"}"));
    }
    assert!(si.requests().is_empty(), "fifty asked, none reached the provider: {:?}", si.requests());
    let mut client = intercepted(&proxy, "chatgpt.com:443", "chatgpt.com", (A_USER, A_PASS)).await;
    let got = send(&mut client, get("chatgpt.com", "/backend-api/me", &[])).await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests().len(), 1, "other paths go on");
    // Sandbox B has no answer: its request is a byte tunnel to the provider (not intercepted).
    assert!(connect(proxy.addr, "chatgpt.com:443", Some((B_USER, B_PASS))).await.is_ok());
    // A bad answer is refused with the rest of the file.
    let mut bad = sandbox_a(&[]);
    bad["answer"] = json!([{ "host": "chatgpt.com", "path": "/oauth/token?x=1", "body": "{}" }]);
    let bad_file: agenthold_proxy::config::ConfigFile =
        serde_json::from_value(json!({"ca": proxy.setup.ca(), "sandboxes": [bad]})).expect("parses");
    let refused = agenthold_proxy::policy::Policy::compile(bad_file, None).expect_err("a query in the path");
    assert!(refused.to_string().contains("answer 0"), "{refused}");
    proxy.stop().await;
}
