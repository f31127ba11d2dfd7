//! `agentholdctl` (the real binary) against a local HTTPS + WSS stand-in of the API: a rustls
//! listener with a certificate from a CA made here with rcgen. With `--ca-file` the CLI trusts
//! it for REST and WebSockets; without it the handshake is refused; `login` stores the URL, token
//! and CA file (mode 0600) for later commands; `prompt --follow` exits with the stop reason's
//! code; a server that never answers hits the timeouts.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use agenthold_plumbing::tls::{HTTP_1_1, server_config};
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

const TOKEN: &str = "ah_tls_test_token";

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("agentholdctl-tls-{}-{n}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// A CA (written to `ca.pem`) and the server side of TLS with a certificate it signed for
/// 127.0.0.1.
fn tls(dir: &Path) -> TlsAcceptor {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca.pem");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("certificate");
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = server_config(chain, key, &[HTTP_1_1]).expect("server config");
    TlsAcceptor::from(Arc::new(config))
}

/// TCP connections handed to axum once their TLS handshake is done (failed ones are dropped).
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else { continue };
            if let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp)).await {
                return (stream, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// The API's answer to a missing or wrong token.
type Refusal = (StatusCode, Json<Value>);

fn authorized(headers: &HeaderMap) -> Result<(), Refusal> {
    let expected = format!("Bearer {TOKEN}");
    if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str()) {
        return Ok(());
    }
    let body = json!({"error": {"code": "UNAUTHORIZED", "message": "a valid token is needed"}});
    Err((StatusCode::UNAUTHORIZED, Json(body)))
}

/// The routes the tests call, answering like the API does. A session's id names the stop reason
/// its turn ends with.
fn stand_in() -> Router {
    Router::new()
        .route(
            "/api/v1/me",
            get(|headers: HeaderMap| async move {
                authorized(&headers).map(|()| Json(json!({"id": "u1", "username": "tester"})))
            }),
        )
        .route(
            "/api/v1/agents/{id}",
            get(|headers: HeaderMap, UrlPath(id): UrlPath<String>| async move {
                authorized(&headers).map(|()| Json(json!({"id": id, "name": "demo", "harness": "fake"})))
            }),
        )
        .route(
            "/api/v1/sessions/{id}/prompt",
            post(|headers: HeaderMap| async move {
                authorized(&headers).map(|()| (StatusCode::ACCEPTED, Json(json!({"turn_id": "t1", "seq": 3}))))
            }),
        )
        .route(
            "/api/v1/sessions/{id}/stream",
            get(
                |headers: HeaderMap,
                 UrlPath(id): UrlPath<String>,
                 Query(query): Query<std::collections::HashMap<String, String>>,
                 upgrade: WebSocketUpgrade| async move {
                    if let Err(refusal) = authorized(&headers) {
                        return refusal.into_response();
                    }
                    let after: u64 = query.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
                    let stop_reason = id.trim_start_matches("s-").to_owned();
                    upgrade.on_upgrade(move |mut socket| async move {
                        let events = [
                            json!({"session_id": id, "seq": 3, "type": "prompt",
                                "payload": {"turn_id": "t1", "prompt": [{"type": "text", "text": "hi"}]}}),
                            json!({"session_id": id, "seq": 4, "type": "update", "payload": {
                                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "over TLS"}}}),
                            json!({"session_id": id, "seq": 5, "type": "turn_end",
                                "payload": {"turn_id": "t1", "stop_reason": stop_reason, "duration_ms": 7}}),
                        ];
                        for event in events.iter().filter(|e| e["seq"].as_u64().unwrap_or(0) > after) {
                            if socket.send(Message::text(event.to_string())).await.is_err() {
                                return;
                            }
                        }
                        // A stream does not end by itself: wait for the client to go.
                        while let Some(Ok(_)) = socket.recv().await {}
                    })
                },
            ),
        )
}

