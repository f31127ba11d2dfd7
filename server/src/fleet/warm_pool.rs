//! The warm pool: sandboxes started ahead for agents not created yet, so a new agent's first
//! prompt skips the container's creation and start and sandboxd's connection (docs/design.md,
//! "Warm pool"). Each pooled sandbox is made for the id its agent will get (like the driver's
//! ready networks): its container, home volume and network carry that id, so claiming one is
//! handing over what exists — never renaming, never reusing a sandbox another agent held.
//!
//! - **Made** in the background, one at a time, up to [`PoolSettings::size`], for the server's
//!   default image, with the default limits; recorded in `pooled_sandboxes` (token hashed) before
//!   the container exists, so the tunnel accepts its sandboxd and [`WarmPool::hold`] keeps the
//!   connection until a claim. Never refilled during a claim: a refill waits
//!   [`PoolSettings::refill_delay`] after one.
//! - **Claimed** by an agent created with the default image ([`WarmPool::claim`]): the caller
//!   creates the agent with the sandbox's id, moves the token (`store::warm_pool::claim`),
//!   applies the agent's limits and hands the live connection to the agent's supervisor.
//! - **Replaced** when its sandboxd does not connect within [`PoolSettings::connect_timeout`] or
//!   its connection ends (the container died): removed, then made again.
//! - **Counted** as awake on the host (`AGENTHOLD_MAX_AWAKE`): none is made while the host is
//!   full; a claim carries the count over to the agent (same id).
//! - **At start** every pooled sandbox an earlier process of this replica left is removed (its
//!   connection is gone with that process), and those of replicas no longer alive; another live
//!   replica's pool is its own. The orphan sweep leaves recorded pooled sandboxes alone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agenthold_sandboxd::protocol::Control;
use parking_lot::Mutex;
use sqlx::PgPool;
use tokio::sync::{Notify, mpsc};

use crate::ids::AgentId;
use crate::sandbox::{SandboxDriver, SandboxSpec};
use crate::store;
use crate::tunnel::link::{Incoming, Link};

/// How the pool is made.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Sandboxes kept ready (0: no pool).
    pub size: usize,
    /// Their image (the server's default).
    pub image: String,
    /// The URL their sandboxd dials.
    pub tunnel_url: String,
    /// The CA their sandboxd trusts for a `wss://` tunnel.
    pub tunnel_ca_pem: Option<String>,
    /// Their limits until claimed (the server's defaults).
    pub cpus: f64,
    /// See [`Self::cpus`].
    pub memory_mib: i32,
    /// See [`Self::cpus`].
    pub pids_limit: i32,
    /// How long a new pooled sandbox has to connect before it is replaced.
    pub connect_timeout: Duration,
    /// How long after a claim the pool waits before making another (the claimed agent's first
    /// prompt has the engine to itself meanwhile).
    pub refill_delay: Duration,
    /// The replica this pool belongs to (its sandboxes' connections reach its tunnel).
    pub replica_id: uuid::Uuid,
}

/// A pooled sandboxd's connection, as the tunnel made it.
pub struct Held {
    /// The connection.
    pub link: Link,
    /// Its hello.
    pub hello: Control,
    /// What it sends.
    pub inbox: mpsc::Receiver<Incoming>,
}

/// A sandbox taken from the pool.
pub struct Claimed {
    /// The id its agent must have.
    pub agent_id: AgentId,
    /// The driver's handle (the container id).
    pub handle: String,
    /// Its live connection.
    pub held: Held,
}

struct Entry {
    since: Instant,
    handle: String,
    held: Option<Held>,
}

struct Inner {
    driver: Arc<dyn SandboxDriver>,
    host: Arc<crate::supervisor::host::Host>,
    pool: PgPool,
    settings: PoolSettings,
    entries: Mutex<HashMap<AgentId, Entry>>,
    last_claim: Mutex<Option<Instant>>,
    changed: Notify,
}

/// The pool (cheap to clone).
#[derive(Clone)]
pub struct WarmPool {
    inner: Arc<Inner>,
}

