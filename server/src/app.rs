//! Wiring: the shared state, the three listeners (API, tunnel, the replicas' internal one),
//! start-up and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::serve::ListenerExt;
use sqlx::PgPool;
use tokio::net::TcpListener;

use crate::config::{Config, DriverKind, Egress, Firewall};
use crate::events::appender::Appender;
use crate::events::hub::Hub;
use crate::sandbox::SandboxDriver;
use crate::sandbox::docker::DockerDriver;
use crate::sandbox::kubernetes::KubeDriver;
use crate::sandbox::local::LocalDriver;
use crate::secrets::master_key::{self, KeySource, MasterKey};
use crate::supervisor::{Deps, Supervisors, Timeouts};
use crate::{api, auth, proxy_feed, store, tunnel};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub pool: PgPool,
    /// The live feed of stored events.
    pub hub: Arc<Hub>,
    /// The event log's writer.
    pub appender: Appender,
    /// One supervisor per agent.
    pub supervisors: Arc<Supervisors>,
    /// Where sandboxes run.
    pub driver: Arc<dyn SandboxDriver>,
    /// The configuration.
    pub config: Arc<Config>,
    /// The master key that encrypts secret values.
    pub master_key: Arc<MasterKey>,
    /// The server's permission settings.
    pub postures: crate::supervisor::Postures,
    /// Checks provider logins on connect.
    pub login_probe: crate::logins::probe::Probe,
    /// Whether Postgres answers (API calls are refused at once while it does not).
    pub availability: store::availability::Availability,
    /// Sandboxes started ahead for new agents (`None`: no pool).
    pub warm_pool: Option<crate::sandbox::warm_pool::WarmPool>,
    /// Turns `true` when the server begins to shut down: open WebSockets close with 1012.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    /// The server's permission settings.
    pub fn postures(&self) -> &crate::supervisor::Postures {
        &self.postures
    }
}

