//! The sandbox driver the configuration names (Docker, several Docker engines, local processes,
//! Kubernetes) with the server's sandbox settings, and the host firewall confined sandboxes rely on.

use std::sync::Arc;

use anyhow::Context;
use sqlx::PgPool;

use crate::config::{Config, DriverKind, Egress, Firewall};
use crate::sandbox::SandboxDriver;
use crate::sandbox::docker::DockerDriver;
use crate::sandbox::kubernetes::KubeDriver;
use crate::sandbox::kubernetes::manifests::Settings;
use crate::sandbox::local::LocalDriver;
use crate::sandbox::subnets::SubnetPool;

/// The engines of `AGENTHOLD_DOCKER_ENGINES`, when set (a bad file stops the start).
pub(super) fn engines(config: &Config) -> anyhow::Result<Option<Vec<crate::sandbox::engines::EngineSpec>>> {
    match (&config.docker_engines, config.driver) {
        (Some(path), DriverKind::Docker) => Ok(Some(
            crate::sandbox::engines::load(path)
                .map_err(anyhow::Error::msg)
                .context("the Docker engines file (AGENTHOLD_DOCKER_ENGINES)")?,
        )),
        (Some(_), DriverKind::Local | DriverKind::Kubernetes) => {
            anyhow::bail!("AGENTHOLD_DOCKER_ENGINES needs AGENTHOLD_DRIVER=docker")
        }
        (None, _) => Ok(None),
    }
}

/// The driver the configuration names.
pub(super) async fn driver(
    config: &Config,
    engines: Option<&[crate::sandbox::engines::EngineSpec]>,
    pool: &PgPool,
    sandbox_proxy_ca: Option<String>,
    replica_id: uuid::Uuid,
) -> anyhow::Result<Arc<dyn SandboxDriver>> {
    let subnet_pool = SubnetPool::of(config).map_err(anyhow::Error::msg)?;
    Ok(match (config.driver, engines) {
        (DriverKind::Docker, None) => {
            let driver = docker_driver(
                config,
                DockerDriver::connect(config.instance.clone(), config.sandbox_bin_dir())
                    .context("connecting to Docker")?,
                sandbox_proxy_ca,
                subnet_pool,
                replica_id,
            );
            // A runtime the engine lacks stops the server here, saying what to do.
            match driver.posture().await {
                Ok(posture) => tracing::info!(
                    runtime = %config.sandbox_runtime,
                    containment = posture.containment.as_str(),
                    sudo = posture.sudo_word(),
                    "sandbox runtime"
                ),
                Err(crate::sandbox::DriverError::Engine(message)) if message.contains("AGENTHOLD_SANDBOX_RUNTIME") => {
                    anyhow::bail!("{message}")
                }
                // An engine not answering yet is asked again at the first sandbox.
                Err(error) => tracing::warn!(%error, "could not ask the Docker engine about its runtimes"),
            }
            Arc::new(driver)
        }
        (DriverKind::Docker, Some(engines)) => Arc::new(multi_engine_driver(
            config,
            engines,
            pool.clone(),
            sandbox_proxy_ca.as_ref(),
            subnet_pool,
            replica_id,
        )?),
        (DriverKind::Local, _) => Arc::new(LocalDriver::new(
            std::path::absolute(&config.data_dir).context("resolving the data directory")?,
            config.sandbox_bin_dir(),
        )),
        (DriverKind::Kubernetes, _) => {
            // Sandboxes reach the server's Pods on the port the tunnel listens on.
            let settings = Settings::of(config, config.tunnel_listen.port(), sandbox_proxy_ca)
                .map_err(anyhow::Error::msg)
                .context("the Kubernetes driver's settings")?;
            let driver = KubeDriver::connect(settings, config.kube_namespace.clone())
                .await
                .context("connecting to Kubernetes")?;
            tracing::info!(namespace = driver.namespace(), "sandboxes run as Pods on Kubernetes");
            Arc::new(driver)
        }
    })
}

/// A Docker driver with the server's sandbox settings.
fn docker_driver(
    config: &Config,
    driver: DockerDriver,
    proxy_ca: Option<String>,
    subnet_pool: Option<crate::sandbox::subnets::SubnetPool>,
    replica_id: uuid::Uuid,
) -> DockerDriver {
    driver
        .with_replica(replica_id)
        .with_nofile_limit(config.sandbox_nofile)
        .with_runtime(config.sandbox_runtime.clone())
        .with_proxy_ca(proxy_ca)
        .with_confined_egress(config.sandbox_egress == Egress::Confined)
        .with_subnet_pool(subnet_pool)
        .with_disk_limits(config.sandbox_disk_limits, config.default_disk_mib())
}

