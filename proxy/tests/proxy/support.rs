//! Test harness: a proxy served in-process on port 0 (its configuration in a temporary file),
//! local HTTPS/HTTP stand-ins for the providers (certificates from a test CA made with rcgen),
//! a recording network that never leaves loopback, and a small CONNECT/TLS/HTTP client. Every
//! wait has a deadline.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agenthold_plumbing::tls::{self as plumbing, ClientTls};
use agenthold_proxy::net::{BoxFuture, Network};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

pub const DEADLINE: Duration = Duration::from_secs(15);

/// A fresh temporary directory.
pub fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenthold-proxy-test-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A test CA for the stand-ins (plays the role of a public root).
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
    pub path: PathBuf,
}

impl TestCa {
    pub fn new(dir: &std::path::Path) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "stand-in public root");
        let key = KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("self-signed");
        let pem = cert.pem();
        let path = dir.join("stand-in-root.pem");
        std::fs::write(&path, &pem).expect("write root");
        Self { issuer: Issuer::new(params, key), pem, path }
    }

    fn server_config(&self, hosts: &[&str]) -> Arc<rustls::ServerConfig> {
        let params = CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>()).expect("params");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let key = PrivateKeyDer::Pkcs8(key.serialize_der().into());
        Arc::new(plumbing::server_config(vec![cert.der().clone()], key, &[plumbing::HTTP_1_1]).expect("cert"))
    }
}

/// One request as a stand-in saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Seen {
    pub fn all(&self, name: &str) -> Vec<String> {
        self.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned()).collect()
    }
    pub fn one(&self, name: &str) -> Option<String> {
        let all = self.all(name);
        assert!(all.len() <= 1, "{name} appears {} times", all.len());
        all.into_iter().next()
    }
}

/// A local stand-in for a provider (HTTPS) or any server (plain HTTP).
pub struct StandIn {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub accepted: Arc<AtomicUsize>,
    /// Each `/sse` response waits for one message here before its second event.
    pub sse_release: mpsc::Sender<()>,
    _task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub async fn https(ca: &TestCa, hosts: &[&str]) -> Self {
        Self::start(Some(ca.server_config(hosts))).await
    }

    pub async fn plain() -> Self {
        Self::start(None).await
    }

    async fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind stand-in");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (sse_release, sse_rx) = mpsc::channel::<()>(16);
        let sse_rx = Arc::new(tokio::sync::Mutex::new(sse_rx));
        let (seen2, accepted2) = (seen.clone(), accepted.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                accepted2.fetch_add(1, Ordering::SeqCst);
                let (seen, sse_rx, tls) = (seen2.clone(), sse_rx.clone(), tls.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (seen, sse_rx) = (seen.clone(), sse_rx.clone());
                        async move { Ok::<_, Infallible>(stand_in_handle(req, seen, sse_rx).await) }
                    });
                    let builder = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(tls) => {
                            let Ok(stream) = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await else { return };
                            let _ = builder.serve_connection(TokioIo::new(stream), service).with_upgrades().await;
                        }
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), service).with_upgrades().await;
                        }
                    }
                });
            }
        });
        Self { addr, seen, accepted, sse_release, _task: task }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

type TestBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(body: impl Into<Bytes>) -> TestBody {
    Full::new(body.into()).boxed()
}

