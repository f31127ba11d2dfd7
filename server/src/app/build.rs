//! The composition root's first half: configuration → services → [`AppState`], with the
//! background tasks they need in one owned [`Background`] set. Nothing here serves a request;
//! [`super::serve`] does.

use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;

use super::listeners::Listeners;
use super::settings;
use super::tasks::Background;
use crate::config::{Config, DriverKind};
use crate::events::appender::Appender;
use crate::events::hub::Hub;
use crate::state::AppState;
use crate::supervisor::{Deps, Supervisors, Timeouts};
use crate::{auth, proxy_feed, store};

/// A built server: its state, its background tasks and what shutting it down needs.
pub struct App {
    /// What every handler reaches.
    pub state: AppState,
    /// The loops that run beside the listeners.
    pub(super) background: Background,
    /// The last to stop: the event log's writer and the database monitor.
    pub(super) foundations: Background,
    /// This replica's registration (retired at shutdown, so that others take its agents at once).
    pub(super) replicas: Arc<crate::replicas::Replicas>,
    /// Sends `true` when the server begins to stop.
    pub(super) stop: watch::Sender<bool>,
    /// The tunnel's TLS, when it has its own certificate.
    pub(super) tunnel_tls: Option<tokio_rustls::TlsAcceptor>,
    /// The Prometheus recorder (`None`: metrics off, or installed by someone else already).
    pub(super) recorder: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// Builds every service from `config`, resumes the open turns and starts the background tasks.
pub async fn build(config: Config, listeners: &Listeners) -> anyhow::Result<App> {
    // A bad engines file stops the start before anything else is done.
    let engines = super::drivers::engines(&config)?;
    tokio::fs::create_dir_all(&config.data_dir).await.context("creating the data directory")?;
    // Installed first, so that what is measured while starting (resumed turns) counts.
    let recorder = config.metrics_listen.and_then(|_| crate::metrics::install());
    let master_key = Arc::new(settings::load_master_key(&config)?);
    let pool = store::connect(
        config.database_url.expose(),
        config.db_pool_size,
        std::time::Duration::from_millis(config.db_acquire_timeout_ms),
    )
    .await?;
    let mut foundations = Background::new();
    let mut background = Background::new();
    let availability = store::availability::Availability::default();
    foundations.adopt("database monitor", availability.spawn(config.database_url.expose().to_owned()));
    settings::warn_about_other_keys(&pool, &master_key).await?;
    auth::bootstrap::run(&pool, &config).await?;

    let api_addr = listeners.api.local_addr()?;
    let proxy_feed_settings = settings::proxy_feed_settings(&config, api_addr)?;
    let sandbox_proxy_ca = settings::sandbox_proxy_ca(&config)?;
    // Where sandboxes reach the egress proxy, when they use it.
    let proxy_addr = sandbox_proxy_ca.as_ref().map(|_| config.proxy_addr());
    let replica_id = crate::replicas::replica_id(config.replica_id, &config.data_dir)?;
    let driver =
        super::drivers::driver(&config, engines.as_deref(), &pool, sandbox_proxy_ca.clone(), replica_id).await?;
    // Pooled sandboxes are made on the local engine only: none when it takes no new agents.
    let local_takes_agents =
        engines.as_ref().is_none_or(|e| e.iter().any(|e| e.name == crate::sandbox::LOCAL_ENGINE && e.capacity > 0));
    if config.warm_pool_size > 0 && !local_takes_agents {
        tracing::info!(
            "no warm pool: it is made on the local engine, which takes no new agents (AGENTHOLD_DOCKER_ENGINES)"
        );
    }
    {
        let (driver, image) = (Arc::clone(&driver), config.image.clone());
        background.spawn("image preparation", async move { driver.prepare(&image).await });
    }
    {
        let (driver, pool) = (Arc::clone(&driver), pool.clone());
        background.spawn("pending deletions", async move {
            crate::fleet::deletion::finish_pending(&pool, driver.as_ref()).await;
        });
    }
    let tunnel_tls = match config.tunnel_tls() {
        Some((cert, key)) => Some(crate::tunnel::tls::acceptor(cert, key)?),
        None => None,
    };
    let tunnel_port = listeners.tunnel.local_addr()?.port();
    super::drivers::install_sandbox_firewall(&config, tunnel_port).await?;
    let replicas = {
        let me = store::replicas::ReplicaRow {
            id: replica_id,
            tunnel_url: config.replica_tunnel_url(tunnel_port),
            internal_url: config.replica_url(listeners.internal.local_addr()?),
        };
        let ttl = std::time::Duration::from_secs_f64(config.lease_ttl_secs);
        Arc::new(crate::replicas::Replicas::register(pool.clone(), me, ttl, &master_key).await?)
    };
    super::drivers::remind_remote_firewalls(&config, engines.as_deref().unwrap_or_default(), tunnel_port);
    let hub = Arc::new(Hub::default());
    let log_reads = store::connect_log_reader(
        config.database_url.expose(),
        config.db_log_read_pool_size,
        std::time::Duration::from_millis(config.db_acquire_timeout_ms),
    )?;
    // Events other replicas store reach this one's watchers.
    background
        .spawn("event fan-out", crate::replicas::fanout::follow(pool.clone(), log_reads.clone(), Arc::clone(&hub)));
    let (appender, appender_task) = Appender::spawn(pool.clone(), Arc::clone(&hub));
    foundations.adopt("event appender", appender_task);
    let secs = std::time::Duration::from_secs;
    let postures = settings::postures(&config)?;
    let (written_tx, written_rx) = watch::channel(proxy_feed::task::Written::default());
    let feed_nudge = Arc::new(tokio::sync::Notify::new());
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
        host: Arc::new(crate::supervisor::host::Host::new(config.max_awake.map(|m| m as usize))),
        mcp: settings::mcp_endpoint(&config, api_addr, sandbox_proxy_ca.is_some(), &master_key),
        proxy_report: proxy_feed_settings
            .as_ref()
            .map(|s| s.config_file.with_file_name(agenthold_proxy::cut::REPORT_FILE)),
        proxy: proxy_addr.clone().map(|addr| crate::supervisor::ProxyAccess {
            addr,
            master_key: Arc::clone(&master_key),
            written: proxy_feed_settings.is_some().then_some(written_rx),
            nudge: Arc::clone(&feed_nudge),
        }),
    }));
    let dispatch = Arc::new(crate::dispatch::Dispatch::new(Arc::clone(&supervisors), Arc::clone(&replicas)));
    let config_overrides = config.proxy_test_upstream_overrides.clone();
    let (stop, stopping) = watch::channel(false);
    let pooled_profiles = crate::fleet::pooled_harness::parse_profiles(&config.warm_pool_harnesses)
        .map_err(|e| anyhow::anyhow!("AGENTHOLD_WARM_POOL_HARNESSES: {e}"))?;
    let pooled_harnesses: Vec<(crate::fleet::pooled_harness::PooledProfile, String)> = pooled_profiles
        .iter()
        .map(|profile| {
            let in_base = crate::harness::adapter(&profile.harness).is_some_and(|a| a.profile().in_base_image);
            (profile.clone(), if in_base { config.base_image.clone() } else { config.image.clone() })
        })
        .collect();
    let pooling = config.warm_pool_size > 0 || !pooled_harnesses.is_empty();
    let warm_pool = (pooling && config.driver == DriverKind::Docker && local_takes_agents).then(|| {
        let settings = crate::fleet::warm_pool::PoolSettings {
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
            harnesses: pooled_harnesses,
            proxy: supervisors.proxy().cloned(),
            warm_timeout: std::time::Duration::from_secs(60),
            harness_budget_mib: config.warm_pool_harness_memory_mib,
            mcp: supervisors.mcp().cloned(),
        };
        let host = Arc::clone(supervisors.host());
        crate::fleet::warm_pool::WarmPool::new(Arc::clone(&driver), host, pool.clone(), settings)
    });
    if let Some(warm_pool) = &warm_pool {
        background.adopt("warm pool", warm_pool.spawn());
    }
    let state = AppState {
        warm_pool,
        availability,
        stopping: stopping.clone(),
        pool: pool.clone(),
        log_reads,
        hub,
        appender,
        supervisors: Arc::clone(&supervisors),
        dispatch: Arc::clone(&dispatch),
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
    };
    // A sandbox asking to refresh its ChatGPT login (the proxy's report) refreshes it at once.
    if let Some(settings) = proxy_feed_settings.as_ref() {
        let report = settings.config_file.with_file_name(agenthold_proxy::cut::REPORT_FILE);
        background.spawn("login refresh asked", crate::logins::asked::run(refresher.clone(), report));
    }
    background.adopt("login refresh", refresher.spawn());
    dispatch.resume_open_turns().await.context("resuming open turns")?;
    // Renews this replica's leases; takes over the agents of replicas that die.
    background.spawn("replica heartbeat", crate::fleet::heartbeat::run(Arc::clone(&dispatch), pool.clone()));
    // Sandboxes that stop on their own (the engine's events): their running turns end at once.
    {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let follow = state.driver.follow_exits(tx);
        let supervisors = Arc::clone(&supervisors);
        background.spawn("sandbox exits", async move {
            let report = async {
                while let Some((agent_id, at)) = rx.recv().await {
                    supervisors.send_if_running(agent_id, crate::supervisor::Command::SandboxExited(at)).await;
                }
            };
            tokio::join!(follow, report);
        });
    }
    // Idle agents are put to sleep (AGENTHOLD_AUTO_SLEEP_SECS, or their own limits.auto_sleep_secs).
    {
        let secs = state.config.auto_sleep_secs;
        let every = crate::fleet::auto_sleep::interval(secs);
        background.spawn(
            "auto-sleep",
            crate::fleet::auto_sleep::run(Arc::clone(&dispatch), pool.clone(), state.appender.clone(), secs, every),
        );
    }
    // Containers, volumes and networks of this instance whose agent is gone are removed.
    if state.config.orphan_sweep_secs > 0 {
        let (driver, pool) = (Arc::clone(&state.driver), pool.clone());
        let every = std::time::Duration::from_secs(state.config.orphan_sweep_secs);
        let grace = std::time::Duration::from_secs(state.config.orphan_grace_secs);
        background.spawn("orphan sweep", crate::fleet::orphans::run(driver, pool, every, grace));
    }
    // Expired browser sessions and old login failures are purged (AGENTHOLD_HOUSEKEEPING_SECS).
    if let Some(housekeeping) = crate::housekeeping::spawn(pool.clone(), state.config.housekeeping_secs) {
        background.adopt("housekeeping", housekeeping);
    }
    // The read-only MCP tools' calls reach the audit log in aggregate.
    background.adopt(
        "MCP read audit",
        crate::mcp::read_audit::spawn(pool.clone(), std::time::Duration::from_secs(state.config.mcp_read_audit_secs)),
    );
    // Schedules run when due (docs/triggers.md).
    background.adopt(
        "scheduler",
        crate::triggers::scheduler::spawn(
            state.clone(),
            std::time::Duration::from_millis(state.config.scheduler_tick_ms),
            stopping.clone(),
        ),
    );
    if let Some(settings) = proxy_feed_settings {
        let feed = proxy_feed::task::spawn(
            pool.clone(),
            Arc::clone(&state.master_key),
            settings,
            written_tx,
            feed_nudge,
            stopping.clone(),
        );
        background.adopt_graceful("proxy feed", feed);
    }
    Ok(App { state, background, foundations, replicas, stop, tunnel_tls, recorder })
}

impl App {
    /// Stops what [`build`] started, in order: the background tasks (the proxy feed writes its
    /// last file), this replica's registration (others take its agents over at once), the MCP
    /// read audit's last counts, the event log's writer, the database pool.
    pub async fn shut_down(self) {
        let _ = self.stop.send(true);
        self.background.stop(std::time::Duration::from_secs(5)).await;
        drop(self.state.supervisors);
        // Other replicas take this one's agents over at once rather than after the lease time.
        self.replicas.retire().await;
        crate::mcp::read_audit::flush(&self.state.pool).await;
        self.foundations.stop(std::time::Duration::ZERO).await;
        self.state.pool.close().await;
    }
}
