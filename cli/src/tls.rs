//! The client's TLS settings, one rustls configuration (built by `agenthold-plumbing`) shared by
//! REST (reqwest) and WebSockets (tokio-tungstenite): the Mozilla roots plus, with `--ca-file`,
//! the certificates of a PEM file.

use std::path::Path;
use std::sync::Arc;

use agenthold_plumbing::tls::{self, ClientTls};

use crate::error::Failure;

/// The rustls client configuration: built-in roots, plus every certificate in `ca_file`.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, Failure> {
    let mut client = ClientTls::public_roots();
    if let Some(path) = ca_file {
        client = client.trust_pem_file(path).map_err(|e| Failure::Usage(format!("--ca-file {e}")))?;
    }
    // HTTP/1.1 only: the WebSocket upgrade needs it, and reqwest is built without HTTP/2.
    let config = client.alpn(&[tls::HTTP_1_1]).build().map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?;
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
