//! The egress proxy as the server sees it (docs/proxy.md): where its configuration file and CA
//! live, where sandboxes reach it, and the test-only upstream stand-ins copied into its file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Config, DriverKind};

/// TEST ONLY: where a `host:port` is really dialled (a loopback stand-in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOverride {
    /// A loopback address.
    pub addr: SocketAddr,
    /// A PEM CA trusted for this host only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
}

/// `AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES`, parsed.
pub type UpstreamOverrides = BTreeMap<String, UpstreamOverride>;

pub(super) fn parse_overrides(raw: &str) -> Result<UpstreamOverrides, String> {
    let map: UpstreamOverrides =
        serde_json::from_str(raw).map_err(|e| format!("not a JSON object of host:port → {{addr, ca_cert}}: {e}"))?;
    match map.iter().find(|(_, o)| !o.addr.ip().is_loopback()) {
        Some((key, _)) => Err(format!("{key}: only loopback stand-ins are allowed (test only)")),
        None => Ok(map),
    }
}

impl Config {
    /// The proxy's configuration file.
    pub fn proxy_config_file(&self) -> PathBuf {
        self.proxy_config_file.clone().unwrap_or_else(|| self.data_dir.join("proxy.json"))
    }

    /// The proxy's CA directory.
    pub fn proxy_ca_dir(&self) -> PathBuf {
        self.proxy_ca_dir.clone().unwrap_or_else(|| self.data_dir.join("proxy-ca"))
    }

    /// Where sandboxes reach the proxy.
    pub fn proxy_addr(&self) -> String {
        match (&self.proxy_addr, self.driver) {
            (Some(addr), _) => addr.clone(),
            (None, DriverKind::Docker) => "host.docker.internal:3128".to_owned(),
            (None, DriverKind::Local) => "127.0.0.1:3128".to_owned(),
            // The Service of deploy/kubernetes, in the sandboxes' namespace.
            (None, DriverKind::Kubernetes) => "agenthold:3128".to_owned(),
        }
    }

    /// The port sandboxes reach the egress proxy at, when they use it.
    pub fn proxy_port(&self) -> Option<u16> {
        let addr = self.proxy_addr.as_ref()?;
        addr.rsplit_once(':').and_then(|(_, port)| port.parse().ok())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::parse;

    #[test]
    fn proxy_settings_default_into_the_data_dir_and_overrides_must_be_loopback() {
        let mut config = parse(&["--data-dir", "/d"]).expect("parses");
        config.proxy_config_file = None; // whatever the environment has
        config.proxy_ca_dir = None;
        config.proxy_addr = None;
        assert_eq!(config.proxy_config_file(), PathBuf::from("/d/proxy.json"));
        assert_eq!(config.proxy_ca_dir(), PathBuf::from("/d/proxy-ca"));
        assert_eq!(config.proxy_addr(), "127.0.0.1:3128");
        let off = parse(&["--proxy-feed", "false", "--proxy-own-addrs", "203.0.113.7,2001:db8::1"]).expect("parses");
        assert!(!off.proxy_feed);
        assert_eq!(off.proxy_own_addrs.len(), 2);
        let ok = parse(&["--proxy-test-upstream-overrides", r#"{"api.anthropic.com:443":{"addr":"127.0.0.1:9"}}"#]);
        assert_eq!(ok.expect("parses").proxy_test_upstream_overrides.map(|m| m.len()), Some(1));
        assert!(parse(&["--proxy-test-upstream-overrides", r#"{"a.example:443":{"addr":"10.0.0.1:9"}}"#]).is_err());
        assert!(parse(&["--proxy-test-upstream-overrides", "[]"]).is_err());
    }
}
