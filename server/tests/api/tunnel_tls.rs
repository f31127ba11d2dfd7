//! The tunnel listener over TLS with the real sandboxd binary: trusting the server's CA through
//! `AGENTHOLD_TUNNEL_CA_FILE` it connects and says hello; without that file it refuses the
//! certificate and never gets through.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use agenthold_sandboxd::protocol::{Control, PROTOCOL_VERSION, TUNNEL_PATH};
use agenthold_server::tunnel::tls::{TlsListener, acceptor};
use axum::Router;
use axum::extract::WebSocketUpgrade;
use axum::extract::ws::Message;
use axum::routing::get;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(10);

/// A CA, a certificate it signed for 127.0.0.1 and its key, as PEM files in a temp dir.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn new() -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("key");
        // The names sandboxes dial: the local driver's and the Docker driver's default.
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "host.docker.internal".to_owned()])
            .expect("params")
            .signed_by(&key, &issuer)
            .expect("certificate");
        let dir = std::env::temp_dir().join(format!("agenthold-tunnel-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca");
        std::fs::write(dir.join("cert.pem"), cert.pem()).expect("cert");
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("key");
        Self { dir }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// The server's TLS listener with a tunnel route that reports each connection's first message.
async fn serve(certs: &Certs) -> (String, mpsc::Receiver<Control>, tokio::task::JoinHandle<()>) {
    let tls = acceptor(&certs.dir.join("cert.pem"), &certs.dir.join("key.pem")).expect("acceptor");
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = tcp.local_addr().expect("addr").port();
    let (tx, rx) = mpsc::channel(8);
    let route = move |upgrade: WebSocketUpgrade| {
        let tx = tx.clone();
        async move {
            upgrade.on_upgrade(move |mut socket| async move {
                if let Some(Ok(Message::Text(text))) = socket.recv().await
                    && let Ok(control) = serde_json::from_str::<Control>(&text)
                {
                    let _ = tx.send(control).await;
                }
            })
        }
    };
    let router = Router::new().route(TUNNEL_PATH, get(route));
    let task = tokio::spawn(async move {
        let _ = axum::serve(TlsListener::new(tcp, tls), router).await;
    });
    (format!("wss://127.0.0.1:{port}{TUNNEL_PATH}"), rx, task)
}

/// The real sandboxd (built by `cargo build --workspace --bins`) dialling `url`.
fn sandboxd(url: &str, ca_file: Option<PathBuf>) -> Child {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_agenthold")).with_file_name("sandboxd");
    let mut command = Command::new(bin);
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("AGENTHOLD_TUNNEL_URL", url)
        .env("AGENTHOLD_SANDBOX_TOKEN", "tls-test-token")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(ca_file) = ca_file {
        command.env("AGENTHOLD_TUNNEL_CA_FILE", ca_file);
    }
    command.spawn().expect("spawn sandboxd (run `cargo build --workspace --bins` first)")
}

#[tokio::test]
async fn sandboxd_dials_the_tls_tunnel_when_it_trusts_the_ca_and_refuses_it_otherwise() {
    let certs = Certs::new();
    let (url, mut first_messages, server) = serve(&certs).await;

    let mut trusting = sandboxd(&url, Some(certs.dir.join("ca.pem")));
    let hello = tokio::time::timeout(DEADLINE, first_messages.recv()).await.expect("hello in time").expect("hello");
    assert!(matches!(hello, Control::Hello { protocol: PROTOCOL_VERSION, .. }), "{hello:?}");
    trusting.kill().await.expect("kill");

    let mut distrusting = sandboxd(&url, None);
    let stderr = distrusting.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let refusal = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if line.contains("cannot reach the server") {
                return line;
            }
        }
        panic!("sandboxd ended without a word");
    })
    .await
    .expect("sandboxd reports the refused certificate in time");
    assert!(refusal.contains("certificate"), "{refusal}");
    assert!(first_messages.try_recv().is_err(), "nothing got through without the CA");
    distrusting.kill().await.expect("kill");
    server.abort();
}

/// The whole server over a TLS tunnel: the driver hands the server's tunnel CA to sandboxd, which
/// dials `wss://` and runs a real turn.
#[tokio::test]
async fn a_turn_runs_over_the_tls_tunnel_with_the_ca_handed_to_the_sandbox() {
    let certs = Certs::new();
    let path = |file: &str| certs.dir.join(file).to_string_lossy().into_owned();
    let (cert, key, ca) = (path("cert.pem"), path("key.pem"), path("ca.pem"));
    let tls = [("AGENTHOLD_TUNNEL_TLS_CERT", cert.as_str()), ("AGENTHOLD_TUNNEL_TLS_KEY", key.as_str())];
    let server =
        crate::support::TestServer::start_with(&[tls[0], tls[1], ("AGENTHOLD_TUNNEL_TLS_CA", ca.as_str())]).await;
    let agent = server.create_agent(serde_json::json!({})).await;
    let session = server.create_session(&agent).await;
    server.prompt(&session, "text over tls").await;
    let events = server.wait_turns(&session, 1, Duration::from_secs(60)).await;
    assert_eq!(crate::support::texts(&events), ["over tls"], "{events:?}");
}
