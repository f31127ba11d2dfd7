//! TLS plumbing shared by both sides: the crypto provider, and the upstream client
//! configurations (public roots only; a test-only override may add one CA for its own host).

use std::sync::{Arc, OnceLock};

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::CertificateDer;

/// The one crypto provider (ring) every config is built with.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// The upstream client configuration: webpki (Mozilla) roots, never the proxy's own CA, ALPN
/// `http/1.1`; plus `extra` only for a test-only upstream override.
pub fn client_with(extra: &[CertificateDer<'static>]) -> Result<ClientConfig, rustls::Error> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for cert in extra {
        roots.add(cert.clone())?;
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
