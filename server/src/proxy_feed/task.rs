//! The feed: a task that keeps the proxy's configuration file in step with the database. It
//! rebuilds at start, on every `NOTIFY` on `agenthold_agent_secrets` (attach, detach, secret
//! deleted) and `agenthold_proxy_config` (agent created, marked for deletion, deleted; an
//! allow-list or identity written — triggers of migration 0006; a pooled harness's sandbox
//! recorded, given its address or removed — migration 0037), debounced, and every
//! [`RESYNC`] in case a notification was lost with the listening connection; each build goes
//! through [`super::check`] before it is written. A failure to read the database keeps the last
//! file: the feed never writes a file it could not build from a complete read. Each agent's
//! source addresses come through [`super::sources`] (an empty reading keeps the last address).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::build::{Inputs, build_config};
use super::check::check_and_write;
use super::file::{CaPaths, UpstreamOverride};
use super::identity::IdentityError;
use super::sources::Sources;
use crate::secrets::master_key::MasterKey;
use crate::store;

/// How long after a notification the feed waits for more before rebuilding.
pub const DEBOUNCE: Duration = Duration::from_millis(25);
/// A full rebuild at least this often.
pub const RESYNC: Duration = Duration::from_secs(30);
/// Longest a rebuild's database reads may take before it is abandoned (the file is kept).
const READ_DEADLINE: Duration = Duration::from_secs(30);

/// The source addresses of the sandboxes in the file the proxy follows, as last written (or
/// found unchanged): a harness whose sandbox just got an address starts once it is there.
pub type Written = Arc<WrittenAddrs>;

/// What [`Written`] holds: agents' sandboxes and pooled harnesses' (not claimed yet) apart — a
/// pooled sandbox and the agent that claims it have the same id, and the agent's entry (with
/// its secrets) is the one a claim waits for.
#[derive(Debug, Default)]
pub struct WrittenAddrs {
    agents: std::collections::HashMap<crate::ids::AgentId, Vec<IpAddr>>,
    pooled: std::collections::HashMap<crate::ids::AgentId, Vec<IpAddr>>,
}

impl WrittenAddrs {
    /// Whether the agent's own entry admits it from `addr`.
    pub fn agent_from(&self, agent_id: crate::ids::AgentId, addr: IpAddr) -> bool {
        self.agents.get(&agent_id).is_some_and(|a| a.contains(&addr))
    }

    /// Whether the pooled harness's entry (no agent's yet) admits it from `addr`.
    pub fn pooled_from(&self, agent_id: crate::ids::AgentId, addr: IpAddr) -> bool {
        self.pooled.get(&agent_id).is_some_and(|a| a.contains(&addr))
    }
}

/// What the feed needs besides the database.
#[derive(Debug, Clone)]
pub struct FeedSettings {
    /// The configuration file the proxy follows.
    pub config_file: PathBuf,
    /// The CA's files.
    pub ca: CaPaths,
    /// More addresses of the proxy itself.
    pub own_addrs: Vec<IpAddr>,
    /// Private or reserved addresses the proxy may dial all the same.
    pub allow_addrs: Vec<IpAddr>,
    /// TEST ONLY: stand-ins.
    pub upstream_overrides: BTreeMap<String, UpstreamOverride>,
    /// agenthold's MCP server through the proxy (`None`: not offered).
    pub server_route: Option<super::file::ServerRouteEntry>,
}

/// Makes the proxy's CA in `dir` unless it exists, as `agenthold-proxy ca init --with-presets`
/// does (constrained to the provider presets' hosts), and returns its paths.
pub fn prepare_ca(dir: &Path) -> anyhow::Result<CaPaths> {
    let hosts: Vec<String> = agenthold_proxy::ca::PRESET_HOSTS.iter().map(|h| (*h).to_owned()).collect();
    let made =
        agenthold_proxy::ca::init(dir, &hosts).with_context(|| format!("making the proxy CA in {}", dir.display()))?;
    if made {
        tracing::info!(dir = %dir.display(), "made the egress proxy's CA");
    }
    Ok(CaPaths { cert: dir.join("ca.pem"), key: dir.join("ca-key.pem") })
}

