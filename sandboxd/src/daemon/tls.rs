//! TLS for a `wss://` tunnel: which server certificates sandboxd trusts. The public web roots
//! (compiled in, so an image without a CA bundle still works) plus, optionally, the CAs in a PEM
//! file (`AGENTHOLD_TUNNEL_CA_FILE`) or given inline (`AGENTHOLD_TUNNEL_CA_PEM`, which the
//! server's drivers set from its `AGENTHOLD_TUNNEL_TLS_CA`) for a server with a private CA or a
//! self-signed certificate. rustls with the ring provider; TLS 1.2 and 1.3.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// The client configuration for `wss://` URLs.
pub fn client_config(ca_file: Option<&Path>, ca_pem: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(pem) = ca_pem {
        let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| format!("AGENTHOLD_TUNNEL_CA_PEM: {err}"))?;
        if certs.is_empty() {
            return Err("AGENTHOLD_TUNNEL_CA_PEM holds no certificate".to_owned());
        }
        for cert in certs {
            roots.add(cert).map_err(|err| format!("a certificate in AGENTHOLD_TUNNEL_CA_PEM: {err}"))?;
        }
    }
    if let Some(path) = ca_file {
        let shown = path.display();
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|err| format!("reading the CA file {shown}: {err}"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| format!("the CA file {shown}: {err}"))?;
        if certs.is_empty() {
            return Err(format!("the CA file {shown} holds no certificate"));
        }
        for cert in certs {
            roots.add(cert).map_err(|err| format!("a certificate in {shown}: {err}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS setup: {err}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_an_error() {
        let err = client_config(Some(Path::new("/no/such/ca.pem")), None).expect_err("missing");
        assert!(err.contains("/no/such/ca.pem"), "{err}");
        let empty = std::env::temp_dir().join(format!("sandboxd-empty-ca-{}.pem", std::process::id()));
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let err = client_config(Some(&empty), None).expect_err("empty");
        assert!(err.contains("no certificate"), "{err}");
        std::fs::remove_file(empty).ok();
        assert!(client_config(None, None).is_ok());
        assert!(client_config(None, Some("not a certificate")).is_err());
    }
}
