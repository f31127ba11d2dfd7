//! `proxy-bench`: measures the proxy on loopback and prints JSON lines on stdout —
//! `proxy_overhead_p50_ms` (a request with injection through the proxy minus the same request
//! direct to the same local HTTPS server, p50 over keep-alive connections), `proxy_stream_mb_per_s`
//! and `direct_stream_mb_per_s` (one large response through an intercepted tunnel and direct),
//! `tls_floor_stream_mb_per_s` (the same response through a TLS relay that only decrypts and
//! re-encrypts: rustls on both sides, no HTTP parsing, no policy — the floor under interception on
//! this machine, measured in the same run), and `proxy_rss_idle_mib` (the `agenthold-proxy` binary
//! next to this one, idle, when found). Each stream figure is the best of [`STREAM_ROUNDS`] interleaved
//! rounds.
//! Nothing leaves loopback: the provider host is mapped to the local server by the test-only
//! upstream override.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use agenthold_plumbing::tls::{self, ClientTls};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{PrivateKeyDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const REQUESTS: usize = 500;
const STREAM_BYTES: usize = 256 << 20;
/// Rounds of the four streams (direct, intercepted, the TLS relay floor, pass-through), each
/// path's best reported.
const STREAM_ROUNDS: usize = 3;
const CHUNK: usize = 64 << 10;
const HOST: &str = "api.anthropic.com";
/// A pass-through host served by the same stand-in (its SNI must name it: the proxy checks).
const TUNNEL_HOST: &str = "bulk.example";
const PLACEHOLDER: &str = "agenthold-bench-placeholder-0123456789";

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("agenthold-proxy-bench-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir)?;
    let result = bench(&dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn bench(dir: &Path) -> anyhow::Result<()> {
    // The stand-in's root and server.
    let mut root_params = CertificateParams::new(Vec::<String>::new())?;
    root_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root_key = KeyPair::generate()?;
    let root_cert = root_params.self_signed(&root_key)?;
    let root_path = dir.join("root.pem");
    std::fs::write(&root_path, root_cert.pem())?;
    let issuer = Issuer::new(root_params, root_key);
    let leaf_key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec![HOST.to_owned(), TUNNEL_HOST.to_owned()])?.signed_by(&leaf_key, &issuer)?;
    let leaf_key = PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let relay_config = tls::server_config(vec![leaf.der().clone()], leaf_key.clone_key(), &[tls::HTTP_1_1])?;
    let server_config = tls::server_config(vec![leaf.der().clone()], leaf_key, &[tls::HTTP_1_1])?;
    let upstream = TcpListener::bind("127.0.0.1:0").await?;
    let upstream_addr = upstream.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let server = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        while let Ok((stream, _)) = upstream.accept().await {
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            connections.spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let body = if req.uri().path() == "/v1/stream" {
                        Chunks { left: STREAM_BYTES / CHUNK, chunk: Bytes::from(vec![b'x'; CHUNK]) }.boxed()
                    } else {
                        Full::new(Bytes::from_static(b"{\"ok\":true}")).boxed()
                    };
                    Ok::<_, Infallible>(Response::new(body))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });

    // The proxy, in process, with the override.
    let hosts = vec![HOST.to_owned()];
    agenthold_proxy::ca::init(dir, &hosts)?;
    let ca_pem = std::fs::read_to_string(dir.join("ca.pem"))?;
    let config = json!({
        "ca": { "cert": dir.join("ca.pem"), "key": dir.join("ca-key.pem") },
        "sandboxes": [{
            "id": "bench", "username": "bench", "password": "bench-password",
            "source_addrs": ["127.0.0.1"],
            "allow": [TUNNEL_HOST],
            "inject": [{ "host": HOST, "path_prefix": "/v1/", "header": "x-api-key", "format": "raw",
                         "placeholder": PLACEHOLDER, "value": "sk-bench-real-value" }]
        }],
        "upstream_overrides": {
            format!("{HOST}:443"): { "addr": upstream_addr.to_string(), "ca_cert": root_path },
            "bulk.example:443": { "addr": upstream_addr.to_string() }
        }
    });
    let config_path = dir.join("proxy.json");
    std::fs::write(&config_path, serde_json::to_vec(&config)?)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let proxy_addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let proxy = tokio::spawn(agenthold_proxy::run(listener, config_path.clone(), async move {
        let _ = stop_rx.await;
    }));

    let root_pem = std::fs::read_to_string(&root_path)?;
    let relay_addr = tls_relay(relay_config, upstream_addr, &root_pem).await?;
    let mut relayed = client(TcpStream::connect(relay_addr).await?, &root_pem, HOST).await?;
    let mut direct = client(TcpStream::connect(upstream_addr).await?, &root_pem, HOST).await?;
    let mut proxied = client(connect(proxy_addr, HOST).await?, &ca_pem, HOST).await?;
    // A pass-through tunnel to the same server (end-to-end TLS, the proxy copies bytes).
    let mut tunneled = client(connect(proxy_addr, TUNNEL_HOST).await?, &root_pem, TUNNEL_HOST).await?;

    let direct_ms = latencies(&mut direct).await?;
    let proxied_ms = latencies(&mut proxied).await?;
    let overhead = p50(proxied_ms) - p50(direct_ms);
    println!("{}", json!({ "proxy_overhead_p50_ms": round(overhead) }));

    // Interleaved rounds, the best of each path: on a shared machine one stream (about a second)
    // can fall into another process's burst, and a ratio of two single streams is mostly noise.
    let (mut direct_rate, mut proxied_rate, mut tunnel_rate, mut floor_rate) = (0f64, 0f64, 0f64, 0f64);
    for _ in 0..STREAM_ROUNDS {
        direct_rate = direct_rate.max(stream(&mut direct).await?);
        proxied_rate = proxied_rate.max(stream(&mut proxied).await?);
        floor_rate = floor_rate.max(stream(&mut relayed).await?);
        tunnel_rate = tunnel_rate.max(stream(&mut tunneled).await?);
    }
    println!("{}", json!({ "proxy_stream_mb_per_s": round(proxied_rate) }));
    println!("{}", json!({ "direct_stream_mb_per_s": round(direct_rate) }));
    println!("{}", json!({ "tunnel_stream_mb_per_s": round(tunnel_rate) }));
    println!("{}", json!({ "tls_floor_stream_mb_per_s": round(floor_rate) }));

    if let Some(rss) = idle_rss(&config_path).await {
        println!("{}", json!({ "proxy_rss_idle_mib": round(rss) }));
    }
    let _ = stop_tx.send(());
    let _ = proxy.await;
    server.abort();
    Ok(())
}

