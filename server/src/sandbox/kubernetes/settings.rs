//! What the Kubernetes driver's objects are made with, the same for every agent ([`Settings`],
//! from the server's configuration), and the checks of those settings: the instance name (a
//! prefix of object names and a label value), label selectors, quantities.

use std::collections::BTreeMap;

use crate::config::Config;

/// The longest instance name: the longest object name (`<instance>-home-<agent id>`) must stay a
/// DNS label (63 characters).
pub const MAX_INSTANCE_LEN: usize = 63 - "-home-".len() - 36;

/// What the driver's objects are made with, the same for every agent.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `agenthold.instance` label and the prefix of every object name.
    pub instance: String,
    /// The image whose `/agenthold/` holds sandboxd and fakeagent (copied by an init container).
    pub tools_image: String,
    /// The home claim's storage class (`None`: the cluster's default).
    pub storage_class: Option<String>,
    /// The home claim's size (a quantity: `10Gi`).
    pub home_size: String,
    /// Labels of the server's Pods (the tunnel's end).
    pub server_labels: BTreeMap<String, String>,
    /// The port the server's Pods serve the tunnel on.
    pub tunnel_port: u16,
    /// Labels of the egress proxy's Pods and the port it listens on; `None` when sandboxes do not
    /// use the proxy.
    pub proxy: Option<(BTreeMap<String, String>, u16)>,
    /// The egress proxy's CA (PEM) sandboxd installs at start, and its short hash.
    pub proxy_ca: Option<(String, String)>,
    /// `host:port` sandboxes reach the proxy at (its host goes into their hosts file).
    pub proxy_addr: Option<String>,
}

impl Settings {
    /// The settings of `config` (the egress proxy's CA, PEM, when sandboxes use it; the tunnel's
    /// bound port); an error saying which setting is wrong.
    pub fn of(config: &Config, tunnel_port: u16, proxy_ca: Option<String>) -> Result<Self, String> {
        check_instance(&config.instance).map_err(|e| format!("AGENTHOLD_INSTANCE: {e}"))?;
        check_quantity(&config.kube_home_size).map_err(|e| format!("AGENTHOLD_KUBE_HOME_SIZE: {e}"))?;
        let server_labels =
            parse_labels(&config.kube_server_labels).map_err(|e| format!("AGENTHOLD_KUBE_SERVER_LABELS: {e}"))?;
        let proxy = match &proxy_ca {
            Some(_) => {
                let labels =
                    parse_labels(&config.kube_proxy_labels).map_err(|e| format!("AGENTHOLD_KUBE_PROXY_LABELS: {e}"))?;
                let port = config.kube_proxy_port.or_else(|| config.proxy_port()).ok_or_else(|| {
                    "AGENTHOLD_KUBE_PROXY_PORT: unset, and AGENTHOLD_PROXY_ADDR names no port".to_owned()
                })?;
                Some((labels, port))
            }
            None => None,
        };
        let proxy_ca = proxy_ca.map(|pem| {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(pem.as_bytes());
            (pem, hex::encode(&digest[..8]))
        });
        Ok(Self {
            instance: config.instance.clone(),
            tools_image: config.kube_tools_image.clone(),
            storage_class: config.kube_storage_class.clone().filter(|c| !c.is_empty()),
            home_size: config.kube_home_size.clone(),
            server_labels,
            tunnel_port,
            proxy_addr: proxy.as_ref().and(config.proxy_addr.clone()),
            proxy,
            proxy_ca,
        })
    }
}

/// Whether `instance` can prefix object names and be a label value; the reason when not.
pub fn check_instance(instance: &str) -> Result<(), String> {
    let ok_chars = instance.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = instance.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && instance.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if !ok_chars || !ok_ends || instance.len() > MAX_INSTANCE_LEN {
        return Err(format!(
            "the instance name {instance:?} cannot name Kubernetes objects: lowercase letters, digits and '-', \
             starting and ending with a letter or digit, at most {MAX_INSTANCE_LEN} characters"
        ));
    }
    Ok(())
}