/// The server's permission settings: the default posture, whether `autonomous` is forbidden,
/// and the server owner's rules (read from `AGENTHOLD_POLICY_FILE`; a bad file stops the start).
fn postures(config: &Config) -> anyhow::Result<crate::supervisor::Postures> {
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

/// The bound listeners (tests bind port 0 and read the ports back).
pub struct Listeners {
    /// The API.
    pub api: TcpListener,
    /// The tunnel.
    pub tunnel: TcpListener,
    /// The replicas' own (`AGENTHOLD_INTERNAL_LISTEN`).
    pub internal: TcpListener,
}

impl Listeners {
    /// Binds the configured addresses.
    pub async fn bind(config: &Config) -> anyhow::Result<Self> {
        let api = TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
        let tunnel = TcpListener::bind(config.tunnel_listen)
            .await
            .with_context(|| format!("binding {}", config.tunnel_listen))?;
        let internal = TcpListener::bind(config.internal_listen)
            .await
            .with_context(|| format!("binding {}", config.internal_listen))?;
        // The bound addresses, for whoever started the server on port 0 (the tests do).
        println!("agenthold listening on {}", api.local_addr()?);
        println!("agenthold tunnel listening on {}", tunnel.local_addr()?);
        println!("agenthold internal listening on {}", internal.local_addr()?);
        Ok(Self { api, tunnel, internal })
    }

    /// The API's bound address.
    pub fn api_addr(&self) -> std::io::Result<SocketAddr> {
        self.api.local_addr()
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// Runs the server until `shutdown` resolves.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // A bad engines file stops the start before anything else is done.
    let engines = match (&config.docker_engines, config.driver) {
        (Some(path), DriverKind::Docker) => Some(
            crate::sandbox::engines::load(path)
                .map_err(anyhow::Error::msg)
                .context("the Docker engines file (AGENTHOLD_DOCKER_ENGINES)")?,
        ),
        (Some(_), DriverKind::Local | DriverKind::Kubernetes) => {
            anyhow::bail!("AGENTHOLD_DOCKER_ENGINES needs AGENTHOLD_DRIVER=docker")
        }
        (None, _) => None,
    };
    tokio::fs::create_dir_all(&config.data_dir).await.context("creating the data directory")?;
    // Installed first, so that what is measured while starting (resumed turns) counts.
    let recorder = config.metrics_listen.and_then(|_| crate::metrics::install());
    let master_key = Arc::new(load_master_key(&config)?);
    let pool = store::connect(
        config.database_url.expose(),
        config.db_pool_size,
        std::time::Duration::from_millis(config.db_acquire_timeout_ms),
    )
    .await?;
    let availability = store::availability::Availability::default();
    let monitor = availability.spawn(config.database_url.expose().to_owned());
    warn_about_other_keys(&pool, &master_key).await?;
    auth::bootstrap::run(&pool, &config).await?;

    let proxy_feed_settings = proxy_feed_settings(&config, listeners.api.local_addr()?)?;
    let sandbox_proxy_ca = sandbox_proxy_ca(&config)?;
    let subnet_pool = config.subnet_pool().map_err(anyhow::Error::msg)?;
    let replica_id = crate::replicas::replica_id(config.replica_id, &config.data_dir)?;
    let driver: Arc<dyn SandboxDriver> = match (config.driver, &engines) {
        (DriverKind::Docker, None) => Arc::new(docker_driver(
            &config,
            DockerDriver::connect(config.instance.clone(), config.sandbox_bin_dir()).context("connecting to Docker")?,
            sandbox_proxy_ca.clone(),
            subnet_pool,
            replica_id,
        )),
        (DriverKind::Docker, Some(engines)) => Arc::new(multi_engine_driver(
            &config,
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
            let settings = config
                .kube_settings(config.tunnel_listen.port(), sandbox_proxy_ca.clone())
                .map_err(anyhow::Error::msg)
                .context("the Kubernetes driver's settings")?;
            let driver = KubeDriver::connect(settings, config.kube_namespace.clone())
                .await
                .context("connecting to Kubernetes")?;
            tracing::info!(namespace = driver.namespace(), "sandboxes run as Pods on Kubernetes");
            Arc::new(driver)
        }
    };
    // Pooled sandboxes are made on the local engine only: none when it takes no new agents.
    let local_takes_agents =
        engines.as_ref().is_none_or(|e| e.iter().any(|e| e.name == crate::sandbox::LOCAL_ENGINE && e.capacity > 0));
    if config.warm_pool_size > 0 && !local_takes_agents {
        tracing::info!(
            "no warm pool: it is made on the local engine, which takes no new agents (AGENTHOLD_DOCKER_ENGINES)"
        );
    }
    let prepared = {
        let (driver, image) = (Arc::clone(&driver), config.image.clone());
        tokio::spawn(async move { driver.prepare(&image).await })
    };
    let deletions = {
        let (driver, pool) = (Arc::clone(&driver), pool.clone());
        tokio::spawn(async move { crate::sandbox::deletion::finish_pending(&pool, driver.as_ref()).await })
    };
    let tunnel_tls = match config.tunnel_tls() {
        Some((cert, key)) => Some(tunnel::tls::acceptor(cert, key)?),
        None => None,
    };
    let tunnel_port = listeners.tunnel.local_addr()?.port();
    install_sandbox_firewall(&config, tunnel_port).await?;
    let replicas = {
        let me = store::replicas::ReplicaRow {
            id: replica_id,
            tunnel_url: config.replica_tunnel_url(tunnel_port),
            internal_url: config.replica_url(listeners.internal.local_addr()?),
        };
        let ttl = std::time::Duration::from_secs_f64(config.lease_ttl_secs);
        Arc::new(crate::replicas::Replicas::register(pool.clone(), me, ttl, &master_key).await?)
    };
    remind_remote_firewalls(&config, engines.as_deref().unwrap_or_default(), tunnel_port);
    let hub = Arc::new(Hub::default());
    // Events other replicas store reach this one's watchers.
    let fanout = tokio::spawn(crate::replicas::fanout::follow(pool.clone(), Arc::clone(&hub)));
    let (appender, appender_task) = Appender::spawn(pool.clone(), Arc::clone(&hub));
    let secs = std::time::Duration::from_secs;
    let postures = postures(&config)?;
    let (written_tx, written_rx) = tokio::sync::watch::channel(crate::proxy_feed::task::Written::default());
    let supervisors = Arc::new(Supervisors::new(Deps {
        pool: pool.clone(),
        appender: appender.clone(),
        driver: Arc::clone(&driver),
        tunnel_url: config.tunnel_url(tunnel_port),
        tunnel_ca_pem: match &config.tunnel_tls_ca {
            Some(path) => Some(
                std::fs::read_to_string(path).with_context(|| format!("reading the tunnel CA {}", path.display()))?,
            ),
            None => None,
        },
        timeouts: Timeouts {
            harness_request: secs(config.harness_timeout_secs),
            turn: secs(config.turn_timeout_secs),
            cancel_grace: secs(config.turn_cancel_grace_secs),
            reconnect_grace: secs(config.reconnect_grace_secs),
            ack_delay: crate::supervisor::ACK_DELAY,
        },
        postures: postures.clone(),
        turn_slots: crate::supervisor::slots::TurnSlots::new(crate::supervisor::slots::SlotLimits {
            server: config.max_running_turns,
            per_workspace: config.max_running_turns_per_workspace,
            per_user: config.max_running_turns_per_user,
        }),
        database: availability.clone(),
        replicas: Arc::clone(&replicas),
        host: Arc::new(crate::supervisor::host::Host::new(config.max_awake.map(|m| m as usize))),
        mcp: mcp_endpoint(&config, listeners.api.local_addr()?, sandbox_proxy_ca.is_some(), &master_key),
        proxy: sandbox_proxy_ca.map(|_| crate::supervisor::ProxyAccess {
            addr: config.proxy_addr(),
            master_key: Arc::clone(&master_key),
            written: proxy_feed_settings.is_some().then_some(written_rx),
        }),
    }));
    let config_overrides = config.proxy_test_upstream_overrides.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let warm_pool = (config.warm_pool_size > 0 && config.driver == DriverKind::Docker).then(|| {
        let settings = crate::sandbox::warm_pool::PoolSettings {
            size: config.warm_pool_size as usize,
            image: config.image.clone(),
            tunnel_url: supervisors.tunnel_url().to_owned(),
            tunnel_ca_pem: supervisors.tunnel_ca_pem().map(str::to_owned),
            cpus: config.default_cpus,
            memory_mib: config.default_memory_mib,
            pids_limit: config.default_pids_limit,
            connect_timeout: std::time::Duration::from_secs(config.warm_pool_connect_timeout_secs),
            refill_delay: std::time::Duration::from_secs(3),
            replica_id: replicas.id(),
        };
        let host = Arc::clone(supervisors.host());
        crate::sandbox::warm_pool::WarmPool::new(Arc::clone(&driver), host, pool.clone(), settings)
    });
    let warm_pool = warm_pool.filter(|_| local_takes_agents);
    let warm_pool_task = warm_pool.as_ref().map(crate::sandbox::warm_pool::WarmPool::spawn);
    let state = AppState {
        warm_pool,
        availability,
        stopping: stop_rx.clone(),
        pool: pool.clone(),
        hub,
        appender,
        supervisors: Arc::clone(&supervisors),
        driver,
        config: Arc::new(config),
        master_key,
        postures,
        login_probe: crate::logins::probe::Probe::new(config_overrides),
    };
    // Only the server refreshes ChatGPT logins (docs/logins.md).
    let refresher = crate::logins::refresh::Refresher {
        pool: pool.clone(),
        key: Arc::clone(&state.master_key),
        probe: state.login_probe.clone(),
        every: secs(state.config.login_refresh_every_secs.max(1)),
        before: secs(state.config.login_refresh_before_secs),
    }
    .spawn();
    supervisors.resume_open_turns().await.context("resuming open turns")?;
    // Renews this replica's leases; takes over the agents of replicas that die.
    let heartbeat = tokio::spawn(crate::replicas::heartbeat::run(Arc::clone(&supervisors), pool.clone()));
    // Sandboxes that stop on their own (the engine's events): their running turns end at once.
    let exits = {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let follow = state.driver.follow_exits(tx);
        let supervisors = Arc::clone(&supervisors);
        tokio::spawn(async move {
            let report = async {
                while let Some((agent_id, at)) = rx.recv().await {
                    supervisors.send_if_running(agent_id, crate::supervisor::Command::SandboxExited(at)).await;
                }
            };
            tokio::join!(follow, report);
        })
    };

    // Idle agents are put to sleep (AGENTHOLD_AUTO_SLEEP_SECS, or their own limits.auto_sleep_secs).
    let auto_sleep = {
        let secs = state.config.auto_sleep_secs;
        let every = crate::supervisor::auto_sleep::interval(secs);
        tokio::spawn(crate::supervisor::auto_sleep::run(Arc::clone(&supervisors), secs, every))
    };
    // Containers, volumes and networks of this instance whose agent is gone are removed.
    let orphans = (state.config.orphan_sweep_secs > 0).then(|| {
        let (driver, pool) = (Arc::clone(&state.driver), pool.clone());
        let every = std::time::Duration::from_secs(state.config.orphan_sweep_secs);
        let grace = std::time::Duration::from_secs(state.config.orphan_grace_secs);
        tokio::spawn(crate::sandbox::orphans::run(driver, pool, every, grace))
    });
    // Expired browser sessions and old login failures are purged (AGENTHOLD_HOUSEKEEPING_SECS).
    let housekeeping = crate::housekeeping::spawn(pool.clone(), state.config.housekeeping_secs);
    // The read-only MCP tools' calls reach the audit log in aggregate.
    let read_audit =
        crate::mcp::read_audit::spawn(pool.clone(), std::time::Duration::from_secs(state.config.mcp_read_audit_secs));
    // Schedules run when due (docs/triggers.md).
    let scheduler = crate::triggers::scheduler::spawn(
        state.clone(),
        std::time::Duration::from_millis(state.config.scheduler_tick_ms),
        stop_rx.clone(),
    );
    let (state_metrics_listen, stop_rx_metrics) = (state.config.metrics_listen, stop_rx.clone());
    let feed = proxy_feed_settings.map(|settings| {
        proxy_feed::task::spawn(pool.clone(), Arc::clone(&state.master_key), settings, written_tx, stop_rx.clone())
    });
    // Small frames (acks, stream events) must not wait for Nagle's algorithm.
    let api_listener = listeners.api.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let tunnel_listener = listeners.tunnel.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let api = axum::serve(api_listener, api::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(wait_for(stop_rx.clone()));
    let internal_listener = listeners.internal.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let internal = axum::serve(
        internal_listener,
        api::internal_router(state.clone()).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(wait_for(stop_rx.clone()));
    let tunnel_router = tunnel::router(state);
    let tunnel: std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> = match tunnel_tls {
        Some(acceptor) => {
            let listener = tunnel::tls::TlsListener::new(tunnel_listener, acceptor);
            Box::pin(axum::serve(listener, tunnel_router).with_graceful_shutdown(wait_for(stop_rx)).into_future())
        }
        None => Box::pin(
            axum::serve(tunnel_listener, tunnel_router).with_graceful_shutdown(wait_for(stop_rx)).into_future(),
        ),
    };
    // Prometheus metrics, on a listener of their own (docs/operations.md).
    if let Some(addr) = state_metrics_listen {
        let listener = crate::metrics::bind(addr).await?;
        println!("agenthold metrics listening on {}", listener.local_addr()?);
        match recorder {
            Some(handle) => {
                tracing::info!(%addr, "metrics at /metrics");
                tokio::spawn(crate::metrics::serve(listener, handle, wait_for(stop_rx_metrics)));
            }
            None => tracing::warn!("a metrics recorder is installed already: /metrics is not served"),
        }
    }
    tracing::info!("agenthold is serving");
    let servers = async { tokio::try_join!(async { api.await }, async { internal.await }, tunnel) };
    tokio::pin!(servers);
    tokio::select! {
        result = &mut servers => { result.context("serving")?; }
        () = shutdown => {
            tracing::info!("shutting down");
            let _ = stop_tx.send(true);
            // Open WebSockets would keep a graceful shutdown waiting: give them a moment.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut servers).await;
        }
    }
    if let Some(feed) = feed {
        let abort = feed.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(5), feed).await.is_err() {
            abort.abort();
        }
    }
    scheduler.abort();
    heartbeat.abort();
    fanout.abort();
    drop(supervisors);
    // Other replicas take this one's agents over at once rather than after the lease time.
    replicas.retire().await;
    prepared.abort();
    exits.abort();
    auto_sleep.abort();
    if let Some(orphans) = orphans {
        orphans.abort();
    }
    deletions.abort();
    refresher.abort();
    if let Some(task) = warm_pool_task {
        task.abort();
    }
    if let Some(housekeeping) = housekeeping {
        housekeeping.abort();
    }
    read_audit.abort();
    crate::mcp::read_audit::flush(&pool).await;
    monitor.abort();
    appender_task.abort();
    pool.close().await;
    Ok(())
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
async fn install_sandbox_firewall(config: &Config, tunnel_port: u16) -> anyhow::Result<()> {
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
fn remind_remote_firewalls(config: &Config, engines: &[crate::sandbox::engines::EngineSpec], tunnel_port: u16) {
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

/// The proxy feed's settings (making the proxy's CA when absent), or `None` when the feed is off.
fn proxy_feed_settings(config: &Config, api: SocketAddr) -> anyhow::Result<Option<proxy_feed::task::FeedSettings>> {
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
        upstream_overrides: overrides,
        // Sandboxes that use the proxy reach agenthold's MCP server through it.
        server_route: (config.proxy_addr.is_some() && config.driver != DriverKind::Local)
            .then(|| proxy_feed::file::ServerRouteEntry::mcp(api)),
    }))
}

/// Where harnesses reach agenthold's MCP server: through the egress proxy when sandboxes use it;
/// at the server's own address for local sandboxes (processes of this host); not at all for
/// Docker sandboxes without the proxy (they would have to hold the credential).
fn mcp_endpoint(
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
fn sandbox_proxy_ca(config: &Config) -> anyhow::Result<Option<String>> {
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
fn load_master_key(config: &Config) -> anyhow::Result<MasterKey> {
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
async fn warn_about_other_keys(pool: &PgPool, key: &MasterKey) -> anyhow::Result<()> {
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

async fn wait_for(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
