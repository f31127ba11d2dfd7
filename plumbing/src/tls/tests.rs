//! Real handshakes between the configurations built here, in memory (no sockets), with a CA and
//! a certificate made for each test.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::{ClientConnection, ServerConnection};
use rustls_pki_types::{CertificateDer, ServerName};

use super::*;

/// A CA, and a certificate it signed for `localhost`, as PEM files in a directory of their own.
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
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .signed_by(&key, &issuer)
            .expect("certificate");
        let dir = std::env::temp_dir().join(format!("agenthold-plumbing-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("CA");
        std::fs::write(dir.join("cert.pem"), cert.pem()).expect("cert");
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("key");
        std::fs::write(dir.join("empty.pem"), "not PEM at all\n").expect("empty");
        Self { dir, ca: ca.der().clone() }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn server(&self, protocols: &[&[u8]]) -> rustls::ServerConfig {
        let chain = pem::read_certs(&self.path("cert.pem")).expect("chain");
        let key = pem::read_key(&self.path("key.pem")).expect("key");
        server_config(chain, key, protocols).expect("server config")
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// Runs a handshake to its end; the negotiated ALPN protocol, or the first error.
fn handshake(client: rustls::ClientConfig, server: rustls::ServerConfig) -> Result<Option<Vec<u8>>, rustls::Error> {
    let name = ServerName::try_from("localhost").expect("name");
    let mut client = ClientConnection::new(Arc::new(client), name)?;
    let mut server = ServerConnection::new(Arc::new(server))?;
    let mut wire = Vec::new();
    for _ in 0..10 {
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(client.alpn_protocol().map(<[u8]>::to_vec));
        }
        wire.clear();
        client.write_tls(&mut wire).expect("client writes");
        server.read_tls(&mut wire.as_slice()).expect("server reads");
        server.process_new_packets()?;
        wire.clear();
        server.write_tls(&mut wire).expect("server writes");
        client.read_tls(&mut wire.as_slice()).expect("client reads");
        client.process_new_packets()?;
    }
    panic!("the handshake did not finish")
}

#[test]
fn a_client_trusting_the_ca_shakes_hands_and_agrees_on_http_1_1() {
    let certs = Certs::new("trust");
    let client = ClientTls::public_roots().trust_pem_file(&certs.path("ca.pem")).expect("trusted");
    let client = client.alpn(&[HTTP_1_1]).build();
    let agreed = handshake(client.expect("client config"), certs.server(&[HTTP_1_1])).expect("handshake");
    assert_eq!(agreed.as_deref(), Some(HTTP_1_1));

    let without_alpn = ClientTls::no_roots().trust("ca", [certs.ca.clone()]).expect("trusted").build();
    let agreed = handshake(without_alpn.expect("client config"), certs.server(&[HTTP_1_1])).expect("handshake");
    assert_eq!(agreed, None, "nothing offered, nothing agreed");
}

#[test]
fn a_client_without_the_ca_is_refused() {
    let certs = Certs::new("refused");
    for client in [ClientTls::public_roots(), ClientTls::no_roots()] {
        let refused = handshake(client.build().expect("client config"), certs.server(&[])).expect_err("refused");
        assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
    }
}

#[test]
fn pem_without_what_was_asked_for_is_an_error_naming_its_origin() {
    let certs = Certs::new("pem");
    let missing = pem::read_certs(&certs.path("missing.pem")).expect_err("missing").to_string();
    assert!(missing.contains("missing.pem") && missing.contains("No such file"), "{missing}");
    let empty = pem::read_certs(&certs.path("empty.pem")).expect_err("empty").to_string();
    assert!(empty.ends_with("empty.pem: no PEM certificate in it"), "{empty}");
    let swapped = pem::read_certs(&certs.path("key.pem")).expect_err("a key").to_string();
    assert!(swapped.contains("no PEM certificate"), "{swapped}");
    let no_key = pem::read_key(&certs.path("cert.pem")).expect_err("a certificate").to_string();
    assert!(no_key.ends_with("cert.pem: no PEM private key in it"), "{no_key}");
    let text = std::fs::read_to_string(certs.path("ca.pem")).expect("CA");
    assert_eq!(pem::parse_certs("CA_PEM", &text).expect("parses"), vec![certs.ca.clone()]);
    let bad = ClientTls::no_roots().trust_pem("CA_PEM", "nothing").expect_err("no certificate").to_string();
    assert_eq!(bad, "CA_PEM: no PEM certificate in it");
    let file = ClientTls::no_roots().trust_pem_file(&certs.path("empty.pem")).expect_err("no certificate");
    assert!(file.to_string().ends_with("empty.pem: no PEM certificate in it"), "{file}");
}

#[test]
fn a_key_of_another_certificate_does_not_go() {
    let (one, other) = (Certs::new("one"), Certs::new("other"));
    let chain = pem::read_certs(&one.path("cert.pem")).expect("chain");
    let key = pem::read_key(&other.path("key.pem")).expect("key");
    let error = server_config(chain, key, &[]).expect_err("mismatched").to_string();
    assert!(error.contains("do not go together"), "{error}");
}

#[test]
fn unusable_certificates_are_refused_or_skipped() {
    let certs = Certs::new("usable");
    let garbage = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
    let strict = ClientTls::no_roots().trust("bundle", [garbage.clone()]).expect_err("refused").to_string();
    assert!(strict.starts_with("bundle: a certificate that cannot be trusted"), "{strict}");
    let lenient = ClientTls::no_roots().trust_usable("bundle", vec![garbage.clone(), certs.ca.clone()]);
    handshake(lenient.expect("one usable").build().expect("client config"), certs.server(&[])).expect("handshake");
    let none = ClientTls::no_roots().trust_usable("bundle", vec![garbage]).expect_err("none usable").to_string();
    assert_eq!(none, "bundle: no usable certificate in it");
}
