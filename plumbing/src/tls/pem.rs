//! Certificates and private keys from PEM files or PEM text. A source without what was asked
//! for is an error ([`TlsError::Missing`]), so a mistyped path or a swapped certificate and key
//! is caught where it is configured, not at the first handshake.

use std::path::Path;

use rustls_pki_types::pem::{self, PemObject as _};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

/// Every certificate in the PEM file at `path` (at least one).
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let origin = || path.display().to_string();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| TlsError::Pem { origin: origin(), error })?;
    non_empty(certs, origin)
}

/// Every certificate in `text` (at least one); `origin` names it in errors (a variable's name).
pub fn parse_certs(origin: &str, text: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem { origin: origin.to_owned(), error })?;
    non_empty(certs, || origin.to_owned())
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file at `path`.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|error| match error {
        pem::Error::NoItemsFound => TlsError::Missing { origin: path.display().to_string(), wanted: "PEM private key" },
        error => TlsError::Pem { origin: path.display().to_string(), error },
    })
}

fn non_empty(
    certs: Vec<CertificateDer<'static>>,
    origin: impl FnOnce() -> String,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    if certs.is_empty() {
        return Err(TlsError::Missing { origin: origin(), wanted: "PEM certificate" });
    }
    Ok(certs)
}
