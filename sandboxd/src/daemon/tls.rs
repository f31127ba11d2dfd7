//! TLS for a `wss://` tunnel: which server certificates sandboxd trusts. The public web roots
//! (compiled in, so an image without a CA bundle still works) plus, optionally, the CAs in a PEM
//! file (`AGENTHOLD_TUNNEL_CA_FILE`) or given inline (`AGENTHOLD_TUNNEL_CA_PEM`, which the
//! server's drivers set from its `AGENTHOLD_TUNNEL_TLS_CA`) for a server with a private CA or a
//! self-signed certificate. Built by `agenthold-plumbing` (rustls with ring; TLS 1.2 and 1.3).

use std::path::Path;
use std::sync::Arc;

use agenthold_plumbing::tls::{ClientTls, TlsError};

/// The client configuration for `wss://` URLs.
pub fn client_config(ca_file: Option<&Path>, ca_pem: Option<&str>) -> Result<Arc<rustls::ClientConfig>, String> {
    trusting(ca_file, ca_pem).and_then(ClientTls::build).map(Arc::new).map_err(|e| format!("the tunnel CA: {e}"))
}

fn trusting(ca_file: Option<&Path>, ca_pem: Option<&str>) -> Result<ClientTls, TlsError> {
    let mut client = ClientTls::public_roots();
    if let Some(text) = ca_pem {
        client = client.trust_pem("AGENTHOLD_TUNNEL_CA_PEM", text)?;
    }
    if let Some(path) = ca_file {
        client = client.trust_pem_file(path)?;
    }
    Ok(client)
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
        assert!(err.contains("no PEM certificate"), "{err}");
        std::fs::remove_file(empty).ok();
        assert!(client_config(None, None).is_ok());
        assert!(client_config(None, Some("not a certificate")).is_err());
    }
}
