//! Issue 29's edges of the proxy. One tenant cannot starve the others: connections are admitted
//! per client address before authentication, a connection that does not authenticate in time is
//! closed, and a sandbox's slot is held for a connection's whole life (a plain-HTTP response
//! until its body ends). One tenant cannot leave its allow-list: a pass-through tunnel's
//! ClientHello must name the CONNECT host (no ECH, TLS on 443), every address of the proxy's
//! host is refused, injection is matched on canonical paths (and `TRACE`/`TRACK` refused), and
//! a sandbox whose address was cleared is not admitted from anywhere. Several clients are
//! different loopback addresses (127.0.0.2, .3, …); nothing leaves the machine.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;

/// A loopback upstream that keeps every byte it receives (and answers nothing).
struct Recorder {
    addr: std::net::SocketAddr,
    bytes: Arc<Mutex<Vec<u8>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind recorder");
        let addr = listener.local_addr().expect("addr");
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let kept = bytes.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let kept = kept.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        kept.lock().expect("bytes").extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Self { addr, bytes, _task: task }
    }

    fn received(&self) -> Vec<u8> {
        self.bytes.lock().expect("bytes").clone()
    }
}

/// Whether the proxy closes `stream` within `within` (EOF or reset), reading whatever comes.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// A TLS ClientHello record with these extensions (type, data).
fn client_hello(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01, 1, 0]);
    let mut ext = Vec::new();
    for (kind, data) in extensions {
        ext.extend_from_slice(&kind.to_be_bytes());
        ext.extend_from_slice(&u16::try_from(data.len()).expect("short").to_be_bytes());
        ext.extend_from_slice(data);
    }
    body.extend_from_slice(&u16::try_from(ext.len()).expect("short").to_be_bytes());
    body.extend_from_slice(&ext);
    let len = u32::try_from(body.len()).expect("short").to_be_bytes();
    let mut message = vec![1, len[1], len[2], len[3]];
    message.extend_from_slice(&body);
    let mut record = vec![0x16, 3, 1];
    record.extend_from_slice(&u16::try_from(message.len()).expect("short").to_be_bytes());
    record.extend_from_slice(&message);
    record
}

/// The server_name extension naming `host`.
fn sni(host: &str) -> (u16, Vec<u8>) {
    let mut entry = vec![0];
    entry.extend_from_slice(&u16::try_from(host.len()).expect("short").to_be_bytes());
    entry.extend_from_slice(host.as_bytes());
    let mut data = u16::try_from(entry.len()).expect("short").to_be_bytes().to_vec();
    data.extend_from_slice(&entry);
    (0, data)
}

#[tokio::test]
async fn one_address_holding_connections_does_not_close_another_sandboxs() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let mut b = bound_to(sandbox_b(), "127.0.0.3");
    b["allow"] = json!(["registry.example"]);
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [bound_to(sandbox_a(&["registry.example"]), "127.0.0.2"), b],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    // Anyone who reaches the port, from one address, opens more connections than the proxy
    // ever held at once (4096) and sends nothing.
    let mut idle = Vec::new();
    for _ in 0..4200 {
        idle.push(dial_from(proxy.addr, "127.0.0.4").await);
    }
    // Another sandbox's next connection is served.
    let tunnel = connect_from(proxy.addr, "127.0.0.3", "registry.example:443", Some((B_USER, B_PASS))).await;
    assert!(tunnel.is_ok(), "sandbox B was refused: {:?}", tunnel.err());
    // The flooding address keeps its share (64 by default): later ones are closed at once.
    assert!(closed_within(&mut idle[4199], Duration::from_secs(5)).await, "beyond its share: closed at accept");
    proxy.stop().await;
}

