//! A `wss://` tunnel: sandboxd trusts a server certificate signed by the CA in
//! `AGENTHOLD_TUNNEL_CA_FILE`, and refuses it without that file.

use std::path::PathBuf;
use std::sync::Arc;

use agenthold_plumbing::tls::server_config;
use agenthold_sandboxd::protocol::DataKind;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::harness::{DEADLINE, Sandboxd, Server};

/// A CA (its certificate in a PEM file) and an acceptor for a certificate it signed for
/// `127.0.0.1` and `localhost`.
struct TestCa {
    dir: PathBuf,
    ca_file: PathBuf,
    acceptor: TlsAcceptor,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("server key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("params");
        let cert = params.signed_by(&key, &issuer).expect("server certificate");

        let dir = std::env::temp_dir().join(format!("sandboxd-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).expect("write the CA");

        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = server_config(chain, key, &[]).expect("server config");
        Self { dir, ca_file, acceptor: TlsAcceptor::from(Arc::new(config)) }
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

#[tokio::test]
async fn wss_works_with_the_ca_file_and_is_refused_without_it() {
    let ca = TestCa::new("trust");
    let server = Server::start().await;
    let url = server.url.replace("ws://", "wss://");
    let ca_file = ca.ca_file.to_str().expect("utf8 path");
    let sandboxd = Sandboxd::start(&url, &[("AGENTHOLD_TUNNEL_CA_FILE", ca_file)]);
    let tcp = server.accept_tcp().await;
    let tls = tokio::time::timeout(DEADLINE, ca.acceptor.accept(tcp)).await.expect("in time").expect("TLS handshake");
    let mut conn = Server::handshake(Box::new(tls)).await;
    assert_eq!(conn.path, "/tunnel");
    conn.handshake().await;
    conn.start(1, &["echo", "over tls"], &[]).await;
    assert_eq!(conn.output(DataKind::Stdout, 1, 0, 9).await, b"over tls\n");
    sandboxd.stop().await;

    // The same server without the CA file: only the public roots, which did not sign it.
    let mut sandboxd = Sandboxd::start(&url, &[]);
    for attempt in 0..2 {
        let tcp = server.accept_tcp().await;
        let refused = tokio::time::timeout(DEADLINE, ca.acceptor.accept(tcp)).await.expect("in time");
        assert!(refused.is_err(), "attempt {attempt}: sandboxd must refuse an unknown CA");
    }
    sandboxd.assert_running();
    sandboxd.stop().await;
}
