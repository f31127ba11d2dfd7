//! What the tests of the server-and-proxy path share: a loopback HTTPS stand-in for
//! `api.anthropic.com` (its certificate from a root made here) that records the `x-api-key` of
//! every request, and the real `agenthold-proxy` binary running on the server's file.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::PrivateKeyDer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long any one step may take.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// A loopback HTTPS server for `api.anthropic.com` answering `200` with `body` (or cutting its
/// responses short). Stopped on drop.
pub struct StandIn {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// The PEM file of the root its certificate comes from.
    pub root: PathBuf,
    /// The `x-api-key` of every request it got (`None`: the request had none).
    pub seen: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    /// Starts one, writing its root into `dir`.
    pub async fn start(dir: &Path, body: &'static str) -> Self {
        let response = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        Self::answering(dir, response, false).await
    }

    /// One whose responses are cut short: they declare 1000 bytes, send 100, and the
    /// connection ends.
    pub async fn cutting(dir: &Path) -> Self {
        let response =
            format!("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\nconnection: close\r\n\r\n{}", "c".repeat(100));
        Self::answering(dir, response, true).await
    }

    /// Starts one answering every request with `response` (head and body), writing its root
    /// into `dir`.
    async fn answering(dir: &Path, response: String, cut: bool) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "stand-in public root");
        let root_key = KeyPair::generate().expect("key");
        let root_cert = params.self_signed(&root_key).expect("root");
        let root = dir.join("stand-in-root.pem");
        std::fs::write(&root, root_cert.pem()).expect("write root");
        let issuer = Issuer::new(params, root_key);
        let leaf_key = KeyPair::generate().expect("key");
        let leaf = CertificateParams::new(vec!["api.anthropic.com".to_owned()])
            .expect("params")
            .signed_by(&leaf_key, &issuer)
            .expect("leaf");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()))
            .expect("cert");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, record, response) = (acceptor.clone(), Arc::clone(&record), response.clone());
                tokio::spawn(async move {
                    let Ok(Ok(mut tls)) = tokio::time::timeout(DEADLINE, acceptor.accept(stream)).await else { return };
                    let Some(head) = read_head(&mut tls).await else { return };
                    let key = head
                        .lines()
                        .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("x-api-key")))
                        .map(|(_, v)| v.trim().to_owned());
                    record.lock().expect("seen").push(key);
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.flush().await;
                    if cut {
                        // As a stream cut mid-way: what was sent reaches the client first.
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self { addr, root, seen, task }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads a request or response head (up to 64 KiB).
pub async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(DEADLINE, async {
        while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            head.push(byte[0]);
        }
        Some(())
    })
    .await
    .ok()??;
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// The real proxy binary (built by `cargo build --workspace --bins`) on the server's file, its
/// log written to a file. Killed on drop.
pub struct Proxy {
    child: Child,
    /// Where it listens (`host:port`, as it logged it).
    pub addr: String,
    log: PathBuf,
}

impl Proxy {
    /// Starts it listening on `listen` (`127.0.0.1:0`, `0.0.0.0:<port>`).
    pub fn start(config: &Path, listen: &str, log: PathBuf) -> Self {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_agenthold")).with_file_name("agenthold-proxy");
        let mut child = Command::new(&bin)
            .args(["--listen", listen, "--config"])
            .arg(config)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting agenthold-proxy (run `cargo build --workspace --bins` first)");
        let stderr = child.stderr.take().expect("stderr");
        let mut file = std::fs::File::create(&log).expect("proxy log");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Write as _;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(file, "{line}");
                if let Some(addr) = line.split_whitespace().find_map(|w| w.strip_prefix("listen=")) {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = rx.recv_timeout(DEADLINE).expect("the proxy says where it listens");
        Self { child, addr, log }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("the proxy's port")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