/// The floor under interception: a relay that terminates the client's TLS (the stand-in's leaf,
/// as the proxy presents a leaf of its own CA) and opens its own TLS session to the upstream, then
/// copies plaintext between the two in [`RELAY_BUFFER`]-sized reads — what any intercepting proxy
/// must do at least, with the same rustls provider and settings as the proxy (plumbing's), and
/// nothing more: no HTTP parsing, no policy, no injection. One connection; returns its address.
async fn tls_relay(
    config: rustls::ServerConfig,
    upstream: std::net::SocketAddr,
    root_pem: &str,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let upstream_tls =
        ClientTls::no_roots().trust_pem("the stand-in's root", root_pem)?.alpn(&[tls::HTTP_1_1]).build()?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(upstream_tls));
    tokio::spawn(async move {
        let relay = async {
            let (inbound, _) = listener.accept().await?;
            inbound.set_nodelay(true)?;
            let mut inbound = acceptor.accept(inbound).await?;
            let outbound = TcpStream::connect(upstream).await?;
            outbound.set_nodelay(true)?;
            let mut outbound = connector.connect(ServerName::try_from(HOST.to_owned())?, outbound).await?;
            // It ends when the benchmark drops its client (without close_notify): not a failure;
            // a short stream fails the benchmark by its byte count.
            let _ =
                tokio::io::copy_bidirectional_with_sizes(&mut inbound, &mut outbound, RELAY_BUFFER, RELAY_BUFFER).await;
            anyhow::Ok(())
        };
        if let Err(error) = relay.await {
            eprintln!("proxy-bench: the TLS relay floor: {error:#}");
        }
    });
    Ok(addr)
}