async fn stand_in_handle(
    mut req: Request<Incoming>,
    seen: Arc<Mutex<Vec<Seen>>>,
    sse_rx: Arc<tokio::sync::Mutex<mpsc::Receiver<()>>>,
) -> Response<TestBody> {
    let record = Seen {
        method: req.method().to_string(),
        path: req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default(),
        headers: req.headers().iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect(),
    };
    seen.lock().expect("seen").push(record.clone());
    let path = req.uri().path().to_owned();
    if path == "/v1/reflect" {
        let mut response = Response::new(full("reflected"));
        for name in ["x-api-key", "authorization"] {
            if let Some(value) = req.headers().get(name) {
                response.headers_mut().insert(
                    hyper::header::HeaderName::from_bytes(format!("x-echo-{name}").as_bytes()).expect("name"),
                    value.clone(),
                );
            }
        }
        return response;
    }
    if path == "/redirect" {
        let mut response = Response::new(full(""));
        *response.status_mut() = StatusCode::FOUND;
        response.headers_mut().insert("location", "https://evil.example/steal".parse().expect("location"));
        return response;
    }
    if path == "/sse" {
        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
        tokio::spawn(async move {
            let _ = tx.send(Ok(Frame::data(Bytes::from_static(b"data: one\n\n")))).await;
            let released = tokio::time::timeout(DEADLINE, async { sse_rx.lock().await.recv().await }).await;
            if released.is_ok() {
                let _ = tx.send(Ok(Frame::data(Bytes::from_static(b"data: two\n\n")))).await;
            }
        });
        let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
        let mut response = Response::new(StreamBody::new(stream).boxed());
        response.headers_mut().insert("content-type", "text/event-stream".parse().expect("ct"));
        return response;
    }
    if path.ends_with("/ws") && req.headers().get("upgrade").is_some() {
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(upgraded) = upgrade.await {
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0u8; 1024];
                while let Ok(n) = io.read(&mut buf).await {
                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        });
        let mut response = Response::new(full(""));
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response.headers_mut().insert("upgrade", "websocket".parse().expect("u"));
        response.headers_mut().insert("connection", "upgrade".parse().expect("c"));
        return response;
    }
    if path.ends_with("/cut") {
        // Declares 1000 bytes, sends 100, and a moment later the connection ends.
        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
        tokio::spawn(async move {
            let _ = tx.send(Ok(Frame::data(Bytes::from(vec![b'c'; 100])))).await;
            // As a stream cut mid-way: the head and the first bytes reach the client first.
            tokio::time::sleep(Duration::from_millis(300)).await;
        });
        let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
        let mut response = Response::new(StreamBody::new(stream).boxed());
        response.headers_mut().insert("content-length", "1000".parse().expect("cl"));
        return response;
    }
    if path == "/big" {
        return Response::new(full(vec![b'x'; 1 << 20]));
    }
    Response::new(full(format!("ok {path}")))
}

/// A network for the proxy that resolves only names the test maps, records every dial, and
/// connects only to loopback (anything else fails without leaving the machine). The host's own
/// addresses are the ones the test gives it (none by default).
#[derive(Default)]
pub struct TestNetwork {
    pub names: Mutex<HashMap<String, Vec<IpAddr>>>,
    pub dials: Mutex<Vec<SocketAddr>>,
    pub host: Mutex<Vec<IpAddr>>,
}

impl TestNetwork {
    pub fn map(&self, name: &str, ips: &[&str]) {
        let ips = ips.iter().map(|ip| ip.parse().expect("test ip")).collect();
        self.names.lock().expect("names").insert(name.to_owned(), ips);
    }
    pub fn dials(&self) -> Vec<SocketAddr> {
        self.dials.lock().expect("dials").clone()
    }
    /// Sets what the proxy reads as its host's addresses (at start and on each refresh).
    pub fn set_host_addrs(&self, ips: &[&str]) {
        *self.host.lock().expect("host") = ips.iter().map(|ip| ip.parse().expect("test ip")).collect();
    }
}

impl Network for TestNetwork {
    fn resolve<'a>(&'a self, host: &'a str, _port: u16) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let found = self.names.lock().expect("names").get(host).cloned();
        Box::pin(async move { found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "unmapped test name")) })
    }
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'_, io::Result<TcpStream>> {
        self.dials.lock().expect("dials").push(addr);
        Box::pin(async move {
            if !addr.ip().is_loopback() {
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, "tests never leave loopback"));
            }
            TcpStream::connect(addr).await
        })
    }
    fn host_addrs(&self) -> BoxFuture<'_, io::Result<Vec<IpAddr>>> {
        let host = self.host.lock().expect("host").clone();
        Box::pin(async move { Ok(host) })
    }
}

/// A loopback listener that counts connections (to prove nothing arrived).
pub struct Tripwire {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Tripwire {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind tripwire");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let hits2 = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((_stream, _)) = listener.accept().await {
                hits2.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self { addr, hits, _task: task }
    }
}

/// Sandbox A's and B's settings used across tests.
pub const A_USER: &str = "sbx-a";
pub const A_PASS: &str = "proxy-pass-a-7f3e9b";
pub const B_USER: &str = "sbx-b";
pub const B_PASS: &str = "proxy-pass-b-29c1d0";
pub const A_PLACEHOLDER: &str = "agenthold-placeholder-a-0123456789abcdef";
pub const B_PLACEHOLDER: &str = "agenthold-placeholder-b-fedcba9876543210";
pub const A_SECRET: &str = "sk-ant-api03-REAL-SECRET-OF-A-xyzzy";
pub const B_SECRET: &str = "sk-proj-REAL-SECRET-OF-B-plugh";

/// Files a proxy configuration refers to: the proxy's CA and the stand-ins' root.
pub struct Setup {
    pub dir: PathBuf,
    pub ca_pem: String,
    pub root: TestCa,
}

/// The CA hosts of test proxies.
pub const CA_HOSTS: &[&str] = &["api.anthropic.com", "api.openai.com", "chatgpt.com", "mcp.agenthold.internal"];

