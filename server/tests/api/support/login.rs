//! A loopback HTTPS stand-in for the providers' APIs (`api.anthropic.com`, `api.openai.com`,
//! `chatgpt.com`, `auth.openai.com`), its certificate from a root made here: it records each
//! request's host, path and credential headers, and answers like a provider — `401` with a JSON
//! error for a key that contains `revoked`, `200` otherwise; `POST /oauth/token` is the ChatGPT
//! refresh exchange: it issues `rt-<n>` refresh tokens and JWT access tokens expiring in
//! [`TOKEN_LIFETIME_SECS`], and answers `refresh_token_reused` once told to reject.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls_pki_types::PrivateKeyDer;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::support::proxy::{DEADLINE, read_head};

/// How long the access tokens the stand-in issues live.
pub const TOKEN_LIFETIME_SECS: i64 = 7200;

/// A JWT with these claims (unsigned; nobody verifies it here).
pub fn jwt(claims: &Value) -> String {
    use base64::Engine;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.stand-in-signature", b64(&json!({"alg": "RS256", "typ": "JWT"})), b64(claims))
}

/// A request the stand-in got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The request line (`GET /v1/models HTTP/1.1`).
    pub line: String,
    /// `x-api-key`.
    pub api_key: Option<String>,
    /// `authorization`.
    pub authorization: Option<String>,
    /// The body (token requests).
    pub body: String,
}

/// The stand-in; stopped on drop.
pub struct Providers {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// The root its certificate comes from (PEM).
    pub root: PathBuf,
    /// Every request, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Refresh exchanges are refused as `refresh_token_reused` while set.
    pub reject_refresh: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)))
        .map(|(_, v)| v.trim().to_owned())
}

impl Providers {
    /// Starts one, writing its root into `dir`.
    pub async fn start(dir: &Path) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "provider stand-in root");
        let root_key = KeyPair::generate().expect("key");
        let root_cert = params.self_signed(&root_key).expect("root");
        let root = dir.join("providers-root.pem");
        std::fs::write(&root, root_cert.pem()).expect("write root");
        let issuer = Issuer::new(params, root_key);
        let leaf_key = KeyPair::generate().expect("key");
        let names =
            ["api.anthropic.com", "api.openai.com", "chatgpt.com", "auth.openai.com"].map(str::to_owned).to_vec();
        let leaf = CertificateParams::new(names).expect("params").signed_by(&leaf_key, &issuer).expect("leaf");
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
        let reject_refresh = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reject = Arc::clone(&reject_refresh);
        let issued = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                let (reject, issued) = (Arc::clone(&reject), Arc::clone(&issued));
                tokio::spawn(async move {
                    let Ok(Ok(mut tls)) = tokio::time::timeout(DEADLINE, acceptor.accept(stream)).await else { return };
                    let Some(head) = read_head(&mut tls).await else { return };
                    let length: usize = header(&head, "content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
                    let mut body = vec![0u8; length.min(64 * 1024)];
                    if tokio::io::AsyncReadExt::read_exact(&mut tls, &mut body).await.is_err() {
                        return;
                    }
                    let seen = Seen {
                        line: head.lines().next().unwrap_or_default().to_owned(),
                        api_key: header(&head, "x-api-key"),
                        authorization: header(&head, "authorization"),
                        body: String::from_utf8_lossy(&body).into_owned(),
                    };
                    let token_request = seen.line.starts_with("POST /oauth/token");
                    let revoked = [&seen.api_key, &seen.authorization]
                        .iter()
                        .any(|v| v.as_ref().is_some_and(|v| v.contains("revoked")));
                    record.lock().expect("seen").push(seen);
                    let (status, body) = if token_request && reject.load(std::sync::atomic::Ordering::SeqCst) {
                        (
                            "400 Bad Request",
                            json!({"error": {"code": "refresh_token_reused", "message": "already used"}}),
                        )
                    } else if token_request {
                        let n = issued.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        let exp = chrono::Utc::now().timestamp() + TOKEN_LIFETIME_SECS;
                        let access = jwt(&json!({"exp": exp, "n": n}));
                        (
                            "200 OK",
                            json!({"access_token": access, "refresh_token": format!("rt-{n}"), "expires_in": TOKEN_LIFETIME_SECS}),
                        )
                    } else if revoked {
                        (
                            "401 Unauthorized",
                            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
                        )
                    } else {
                        ("200 OK", json!({"data": [{"id": "stand-in-model"}]}))
                    };
                    let body = body.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self { addr, root, seen, reject_refresh, task }
    }

    /// The upstream overrides that send the providers' hosts here.
    pub fn overrides(&self) -> Value {
        let to = json!({"addr": self.addr.to_string(), "ca_cert": self.root});
        json!({"api.anthropic.com:443": to, "api.openai.com:443": to, "chatgpt.com:443": to, "auth.openai.com:443": to})
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

impl Drop for Providers {
    fn drop(&mut self) {
        self.task.abort();
    }
}