#[tokio::test]
async fn unauthenticated_connections_are_capped_per_address_and_sandbox_addresses_keep_their_room() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let mut b = bound_to(sandbox_b(), "127.0.0.3");
    b["allow"] = json!(["registry.example"]);
    let config = json!({
        "ca": setup.ca(),
        "max_unauthenticated_per_source": 3,
        "max_unauthenticated": 4,
        "sandboxes": [bound_to(sandbox_a(&["registry.example"]), "127.0.0.2"), b],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    // Sandbox A's own address: three silent connections are held, the fourth is closed.
    let mut a_idle = Vec::new();
    for _ in 0..3 {
        a_idle.push(dial_from(proxy.addr, "127.0.0.2").await);
    }
    let mut fourth = dial_from(proxy.addr, "127.0.0.2").await;
    assert!(closed_within(&mut fourth, Duration::from_secs(5)).await, "A's fourth unauthenticated connection");
    // Two unbound addresses fill the shared pool (4): a third unbound address is closed...
    let mut unbound = Vec::new();
    for from in ["127.0.0.4", "127.0.0.4", "127.0.0.5", "127.0.0.5"] {
        unbound.push(dial_from(proxy.addr, from).await);
    }
    let mut sixth = dial_from(proxy.addr, "127.0.0.6").await;
    assert!(closed_within(&mut sixth, Duration::from_secs(5)).await, "the shared pool is full");
    // ...but sandbox B's address does not draw from it.
    let tunnel = connect_from(proxy.addr, "127.0.0.3", "registry.example:443", Some((B_USER, B_PASS))).await;
    assert!(tunnel.is_ok(), "B: {:?}", tunnel.err());
    // A connection that authenticates gives its place back: A opens a tunnel once one of its
    // silent connections is gone, and then another (authenticated ones count per sandbox).
    drop(a_idle.pop());
    eventually("A's place to be given back", || async {
        connect_from(proxy.addr, "127.0.0.2", "registry.example:443", Some((A_USER, A_PASS))).await.is_ok()
    })
    .await;
    let again = connect_from(proxy.addr, "127.0.0.2", "registry.example:443", Some((A_USER, A_PASS))).await;
    assert!(again.is_ok(), "{:?}", again.err());
    proxy.stop().await;
}

#[tokio::test]
async fn a_connection_that_does_not_authenticate_in_time_is_closed() {
    let setup = Setup::new();
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["registry.example"])],
        "upstream_overrides": { "registry.example:443": setup.over(&registry) }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut partial = TcpStream::connect(proxy.addr).await.expect("connect");
    partial.write_all(b"CONNECT registry.example:443 HTTP/1.1\r\nHost: registry.example:443\r\n").await.expect("write");
    let mut wrong = TcpStream::connect(proxy.addr).await.expect("connect");
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{A_USER}:wrong"));
    wrong
        .write_all(format!("GET http://registry.example/ HTTP/1.1\r\nHost: registry.example\r\nProxy-Authorization: Basic {auth}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    assert_eq!(read_response(&mut wrong).await.0, 407);
    let tunnel = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("tunnel");
    // The default deadline is 5 s (the header-read timeout was 30 s).
    let within = Duration::from_secs(8);
    let (silent_closed, partial_closed, wrong_closed) = tokio::join!(
        closed_within(&mut silent, within),
        closed_within(&mut partial, within),
        closed_within(&mut wrong, within)
    );
    assert!(silent_closed && partial_closed && wrong_closed, "{silent_closed} {partial_closed} {wrong_closed}");
    assert!(started.elapsed() >= Duration::from_secs(4), "not before the deadline: {:?}", started.elapsed());
    // The authenticated tunnel is not cut by the deadline: it still carries a TLS session.
    let tls = tls(tunnel, "registry.example", &proxy.setup.root.pem, &[b"http/1.1"]).await.expect("TLS after 5 s");
    let mut client = http1(tls).await;
    assert_eq!(send(&mut client, get("registry.example", "/pkg", &[])).await.status, 200);
    proxy.stop().await;
}

#[tokio::test]
async fn a_plain_http_response_holds_the_sandboxs_slot_until_its_body_ends() {
    let setup = Setup::new();
    let plain = StandIn::plain().await;
    let registry = StandIn::https(&setup.root, &["registry.example"]).await;
    let mut b = sandbox_b();
    b["allow"] = json!(["registry.example"]);
    let config = json!({
        "ca": setup.ca(),
        "max_connections_per_sandbox": 1,
        "sandboxes": [sandbox_a(&["plain.example", "registry.example"]), b],
        "upstream_overrides": {
            "plain.example:80": { "addr": plain.addr.to_string() },
            "registry.example:443": setup.over(&registry)
        }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{A_USER}:{A_PASS}"))
    );
    let stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let mut client = http1(stream).await;
    let response = tokio::time::timeout(
        DEADLINE,
        client.send_request(get("plain.example", "http://plain.example/sse", &[("proxy-authorization", &auth)])),
    )
    .await
    .expect("head in time")
    .expect("response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let first = tokio::time::timeout(DEADLINE, http_body_util::BodyExt::frame(&mut body))
        .await
        .expect("first event in time")
        .expect("frame")
        .expect("ok");
    assert_eq!(first.into_data().expect("data").as_ref(), b"data: one\n\n");
    // The body is still streaming: A's one connection is in use.
    let refused = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect_err("at its cap");
    assert_eq!(refused.status, 429);
    // Another sandbox is not affected.
    assert!(connect(proxy.addr, "registry.example:443", Some((B_USER, B_PASS))).await.is_ok());
    // The body ends, the connection closes: A may connect again.
    plain.sse_release.send(()).await.expect("release");
    while let Some(frame) =
        tokio::time::timeout(DEADLINE, http_body_util::BodyExt::frame(&mut body)).await.expect("rest in time")
    {
        frame.expect("frame");
    }
    drop(body);
    drop(client);
    eventually("A's slot to be given back", || async {
        connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.is_ok()
    })
    .await;
    proxy.stop().await;
}

#[tokio::test]
async fn a_pass_through_tunnel_carries_only_a_client_hello_naming_its_host() {
    let setup = Setup::new();
    let upstream = Recorder::start().await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["registry.example", "registry.example:8080"])],
        "upstream_overrides": {
            "registry.example:443": { "addr": upstream.addr.to_string() },
            "registry.example:8080": { "addr": upstream.addr.to_string() }
        }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("another site on the same CDN", client_hello(&[sni("www.cloudflare.com")])),
        ("no SNI", client_hello(&[(0x000a, vec![0, 2, 0, 29])])),
        ("Encrypted Client Hello", client_hello(&[sni("registry.example"), (0xfe0d, vec![0; 16])])),
        ("not TLS on 443", b"GET / HTTP/1.1\r\nHost: www.cloudflare.com\r\n\r\n".to_vec()),
    ];
    for (what, bytes) in refused {
        let mut tunnel = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
        tunnel.write_all(&bytes).await.expect("write");
        assert!(closed_within(&mut tunnel, DEADLINE).await, "{what}: the tunnel is closed");
        assert!(upstream.received().is_empty(), "{what}: nothing reached the upstream");
    }
    // A real client with the wrong name fails too (the proxy closes before any byte goes on).
    let tunnel = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    assert!(tls_unverified(tunnel, "www.cloudflare.com").await.is_err());
    assert!(upstream.received().is_empty());
    // The right name passes, bytes unchanged; the name is normalised (case, one trailing dot).
    let hello = client_hello(&[sni("Registry.Example.")]);
    let mut tunnel = connect(proxy.addr, "registry.example:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    tunnel.write_all(&hello).await.expect("write");
    eventually("the hello to arrive", || async { upstream.received() == hello }).await;
    // Off port 443 a protocol other than TLS passes as it is.
    let mut other = connect(proxy.addr, "registry.example:8080", Some((A_USER, A_PASS))).await.expect("CONNECT");
    other.write_all(b"SSH-2.0-client\r\n").await.expect("write");
    eventually("the other protocol to arrive", || async { upstream.received().ends_with(b"SSH-2.0-client\r\n") }).await;
    drop(tunnel);
    proxy.stop().await;
}

#[tokio::test]
async fn every_address_of_the_proxys_host_is_refused_and_kept_fresh() {
    let setup = Setup::new();
    let wire = Tripwire::start().await;
    let network = Arc::new(TestNetwork::default());
    // What the proxy reads as its host's interfaces: a public IPv4 and a global IPv6 (never
    // dialled: the test network connects to loopback only, and the proxy must not even try).
    network.set_host_addrs(&["192.0.1.7", "2a01:db9::7"]);
    network.map("selfhost.test", &["192.0.1.7"]);
    network.map("selfhost6.test", &["2a01:db9::7"]);
    network.map("later.test", &["192.0.1.8"]);
    let config = json!({
        "ca": setup.ca(),
        "host_addrs_refresh_secs": 1,
        "sandboxes": [sandbox_a(&[
            "selfhost.test", "selfhost6.test", "192.0.1.7:7700", "[2a01:db9::7]:2375", "later.test",
            "selfhost.test:80", "192.0.1.7:7700"
        ])],
    });
    let proxy = TestProxy::start_with(setup, &config, network.clone()).await;
    for authority in ["selfhost.test:443", "selfhost6.test:443", "192.0.1.7:7700", "[2a01:db9::7]:2375"] {
        let refused = connect(proxy.addr, authority, Some((A_USER, A_PASS))).await.expect_err(authority);
        assert_eq!(refused.status, 403, "{authority}: {}", refused.body);
        assert!(refused.body.contains("the proxy's own address"), "{authority}: {}", refused.body);
    }
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{A_USER}:{A_PASS}"))
    );
    let mut client = http1(TcpStream::connect(proxy.addr).await.expect("connect")).await;
    let got =
        send(&mut client, get("192.0.1.7:7700", "http://192.0.1.7:7700/healthz", &[("proxy-authorization", &auth)]))
            .await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert!(got.body.contains("the proxy's own address"), "{}", got.body);
    // An address the host gains later is refused after the next reading.
    network.set_host_addrs(&["192.0.1.7", "2a01:db9::7", "192.0.1.8"]);
    eventually("the new address to be refused", || async {
        matches!(connect(proxy.addr, "later.test:443", Some((A_USER, A_PASS))).await,
                 Err(r) if r.status == 403 && r.body.contains("the proxy's own address"))
    })
    .await;
    assert!(
        proxy.network.dials().iter().all(|a| a.ip() == "192.0.1.8".parse::<std::net::IpAddr>().expect("ip")),
        "none of the host's addresses was dialled: {:?}",
        proxy.network.dials()
    );
    assert_eq!(wire.hits.load(Ordering::SeqCst), 0);
    proxy.stop().await;
}