impl Setup {
    pub fn new() -> Self {
        let dir = temp_dir();
        let (cert, key) =
            agenthold_proxy::ca::generate(&CA_HOSTS.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>()).expect("ca");
        std::fs::write(dir.join("ca.pem"), &cert).expect("write ca");
        std::fs::write(dir.join("ca-key.pem"), &key).expect("write key");
        let root = TestCa::new(&dir);
        Self { dir, ca_pem: cert, root }
    }
    /// The `ca` block.
    pub fn ca(&self) -> Value {
        json!({ "cert": self.dir.join("ca.pem"), "key": self.dir.join("ca-key.pem") })
    }
    /// An override entry to a stand-in.
    pub fn over(&self, stand_in: &StandIn) -> Value {
        json!({ "addr": stand_in.addr.to_string(), "ca_cert": self.root.path })
    }
}

/// A proxy under test.
pub struct TestProxy {
    pub addr: SocketAddr,
    pub setup: Setup,
    pub config_path: PathBuf,
    pub ca_pem: String,
    pub network: Arc<TestNetwork>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestProxy {
    /// Starts a proxy with `config`.
    pub async fn start(setup: Setup, config: &Value) -> Self {
        Self::start_with(setup, config, Arc::new(TestNetwork::default())).await
    }

    /// Starts a proxy with `config` on `network` (prepared by the test: names, host addresses).
    pub async fn start_with(setup: Setup, config: &Value, network: Arc<TestNetwork>) -> Self {
        let config_path = setup.dir.join("proxy.json");
        std::fs::write(&config_path, serde_json::to_vec(config).expect("json")).expect("write config");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel();
        let net: Arc<dyn Network> = network.clone();
        let path = config_path.clone();
        let task = tokio::spawn(async move {
            agenthold_proxy::run_with(listener, path, net, async move {
                let _ = rx.await;
            })
            .await
            .expect("proxy runs");
        });
        let ca_pem = setup.ca_pem.clone();
        Self { addr, setup, config_path, ca_pem, network, shutdown: Some(tx), task: Some(task) }
    }

    /// Replaces the configuration file (atomically: write + rename).
    pub fn write_config(&self, bytes: &[u8]) {
        let tmp = self.setup.dir.join("proxy.json.tmp");
        std::fs::write(&tmp, bytes).expect("write");
        std::fs::rename(&tmp, &self.config_path).expect("rename");
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(DEADLINE, task).await.expect("proxy stops").expect("proxy task");
        }
        let _ = std::fs::remove_dir_all(&self.setup.dir);
    }
}

/// Sandbox A: x-api-key for api.anthropic.com/v1/, bearer for api.openai.com/v1/; its
/// credentials count from any address.
pub fn sandbox_a(allow: &[&str]) -> Value {
    json!({
        "id": "sandbox-a", "username": A_USER, "password": A_PASS, "any_source": true,
        "allow": allow,
        "inject": [
            { "host": "api.anthropic.com", "path_prefix": "/v1/", "header": "x-api-key", "format": "raw",
              "placeholder": A_PLACEHOLDER, "value": A_SECRET },
            { "host": "api.openai.com", "path_prefix": "/v1/", "header": "authorization", "format": "bearer",
              "placeholder": A_PLACEHOLDER, "value": A_SECRET },
        ]
    })
}

/// Sandbox B: its own x-api-key for api.anthropic.com; its credentials count from any address.
pub fn sandbox_b() -> Value {
    json!({
        "id": "sandbox-b", "username": B_USER, "password": B_PASS, "any_source": true,
        "inject": [
            { "host": "api.anthropic.com", "path_prefix": "/v1/", "header": "x-api-key", "format": "raw",
              "placeholder": B_PLACEHOLDER, "value": B_SECRET },
        ]
    })
}

/// The answer to a CONNECT that was refused.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

fn basic(user: &str, pass: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")))
}

/// Binds `sandbox` to `addr` only (no longer from any address).
pub fn bound_to(mut sandbox: Value, addr: &str) -> Value {
    sandbox.as_object_mut().expect("object").remove("any_source");
    sandbox["source_addrs"] = json!([addr]);
    sandbox
}

/// A TCP connection to the proxy from `from` (a loopback address such as 127.0.0.2: every
/// 127/8 address is the machine's own, so tests can be several clients).
pub async fn dial_from(proxy: SocketAddr, from: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(from.parse().expect("from"), 0)).expect("bind the client address");
    tokio::time::timeout(DEADLINE, socket.connect(proxy)).await.expect("connected in time").expect("connect to proxy")
}

