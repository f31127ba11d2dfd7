//! This replica among several (docs/replicas.md): what sandboxes and the other replicas dial to
//! reach it, and how long its lease on its agents outlives its last heartbeat.

use std::net::SocketAddr;

use super::{Config, DriverKind};

impl Config {
    /// What sandboxes dial to reach this replica itself.
    pub fn replica_tunnel_url(&self, tunnel_port: u16) -> String {
        let scheme = if self.tunnel_tls().is_some() { "wss" } else { "ws" };
        match (&self.replica_tunnel_url, self.driver) {
            (Some(url), _) => url.clone(),
            (None, DriverKind::Docker) => format!("{scheme}://host.docker.internal:{tunnel_port}/tunnel"),
            (None, DriverKind::Local) => format!("{scheme}://127.0.0.1:{tunnel_port}/tunnel"),
            // The Service's name: with several replicas, set it to each Pod's own address
            // (docs/kubernetes.md).
            (None, DriverKind::Kubernetes) => format!("{scheme}://agenthold:{tunnel_port}/tunnel"),
        }
    }

    /// Where the other replicas reach this one's internal listener (bound at `internal`).
    pub fn replica_url(&self, internal: SocketAddr) -> String {
        match &self.replica_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None if internal.ip().is_unspecified() => format!("http://127.0.0.1:{}", internal.port()),
            None => format!("http://{internal}"),
        }
    }
}

/// A lease time: at least 0.3 s (a heartbeat every 0.1 s), at most a day.
pub(super) fn lease_ttl(value: &str) -> Result<f64, String> {
    let secs: f64 = value.parse().map_err(|_| format!("{value:?} is not a number of seconds"))?;
    if !(0.3..=86_400.0).contains(&secs) {
        return Err(format!("{secs} is outside 0.3..=86400 seconds"));
    }
    Ok(secs)
}