/// One request, written raw inside a fresh intercepted tunnel to api.anthropic.com; its status.
async fn raw_intercepted(proxy: &TestProxy, request: &str) -> u16 {
    let stream = connect(proxy.addr, "api.anthropic.com:443", Some((A_USER, A_PASS))).await.expect("CONNECT");
    let mut tls = tls(stream, "api.anthropic.com", &proxy.ca_pem, &[b"http/1.1"]).await.expect("TLS");
    tls.write_all(request.as_bytes()).await.expect("write");
    read_response(&mut tls).await.0
}

#[tokio::test]
async fn injection_is_matched_on_canonical_paths_and_odd_paths_are_refused() {
    let setup = Setup::new();
    let si = StandIn::https(&setup.root, &["api.anthropic.com"]).await;
    let plain = StandIn::plain().await;
    let config = json!({
        "ca": setup.ca(),
        "sandboxes": [sandbox_a(&["plain.example"])],
        "upstream_overrides": {
            "api.anthropic.com:443": setup.over(&si),
            "plain.example:80": { "addr": plain.addr.to_string() }
        }
    });
    let proxy = TestProxy::start(setup, &config).await;
    let request = |method: &str, path: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: api.anthropic.com\r\nx-api-key: {A_PLACEHOLDER}\r\nConnection: close\r\n\r\n"
        )
    };
    // Encoded unreserved characters: the canonical path matches the rule, and is what is sent.
    assert_eq!(raw_intercepted(&proxy, &request("GET", "/v%31/m%65ssages?x=%2e%2e")).await, 200);
    let seen = si.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/messages?x=%2e%2e", "the canonical path, the query as sent");
    assert_eq!(seen[0].one("x-api-key").as_deref(), Some(A_SECRET));
    for path in [
        "/v1/..%5capi/oauth/token",
        "/v1/..%5Capi/oauth/token",
        "/v1/..\\api/oauth/token",
        "/v1/..;/api/oauth/token",
        "/v1/models;x=1",
        "/v1/models%3bx=1",
        "/v1%2fmodels",
        "/v1/%252e%252e/api",
        "/v1/%25%32%65%25%32%65/api",
        "/v1/%c0%ae%c0%ae/api",
        "/v1/%2e%2e/api",
        "/v1/./models",
    ] {
        assert_eq!(raw_intercepted(&proxy, &request("GET", path)).await, 400, "{path}");
    }
    for method in ["TRACE", "TRACK"] {
        assert_eq!(raw_intercepted(&proxy, &request(method, "/v1/messages")).await, 405, "{method}");
    }
    assert_eq!(si.requests().len(), 1, "no refused request reached the upstream: {:?}", si.requests());
    // TRACE over plain HTTP too.
    let auth = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("{A_USER}:{A_PASS}"));
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream
        .write_all(format!("TRACE http://plain.example/ HTTP/1.1\r\nHost: plain.example\r\nProxy-Authorization: Basic {auth}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    assert_eq!(read_response(&mut stream).await.0, 405);
    assert!(plain.requests().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn a_sandbox_without_an_address_is_admitted_from_nowhere_unless_any_source_says_so() {
    let setup = Setup::new();
    let mut cleared = sandbox_a(&[]);
    cleared.as_object_mut().expect("object").remove("any_source");
    let config = json!({ "ca": setup.ca(), "sandboxes": [cleared, sandbox_b()] });
    let proxy = TestProxy::start(setup, &config).await;
    // A: its address was cleared (an empty list): refused from every address.
    for from in ["127.0.0.1", "127.0.0.2"] {
        let refused = connect_from(proxy.addr, from, "api.anthropic.com:443", Some((A_USER, A_PASS))).await;
        assert_eq!(refused.expect_err("refused").status, 407, "from {from}");
    }
    // B says `any_source`: admitted (then refused by its allow-list, not by its address).
    let refused = connect_from(proxy.addr, "127.0.0.2", "api.openai.com:443", Some((B_USER, B_PASS))).await;
    assert_eq!(refused.expect_err("not on B's list").status, 403);
    proxy.stop().await;
}
