//! Settings the composition root derives from the configuration and files before it builds
//! the services: the permission postures, the master key, the proxy's feed and CA, where
//! harnesses reach the MCP server.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use sqlx::PgPool;

use crate::config::{Config, DriverKind};
use crate::secrets::master_key::{self, KeySource, MasterKey};
use crate::{proxy_feed, store};

/// The server's permission settings: the default posture, whether `autonomous` is forbidden,
/// and the server owner's rules (read from `AGENTHOLD_POLICY_FILE`; a bad file stops the start).
pub(super) fn postures(config: &Config) -> anyhow::Result<crate::supervisor::Postures> {
    let server_rules = match &config.policy_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let value: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            let rules = value.get("rules").cloned().unwrap_or(serde_json::Value::Array(Vec::new()));
            crate::permissions::policy::parse_rules(&rules)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
                .context("the server's permission rules (AGENTHOLD_POLICY_FILE)")?
        }
        None => Vec::new(),
    };
    Ok(crate::supervisor::Postures {
        default: config.default_posture,
        forbid_autonomous: config.forbid_autonomous,
        server_rules: Arc::new(server_rules),
    })
}

/// The proxy feed's settings (making the proxy's CA when absent), or `None` when the feed is off.
pub(super) fn proxy_feed_settings(
    config: &Config,
    api: SocketAddr,
) -> anyhow::Result<Option<proxy_feed::task::FeedSettings>> {
    let overrides = config.proxy_test_upstream_overrides.clone().unwrap_or_default();
    if !overrides.is_empty() && config.mode == crate::config::Mode::Production {
        anyhow::bail!("AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES is for tests only: refused in production mode");
    }
    if !config.proxy_feed {
        return Ok(None);
    }
    let ca = proxy_feed::task::prepare_ca(&config.proxy_ca_dir())?;
    Ok(Some(proxy_feed::task::FeedSettings {
        config_file: config.proxy_config_file(),
        ca,
        own_addrs: config.proxy_own_addrs.clone(),
        allow_addrs: config.proxy_allow_addrs.clone(),
        upstream_overrides: overrides,
        // Sandboxes that use the proxy reach agenthold's MCP server through it.
        server_route: (config.proxy_addr.is_some() && config.driver != DriverKind::Local)
            .then(|| proxy_feed::file::ServerRouteEntry::mcp(api)),
    }))
}

/// Where harnesses reach agenthold's MCP server: through the egress proxy when sandboxes use it;
/// at the server's own address for local sandboxes (processes of this host); not at all for
/// Docker sandboxes without the proxy (they would have to hold the credential).
pub(super) fn mcp_endpoint(
    config: &Config,
    api: std::net::SocketAddr,
    proxied: bool,
    master_key: &Arc<crate::secrets::master_key::MasterKey>,
) -> Option<crate::mcp::servers::Endpoint> {
    if proxied {
        Some(crate::mcp::servers::Endpoint::proxied(Arc::clone(master_key)))
    } else if config.driver == DriverKind::Local {
        Some(crate::mcp::servers::Endpoint::direct(api, Arc::clone(master_key)))
    } else {
        None
    }
}

/// The egress proxy's CA (PEM) sandboxes trust, when they use the proxy: only when
/// `AGENTHOLD_PROXY_ADDR` is set, and only on the Docker driver (the local driver has no trust
/// store of its own to install it in: its harnesses do not use the proxy).
pub(super) fn sandbox_proxy_ca(config: &Config) -> anyhow::Result<Option<String>> {
    if config.proxy_addr.is_none() {
        return Ok(None);
    }
    if config.driver == DriverKind::Local {
        tracing::warn!("AGENTHOLD_PROXY_ADDR is set, but local sandboxes do not use the egress proxy");
        return Ok(None);
    }
    let ca = proxy_feed::task::prepare_ca(&config.proxy_ca_dir())?;
    let pem =
        std::fs::read_to_string(&ca.cert).with_context(|| format!("reading the proxy CA {}", ca.cert.display()))?;
    tracing::info!(addr = %config.proxy_addr(), "sandboxes send their traffic through the egress proxy");
    Ok(Some(pem))
}

/// Loads the master key (refusing to start without one in production mode) and says where it
/// came from.
pub(super) fn load_master_key(config: &Config) -> anyhow::Result<MasterKey> {
    let (key, source) = master_key::load(config)?;
    match &source {
        KeySource::File(path) => tracing::info!(key.id = key.id(), path = %path.display(), "master key from a file"),
        KeySource::Environment => tracing::info!(key.id = key.id(), "master key from AGENTHOLD_MASTER_KEY"),
        KeySource::DevFile { path, created } => tracing::warn!(
            key.id = key.id(),
            path = %path.display(),
            created,
            mode = config.mode.as_str(),
            "master key from the data directory (dev/test mode only)"
        ),
    }
    Ok(key)
}

/// Secrets sealed under another key do not open (their agents get no value): say so at start.
pub(super) async fn warn_about_other_keys(pool: &PgPool, key: &MasterKey) -> anyhow::Result<()> {
    let others = store::secrets::count_under_other_keys(pool, key.id()).await.context("counting secrets")?;
    if others > 0 {
        tracing::warn!(
            secrets = others,
            key.id = key.id(),
            "secrets encrypted under another master key will not open: start with that key, or rotate \
             (agenthold secrets rotate)"
        );
    }
    Ok(())
}