impl WarmPool {
    /// A pool of `settings.size` sandboxes on `driver`; [`Self::spawn`] makes them.
    pub fn new(
        driver: Arc<dyn SandboxDriver>,
        host: Arc<crate::supervisor::host::Host>,
        pool: PgPool,
        settings: PoolSettings,
    ) -> Self {
        let inner = Inner {
            driver,
            host,
            pool,
            settings,
            entries: Mutex::default(),
            last_claim: Mutex::default(),
            changed: Notify::new(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Keeps a pooled sandboxd's connection until a claim; false when `agent_id` is not pooled
    /// (any more).
    pub fn hold(&self, agent_id: AgentId, held: Held) -> bool {
        let mut entries = self.inner.entries.lock();
        let Some(entry) = entries.get_mut(&agent_id) else { return false };
        entry.held = Some(held);
        tracing::debug!(agent.id = %agent_id, "a pooled sandbox connected");
        true
    }

    /// Takes a connected sandbox of `image`, if the pool has one.
    pub fn claim(&self, image: &str) -> Option<Claimed> {
        if image != self.inner.settings.image {
            return None;
        }
        let claimed = {
            let mut entries = self.inner.entries.lock();
            let id = entries
                .iter()
                .find(|(_, entry)| entry.held.as_ref().is_some_and(|held| !held.inbox.is_closed()))
                .map(|(id, _)| *id)?;
            let entry = entries.remove(&id)?;
            Claimed { agent_id: id, handle: entry.handle, held: entry.held? }
        };
        *self.inner.last_claim.lock() = Some(Instant::now());
        self.inner.changed.notify_one();
        crate::metrics::warm_pool(self.ready());
        Some(claimed)
    }

    /// Puts back a sandbox whose agent could not be created after all.
    pub fn give_back(&self, claimed: Claimed) {
        let entry = Entry { since: Instant::now(), handle: claimed.handle, held: Some(claimed.held) };
        self.inner.entries.lock().insert(claimed.agent_id, entry);
        crate::metrics::warm_pool(self.ready());
    }

    /// Whether `agent_id` is a pooled sandbox of this process.
    pub fn holds(&self, agent_id: AgentId) -> bool {
        self.inner.entries.lock().contains_key(&agent_id)
    }

    /// Pooled sandboxes connected and ready to claim.
    pub fn ready(&self) -> usize {
        self.inner.entries.lock().values().filter(|e| e.held.as_ref().is_some_and(|h| !h.inbox.is_closed())).count()
    }

    /// Removes what an earlier process left, then keeps the pool full until aborted.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let pool = self.clone();
        tokio::spawn(async move {
            pool.remove_leftovers().await;
            loop {
                pool.prune().await;
                pool.refill().await;
                crate::metrics::warm_pool(pool.ready());
                tokio::select! {
                    () = pool.inner.changed.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        })
    }

    async fn remove_leftovers(&self) {
        let leftovers = match store::warm_pool::leftovers(&self.inner.pool, self.inner.settings.replica_id).await {
            Ok(ids) => ids,
            Err(error) => {
                tracing::warn!(%error, "listing pooled sandboxes left by an earlier run");
                return;
            }
        };
        // A record whose id an agent has is a claim that did not finish forgetting it: the
        // sandbox is that agent's now; only the record goes.
        let ids: Vec<uuid::Uuid> = leftovers.iter().map(|id| id.0).collect();
        let agents = match store::agents::existing(&self.inner.pool, &ids).await {
            Ok(agents) => agents,
            Err(error) => {
                tracing::warn!(%error, "checking pooled sandboxes left by an earlier run against the agents");
                return;
            }
        };
        for agent_id in leftovers {
            if agents.contains(&agent_id) {
                if let Err(error) = store::warm_pool::delete(&self.inner.pool, agent_id).await {
                    tracing::warn!(%error, agent.id = %agent_id, "forgetting a claimed pooled sandbox");
                }
                continue;
            }
            self.remove(agent_id).await;
        }
    }

    /// Removes pooled sandboxes that never connected in time or whose connection ended.
    async fn prune(&self) {
        let timeout = self.inner.settings.connect_timeout;
        let dead: Vec<AgentId> = {
            let mut entries = self.inner.entries.lock();
            let dead: Vec<AgentId> = entries
                .iter()
                .filter(|(_, e)| match &e.held {
                    Some(held) => held.inbox.is_closed(),
                    None => e.since.elapsed() > timeout,
                })
                .map(|(id, _)| *id)
                .collect();
            for id in &dead {
                entries.remove(id);
            }
            dead
        };
        for agent_id in dead {
            tracing::warn!(agent.id = %agent_id, "a pooled sandbox did not connect in time or went away: replacing it");
            self.remove(agent_id).await;
        }
    }

    async fn refill(&self) {
        let settings = &self.inner.settings;
        while self.inner.entries.lock().len() < settings.size {
            // Pooled sandboxes run: they count against the host's awake limit, and never take
            // the last room an agent's wake could use.
            if self.inner.host.free().is_some_and(|free| free < 2) {
                return;
            }
            let since_claim = *self.inner.last_claim.lock();
            if let Some(wait) = since_claim.and_then(|at| settings.refill_delay.checked_sub(at.elapsed())) {
                tokio::time::sleep(wait).await;
            }
            if let Err(error) = self.make_one().await {
                tracing::warn!(%error, "making a pooled sandbox; trying again shortly");
                tokio::time::sleep(Duration::from_secs(5)).await;
                return;
            }
        }
    }

    async fn make_one(&self) -> anyhow::Result<()> {
        let (driver, settings) = (&self.inner.driver, &self.inner.settings);
        let agent_id = driver.next_agent_id();
        let token = crate::supervisor::shell::mint_token();
        let hash = store::tokens::hash_token(token.expose());
        store::warm_pool::insert(&self.inner.pool, agent_id, &hash, &settings.image, settings.replica_id).await?;
        let spec = SandboxSpec {
            agent_id,
            image: settings.image.clone(),
            tunnel_url: settings.tunnel_url.clone(),
            tunnel_ca_pem: settings.tunnel_ca_pem.clone(),
            token,
            cpus: settings.cpus,
            memory_mib: settings.memory_mib,
            pids_limit: settings.pids_limit,
            // The driver's default: an agent with a size of its own takes no pooled sandbox.
            disk_mib: None,
        };
        let made = async {
            let handle = driver.create(spec).await?;
            // Known before it starts, so its sandboxd's connection is held, not refused.
            self.inner.entries.lock().insert(agent_id, Entry { since: Instant::now(), handle, held: None });
            self.inner.host.take_running(agent_id, Instant::now());
            driver.start(agent_id).await
        };
        if let Err(error) = made.await {
            self.inner.entries.lock().remove(&agent_id);
            self.remove(agent_id).await;
            return Err(error.into());
        }
        tracing::info!(agent.id = %agent_id, "a pooled sandbox is starting");
        Ok(())
    }

    /// Removes a pooled sandbox's container, home and network, then its record.
    async fn remove(&self, agent_id: AgentId) {
        self.inner.host.give_back(agent_id);
        if let Err(error) = self.inner.driver.destroy(agent_id).await {
            tracing::warn!(%error, agent.id = %agent_id, "removing a pooled sandbox");
            return;
        }
        if let Err(error) = store::warm_pool::delete(&self.inner.pool, agent_id).await {
            tracing::warn!(%error, agent.id = %agent_id, "forgetting a pooled sandbox");
        }
    }
}