/// Starts the feed; it stops when `stop` turns true. `written` hears of every file written;
/// `nudge` makes it rebuild at once (a pooled harness's claim, which waits for the write).
pub fn spawn(
    pool: PgPool,
    key: Arc<MasterKey>,
    settings: FeedSettings,
    written: watch::Sender<Written>,
    nudge: Arc<tokio::sync::Notify>,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The addresses of the file last written (before a restart) are the last ones known.
        let path = settings.config_file.clone();
        let sources = tokio::task::spawn_blocking(move || {
            let mut sources = Sources::default();
            sources.seed_from_file(&path);
            sources
        })
        .await
        .unwrap_or_default();
        run(Feed { pool, key, settings, last_digest: None, last_version: 0, written, sources }, nudge, stop).await
    })
}

struct Feed {
    pool: PgPool,
    key: Arc<MasterKey>,
    settings: FeedSettings,
    last_digest: Option<[u8; 32]>,
    last_version: u64,
    written: watch::Sender<Written>,
    sources: Sources,
}

enum Wake {
    Stop,
    Notified,
    Lost,
    Resync,
}

async fn run(mut feed: Feed, nudge: Arc<tokio::sync::Notify>, mut stop: watch::Receiver<bool>) {
    let mut listener: Option<PgListener> = None;
    loop {
        if listener.is_none() {
            listener = listen(&feed.pool).await;
        }
        feed.rebuild().await;
        let wake = tokio::select! {
            biased;
            _ = stop.wait_for(|stop| *stop) => Wake::Stop,
            // A claim waits on this rebuild: no debounce (its own commits are in already).
            () = nudge.notified() => Wake::Resync,
            got = next(&mut listener) => got,
            () = tokio::time::sleep(RESYNC) => Wake::Resync,
        };
        match wake {
            Wake::Stop => return,
            Wake::Notified => {
                // Debounce: take what else arrives shortly, then rebuild once (at once when a
                // claim asks).
                let deadline = tokio::time::Instant::now() + DEBOUNCE;
                loop {
                    tokio::select! {
                        biased;
                        () = nudge.notified() => break,
                        got = tokio::time::timeout_at(deadline, next(&mut listener)) => match got {
                            Ok(Wake::Notified) => {}
                            _ => break,
                        },
                    }
                }
            }
            Wake::Lost => listener = None,
            Wake::Resync => {}
        }
        if *stop.borrow() {
            return;
        }
    }
}

async fn listen(pool: &PgPool) -> Option<PgListener> {
    let connect = async {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen_all([store::secrets::CHANGED_CHANNEL, store::proxy_identities::CHANGED_CHANNEL]).await?;
        Ok::<_, sqlx::Error>(listener)
    };
    match tokio::time::timeout(READ_DEADLINE, connect).await {
        Ok(Ok(listener)) => Some(listener),
        Ok(Err(error)) => {
            tracing::warn!(%error, "the proxy feed cannot listen for changes; it rebuilds every {}s", RESYNC.as_secs());
            None
        }
        Err(_) => {
            tracing::warn!("the proxy feed timed out listening for changes; it rebuilds every {}s", RESYNC.as_secs());
            None
        }
    }
}

async fn next(listener: &mut Option<PgListener>) -> Wake {
    let Some(active) = listener.as_mut() else {
        return std::future::pending().await;
    };
    match active.try_recv().await {
        Ok(Some(_)) => Wake::Notified,
        // Notifications may have been missed while the connection was down: rebuild.
        Ok(None) => Wake::Notified,
        Err(error) => {
            tracing::warn!(%error, "the proxy feed lost its notification connection");
            Wake::Lost
        }
    }
}