/// The driver over the engines of `AGENTHOLD_DOCKER_ENGINES` (docs/engines.md): one Docker driver
/// per engine, with the server's sandbox settings and the engine's own tunnel URL, proxy
/// address and subnet pool. The local engine is always there (its agents stay reachable); when
/// the file does not list it, it takes no new agents.
fn multi_engine_driver(
    config: &Config,
    specs: &[crate::sandbox::engines::EngineSpec],
    pool: PgPool,
    proxy_ca: Option<&String>,
    subnet_pool: Option<crate::sandbox::subnets::SubnetPool>,
    replica_id: uuid::Uuid,
) -> anyhow::Result<crate::sandbox::multi::MultiEngineDriver> {
    use crate::sandbox::multi::{Engine, MultiEngineDriver};
    let mut specs = specs.to_vec();
    if !specs.iter().any(|s| s.name == crate::sandbox::LOCAL_ENGINE) {
        tracing::info!("AGENTHOLD_DOCKER_ENGINES lists no local engine: it takes no new agents (its agents stay)");
        specs.push(crate::sandbox::engines::EngineSpec {
            name: crate::sandbox::LOCAL_ENGINE.to_owned(),
            host: None,
            ca: None,
            cert: None,
            key: None,
            capacity: 0,
            tunnel_url: None,
            proxy_addr: None,
            proxy_source_addr: None,
            subnet_pool: None,
        });
    }
    let mut engines = Vec::with_capacity(specs.len());
    for spec in specs {
        let (instance, bin_dir) = (config.instance.clone(), config.sandbox_bin_dir());
        let driver = match spec.remote() {
            None => DockerDriver::connect(instance, bin_dir).context("connecting to the local Docker engine")?,
            Some(remote) => {
                DockerDriver::connect_tls(instance, bin_dir, &remote.host, &remote.ca, &remote.cert, &remote.key)
                    .with_context(|| format!("the Docker engine {} ({})", spec.name, remote.host))?
            }
        };
        let pool = match &spec.subnet_pool {
            None => subnet_pool,
            Some(own) if own.trim() == "engine" => None,
            Some(own) => Some(
                crate::sandbox::subnets::SubnetPool::new(own, config.sandbox_subnet_prefix)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("the subnet pool of the Docker engine {}", spec.name))?,
            ),
        };
        let driver = docker_driver(config, driver, proxy_ca.cloned(), pool, replica_id)
            .with_tunnel_url(spec.tunnel_url.clone())
            .with_proxy_source_addr(spec.proxy_source_addr);
        tracing::info!(engine = %spec.name, host = spec.host.as_deref().unwrap_or("local"), capacity = spec.capacity, "Docker engine configured");
        engines.push(Engine::new(spec.name, spec.capacity, driver, spec.proxy_addr));
    }
    MultiEngineDriver::new(engines, pool).map_err(anyhow::Error::msg)
}

/// Installs the host firewall confined Docker sandboxes rely on (sandbox → host: the tunnel and
/// the proxy only), unless the operator does, or sandboxes are not confined. Refuses to start
/// when it cannot: a confined network without these rules still reaches every service the host
/// offers.
pub(super) async fn install_sandbox_firewall(config: &Config, tunnel_port: u16) -> anyhow::Result<()> {
    if config.driver != DriverKind::Docker {
        return Ok(());
    }
    if config.sandbox_egress == Egress::Open {
        tracing::warn!("AGENTHOLD_SANDBOX_EGRESS=open: sandboxes reach the internet, the LAN and the host's services");
        return Ok(());
    }
    if config.proxy_port().is_none() {
        tracing::warn!("AGENTHOLD_PROXY_ADDR is unset: confined sandboxes reach nothing but the tunnel");
    }
    let rules = crate::sandbox::firewall::Rules::new(
        &config.instance,
        [Some(tunnel_port), config.proxy_port()].into_iter().flatten(),
    );
    if config.sandbox_firewall == Firewall::External {
        tracing::info!(chain = %rules.chain, interfaces = %format!("{}+", rules.interface_prefix), ports = ?rules.allowed_tcp_ports, "the operator installs the sandbox firewall (docs/security.md)");
        return Ok(());
    }
    let installed = rules.clone();
    tokio::task::spawn_blocking(move || crate::sandbox::firewall::install(&installed))
        .await
        .context("installing the sandbox firewall")?
        .context(
            "installing the sandbox firewall (run the server as root or with CAP_NET_ADMIN, or set \
             AGENTHOLD_SANDBOX_FIREWALL=external and install the rules yourself: docs/security.md)",
        )?;
    tracing::info!(chain = %rules.chain, ports = ?rules.allowed_tcp_ports, "sandboxes reach only the tunnel and the proxy on this host");
    Ok(())
}

/// Says, for each remote engine, that its host's sandbox firewall is the operator's to install
/// (the server installs rules on its own host only): the chain, the interfaces and the ports.
pub(super) fn remind_remote_firewalls(
    config: &Config,
    engines: &[crate::sandbox::engines::EngineSpec],
    tunnel_port: u16,
) {
    if config.sandbox_egress == Egress::Open {
        return;
    }
    let port = |addr: &str| addr.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
    for engine in engines.iter().filter(|e| e.remote().is_some()) {
        let tunnel = engine
            .tunnel_url
            .as_deref()
            .and_then(|url| url.split_once("://").map(|(_, rest)| rest.split('/').next().unwrap_or(rest)))
            .and_then(port)
            .unwrap_or(tunnel_port);
        let proxy = engine.proxy_addr.as_deref().and_then(port).or_else(|| config.proxy_port());
        let rules = crate::sandbox::firewall::Rules::new(&config.instance, [Some(tunnel), proxy].into_iter().flatten());
        tracing::warn!(
            engine = %engine.name,
            chain = %rules.chain,
            interfaces = %format!("{}+", rules.interface_prefix),
            ports = ?rules.allowed_tcp_ports,
            "install the sandbox firewall on this remote engine's host yourself: the server cannot (docs/security.md, Egress)"
        );
    }
}
