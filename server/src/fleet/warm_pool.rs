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
//! - **Pooled harnesses** (`AGENTHOLD_WARM_POOL_HARNESSES`, [`super::pooled_harness`]): for each
//!   profile, sandboxes of its harness's image (one, more while its claims come fast, within the
//!   memory budget: [`super::pooled_harness::targets`]) whose harness the pool starts,
//!   initialises and opens a session on as soon as its sandboxd connects — once the proxy
//!   admits its sandbox to agenthold's MCP route (its identity and address recorded with it), so
//!   that session connects to the MCP server; an agent whose harness, model and secrets'
//!   variables fit the profile takes it, harness and all.
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

use super::pooled_harness::{Keeper, Plan, PlanContext, PooledProfile, Warmed};
use crate::ids::AgentId;
use crate::sandbox::{SandboxDriver, SandboxSpec};
use crate::store;
use crate::tunnel::link::{Incoming, Link};

/// How long a pooled harness waits for the proxy feed to admit its sandbox before it starts.
const FEED_WAIT: Duration = Duration::from_secs(10);

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
    /// Profiles of the harnesses started ahead, each with its sandboxes' image.
    pub harnesses: Vec<(PooledProfile, String)>,
    /// The egress proxy as sandboxes reach it, and its feed (`None`: they do not use one).
    pub proxy: Option<crate::supervisor::ProxyAccess>,
    /// How long a pooled harness has to answer `initialize`.
    pub warm_timeout: Duration,
    /// The memory the pooled harnesses may hold together (MiB, by their harnesses' estimates).
    pub harness_budget_mib: u64,
    /// agenthold's MCP server as harnesses are offered it (for the sessions opened ahead).
    pub mcp: Option<crate::mcp::servers::Endpoint>,
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
    /// Its live connection, and the harness running in it.
    pub taken: Taken,
}

/// What runs in a claimed sandbox.
pub enum Taken {
    /// Nothing yet: its connection.
    Plain(Held),
    /// A harness the pool started ([`super::pooled_harness`]), with the connection.
    Harness(Box<Warmed>),
}

/// What an agent asks of a pooled harness.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// Its harness.
    pub harness: &'a str,
    /// Its model.
    pub model: Option<&'a str>,
    /// The variables its secrets are attached under.
    pub variables: &'a [String],
}

struct Entry {
    since: Instant,
    handle: String,
    /// The profile whose harness it runs (an index into the settings' `harnesses`).
    profile: Option<usize>,
    /// Its connection, while nothing runs in it.
    held: Option<Held>,
    /// Its harness's start, until its sandboxd connects.
    plan: Option<Plan>,
    /// Its warmed harness, waiting for a claim.
    keeper: Option<Keeper>,
    /// Its harness could not be warmed: replaced.
    failed: bool,
}

impl Entry {
    fn ready(&self) -> bool {
        match self.profile {
            None => self.held.as_ref().is_some_and(|held| !held.inbox.is_closed()),
            Some(_) => self.keeper.as_ref().is_some_and(Keeper::alive),
        }
    }

    /// Gone for good: its connection ended, it never connected in time, or its harness failed.
    fn dead(&self, connect_timeout: Duration) -> bool {
        if self.failed {
            return true;
        }
        match (&self.held, &self.keeper) {
            (Some(held), _) => held.inbox.is_closed(),
            (None, Some(keeper)) => !keeper.alive(),
            // Not connected yet (a harness being warmed has its own deadline).
            (None, None) => (self.plan.is_some() || self.profile.is_none()) && self.since.elapsed() > connect_timeout,
        }
    }
}

