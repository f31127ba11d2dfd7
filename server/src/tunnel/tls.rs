//! TLS on the tunnel listener (`wss://`), for sandboxes on other hosts: the certificate and key
//! (`AGENTHOLD_TUNNEL_TLS_CERT` / `AGENTHOLD_TUNNEL_TLS_KEY`, PEM) and [`TlsListener`], an
//! [`axum::serve::Listener`] that hands axum connections whose TLS handshake is done.
//!
//! Built on `tokio-rustls` (the configuration from `agenthold-plumbing`: rustls with ring) rather
//! than `axum-server`: the listener is the only thing missing, and this keeps axum's own `serve`
//! with its graceful shutdown. Handshakes run concurrently (at most [`MAX_HANDSHAKES`] at once,
//! each within [`HANDSHAKE_TIMEOUT`]), so a client that stalls its handshake never holds up the
//! others.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agenthold_plumbing::tls::{self, pem};
use anyhow::Context as _;
use axum::serve::Listener;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Most TLS handshakes in progress at once; further connections wait in the accept backlog.
pub const MAX_HANDSHAKES: usize = 64;

/// How long a client has to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server side of TLS from a PEM certificate chain and a PEM private key (ALPN `http/1.1`).
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = pem::read_certs(cert).context("the tunnel TLS certificate")?;
    let key = pem::read_key(key).context("the tunnel TLS key")?;
    let config = tls::server_config(chain, key, &[tls::HTTP_1_1]).context("the tunnel TLS")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

type Handshaken = Option<(TlsStream<TcpStream>, SocketAddr)>;

/// A TCP listener whose connections are handed on once their TLS handshake is done; those that
/// fail or time out are dropped (logged at debug: scanners and wrong-CA clients are routine).
pub struct TlsListener<L> {
    inner: L,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Handshaken>,
}

impl<L> TlsListener<L> {
    /// Wraps a listener of TCP connections.
    pub fn new(inner: L, acceptor: TlsAcceptor) -> Self {
        Self { inner, acceptor, handshakes: JoinSet::new() }
    }
}

