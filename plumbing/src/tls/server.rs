//! A server's TLS configuration from its certificate chain and key.

use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::{TlsError, provider};

/// The configuration of a server presenting `chain` (leaf first) signed with `key`, accepting
/// the ALPN `protocols` (most preferred first); TLS 1.2 and 1.3, no client certificates.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    protocols: &[&[u8]],
) -> Result<rustls::ServerConfig, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Mismatch)?;
    config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
