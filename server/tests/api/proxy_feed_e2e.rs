//! The file the server writes drives the real `agenthold-proxy` binary: a request sent with the
//! sandbox's proxy environment (from `proxy_feed::sandbox_proxy_env`) and its placeholder
//! reaches a loopback HTTPS stand-in for `api.anthropic.com` (the test-only upstream override)
//! with the real value in `x-api-key`; after detaching, the proxy refuses the host.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use agenthold_server::ids::AgentId;
use agenthold_server::secrets::master_key::MasterKey;

use crate::secrets_support::{admin, create_secret, database, personal_workspace, unique_value};
use crate::support::TestServer;

const DEADLINE: Duration = Duration::from_secs(15);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A loopback HTTPS server for `api.anthropic.com` (its certificate from a root made here) that
/// records the `x-api-key` of every request and answers `200 ok`.
struct StandIn {
    addr: std::net::SocketAddr,
    root: PathBuf,
    seen: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    async fn start(dir: &Path) -> Self {
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
        let config = rustls::ServerConfig::builder_with_provider(provider())
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
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                tokio::spawn(async move {
                    let Ok(Ok(mut tls)) = tokio::time::timeout(DEADLINE, acceptor.accept(stream)).await else { return };
                    let Some(head) = read_head(&mut tls).await else { return };
                    let key = head
                        .lines()
                        .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("x-api-key")))
                        .map(|(_, v)| v.trim().to_owned());
                    record.lock().expect("seen").push(key);
                    let _ = tls.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
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
async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
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

/// The real proxy binary (built by `cargo build --workspace --bins`) on the server's file.
struct Proxy {
    child: Child,
    addr: String,
}

impl Proxy {
    fn start(config: &Path) -> Self {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_agenthold")).with_file_name("agenthold-proxy");
        let mut child = Command::new(&bin)
            .args(["--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting agenthold-proxy (run `cargo build --workspace --bins` first)");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split_whitespace().find_map(|w| w.strip_prefix("listen=")) {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = rx.recv_timeout(DEADLINE).expect("the proxy says where it listens");
        Self { child, addr }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `CONNECT api.anthropic.com:443` through `proxy` with these credentials; the status, and the
/// stream when it is 200.
async fn connect(proxy: &str, user: &str, password: &str) -> (u16, Option<TcpStream>) {
    let mut stream = TcpStream::connect(proxy).await.expect("connect to the proxy");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let head = format!(
        "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\nProxy-Authorization: Basic {basic}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write CONNECT");
    let response = read_head(&mut stream).await.expect("a CONNECT response");
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, (status == 200).then_some(stream))
}

/// Sends `GET /v1/models` with `x-api-key: placeholder` over TLS inside the tunnel, trusting only
/// the proxy's CA; returns the response status.
async fn get_through(stream: TcpStream, proxy_ca: &Path, placeholder: &str) -> u16 {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(proxy_ca).expect("the proxy's CA")).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from("api.anthropic.com").expect("name");
    let mut tls =
        tokio::time::timeout(DEADLINE, tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream))
            .await
            .expect("TLS in time")
            .expect("TLS with the proxy's leaf for api.anthropic.com");
    let request = format!(
        "GET /v1/models HTTP/1.1\r\nHost: api.anthropic.com\r\nx-api-key: {placeholder}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.expect("write request");
    let head = read_head(&mut tls).await.expect("a response");
    head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn a_request_with_the_sandbox_environment_gets_the_real_value_through_the_real_proxy() {
    let dir = std::env::temp_dir().join(format!("agenthold-feed-e2e-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("dir");
    let stand_in = StandIn::start(&dir).await;
    let overrides = json!({"api.anthropic.com:443": {"addr": stand_in.addr.to_string(), "ca_cert": stand_in.root}});
    let server = TestServer::start_with(&[("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES", &overrides.to_string())]).await;
    let config = server.data_dir.join("proxy.json");
    let agent = server.create_agent(json!({})).await;
    let workspace = personal_workspace(&server).await;
    let value = unique_value();
    let secret =
        create_secret(&server, &workspace, json!({"name": "anthropic", "preset": "anthropic", "value": value})).await;
    let attach = format!("/api/v1/agents/{agent}/secrets/ANTHROPIC_API_KEY");
    assert_eq!(admin(&server, "PUT", &attach, json!({"secret_id": secret})).await.0, 200);

    // What the harness would get: the proxy environment and the placeholder.
    let pool = database(&server).await;
    let key = MasterKey::from_file(&server.data_dir.join("master.key")).expect("the server's master key");
    let agent_id = AgentId(agent.parse().expect("uuid"));
    let proxy = Proxy::start(&config);
    let env = agenthold_server::proxy_feed::sandbox_proxy_env(&pool, &key, agent_id, &proxy.addr)
        .await
        .expect("the proxy environment");
    let url = env.iter().find(|(k, _)| k == "HTTPS_PROXY").map(|(_, v)| v.clone()).expect("HTTPS_PROXY");
    let (user, password) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.rsplit_once('@'))
        .and_then(|(creds, _)| creds.split_once(':'))
        .map(|(u, p)| (u.to_owned(), p.to_owned()))
        .expect("http://user:password@host:port");
    let placeholder = agenthold_server::secrets::sandbox_env(&pool, agent_id)
        .await
        .expect("the placeholder env")
        .into_iter()
        .find(|(name, _)| name == "ANTHROPIC_API_KEY")
        .map(|(_, placeholder)| placeholder)
        .expect("ANTHROPIC_API_KEY");
    let proxy_ca = server.data_dir.join("proxy-ca").join("ca.pem");

    // The proxy follows the server's file: once the rule is in, the stand-in gets the value.
    let start = Instant::now();
    let status = loop {
        if let (200, Some(stream)) = connect(&proxy.addr, &user, &password).await {
            break get_through(stream, &proxy_ca, &placeholder).await;
        }
        assert!(start.elapsed() < DEADLINE, "the proxy never intercepted api.anthropic.com for the sandbox");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, 200);
    assert_eq!(stand_in.seen.lock().expect("seen").clone(), [Some(value.clone())], "the real value, in x-api-key");

    // A wrong password is refused.
    assert_eq!(connect(&proxy.addr, &user, "not-the-password").await.0, 407);

    // Detach: within seconds the proxy refuses the host for this sandbox.
    assert_eq!(admin(&server, "DELETE", &attach, json!({})).await.0, 204);
    let start = Instant::now();
    loop {
        let (status, _) = connect(&proxy.addr, &user, &password).await;
        if status == 403 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the proxy still lets the sandbox reach api.anthropic.com");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("after detaching, the proxy refused the host within {:?}", start.elapsed());
    assert_eq!(stand_in.seen.lock().expect("seen").len(), 1);
    assert!(!server.log().contains(&value) && !server.log().contains(&password), "nothing secret in the server's log");
    let _ = std::fs::remove_dir_all(&dir);
}