/// Parses `key=value,key=value` (a Pod label selector of equalities only).
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("{pair:?} is not key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || key.contains(char::is_whitespace) || value.contains(char::is_whitespace) {
            return Err(format!("{pair:?} is not key=value"));
        }
        labels.insert(key.to_owned(), value.to_owned());
    }
    if labels.is_empty() {
        return Err("no labels (key=value,key=value)".to_owned());
    }
    Ok(labels)
}

/// Whether `text` is a Kubernetes quantity (`10Gi`, `500M`, `1.5Ti`); the reason when not.
pub fn check_quantity(text: &str) -> Result<(), String> {
    let digits_end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    let number_ok = !number.is_empty() && number.parse::<f64>().is_ok_and(|n| n > 0.0);
    let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"];
    if number_ok && suffixes.contains(&suffix) {
        Ok(())
    } else {
        Err(format!("{text:?} is not a size (a positive number with an optional suffix: 10Gi, 500Mi)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DriverKind, KUBE_SERVER_LABELS};

    #[test]
    fn settings_are_checked_and_default_to_the_manifests_service() {
        let mut config = crate::config::parse(&["--instance", "agenthold"]).expect("parses");
        config.driver = DriverKind::Kubernetes;
        (config.tunnel_url, config.proxy_addr, config.kube_proxy_port) = (None, None, None);
        (config.kube_home_size, config.kube_server_labels, config.kube_proxy_labels) =
            ("10Gi".to_owned(), KUBE_SERVER_LABELS.to_owned(), KUBE_SERVER_LABELS.to_owned());
        assert_eq!(config.driver, DriverKind::Kubernetes);
        assert_eq!(config.tunnel_url(7701), "ws://agenthold:7701/tunnel");
        let settings = Settings::of(&config, 7701, None).expect("valid");
        assert_eq!((settings.tunnel_port, settings.proxy.is_none()), (7701, true));
        assert_eq!(settings.server_labels.len(), 2);
        config.proxy_addr = Some("agenthold:3128".to_owned());
        let settings = Settings::of(&config, 7701, Some("PEM".to_owned())).expect("valid");
        assert_eq!(settings.proxy.map(|(_, port)| port), Some(3128));
        assert_eq!(settings.proxy_ca.map(|(_, hash)| hash.len()), Some(16));
        config.kube_home_size = "lots".to_owned();
        assert!(Settings::of(&config, 7701, None).expect_err("bad size").contains("AGENTHOLD_KUBE_HOME_SIZE"));
        config.kube_home_size = "10Gi".to_owned();
        config.kube_server_labels = "app".to_owned();
        assert!(Settings::of(&config, 7701, None).expect_err("bad labels").contains("AGENTHOLD_KUBE_SERVER_LABELS"));
        config.kube_server_labels = KUBE_SERVER_LABELS.to_owned();
        config.instance = "Agent_Hold".to_owned();
        assert!(Settings::of(&config, 7701, None).expect_err("bad instance").contains("AGENTHOLD_INSTANCE"));
    }

    #[test]
    fn settings_are_checked() {
        assert!(check_instance("agenthold").is_ok());
        assert!(check_instance("Agenthold").is_err());
        assert!(check_instance("a-").is_err());
        assert!(check_instance(&"a".repeat(MAX_INSTANCE_LEN + 1)).is_err());
        assert!(check_quantity("10Gi").is_ok() && check_quantity("1.5Ti").is_ok() && check_quantity("500000").is_ok());
        for bad in ["", "Gi", "10GB", "-1Gi", "0", "ten"] {
            assert!(check_quantity(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_labels("a=b, c/d=e").expect("labels").len(), 2);
        for bad in ["", "a", "=b", "a b=c"] {
            assert!(parse_labels(bad).is_err(), "{bad}");
        }
    }
}
