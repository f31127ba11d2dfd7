//! A client's TLS configuration: whom it trusts, what it offers (ALPN).

use std::path::Path;

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;

use super::{TlsError, pem, provider};

/// Builds a [`rustls::ClientConfig`]: start from [`public_roots`](Self::public_roots) or
/// [`no_roots`](Self::no_roots), add CAs, choose the ALPN protocols, [`build`](Self::build).
#[derive(Debug, Clone)]
pub struct ClientTls {
    roots: RootCertStore,
    alpn: Vec<Vec<u8>>,
}

impl ClientTls {
    /// Trusts the public web roots (Mozilla's, from `webpki-roots`: compiled in, so nothing
    /// depends on the host's or the image's CA bundle).
    pub fn public_roots() -> Self {
        Self { roots: RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }, alpn: Vec::new() }
    }

    /// Trusts nothing but the CAs added next (a private CA, a test's own root).
    pub fn no_roots() -> Self {
        Self { roots: RootCertStore::empty(), alpn: Vec::new() }
    }

    /// Also trusts `certs`; any that cannot be a trust anchor is an error naming `origin`.
    pub fn trust(
        mut self,
        origin: &str,
        certs: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Result<Self, TlsError> {
        for cert in certs {
            self.roots.add(cert).map_err(|error| TlsError::Untrustable { origin: origin.to_owned(), error })?;
        }
        Ok(self)
    }

    /// Also trusts every certificate in the PEM file at `path` (at least one).
    pub fn trust_pem_file(self, path: &Path) -> Result<Self, TlsError> {
        let certs = pem::read_certs(path)?;
        self.trust(&path.display().to_string(), certs)
    }

    /// Also trusts every certificate in the PEM `text` (at least one); `origin` names it in
    /// errors (a variable's name).
    pub fn trust_pem(self, origin: &str, text: &str) -> Result<Self, TlsError> {
        let certs = pem::parse_certs(origin, text)?;
        self.trust(origin, certs)
    }

    /// Also trusts those of `certs` that can be trust anchors, skipping the others (a system CA
    /// bundle may hold some webpki refuses); none usable is an error naming `origin`.
    pub fn trust_usable(mut self, origin: &str, certs: Vec<CertificateDer<'static>>) -> Result<Self, TlsError> {
        let (added, _skipped) = self.roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(TlsError::Missing { origin: origin.to_owned(), wanted: "usable certificate" });
        }
        Ok(self)
    }

    /// Offers these ALPN protocols, most preferred first (none by default).
    pub fn alpn(mut self, protocols: &[&[u8]]) -> Self {
        self.alpn = protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// The configuration: the ring provider, TLS 1.2 and 1.3, no client certificate.
    pub fn build(self) -> Result<rustls::ClientConfig, TlsError> {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?
            .with_root_certificates(self.roots)
            .with_no_client_auth();
        config.alpn_protocols = self.alpn;
        Ok(config)
    }
}