impl Feed {
    /// Reads, builds, checks and (when changed) writes. Every failure keeps the last file.
    async fn rebuild(&mut self) {
        let began = std::time::Instant::now();
        let mut inputs = match tokio::time::timeout(READ_DEADLINE, self.gather()).await {
            Ok(Ok(inputs)) => inputs,
            Ok(Err(error)) => {
                tracing::warn!(%error, "the proxy feed could not read the database; the proxy keeps its last configuration");
                return;
            }
            Err(_) => {
                tracing::warn!("the proxy feed's database reads timed out; the proxy keeps its last configuration");
                return;
            }
        };
        self.admit_sources(&mut inputs);
        let mut addrs = WrittenAddrs::default();
        for input in &inputs.agents {
            let side = if input.pooled { &mut addrs.pooled } else { &mut addrs.agents };
            side.insert(input.agent_id, input.source_addrs.clone());
        }
        let addrs: Written = Arc::new(addrs);
        let (mut file, skipped) = build_config(&inputs);
        for skip in &skipped {
            tracing::warn!(agent.id = %skip.agent_id, secret.id = %skip.secret_id, reason = skip.reason, "a secret is not injected");
        }
        let path = self.settings.config_file.clone();
        let previous = self.last_digest;
        let version = next_version(self.last_version);
        let read = began.elapsed();
        let written = tokio::task::spawn_blocking(move || check_and_write(&mut file, &path, previous, version)).await;
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        match written {
            Ok(Ok(Some((digest, sandboxes)))) => {
                self.last_digest = Some(digest);
                self.last_version = version;
                let (read_ms, total_ms) = (ms(read), ms(began.elapsed()));
                tracing::info!(version, sandboxes, path = %self.settings.config_file.display(), %read_ms, %total_ms, "wrote the proxy configuration");
                self.written.send_replace(addrs);
            }
            Ok(Ok(None)) => {
                self.written.send_replace(addrs);
            }
            Ok(Err(error)) => {
                tracing::error!(error = %format!("{error:#}"), "the proxy configuration could not be written")
            }
            Err(error) => tracing::error!(%error, "the proxy configuration task failed"),
        }
    }

    /// Replaces each agent's address as read by what the proxy admits it from: the last one
    /// known when the reading is empty ([`super::sources`]).
    fn admit_sources(&mut self, inputs: &mut Inputs) {
        // The server route is offered exactly when sandboxes use the proxy (`AGENTHOLD_PROXY_ADDR`
        // set, a driver other than the local one): then sandboxes hold proxy credentials.
        let sandboxes_use_proxy = self.settings.server_route.is_some();
        self.sources.retain(&inputs.agents.iter().map(|a| a.agent_id).collect());
        for agent in &mut inputs.agents {
            let reading = agent.source_addrs.first().copied();
            let admitted = self.sources.admit(agent.agent_id, reading, sandboxes_use_proxy);
            agent.source_addrs = admitted.source_addrs;
            agent.any_source = admitted.any_source;
        }
    }

    async fn gather(&self) -> Result<Inputs, IdentityError> {
        Ok(Inputs {
            version: 0,
            ca: self.settings.ca.clone(),
            own_addrs: self.settings.own_addrs.clone(),
            allow_addrs: self.settings.allow_addrs.clone(),
            agents: self.read_agents().await?,
            upstream_overrides: self.settings.upstream_overrides.clone(),
            server_route: self.settings.server_route.clone(),
        })
    }
}

impl Feed {
    /// [`super::gather::agents`] in a task of its own: the read runs in a transaction, and the
    /// rebuild's deadline must not cancel it between its `BEGIN` and its end (a connection would
    /// go back to the pool inside an open transaction). Past the deadline the task finishes on
    /// its own and its result is dropped.
    async fn read_agents(&self) -> Result<Vec<super::build::AgentInput>, IdentityError> {
        let (pool, key, route) = (self.pool.clone(), Arc::clone(&self.key), self.settings.server_route.clone());
        let read = tokio::spawn(async move { super::gather::agents(&pool, &key, route.as_ref()).await });
        match read.await {
            Ok(read) => read,
            Err(error) => {
                tracing::error!(%error, "the proxy feed's read failed");
                Err(IdentityError::Db(sqlx::Error::WorkerCrashed))
            }
        }
    }
}

/// A version above `last`: the time in milliseconds, or `last + 1`.
fn next_version(last: u64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    now.max(last + 1)
}