/// The relay floor's read size each way (the proxy's pass-through tunnel copies in 64 KiB too).
const RELAY_BUFFER: usize = 64 << 10;

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

async fn connect(proxy: std::net::SocketAddr, host: &str) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(proxy).await?;
    stream.set_nodelay(true)?;
    let auth = base64::engine::general_purpose::STANDARD.encode("bench:bench-password");
    stream
        .write_all(
            format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\nProxy-Authorization: Basic {auth}\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        anyhow::ensure!(stream.read(&mut byte).await? == 1, "proxy closed");
        head.push(byte[0]);
    }
    anyhow::ensure!(head.starts_with(b"HTTP/1.1 200"), "CONNECT refused: {}", String::from_utf8_lossy(&head));
    Ok(stream)
}

async fn client(stream: TcpStream, ca_pem: &str, sni: &str) -> anyhow::Result<Sender> {
    stream.set_nodelay(true)?;
    let config = ClientTls::no_roots().trust_pem("the stand-in's root", ca_pem)?.alpn(&[tls::HTTP_1_1]).build()?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(sni.to_owned())?, stream)
        .await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

fn request(path: &str) -> anyhow::Result<Request<Full<Bytes>>> {
    Ok(Request::get(path).header("host", HOST).header("x-api-key", PLACEHOLDER).body(Full::new(Bytes::new()))?)
}

async fn latencies(sender: &mut Sender) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(REQUESTS);
    for i in 0..REQUESTS + 20 {
        sender.ready().await?;
        let start = Instant::now();
        let response = sender.send_request(request("/v1/messages")?).await?;
        anyhow::ensure!(response.status() == 200, "status {}", response.status());
        response.into_body().collect().await?;
        if i >= 20 {
            out.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Ok(out)
}

fn p50(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn stream(sender: &mut Sender) -> anyhow::Result<f64> {
    sender.ready().await?;
    let start = Instant::now();
    let response = sender.send_request(request("/v1/stream")?).await?;
    let mut body = response.into_body();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            total += data.len();
        }
    }
    anyhow::ensure!(total == STREAM_BYTES, "short body");
    Ok(total as f64 / (1024.0 * 1024.0) / start.elapsed().as_secs_f64())
}

/// Starts the real binary next to this one and reads its resident set size once it listens.
async fn idle_rss(config: &Path) -> Option<f64> {
    let exe: PathBuf = std::env::current_exe().ok()?.with_file_name("agenthold-proxy");
    let mut child = tokio::process::Command::new(exe)
        .env("AGENTHOLD_PROXY_CONFIG", config)
        .env("AGENTHOLD_PROXY_LISTEN", "127.0.0.1:0")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut stderr = tokio::io::BufReader::new(child.stderr.take()?);
    let mut line = String::new();
    let listening = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            line.clear();
            if tokio::io::AsyncBufReadExt::read_line(&mut stderr, &mut line).await.ok()? == 0 {
                return None;
            }
            if line.contains("listening") {
                return Some(());
            }
        }
    })
    .await
    .ok()
    .flatten();
    let pid = child.id()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok();
    let _ = child.kill().await;
    listening?;
    let kib: f64 =
        status?.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// A response body of `left` copies of `chunk`, produced as fast as it is read.
struct Chunks {
    left: usize,
    chunk: Bytes,
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }
}
