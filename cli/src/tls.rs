//! The client's TLS settings, one rustls configuration (ring provider, the crypto stack already in
//! the tree) shared by REST (reqwest) and WebSockets (tokio-tungstenite): the Mozilla roots
//! (`webpki-roots`) plus, with `--ca-file`, the certificates of a PEM file.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use crate::error::Failure;

/// The rustls client configuration: built-in roots, plus every certificate in `ca_file`.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, Failure> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = ca_file {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| Failure::Usage(format!("--ca-file {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(Failure::Usage(format!("--ca-file {}: no PEM certificate in the file", path.display())));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| Failure::Usage(format!("--ca-file {}: {e}", path.display())))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // HTTP/1.1 only: the WebSocket upgrade needs it, and reqwest is built without HTTP/2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("agentholdctl-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        assert!(matches!(client_config(Some(&empty)), Err(Failure::Usage(_))));
        assert!(matches!(client_config(Some(&dir.join("missing.pem"))), Err(Failure::Usage(_))));
        assert!(client_config(None).is_ok());
        std::fs::remove_dir_all(&dir).ok();
    }
}
