//! Whether the egress proxy could inject a secret into requests to a host: its CA (the files in
//! `AGENTHOLD_PROXY_CA_DIR`, the ones the feed names in the proxy's file) must cover the host,
//! else the feed leaves the rule out and the harness's requests are refused. Asked when a secret
//! is stored or attached, so an uncovered host is refused there (`HOST_NOT_COVERED`) rather than
//! accepted and never injected. The CA is read at each check: a CA the operator replaced counts
//! at once. Without the feed (`AGENTHOLD_PROXY_FEED=false`: nothing is intercepted) every host
//! passes.

use std::path::PathBuf;

use anyhow::Context;

use crate::config::Config;

/// Where docs/proxy.md says how to cover another host.
pub const DOCS: &str = "docs/proxy.md#secrets-for-other-hosts";

/// Whether the proxy's CA covers `host` (`true` too when the server feeds no proxy).
pub async fn covers(config: &Config, host: &str) -> anyhow::Result<bool> {
    if !config.proxy_feed {
        return Ok(true);
    }
    let dir = config.proxy_ca_dir();
    let host = host.to_owned();
    tokio::task::spawn_blocking(move || covers_in(&dir, &host)).await.context("the CA check task")?
}

fn covers_in(dir: &std::path::Path, host: &str) -> anyhow::Result<bool> {
    let (cert, key): (PathBuf, PathBuf) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    let ca = agenthold_proxy::ca::Ca::load(&cert, &key).context("loading the proxy's CA")?;
    Ok(ca.check_covers(host).is_ok())
}

/// What a refused secret's answer says: the host, why, and the fix.
pub fn refusal(host: &str) -> String {
    format!(
        "the egress proxy's CA does not cover {host}: the proxy could never put this secret into requests \
         to it. An operator makes a CA that covers it (agenthold-proxy ca init --out DIR --with-presets \
         --host {host}), sets AGENTHOLD_PROXY_CA_DIR=DIR and restarts agenthold; see {DOCS}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_ca_covers_the_presets_and_their_subdomains_only() {
        let dir = std::env::temp_dir().join(format!("agenthold-coverage-{}", uuid::Uuid::new_v4().simple()));
        super::super::task::prepare_ca(&dir).expect("ca");
        assert!(covers_in(&dir, "api.anthropic.com").expect("check"));
        assert!(covers_in(&dir, "eu.openrouter.ai").expect("check"));
        assert!(!covers_in(&dir, "llm.example.com").expect("check"));
        assert!(refusal("llm.example.com").contains("--host llm.example.com"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