struct Inner {
    driver: Arc<dyn SandboxDriver>,
    host: Arc<crate::supervisor::host::Host>,
    pool: PgPool,
    settings: PoolSettings,
    entries: Mutex<HashMap<AgentId, Entry>>,
    last_claim: Mutex<Option<Instant>>,
    /// When each profile's harnesses were claimed, the last minute's.
    claims: Mutex<HashMap<usize, std::collections::VecDeque<Instant>>>,
    changed: Arc<Notify>,
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
            claims: Mutex::default(),
            changed: Arc::new(Notify::new()),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Keeps a pooled sandboxd's connection until a claim (starting its harness first, for a
    /// harness profile's sandbox); false when `agent_id` is not pooled (any more).
    pub fn hold(&self, agent_id: AgentId, held: Held) -> bool {
        let mut entries = self.inner.entries.lock();
        let Some(entry) = entries.get_mut(&agent_id) else { return false };
        tracing::debug!(agent.id = %agent_id, "a pooled sandbox connected");
        let Some(plan) = entry.plan.take() else {
            if entry.profile.is_some() {
                // Its sandboxd connected again: the harness started over the first connection
                // is not handed over; the sandbox is replaced.
                tracing::warn!(agent.id = %agent_id, "a pooled harness's sandbox connected again; replacing it");
                entry.failed = true;
                drop(entries);
                self.inner.changed.notify_one();
                return false;
            }
            entry.held = Some(held);
            return true;
        };
        let pool = self.clone();
        let timeout = self.inner.settings.warm_timeout;
        tokio::spawn(async move {
            let began = Instant::now();
            // Its address, read now rather than while an agent waits for its claim; with it the
            // proxy admits the harness to agenthold's MCP route, for the session opened ahead.
            let source_addr = pool.inner.driver.source_addr(agent_id).await.ok().flatten();
            if plan.identity.is_some() {
                pool.admit_to_mcp(agent_id, source_addr).await;
            }
            let warmed = match super::pooled_harness::warm(held, plan, timeout).await {
                Ok(mut warmed) => {
                    warmed.source_addr = source_addr;
                    Ok(warmed)
                }
                Err(error) => Err(error),
            };
            let mut entries = pool.inner.entries.lock();
            let Some(entry) = entries.get_mut(&agent_id) else { return };
            match warmed {
                Ok(warmed) => {
                    let warm_up_ms = warmed.warm_up_ms.map(|ms| ms.to_string()).unwrap_or_else(|| "none".to_owned());
                    tracing::info!(agent.id = %agent_id, ms = began.elapsed().as_millis() as u64, %warm_up_ms, "a pooled harness answered `initialize`");
                    entry.keeper = Some(Keeper::keep(warmed, agent_id, pool.changed()));
                }
                Err(error) => {
                    tracing::warn!(agent.id = %agent_id, %error, "a pooled harness could not be started; replacing its sandbox");
                    entry.failed = true;
                }
            }
            drop(entries);
            pool.inner.changed.notify_one();
            pool.publish();
        });
        true
    }

    /// Takes a sandbox of `image`: one whose harness fits `wanted`, else one with nothing
    /// running in it, if the pool has one.
    pub async fn claim(&self, image: &str, wanted: Option<Wanted<'_>>) -> Option<Claimed> {
        let profiles = &self.inner.settings.harnesses;
        let fitting = wanted
            .and_then(|w| profiles.iter().position(|(p, img)| img == image && p.fits(w.harness, w.model, w.variables)));
        let claimed = match fitting {
            Some(profile) => self.claim_harness(profile).await,
            None => None,
        };
        let claimed = match claimed {
            Some(claimed) => claimed,
            None => self.claim_plain(image)?,
        };
        *self.inner.last_claim.lock() = Some(Instant::now());
        self.inner.changed.notify_one();
        self.publish();
        Some(claimed)
    }

    async fn claim_harness(&self, profile: usize) -> Option<Claimed> {
        loop {
            let (agent_id, entry) = {
                let mut entries = self.inner.entries.lock();
                let id = entries.iter().find(|(_, e)| e.profile == Some(profile) && e.ready()).map(|(id, _)| *id)?;
                (id, entries.remove(&id)?)
            };
            let keeper = entry.keeper?;
            match keeper.take().await {
                Ok(warmed) => {
                    self.inner.claims.lock().entry(profile).or_default().push_back(Instant::now());
                    return Some(Claimed { agent_id, handle: entry.handle, taken: Taken::Harness(Box::new(warmed)) });
                }
                Err(why) => {
                    tracing::warn!(agent.id = %agent_id, %why, "a pooled harness is not fit to hand over; removing its sandbox");
                    let pool = self.clone();
                    tokio::spawn(async move { pool.remove(agent_id).await });
                }
            }
        }
    }

    fn claim_plain(&self, image: &str) -> Option<Claimed> {
        if image != self.inner.settings.image {
            return None;
        }
        let mut entries = self.inner.entries.lock();
        let id = entries.iter().find(|(_, e)| e.profile.is_none() && e.ready()).map(|(id, _)| *id)?;
        let entry = entries.remove(&id)?;
        Some(Claimed { agent_id: id, handle: entry.handle, taken: Taken::Plain(entry.held?) })
    }

    /// Puts back a sandbox whose agent could not be created after all.
    pub fn give_back(&self, claimed: Claimed) {
        let mut entry = Entry {
            since: Instant::now(),
            handle: claimed.handle,
            profile: None,
            held: None,
            plan: None,
            keeper: None,
            failed: false,
        };
        match claimed.taken {
            Taken::Plain(held) => {
                entry.held = Some(held);
            }
            Taken::Harness(warmed) => {
                let profiles = &self.inner.settings.harnesses;
                let profile = profiles.iter().position(|(p, _)| *p == warmed.plan.profile);
                entry.profile = profile;
                entry.failed = profile.is_none();
                entry.keeper = Some(Keeper::keep(*warmed, claimed.agent_id, self.changed()));
            }
        }
        self.inner.entries.lock().insert(claimed.agent_id, entry);
        self.publish();
    }