/// Sends `CONNECT authority` with these credentials (None: no header).
pub async fn connect(proxy: SocketAddr, authority: &str, creds: Option<(&str, &str)>) -> Result<TcpStream, Refused> {
    let stream = TcpStream::connect(proxy).await.expect("connect to proxy");
    connect_on(stream, authority, creds).await
}

/// Sends `CONNECT authority` from the client address `from`.
pub async fn connect_from(
    proxy: SocketAddr,
    from: &str,
    authority: &str,
    creds: Option<(&str, &str)>,
) -> Result<TcpStream, Refused> {
    connect_on(dial_from(proxy, from).await, authority, creds).await
}

/// Sends `CONNECT authority` on an open connection to the proxy.
pub async fn connect_on(
    mut stream: TcpStream,
    authority: &str,
    creds: Option<(&str, &str)>,
) -> Result<TcpStream, Refused> {
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some((user, pass)) = creds {
        head.push_str(&format!("Proxy-Authorization: {}\r\n", basic(user, pass)));
    }
    head.push_str("\r\n");
    if stream.write_all(head.as_bytes()).await.is_err() {
        return Err(Refused { status: 0, headers: String::new(), body: "closed before the CONNECT".into() });
    }
    let (status, headers, body) = read_response(&mut stream).await;
    if status == 200 { Ok(stream) } else { Err(Refused { status, headers, body }) }
}

/// Reads one response head (and a Content-Length body) from a raw stream, byte by byte.
pub async fn read_response<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> (u16, String, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(DEADLINE, async {
        while !head.ends_with(b"\r\n\r\n") {
            // Closed (or reset): no response.
            if !matches!(stream.read(&mut byte).await, Ok(1)) {
                break;
            }
            head.push(byte[0]);
        }
    })
    .await
    .expect("a response head within the deadline");
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if length > 0 {
        tokio::time::timeout(DEADLINE, stream.read_exact(&mut body)).await.expect("body in time").expect("body");
    }
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

/// TLS to `sni` over `stream`, trusting only `ca_pem`.
pub async fn tls(
    stream: TcpStream,
    sni: &str,
    ca_pem: &str,
    alpn: &[&[u8]],
) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let roots = plumbing::pem::parse_certs("the test CA", ca_pem).expect("ca pem");
    let config =
        ClientTls::no_roots().trust("the test CA", roots).expect("add root").alpn(alpn).build().expect("config");
    let name = ServerName::try_from(sni.to_owned()).expect("sni");
    tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream))
        .await
        .map_err(|_| io::Error::other("TLS timeout"))?
}

/// CONNECT + TLS + an HTTP/1.1 client, as sandbox A.
pub async fn intercepted(
    proxy: &TestProxy,
    authority: &str,
    sni: &str,
    creds: (&str, &str),
) -> SendRequest<Full<Bytes>> {
    let stream = connect(proxy.addr, authority, Some(creds)).await.expect("CONNECT accepted");
    let tls = tls(stream, sni, &proxy.ca_pem, &[b"http/1.1"]).await.expect("TLS with the proxy's leaf");
    http1(tls).await
}

/// An HTTP/1.1 client over `io`.
pub async fn http1<T>(io: T) -> SendRequest<Full<Bytes>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.expect("handshake");
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    sender
}

/// A simple response.
pub struct Got {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

/// Sends `req` and reads the whole response.
pub async fn send(sender: &mut SendRequest<Full<Bytes>>, req: Request<Full<Bytes>>) -> Got {
    tokio::time::timeout(DEADLINE, sender.ready()).await.expect("ready in time").expect("connection usable");
    let response =
        tokio::time::timeout(DEADLINE, sender.send_request(req)).await.expect("response in time").expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = tokio::time::timeout(DEADLINE, response.into_body().collect())
        .await
        .expect("body in time")
        .expect("body")
        .to_bytes();
    Got { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

/// A GET with these headers (Host is added unless given).
pub fn get(host: &str, path: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut builder = Request::get(path);
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        builder = builder.header("host", host);
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Full::new(Bytes::new())).expect("request")
}

/// Waits until `check` holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A verifier that accepts any certificate: to see what the proxy itself does with a handshake
/// the client would otherwise abort.
#[derive(Debug)]
struct AcceptAnything;

impl rustls::client::danger::ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        plumbing::provider().signature_verification_algorithms.supported_schemes()
    }
}

/// TLS with `server_name` (an IP sends no SNI), accepting any certificate.
pub async fn tls_unverified(
    stream: TcpStream,
    server_name: &str,
) -> io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut config = rustls::ClientConfig::builder_with_provider(plumbing::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnything))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(server_name.to_owned()).expect("name");
    tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream))
        .await
        .map_err(|_| io::Error::other("TLS timeout"))?
}
