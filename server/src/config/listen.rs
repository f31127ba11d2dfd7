//! Where the server listens (the API, the tunnel, metrics) and what sandboxd dials: the tunnel's
//! URL, derived from the driver when unset, and the tunnel's TLS files.

use std::path::Path;

use super::{Config, DriverKind};

impl Config {
    /// The URL sandboxd dials, given the tunnel's bound port.
    pub fn tunnel_url(&self, tunnel_port: u16) -> String {
        let scheme = if self.tunnel_tls().is_some() { "wss" } else { "ws" };
        match (&self.tunnel_url, self.driver) {
            (Some(url), _) => url.clone(),
            (None, DriverKind::Docker) => format!("{scheme}://host.docker.internal:{tunnel_port}/tunnel"),
            (None, DriverKind::Local) => format!("{scheme}://127.0.0.1:{tunnel_port}/tunnel"),
            (None, DriverKind::Kubernetes) => format!("{scheme}://agenthold:{tunnel_port}/tunnel"),
        }
    }

    /// The tunnel's TLS certificate and key files, when it serves TLS.
    pub fn tunnel_tls(&self) -> Option<(&Path, &Path)> {
        Some((self.tunnel_tls_cert.as_deref()?, self.tunnel_tls_key.as_deref()?))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn tunnel_tls_needs_both_files_and_makes_the_default_url_wss() {
        let mut plain = parse(&[]).expect("parses");
        plain.tunnel_url = None; // whatever AGENTHOLD_TUNNEL_URL the environment has
        assert_eq!((plain.tunnel_tls(), plain.tunnel_url(7701).as_str()), (None, "ws://127.0.0.1:7701/tunnel"));
        let mut tls = parse(&["--tunnel-tls-cert", "/c.pem", "--tunnel-tls-key", "/k.pem"]).expect("parses");
        tls.tunnel_url = None;
        assert_eq!(tls.tunnel_tls(), Some((std::path::Path::new("/c.pem"), std::path::Path::new("/k.pem"))));
        assert_eq!(tls.tunnel_url(7701), "wss://127.0.0.1:7701/tunnel");
        assert!(parse(&["--tunnel-tls-cert", "/c.pem"]).is_err(), "a certificate without its key");
        assert!(parse(&["--tunnel-tls-key", "/k.pem"]).is_err(), "a key without its certificate");
    }
}