impl<L> Listener for TlsListener<L>
where
    L: Listener<Io = TcpStream, Addr = SocketAddr>,
{
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Both branches are cancel safe: an accepted socket is in the set before any await.
            tokio::select! {
                Some(done) = self.handshakes.join_next() => {
                    if let Ok(Some(handshaken)) = done {
                        return handshaken;
                    }
                }
                (tcp, addr) = self.inner.accept(), if self.handshakes.len() < MAX_HANDSHAKES => {
                    let acceptor = self.acceptor.clone();
                    self.handshakes.spawn(async move {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(tls)) => Some((tls, addr)),
                            Ok(Err(error)) => {
                                tracing::debug!(%addr, %error, "tunnel TLS handshake failed");
                                None
                            }
                            Err(_) => {
                                tracing::debug!(%addr, "tunnel TLS handshake timed out");
                                None
                            }
                        }
                    });
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use axum::Router;
    use axum::extract::WebSocketUpgrade;
    use axum::extract::ws::Message;
    use axum::routing::get;
    use futures_util::{SinkExt as _, StreamExt as _};
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use rustls::pki_types::CertificateDer;
    use tokio::net::TcpListener;
    use tokio_tungstenite::Connector;
    use tokio_tungstenite::tungstenite;

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// A CA and a certificate it signed for 127.0.0.1, as PEM files.
    struct Certs {
        dir: PathBuf,
        ca: CertificateDer<'static>,
    }

    impl Certs {
        fn new(name: &str) -> Self {
            let ca_key = KeyPair::generate().expect("CA key");
            let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
            ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
            let issuer = Issuer::new(ca_params, ca_key);
            let key = KeyPair::generate().expect("key");
            let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
            let cert = params.signed_by(&key, &issuer).expect("certificate");
            let dir = std::env::temp_dir().join(format!("agenthold-tunnel-tls-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("dir");
            std::fs::write(dir.join("cert.pem"), cert.pem()).expect("cert");
            std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("key");
            Self { dir, ca: ca.der().clone() }
        }

        fn acceptor(&self) -> TlsAcceptor {
            acceptor(&self.dir.join("cert.pem"), &self.dir.join("key.pem")).expect("acceptor")
        }
    }

    impl Drop for Certs {
        fn drop(&mut self) {
            std::fs::remove_dir_all(&self.dir).ok();
        }
    }

    /// Serves a WebSocket echo on `/tunnel` over TLS; returns its `wss://` URL.
    async fn echo_server(acceptor: TlsAcceptor) -> (String, tokio::task::JoinHandle<()>) {
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = tcp.local_addr().expect("addr").port();
        let echo = |upgrade: WebSocketUpgrade| async move {
            upgrade.on_upgrade(|mut socket| async move {
                while let Some(Ok(Message::Text(text))) = socket.recv().await {
                    if socket.send(Message::Text(text)).await.is_err() {
                        break;
                    }
                }
            })
        };
        let router = Router::new().route("/tunnel", get(echo));
        let task = tokio::spawn(async move {
            let _ = axum::serve(TlsListener::new(tcp, acceptor), router).await;
        });
        (format!("wss://127.0.0.1:{port}/tunnel"), task)
    }

    fn client(trust: Option<&CertificateDer<'static>>) -> Connector {
        let config = tls::ClientTls::no_roots().trust("the test CA", trust.cloned()).expect("add CA").build();
        Connector::Rustls(Arc::new(config.expect("client config")))
    }

    async fn dial(url: &str, connector: Connector) -> Result<(), tungstenite::Error> {
        let connect = tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector));
        let (mut ws, _) = tokio::time::timeout(DEADLINE, connect).await.expect("in time")?;
        ws.send(tungstenite::Message::text("hello")).await?;
        let echoed = tokio::time::timeout(DEADLINE, ws.next()).await.expect("in time").expect("open")?;
        assert_eq!(echoed, tungstenite::Message::text("hello"));
        Ok(())
    }

    #[tokio::test]
    async fn a_client_trusting_the_ca_gets_through_and_others_are_refused() {
        let certs = Certs::new("trust");
        let (url, server) = echo_server(certs.acceptor()).await;
        dial(&url, client(Some(&certs.ca))).await.expect("a client trusting the CA connects");
        let refused = dial(&url, client(None)).await.expect_err("a client without the CA is refused");
        assert!(refused.to_string().contains("certificate"), "{refused}");
        dial(&url, client(Some(&certs.ca))).await.expect("the listener goes on after a failed handshake");
        server.abort();
    }

    #[tokio::test]
    async fn a_stalled_handshake_does_not_hold_up_the_others() {
        let certs = Certs::new("stall");
        let (url, server) = echo_server(certs.acceptor()).await;
        let addr = url.trim_start_matches("wss://").trim_end_matches("/tunnel").to_owned();
        // Connected, but never says a word of TLS.
        let stalled = TcpStream::connect(&addr).await.expect("connect");
        dial(&url, client(Some(&certs.ca))).await.expect("another client is served meanwhile");
        drop(stalled);
        server.abort();
    }

    fn error(result: anyhow::Result<TlsAcceptor>) -> String {
        match result {
            Ok(_) => panic!("expected an error"),
            Err(error) => format!("{error:#}"),
        }
    }

    #[test]
    fn bad_files_are_errors() {
        let certs = Certs::new("bad");
        let missing = error(acceptor(Path::new("/no/such/cert.pem"), &certs.dir.join("key.pem")));
        assert!(missing.contains("/no/such/cert.pem"), "{missing}");
        let swapped = error(acceptor(&certs.dir.join("key.pem"), &certs.dir.join("cert.pem")));
        assert!(swapped.contains("certificate"), "{swapped}");
        let other = Certs::new("other");
        let mismatched = error(acceptor(&certs.dir.join("cert.pem"), &other.dir.join("key.pem")));
        assert!(mismatched.contains("do not go together"), "{mismatched}");
    }
}
