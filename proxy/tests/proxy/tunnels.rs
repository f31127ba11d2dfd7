//! Pass-through tunnels (allowed hosts without secrets: TLS end to end, the proxy sees bytes)
//! and plain-HTTP forwarding (allowed hosts only, never to secret hosts, never injected).

use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::support::*;

#[tokio::test]
async fn allowed_hosts_get_a_byte_tunnel_with_their_own_certificate() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["registry.example"])],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let root_pem = setup.root.pem.clone();
    let proxy = TestProxy::start(setup, &config).await;
    let stream = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    // The client verifies the registry's own certificate (the proxy's CA is not involved).
    let tls_stream = tls(stream, "registry.example", &root_pem, &[b"http/1.1"]).await.expect("end-to-end TLS");
    let mut client = http1(tls_stream).await;
    let got =
        send(&mut client, get("registry.example", "/pkg", &[("authorization", "Bearer npm-token-of-the-sandbox")]))
            .await;
    assert_eq!(got.status, 200);
    let seen = registry.requests();
    assert_eq!(
        seen[0].one("authorization").as_deref(),
        Some("Bearer npm-token-of-the-sandbox"),
        "bytes pass untouched"
    );
    // A megabyte streams through.
    let got = send(&mut client, get("registry.example", "/big", &[])).await;
    assert_eq!(got.body.len(), 1 << 20);
    // The proxy's CA would not be accepted here: it cannot issue for registry.example.
    let stream = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(tls(stream, "registry.example", &proxy.ca_pem, &[b"http/1.1"]).await.is_err());
    proxy.stop().await;
}

#[tokio::test]
async fn idle_tunnels_are_closed() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let config = json!({
        "ca": setup.ca(),
        "tunnel_idle_timeout_secs": 1,
        "sandboxes": [sandbox_a(&["registry.example"])],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let mut stream = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(DEADLINE, tokio::io::AsyncReadExt::read(&mut stream, &mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(closed, Ok(0) | Err(_)), "the idle tunnel is closed");
    let _ = stream.shutdown().await;
    proxy.stop().await;
}

#[tokio::test]
async fn plain_http_goes_to_allowed_hosts_only_and_never_to_secret_hosts() {
    let setup = Setup::new();
    let plain = StandIn::plain().await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["plain.example", "api.anthropic.com:80"])],
        "upstream_overrides": { "plain.example:80": { "addr": plain.addr.to_string() }, "api.anthropic.com:80": { "addr": plain.addr.to_string() } }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{A_USER}:{A_PASS}"))
    );
    let stream = tokio::net::TcpStream::connect(proxy.addr).await.expect("connect");
    let mut client = http1(stream).await;
    let got = send(
        &mut client,
        get(
            "plain.example",
            "http://plain.example/x?y=1",
            &[("proxy-authorization", &auth), ("x-api-key", A_PLACEHOLDER)],
        ),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    let seen = plain.requests();
    assert_eq!(seen[0].path, "/x?y=1");
    assert_eq!(seen[0].one("host").as_deref(), Some("plain.example"));
    assert!(seen[0].all("proxy-authorization").is_empty());
    assert_eq!(seen[0].one("x-api-key").as_deref(), Some(A_PLACEHOLDER), "never injected over plain HTTP");

    let got = send(
        &mut client,
        get(
            "api.anthropic.com",
            "http://api.anthropic.com/v1/messages",
            &[("proxy-authorization", &auth), ("x-api-key", A_PLACEHOLDER)],
        ),
    )
    .await;
    assert_eq!(got.status, 403, "secret host over plain HTTP");
    let got = send(&mut client, get("evil.example", "http://evil.example/", &[("proxy-authorization", &auth)])).await;
    assert_eq!(got.status, 403);
    let got = send(&mut client, get("plain.example", "http://plain.example/", &[])).await;
    assert_eq!(got.status, 407);
    assert_eq!(plain.requests().len(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn a_sandbox_holds_a_bounded_number_of_tunnels() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let mut b = sandbox_b();
    b["allow"] = json!(["registry.example"]);
    let config = json!({
        "ca": setup.ca(),
        "max_connections_per_sandbox": 1,
        "sandboxes": [sandbox_a(&["registry.example"]), b],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let first = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("first tunnel");
    let refused = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect_err("second");
    assert_eq!(refused.status, 429);
    let other = connect(proxy.addr, "registry.example:443", Some((B_USER, B_PASS)))
        .await
        .expect("another sandbox is not affected");
    drop(first);
    eventually("the slot to be released", || async {
        connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.is_ok()
    })
    .await;
    drop(other);
    proxy.stop().await;
}