    /// What the pool's loop waits on: notified, it looks at its sandboxes again.
    fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.inner.changed)
    }

    /// Whether `agent_id` is a pooled sandbox of this process.
    pub fn holds(&self, agent_id: AgentId) -> bool {
        self.inner.entries.lock().contains_key(&agent_id)
    }

    /// Sets the gauges: sandboxes ready to claim, and pooled harnesses ready per profile.
    fn publish(&self) {
        let profiles = &self.inner.settings.harnesses;
        let (total, per_profile) = {
            let entries = self.inner.entries.lock();
            let ready: Vec<&Entry> = entries.values().filter(|e| e.ready()).collect();
            let per_profile: Vec<usize> =
                (0..profiles.len()).map(|i| ready.iter().filter(|e| e.profile == Some(i)).count()).collect();
            (ready.len(), per_profile)
        };
        crate::metrics::warm_pool(total);
        for ((profile, _), ready) in profiles.iter().zip(per_profile) {
            crate::metrics::pooled_harnesses_ready(&profile.to_string(), ready);
        }
    }

    /// Pooled sandboxes connected and ready to claim.
    pub fn ready(&self) -> usize {
        self.inner.entries.lock().values().filter(|e| e.ready()).count()
    }

    /// Removes what an earlier process left, then keeps the pool full until aborted.
    pub fn spawn(&self) -> tokio::task::JoinHandle<()> {
        let pool = self.clone();
        tokio::spawn(async move {
            pool.remove_leftovers().await;
            loop {
                pool.prune().await;
                pool.refill().await;
                pool.publish();
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
        // A record whose id an agent has is a claim cut short before it was recorded (the claim
        // moves the token and forgets the record in one statement): the container still holds
        // the pool's token, which nothing accepts once the record goes. It is removed (the home
        // stays): the agent's next wake makes its own, as after any lost container.
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
                tracing::info!(agent.id = %agent_id, "a claim of a pooled sandbox was cut short: removing its container, the agent makes its own");
                if let Err(error) = self.inner.driver.remove_container(agent_id).await {
                    tracing::warn!(%error, agent.id = %agent_id, "removing the container of a claim cut short");
                    continue;
                }
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
            let dead: Vec<AgentId> = entries.iter().filter(|(_, e)| e.dead(timeout)).map(|(id, _)| *id).collect();
            for id in &dead {
                entries.remove(id);
            }
            dead
        };
        for agent_id in dead {
            tracing::warn!(agent.id = %agent_id, "a pooled sandbox did not connect in time, went away or its harness failed: replacing it");
            self.remove(agent_id).await;
        }
    }

    /// How many pooled harnesses each profile keeps now ([`super::pooled_harness::targets`]).
    fn harness_targets(&self) -> Vec<usize> {
        let profiles = &self.inner.settings.harnesses;
        let recent: Vec<usize> = {
            let mut claims = self.inner.claims.lock();
            (0..profiles.len())
                .map(|i| {
                    let times = claims.entry(i).or_default();
                    while times.front().is_some_and(|at| at.elapsed() > Duration::from_secs(60)) {
                        times.pop_front();
                    }
                    times.len()
                })
                .collect()
        };
        let idle_mib: Vec<u32> = profiles
            .iter()
            .map(|(p, _)| crate::harness::adapter(&p.harness).map_or(64, |a| a.profile().idle_mib))
            .collect();
        super::pooled_harness::targets(&idle_mib, &recent, self.inner.settings.harness_budget_mib)
    }

    /// Removes pooled harnesses beyond their profiles' targets (demand fell), the newest first.
    async fn shrink(&self) {
        let targets = self.harness_targets();
        let surplus: Vec<AgentId> = {
            let mut entries = self.inner.entries.lock();
            let mut surplus = Vec::new();
            for (profile, target) in targets.iter().enumerate() {
                let mut mine: Vec<(Instant, AgentId)> =
                    entries.iter().filter(|(_, e)| e.profile == Some(profile)).map(|(id, e)| (e.since, *id)).collect();
                mine.sort();
                surplus.extend(mine.iter().skip(*target).map(|(_, id)| *id));
            }
            for id in &surplus {
                entries.remove(id);
            }
            surplus
        };
        for agent_id in surplus {
            tracing::info!(agent.id = %agent_id, "fewer pooled harnesses are wanted now: removing one");
            self.remove(agent_id).await;
        }
    }

    async fn refill(&self) {
        let settings = &self.inner.settings;
        self.shrink().await;
        loop {
            let targets = self.harness_targets();
            let wanted = {
                let entries = self.inner.entries.lock();
                let count = |profile: Option<usize>| entries.values().filter(|e| e.profile == profile).count();
                if count(None) < settings.size {
                    Some(None)
                } else {
                    targets.iter().enumerate().find(|(i, target)| count(Some(*i)) < **target).map(|(i, _)| Some(i))
                }
            };
            let Some(profile) = wanted else { return };
            // Pooled sandboxes run: they count against the host's awake limit, and never take
            // the last room an agent's wake could use.
            if self.inner.host.free().is_some_and(|free| free < 2) {
                return;
            }
            let since_claim = *self.inner.last_claim.lock();
            if let Some(wait) = since_claim.and_then(|at| settings.refill_delay.checked_sub(at.elapsed())) {
                tokio::time::sleep(wait).await;
            }
            if let Err(error) = self.make_one(profile).await {
                tracing::warn!(%error, "making a pooled sandbox; trying again shortly");
                tokio::time::sleep(Duration::from_secs(5)).await;
                return;
            }
        }
    }

    async fn make_one(&self, profile: Option<usize>) -> anyhow::Result<()> {
        let (driver, settings) = (&self.inner.driver, &self.inner.settings);
        let agent_id = driver.next_agent_id();
        let image = profile.map_or(&settings.image, |i| &settings.harnesses[i].1).clone();
        let plan = match profile {
            Some(i) => {
                let proxy_addr = match &settings.proxy {
                    Some(proxy) => Some(driver.proxy_addr(agent_id).await?.unwrap_or_else(|| proxy.addr.clone())),
                    None => None,
                };
                let context = PlanContext {
                    image: image.clone(),
                    tools_dir: driver.tools_dir(),
                    home_dir: driver.home_dir(agent_id),
                    user: driver.sandbox_user(),
                    memory_mib: settings.memory_mib,
                    proxy_addr,
                    mcp_servers: crate::supervisor::shell::offered_mcp(settings.mcp.as_ref(), agent_id).0,
                };
                let plan =
                    super::pooled_harness::plan(&settings.harnesses[i].0, &context).map_err(anyhow::Error::msg)?;
                Some(plan)
            }
            None => None,
        };
        let token = crate::supervisor::shell::mint_token();
        let hash = store::tokens::hash_token(token.expose());
        // Its harness's identity, sealed as the agent's will be: the proxy admits it (to
        // agenthold's MCP route only) once its address is known ([`Self::hold`]).
        let sealed = match (plan.as_ref().and_then(|p| p.identity.as_ref()), &settings.proxy) {
            (Some(identity), Some(proxy)) => {
                Some(crate::proxy_feed::identity::seal(&proxy.master_key, agent_id, identity)?)
            }
            _ => None,
        };
        store::warm_pool::insert(&self.inner.pool, agent_id, &hash, &image, settings.replica_id, sealed.as_ref())
            .await?;
        let spec = SandboxSpec {
            agent_id,
            image: image.clone(),
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
            let entry = Entry { since: Instant::now(), handle, profile, held: None, plan, keeper: None, failed: false };
            self.inner.entries.lock().insert(agent_id, entry);
            self.inner.host.take_running(agent_id, Instant::now());
            driver.start(agent_id).await
        };
        if let Err(error) = made.await {
            self.inner.entries.lock().remove(&agent_id);
            self.remove(agent_id).await;
            return Err(error.into());
        }
        match profile {
            Some(i) => {
                tracing::info!(agent.id = %agent_id, profile = %settings.harnesses[i].0, "a pooled sandbox for a harness is starting")
            }
            None => tracing::info!(agent.id = %agent_id, "a pooled sandbox is starting"),
        }
        Ok(())
    }

    /// Records a pooled harness's address and waits (at most [`FEED_WAIT`]) until the proxy
    /// feed has written its entry — agenthold's MCP route only —, so the session its harness
    /// opens ahead connects to the MCP server. Past the wait (or without an address) it goes on:
    /// that session's MCP connection is refused, and the harness works without those tools.
    async fn admit_to_mcp(&self, agent_id: AgentId, addr: Option<std::net::IpAddr>) {
        let Some(proxy) = &self.inner.settings.proxy else { return };
        let Some(addr) = addr else {
            tracing::warn!(agent.id = %agent_id, "a pooled harness's sandbox has no address: its session opened ahead cannot reach agenthold's MCP server");
            return;
        };
        match store::warm_pool::set_source_addr(&self.inner.pool, agent_id, addr).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::warn!(%error, agent.id = %agent_id, "recording a pooled sandbox's address");
                return;
            }
        }
        let Some(mut written) = proxy.written.clone() else { return };
        proxy.nudge.notify_one();
        let admitted = |w: &crate::proxy_feed::task::Written| w.pooled_from(agent_id, addr);
        if tokio::time::timeout(FEED_WAIT, written.wait_for(admitted)).await.is_err() {
            tracing::warn!(agent.id = %agent_id, "the proxy feed has not written a pooled harness's sandbox yet; starting it anyway");
        }
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