/// Serves the stand-in over TLS; returns its `https://` URL.
async fn serve(dir: &Path) -> String {
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = tcp.local_addr().expect("addr").port();
    let listener = TlsListener { tcp, acceptor: tls(dir) };
    tokio::spawn(async move {
        let _ = axum::serve(listener, stand_in()).await;
    });
    format!("https://127.0.0.1:{port}")
}

/// Runs the CLI with a clean environment (no AGENTHOLD_* from the caller, a config dir of its own).
async fn ctl(config: &Path, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentholdctl"));
    command.args(args).env("XDG_CONFIG_HOME", config).kill_on_drop(true);
    for key in ["AGENTHOLD_URL", "AGENTHOLD_TOKEN", "AGENTHOLD_CA_FILE", "AGENTHOLD_CREDENTIALS"] {
        command.env_remove(key);
    }
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("agentholdctl did not finish within 60 s")
        .expect("running agentholdctl")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn https_with_the_ca_file_and_refused_without_it() {
    let dir = Scratch::new();
    let url = serve(&dir.0).await;
    let ca = dir.0.join("ca.pem");
    let ca = ca.to_str().expect("path");
    let out = ctl(&dir.0, &["--url", &url, "--ca-file", ca, "--token", TOKEN, "--json", "agents", "show", "a1"]).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let agent: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!((agent["id"].as_str(), agent["name"].as_str()), (Some("a1"), Some("demo")));

    // Text output is the default.
    let out = ctl(&dir.0, &["--url", &url, "--ca-file", ca, "--token", TOKEN, "agents", "show", "a1"]).await;
    assert_eq!(text(&out.stdout), "id: a1\nname: demo\nharness: fake\n");

    // Without the CA the certificate is not trusted: a clear error, exit 1.
    let out = ctl(&dir.0, &["--url", &url, "--token", TOKEN, "agents", "show", "a1"]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("certificate") || stderr.contains("UnknownIssuer"), "stderr: {stderr}");
    assert!(!stderr.contains(TOKEN), "the token is never printed: {stderr}");

    // A wrong token: the API's error code.
    let out = ctl(&dir.0, &["--url", &url, "--ca-file", ca, "--token", "ah_wrong", "agents", "show", "a1"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("HTTP 401 UNAUTHORIZED"), "stderr: {}", text(&out.stderr));

    // A CA file that holds no certificate is bad usage.
    std::fs::write(dir.0.join("junk.pem"), "junk").expect("write");
    let junk = dir.0.join("junk.pem");
    let out = ctl(&dir.0, &["--url", &url, "--ca-file", junk.to_str().expect("path"), "agents", "show", "a1"]).await;
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
}

#[tokio::test]
async fn login_stores_the_server_for_later_commands() {
    let dir = Scratch::new();
    let url = serve(&dir.0).await;
    let ca = dir.0.join("ca.pem");
    let config = dir.0.join("config");

    // A wrong token is checked and not stored.
    let out =
        ctl(&config, &["login", "--url", &url, "--ca-file", ca.to_str().expect("path"), "--token", "ah_bad"]).await;
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let file = config.join("agenthold/credentials");
    assert!(!file.exists());

    // The token on stdin.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentholdctl"));
    command
        .args(["login", "--url", &url, "--ca-file", ca.to_str().expect("path")])
        .env("XDG_CONFIG_HOME", &config)
        .env_remove("AGENTHOLD_TOKEN")
        .env_remove("AGENTHOLD_URL")
        .env_remove("AGENTHOLD_CA_FILE")
        .env_remove("AGENTHOLD_CREDENTIALS")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, format!("{TOKEN}\n").as_bytes()).await.expect("stdin");
    drop(stdin);
    let out = child.wait_with_output().await.expect("login");
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("as tester"), "stdout: {}", text(&out.stdout));
    assert!(!text(&out.stdout).contains(TOKEN));

    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().expect("dir")), 0o700);

    // Later commands need neither --url, --token nor --ca-file; REST and WebSocket alike.
    let out = ctl(&config, &["--compact", "agents", "show", "a1"]).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    // One line of JSON (key order depends on serde_json's features in the build, so compare values).
    let shown = text(&out.stdout);
    assert_eq!(shown.lines().count(), 1, "{shown}");
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(shown, serde_json::json!({"harness": "fake", "id": "a1", "name": "demo"}));
    let out = ctl(&config, &["prompt", "s-end_turn", "hi", "--follow"]).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));

    // Another server does not get the stored token.
    let out = ctl(&config, &["--url", "http://127.0.0.1:9", "--connect-timeout", "2", "agents", "show", "a1"]).await;
    assert_eq!(out.status.code(), Some(1));

    // A broken login file is a clear error, and logout still removes it.
    let saved = std::fs::read(&file).expect("login file");
    std::fs::write(&file, "{broken").expect("write");
    let out = ctl(&config, &["agents", "show", "a1"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("login again"), "{}", text(&out.stderr));
    let out = ctl(&config, &["logout"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!file.exists());
    std::fs::write(&file, saved).expect("write");
    let out = ctl(&config, &["logout"]).await;
    assert!(out.status.success());
    assert!(!file.exists());
    let out = ctl(&config, &["--url", &url, "--ca-file", ca.to_str().expect("path"), "agents", "show", "a1"]).await;
    assert!(text(&out.stderr).contains("401"), "logged out: {}", text(&out.stderr));
}

#[tokio::test]
async fn prompt_follow_over_wss_exits_with_the_stop_reason() {
    let dir = Scratch::new();
    let url = serve(&dir.0).await;
    let ca = dir.0.join("ca.pem");
    let base = ["--url", &url, "--ca-file", ca.to_str().expect("path"), "--token", TOKEN];
    let follow = |session: &'static str, json: bool| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["prompt", session, "hi", "--follow", "--timeout", "20"]);
        if json {
            args.push("--json");
        }
        args
    };

    let out = ctl(&dir.0, &follow("s-end_turn", false)).await;
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "over TLS\n[turn_end] end_turn (7 ms)\n");

    let out = ctl(&dir.0, &follow("s-end_turn", true)).await;
    let lines: Vec<Value> = text(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(lines.iter().map(|e| e["seq"].as_u64().unwrap_or(0)).collect::<Vec<_>>(), [3, 4, 5]);

    for (session, code) in [("s-cancelled", 4), ("s-error", 5), ("s-max_tokens", 6), ("s-refusal", 6)] {
        let out = ctl(&dir.0, &follow(session, false)).await;
        assert_eq!(out.status.code(), Some(code), "{session}: stderr {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("the turn ended"), "{session}: {}", text(&out.stderr));
    }

    // `watch` over wss too.
    let mut args = base.to_vec();
    args.extend(["watch", "s-end_turn", "--until", "turn_end", "--timeout", "20"]);
    let out = ctl(&dir.0, &args).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 3);
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_timeouts() {
    let dir = Scratch::new();
    // Accepts connections (the kernel does) but never speaks: no TLS handshake, no HTTP answer.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = silent.local_addr().expect("addr").port();
    for url in [format!("https://127.0.0.1:{port}"), format!("http://127.0.0.1:{port}")] {
        let started = Instant::now();
        let out = ctl(&dir.0, &["--url", &url, "--http-timeout", "1", "--token", TOKEN, "agents", "show", "a1"]).await;
        assert_eq!(out.status.code(), Some(3), "{url}: stderr {}", text(&out.stderr));
        assert!(started.elapsed() < Duration::from_secs(20));
        let started = Instant::now();
        let out = ctl(&dir.0, &["--url", &url, "--http-timeout", "1", "--token", TOKEN, "watch", "s1"]).await;
        assert_eq!(out.status.code(), Some(3), "{url}: stderr {}", text(&out.stderr));
        assert!(started.elapsed() < Duration::from_secs(20));
    }
    drop(silent);
}
