//! The "bad input and attacks" that concern the proxy: identity, allow-list, authority
//! and SNI mismatches, nested CONNECT, numeric/mapped/trailing-dot hosts, internal addresses
//! (refused with no connection made), and credential headers that are not the placeholder.

use serde_json::json;

use crate::support::*;

async fn proxy_with(allow: &[&str]) -> (TestProxy, StandIn) {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(allow), sandbox_b()],
        "upstream_overrides": { "api.anthropic.com:443": setup.over(&si) }
    });
    (TestProxy::start(setup, &config).await, si)
}

#[tokio::test]
async fn missing_or_wrong_credentials_get_407() {
    let (proxy, si) = proxy_with(&[]).await;
    for creds in [None, Some((A_USER, "wrong")), Some(("nobody", A_PASS)), Some((A_USER, B_PASS))] {
        let refused = connect(proxy.addr, "api.anthropic.com:443", creds).await.expect_err("refused");
        assert_eq!(refused.status, 407, "{creds:?}");
        assert!(refused.headers.to_ascii_lowercase().contains("proxy-authenticate: basic"), "{}", refused.headers);
    }
    assert_eq!(si.accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    proxy.stop().await;
}

#[tokio::test]
async fn the_source_address_must_match_when_configured() {
    let setup = Setup::new();
    let a = bound_to(sandbox_a(&[]), "10.9.9.9");
    let b = bound_to(sandbox_b(), "127.0.0.1");
    let config = json!({ "ca": setup.ca(), "sandboxes": [a, b] });
    let proxy = TestProxy::start(setup, &config).await;
    let refused = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect_err("wrong source");
    assert_eq!(refused.status, 407);
    // B's address matches: its CONNECT is accepted (the upstream is not reached: no override).
    let ok = connect(proxy.addr, "api.openai.com:443", Some((B_USER, B_PASS))).await.expect_err("not on B's list");
    assert_eq!(ok.status, 403, "authenticated, then refused by the allow-list");
    proxy.stop().await;
}

#[tokio::test]
async fn hosts_off_the_allow_list_get_403_naming_the_host() {
    let (proxy, _si) = proxy_with(&["registry.npmjs.org"]).await;
    let refused = connect(proxy.addr, "evil.example:443", Some((A_USER, A_PASS))).await.expect_err("refused");
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("evil.example:443") && refused.body.contains("allow-list"), "{}", refused.body);
    let refused = connect(proxy.addr, "registry.npmjs.org:22", Some((A_USER, A_PASS))).await.expect_err("other port");
    assert_eq!(refused.status, 403);
    // Sandbox B may not use A's allow-list.
    let refused = connect(proxy.addr, "registry.npmjs.org:443", Some((B_USER, B_PASS))).await.expect_err("B");
    assert_eq!(refused.status, 403);
    assert!(proxy.network.dials().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn internal_destinations_are_refused_after_resolution_without_connecting() {
    let wire = Tripwire::start().await;
    let port = wire.addr.port();
    let numeric = [
        format!("2130706433:{port}"),
        format!("0177.0.0.1:{port}"),
        format!("0x7f.1:{port}"),
        format!("127.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("[::1]:{port}"),
    ];
    let mut allow: Vec<String> = numeric.to_vec();
    allow.extend([
        format!("sneaky.test:{port}"),
        "169.254.169.254:80".to_owned(),
        "metadata.test:80".to_owned(),
        "mixed.test".to_owned(),
        "dockerhost.test".to_owned(),
        "172.17.0.1".to_owned(),
        "0251.0376.0251.0376:80".to_owned(),
    ]);
    let allow_refs: Vec<&str> = allow.iter().map(String::as_str).collect();
    let (proxy, _si) = proxy_with(&allow_refs).await;
    proxy.network.map("sneaky.test", &["127.0.0.1"]);
    proxy.network.map("metadata.test", &["169.254.169.254"]);
    proxy.network.map("mixed.test", &["93.184.216.34", "10.0.0.5"]);
    proxy.network.map("dockerhost.test", &["::ffff:172.17.0.1"]);
    let cases: Vec<(String, &str)> = vec![
        (numeric[0].clone(), "loopback"),
        (numeric[1].clone(), "loopback"),
        (numeric[2].clone(), "loopback"),
        (numeric[3].clone(), "loopback"),
        (numeric[4].clone(), "loopback"),
        (numeric[5].clone(), "loopback"),
        (format!("SNEAKY.test.:{port}"), "loopback"),
        ("169.254.169.254:80".to_owned(), "link-local"),
        ("0251.0376.0251.0376:80".to_owned(), "link-local"),
        ("metadata.test:80".to_owned(), "link-local"),
        ("mixed.test:443".to_owned(), "private"),
        ("dockerhost.test:443".to_owned(), "private"),
        ("172.17.0.1:443".to_owned(), "private"),
    ];
    for (authority, reason) in cases {
        let refused = connect(proxy.addr, &authority, Some((A_USER, A_PASS))).await.expect_err(&authority);
        assert_eq!(refused.status, 403, "{authority}: {}", refused.body);
        assert!(refused.body.contains(reason), "{authority}: {}", refused.body);
    }
    // A numeric spelling that is not on the list is refused by the list itself.
    let refused = connect(proxy.addr, "0x7f000002:443", Some((A_USER, A_PASS))).await.expect_err("unlisted");
    assert!(refused.body.contains("allow-list"), "{}", refused.body);
    assert!(proxy.network.dials().is_empty(), "no connection was attempted: {:?}", proxy.network.dials());
    assert_eq!(wire.hits.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing arrived at the loopback listener");
    proxy.stop().await;
}

#[tokio::test]
async fn the_inner_authority_must_be_the_connect_target() {
    let (proxy, si) = proxy_with(&[]).await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let got = send(&mut client, get("evil.example", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await;
    assert_eq!(got.status, 421, "Host differs");
    let got = send(&mut client, get("api.anthropic.com:8443", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await;
    assert_eq!(got.status, 421, "port differs");
    let got = send(
        &mut client,
        get("api.anthropic.com", "https://evil.example/v1/messages", &[("x-api-key", A_PLACEHOLDER)]),
    )
    .await;
    assert_eq!(got.status, 421, "absolute form differs");
    let got = send(
        &mut client,
        get("api.anthropic.com", "http://api.anthropic.com/v1/messages", &[("x-api-key", A_PLACEHOLDER)]),
    )
    .await;
    assert_eq!(got.status, 421, "absolute form with http");
    let two_hosts = hyper::Request::get("/v1/messages")
        .header("host", "api.anthropic.com")
        .header("host", "evil.example")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let got = send(&mut client, two_hosts).await;
    assert_eq!(got.status, 400, "two Host headers");
    assert!(si.requests().is_empty(), "nothing reached the upstream");
    // The same tunnel still serves a correct request.
    let got = send(
        &mut client,
        get("API.anthropic.com.", "https://api.anthropic.com/v1/messages", &[("x-api-key", A_PLACEHOLDER)]),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(si.requests()[0].one("x-api-key").as_deref(), Some(A_SECRET));
    proxy.stop().await;
}

#[tokio::test]
async fn sni_must_name_the_connect_host_and_h2_is_not_offered() {
    let (proxy, si) = proxy_with(&[]).await;
    let stream = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(tls_unverified(stream, "api.openai.com").await.is_err(), "SNI differs: the proxy aborts");
    let stream = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(tls_unverified(stream, "127.0.0.1").await.is_err(), "no SNI: the proxy aborts");
    let stream = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(
        tls_unverified(stream, "api.anthropic.com").await.is_ok(),
        "the same client with the right SNI gets through"
    );
    let stream = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(tls(stream, "api.anthropic.com", &proxy.ca_pem, &[b"h2"]).await.is_err(), "h2 only: no protocol in common");
    let stream =
        connect(proxy.addr, "api.anthropic.com.:443", Some((A_USER, A_PASS))).await.expect("trailing dot CONNECT");
    let tls_stream = tls(stream, "api.anthropic.com", &proxy.ca_pem, &[b"h2", b"http/1.1"]).await.expect("TLS");
    assert_eq!(tls_stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    // An HTTP/2 preface sent anyway is not HTTP/1.1: the connection ends without a request upstream.
    let mut tls_stream = tls_stream;
    tokio::io::AsyncWriteExt::write_all(&mut tls_stream, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("write preface");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, tokio::io::AsyncReadExt::read_to_end(&mut tls_stream, &mut answer))
        .await
        .expect("closed in time");
    assert!(!String::from_utf8_lossy(&answer).contains(" 200 "), "{}", String::from_utf8_lossy(&answer));
    assert_eq!(si.accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    proxy.stop().await;
}

#[tokio::test]
async fn nested_connect_is_refused_and_the_tunnel_survives() {
    let (proxy, si) = proxy_with(&[]).await;
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
    let nested = hyper::Request::connect("evil.example:443")
        .header("host", "evil.example:443")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let got = send(&mut client, nested).await;
    assert_eq!(got.status, 403);
    let got = send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await;
    assert_eq!(got.status, 200);
    assert_eq!(si.requests().len(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn credentials_other_than_the_placeholder_are_refused() {
    let (proxy, si) = proxy_with(&[]).await;
    let bearer_a = format!("Bearer {A_PLACEHOLDER}");
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("duplicate", vec![("x-api-key", A_PLACEHOLDER), ("x-api-key", A_PLACEHOLDER)]),
        ("attacker's key", vec![("x-api-key", "sk-ant-attacker")]),
        ("alternate header", vec![("x-api-key", A_PLACEHOLDER), ("authorization", "Bearer sk-ant-attacker")]),
        ("placeholder in the wrong header", vec![("authorization", bearer_a.as_str())]),
        ("cookie", vec![("x-api-key", A_PLACEHOLDER), ("cookie", "session=attacker")]),
        ("B's placeholder", vec![("x-api-key", B_PLACEHOLDER)]),
    ];
    for (what, headers) in cases {
        let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (A_USER, A_PASS)).await;
        let got = send(&mut client, get("api.anthropic.com", "/v1/messages", &headers)).await;
        assert_eq!(got.status, 403, "{what}: {}", got.body);
        assert!(!got.body.contains(A_SECRET));
    }
    // A's placeholder presented with B's credentials.
    let mut client = intercepted(&proxy, "api.anthropic.com:443", "api.anthropic.com", (B_USER, B_PASS)).await;
    let got = send(&mut client, get("api.anthropic.com", "/v1/messages", &[("x-api-key", A_PLACEHOLDER)])).await;
    assert_eq!(got.status, 403, "{}", got.body);
    // The placeholder on a path no rule covers.
    let got = send(&mut client, get("api.anthropic.com", "/admin", &[("x-api-key", B_PLACEHOLDER)])).await;
    assert_eq!(got.status, 403);
    assert!(si.requests().is_empty(), "no refused request reached the upstream");
    proxy.stop().await;
}
