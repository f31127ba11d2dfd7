//! The Docker driver's networks: one bridge per agent (internal and named for
//! [`super::firewall`] when egress is confined), its subnet cut from agenthold's own pool
//! ([`super::subnets`], passed in the network's IPAM settings so a stock engine holds thousands),
//! and the few networks kept ready for agents not created yet (a bridge takes ~120 ms to make,
//! which a first prompt would otherwise wait for).
//!
//! Ready networks: as many exist or are being made as [`super::ready_demand`] says the creation
//! rate wants — [`READY_NETWORKS`] when creations are rare, at most [`MOST_READY_NETWORKS`] while
//! they come often (refills in flight are counted) — and once creations stop for a while those
//! beyond the floor are removed; those no agent took are removed at the next start. Once the driver
//! knows the default image and tools ([`Networks::hold_ready_with`]), each ready network also gets
//! its agent's network holder ([`super::docker_netns`]), so a new agent's sandbox starts like a
//! woken one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bollard::Docker;
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use parking_lot::Mutex;
use tokio::sync::OnceCell;

use super::DriverError;
use super::ready_demand::{DEMAND_WINDOW, ReadyDemand};
use super::subnets::{Allocator, SubnetPool};
use crate::ids::AgentId;

pub use super::ready_demand::{MOST_READY_NETWORKS, READY_NETWORKS};
/// How long after an agent takes a ready network another one is made: not at once, since the
/// engine makes the taking agent's sandbox meanwhile (the wanted count is higher while creations
/// come often, so that the replacements' delay does not empty the list).
const REFILL_DELAY: std::time::Duration = std::time::Duration::from_secs(2);
/// How many blocks a network creation tries when the engine says they overlap a network made
/// meanwhile (each refusal marks the block taken; the list is read again after the first).
const OVERLAP_RETRIES: usize = 16;
/// Docker's network option naming a bridge network's interface on the host.
const BRIDGE_NAME_OPTION: &str = "com.docker.network.bridge.name";
/// The label of ready networks.
pub const READY_LABEL: &str = "agenthold.ready";
/// The label naming the replica that made a ready network and its holder: at start a server
/// removes only what it (an earlier process of it) left, never another live replica's.
pub const REPLICA_LABEL: &str = "agenthold.replica";

/// The driver's networks.
pub struct Networks {
    docker: Docker,
    instance: String,
    /// Whether networks are internal (confined egress).
    pub(super) confined: bool,
    /// The subnets agenthold hands out (`None`: the engine picks, from its own pools).
    subnets: Option<Arc<Subnets>>,
    /// Agent ids whose network already exists.
    ready: Arc<Mutex<Vec<AgentId>>>,
    /// Ready networks being made.
    refilling: Arc<AtomicUsize>,
    /// How many the creation rate wants ready.
    demand: Arc<Mutex<ReadyDemand>>,
    /// The image and tools volume ready networks' holders are made from (once known).
    holders: Arc<OnceLock<ReadyHolders>>,
    /// Whether [`Self::prepare`] ran: until then nothing is made ready (it removes what an
    /// earlier run left first, then fills the list at once).
    prepared: AtomicBool,
    /// The replica whose ready networks these are ([`REPLICA_LABEL`]; `None`: unlabelled).
    replica: Option<String>,
}

/// What ready networks' holders are made from.
#[derive(Debug, Clone)]
struct ReadyHolders {
    image: String,
    tools: String,
    tools_dir: String,
}

/// The subnet allocator and whether it has read the engine's networks yet.
struct Subnets {
    allocator: Mutex<Allocator>,
    synced: OnceCell<()>,
}

/// A network could not be made.
enum MakeError {
    /// The pool has no free block.
    Full,
    /// A network of that name exists (made meanwhile).
    Conflict,
    /// The engine failed.
    Failed(DriverError),
}

impl Networks {
    /// Networks on `docker` for `instance`, confined, with subnets from the default pool.
    pub fn new(docker: Docker, instance: String) -> Self {
        let pool = super::subnets::SubnetPool::new(super::subnets::DEFAULT_POOL, super::subnets::DEFAULT_BLOCK_PREFIX)
            .expect("the default pool is valid");
        let mut networks = Self {
            docker,
            instance,
            confined: true,
            subnets: None,
            ready: Arc::default(),
            refilling: Arc::default(),
            demand: Arc::default(),
            holders: Arc::default(),
            prepared: AtomicBool::new(false),
            replica: None,
        };
        networks.set_pool(Some(pool));
        networks
    }

    /// Ready networks made from now on get a network holder made from `image`, running
    /// `sandboxd` from the `tools` volume mounted at `tools_dir` (the first call decides).
    pub fn hold_ready_with(&self, image: &str, tools: &str, tools_dir: &str) {
        let _ = self.holders.set(ReadyHolders {
            image: image.to_owned(),
            tools: tools.to_owned(),
            tools_dir: tools_dir.to_owned(),
        });
    }

    /// Ready networks (and their holders) are labelled as this replica's from now on.
    pub fn set_replica(&mut self, replica: String) {
        self.replica = Some(replica);
    }

    /// Where subnets come from from now on (`None`: the engine's own pools).
    pub fn set_pool(&mut self, pool: Option<SubnetPool>) {
        self.subnets =
            pool.map(|pool| Arc::new(Subnets { allocator: Mutex::new(Allocator::new(pool)), synced: OnceCell::new() }));
    }

    /// The name of the agent's network.
    pub fn name(&self, agent_id: AgentId) -> String {
        network_name(&self.instance, agent_id)
    }

    /// The id for a new agent: one whose network is ready, if any (and more are made).
    pub fn next_agent_id(&self) -> AgentId {
        let ready = self.ready.lock().pop();
        self.demand.lock().took(std::time::Instant::now());
        self.refill(REFILL_DELAY);
        self.settle_later();
        ready.unwrap_or_default()
    }

    /// Whether `agent_id` names a ready network (one no agent took yet).
    pub fn is_ready(&self, agent_id: AgentId) -> bool {
        self.ready.lock().contains(&agent_id)
    }

    /// Whether one more agent can have a network: a ready one, or a free block in the pool.
    pub async fn room(&self) -> Result<(), DriverError> {
        let Some(subnets) = &self.subnets else { return Ok(()) };
        if !self.ready.lock().is_empty() {
            return Ok(());
        }
        sync_once(&self.docker, subnets).await?;
        if subnets.allocator.lock().free() > 0 {
            return Ok(());
        }
        // What others removed since is free again.
        sync(&self.docker, subnets).await?;
        let (free, pool) = {
            let allocator = subnets.allocator.lock();
            (allocator.free(), allocator.pool())
        };
        if free == 0 { Err(full(&pool)) } else { Ok(()) }
    }

    /// At start: removes the ready networks an earlier server process made and no agent took (a
    /// network an agent took but has no container yet is made again when the agent wakes), reads
    /// which subnets are taken, and makes ready networks.
    pub async fn prepare(&self) {
        // Their holders first: a network with a container on it is not removed. This replica's
        // only (and those made before ready networks were labelled with their replica).
        let replica = self.replica.as_deref();
        match super::docker_netns::remove_untaken_ready(&self.docker, &self.instance, replica).await {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "removed the holders of ready networks left by an earlier run"),
            Err(error) => tracing::warn!(%error, "removing the holders of stale ready networks"),
        }
        let base = || vec![format!("agenthold.instance={}", self.instance), format!("{READY_LABEL}=true")];
        let prunes: Vec<HashMap<String, Vec<String>>> = match replica {
            Some(replica) => {
                let mut mine = base();
                mine.push(format!("{REPLICA_LABEL}={replica}"));
                vec![
                    HashMap::from([("label".to_owned(), mine)]),
                    // Made before ready networks were labelled with their replica.
                    HashMap::from([
                        ("label".to_owned(), base()),
                        ("label!".to_owned(), vec![REPLICA_LABEL.to_owned()]),
                    ]),
                ]
            }
            None => vec![HashMap::from([("label".to_owned(), base())])],
        };
        for filters in prunes {
            let options = bollard::query_parameters::PruneNetworksOptions { filters: Some(filters) };
            match self.docker.prune_networks(Some(options)).await {
                Ok(pruned) => {
                    let count = pruned.networks_deleted.map_or(0, |n| n.len());
                    if count > 0 {
                        tracing::info!(count, "removed ready networks left by an earlier run");
                    }
                }
                Err(error) => tracing::warn!(%error, "removing stale ready networks"),
            }
        }
        if let Some(subnets) = &self.subnets
            && let Err(error) = sync(&self.docker, subnets).await
        {
            tracing::warn!(%error, "reading the engine's networks (retried on first use)");
        }
        // At once: no sandbox that took one is starting yet.
        self.prepared.store(true, Ordering::SeqCst);
        self.refill(std::time::Duration::ZERO);
    }

    /// Creates networks in the background, after `delay`, until as many as the demand wants are
    /// ready or being made.
    fn refill(&self, delay: std::time::Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if !self.prepared.load(Ordering::SeqCst) {
            return;
        }
        let target = self.demand.lock().target(std::time::Instant::now());
        // Under the list's lock, so that concurrent callers agree on what is missing.
        let missing = {
            let ready = self.ready.lock();
            let missing = target.saturating_sub(ready.len() + self.refilling.load(Ordering::SeqCst));
            self.refilling.fetch_add(missing, Ordering::SeqCst);
            missing
        };
        for _ in 0..missing {
            let (docker, instance, ready, confined, refilling, subnets, holders, replica) = (
                self.docker.clone(),
                self.instance.clone(),
                Arc::clone(&self.ready),
                self.confined,
                Arc::clone(&self.refilling),
                self.subnets.clone(),
                Arc::clone(&self.holders),
                self.replica.clone(),
            );
            runtime.spawn(async move {
                // Not while the sandbox that took the last one is starting: the engine does
                // one thing at a time, and the first prompt is waiting for that start.
                tokio::time::sleep(delay).await;
                let agent_id = AgentId::new();
                let labels = ready_labels(replica.as_deref());
                let made = make(&docker, &instance, agent_id, confined, subnets.as_deref(), &labels).await;
                if made.is_ok()
                    && let Some(holders) = holders.get()
                    && let Err(error) =
                        make_ready_holder(&docker, &instance, agent_id, confined, holders, &labels).await
                {
                    // The agent's sandbox makes it then.
                    tracing::warn!(%error, "preparing a network holder for the next agent");
                }
                let mut ready = ready.lock();
                refilling.fetch_sub(1, Ordering::SeqCst);
                match made {
                    Ok(()) => ready.push(agent_id),
                    Err(MakeError::Full) => tracing::debug!("no ready network: the subnet pool is full"),
                    Err(MakeError::Conflict) => {}
                    Err(MakeError::Failed(error)) => tracing::warn!(%error, "preparing a network for the next agent"),
                }
            });
        }
    }

    /// Once creations have stopped for a [`DEMAND_WINDOW`], removes the ready networks (and
    /// holders) beyond what the demand then wants. One task at a time; it goes on while creations
    /// keep coming.
    fn settle_later(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        {
            let mut demand = self.demand.lock();
            if demand.settling {
                return;
            }
            demand.settling = true;
        }
        let (docker, instance, ready, refilling, demand, subnets) = (
            self.docker.clone(),
            self.instance.clone(),
            Arc::clone(&self.ready),
            Arc::clone(&self.refilling),
            Arc::clone(&self.demand),
            self.subnets.clone(),
        );
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(DEMAND_WINDOW).await;
                let now = std::time::Instant::now();
                let surplus: Vec<AgentId> = {
                    let mut demand = demand.lock();
                    let target = demand.target(now);
                    let mut ready = ready.lock();
                    let making = refilling.load(Ordering::SeqCst);
                    let count = super::ready_demand::surplus(ready.len(), making, target);
                    // The oldest first: the list is taken from its end.
                    let surplus = ready.drain(..count).collect();
                    // Done once nothing counts any more and nothing is being made (a refill still
                    // in flight may land beyond the floor: looked at again a window later).
                    if demand.is_quiet(now) && making == 0 {
                        demand.settling = false;
                    }
                    surplus
                };
                for agent_id in &surplus {
                    remove_ready(&docker, &instance, *agent_id, subnets.as_deref()).await;
                }
                if !surplus.is_empty() {
                    tracing::debug!(count = surplus.len(), "removed ready networks creations no longer want");
                }
                if !demand.lock().settling {
                    return;
                }
            }
        });
    }

    /// The agent's own network, made unless it exists as it should (a network made with the other
    /// egress setting, by an earlier version, is made again: no container is on it then). Returns
    /// its gateway, the host's address on it. A full pool is [`DriverError::Capacity`].
    pub async fn ensure(&self, agent_id: AgentId) -> Result<Option<String>, DriverError> {
        let network = self.name(agent_id);
        // Older engines accept duplicate network names, so look before creating.
        for _ in 0..3 {
            let options = None::<bollard::query_parameters::InspectNetworkOptions>;
            match self.docker.inspect_network(&network, options).await {
                Ok(found) if found.internal.unwrap_or(false) == self.confined => return Ok(gateway(&found)),
                Ok(_) => self.remove(agent_id).await?,
                Err(error) if status_of(&error) == Some(404) => {
                    let (subnets, none) = (self.subnets.as_deref(), HashMap::new());
                    match make(&self.docker, &self.instance, agent_id, self.confined, subnets, &none).await {
                        Ok(()) | Err(MakeError::Conflict) => {}
                        Err(MakeError::Failed(error)) => return Err(error),
                        Err(MakeError::Full) => {
                            let pool = self.subnets.as_ref().map(|s| s.allocator.lock().pool());
                            return Err(
                                pool.map_or_else(|| DriverError::Capacity("no subnet".to_owned()), |p| full(&p))
                            );
                        }
                    }
                }
                Err(error) => return Err(engine(error)),
            }
        }
        Err(DriverError::Engine(format!("the network {network} could not be made")))
    }

    /// Removes the agent's network (if any) and gives its subnet back.
    pub async fn remove(&self, agent_id: AgentId) -> Result<(), DriverError> {
        remove_network(&self.docker, &self.instance, agent_id, self.subnets.as_deref()).await.map_err(engine)
    }
}

/// Removes an agent's network (gone already is removed) and gives its subnet back; on a failure
/// the subnet stays booked, so it is never handed out twice.
async fn remove_network(
    docker: &Docker,
    instance: &str,
    agent_id: AgentId,
    subnets: Option<&Subnets>,
) -> Result<(), bollard::errors::Error> {
    match docker.remove_network(&network_name(instance, agent_id)).await {
        Ok(()) => {}
        Err(error) if status_of(&error) == Some(404) => {}
        Err(error) => return Err(error),
    }
    if let Some(subnets) = subnets {
        subnets.allocator.lock().release(agent_id);
    }
    Ok(())
}

/// The labels of a ready network and its holder: ready, and the replica that made it.
pub fn ready_labels(replica: Option<&str>) -> HashMap<String, String> {
    let mut labels = HashMap::from([(READY_LABEL.to_owned(), "true".to_owned())]);
    labels.extend(replica.map(|replica| (REPLICA_LABEL.to_owned(), replica.to_owned())));
    labels
}

/// Removes a ready network no agent took, its holder first (a network with a container on it is
/// not removed), and gives its subnet back. Failures are logged: the next start removes it.
async fn remove_ready(docker: &Docker, instance: &str, agent_id: AgentId, subnets: Option<&Subnets>) {
    let holder = super::docker_netns::holder_name(instance, agent_id);
    let options = bollard::query_parameters::RemoveContainerOptions { force: true, ..Default::default() };
    match docker.remove_container(&holder, Some(options)).await {
        Ok(()) => {}
        Err(error) if status_of(&error) == Some(404) => {}
        Err(error) => return tracing::warn!(%error, "removing the holder of a ready network"),
    }
    if let Err(error) = remove_network(docker, instance, agent_id, subnets).await {
        tracing::warn!(%error, "removing a ready network");
    }
}

/// Makes and starts the holder of a ready network.
async fn make_ready_holder(
    docker: &Docker,
    instance: &str,
    agent_id: AgentId,
    confined: bool,
    holders: &ReadyHolders,
    ready_labels: &HashMap<String, String>,
) -> Result<(), DriverError> {
    let network = network_name(instance, agent_id);
    let found = docker
        .inspect_network(&network, None::<bollard::query_parameters::InspectNetworkOptions>)
        .await
        .map_err(engine)?;
    let spec = super::docker_netns::HolderSpec {
        image: holders.image.clone(),
        tools: holders.tools.clone(),
        network,
        gateway: gateway(&found),
        confined,
    };
    let name = super::docker_netns::holder_name(instance, agent_id);
    let mut labels = super::docker::agent_labels(instance, agent_id);
    labels.extend(ready_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    super::docker_netns::ensure_running(docker, &name, &spec, labels, &holders.tools_dir).await.map(|_| ())
}

/// Reads the engine's networks into the allocator once.
async fn sync_once(docker: &Docker, subnets: &Subnets) -> Result<(), DriverError> {
    subnets.synced.get_or_try_init(|| sync(docker, subnets)).await.map(|_| ())
}

/// Reads which subnets the engine's networks hold (every network's, not only ours: the engine
/// refuses overlaps) into the allocator.
async fn sync(docker: &Docker, subnets: &Subnets) -> Result<(), DriverError> {
    let networks =
        docker.list_networks(None::<bollard::query_parameters::ListNetworksOptions>).await.map_err(engine)?;
    let held: Vec<(String, Option<AgentId>)> = networks
        .iter()
        .flat_map(|n| {
            let agent =
                n.labels.as_ref().and_then(|l| l.get("agenthold.agent")).and_then(|a| a.parse::<AgentId>().ok());
            let configs = n.ipam.as_ref().and_then(|i| i.config.clone()).unwrap_or_default();
            configs.into_iter().filter_map(move |c| c.subnet.map(|s| (s, agent)))
        })
        .collect();
    subnets.allocator.lock().sync(held.iter().map(|(s, a)| (s.as_str(), *a)));
    Ok(())
}

/// Makes the agent's network, with `extra_labels` besides the agent's ([`ready_labels`] for a
/// ready one); with a pool, on a block of its own (the next free one when the engine says a block
/// overlaps a network made meanwhile).
async fn make(
    docker: &Docker,
    instance: &str,
    agent_id: AgentId,
    confined: bool,
    subnets: Option<&Subnets>,
    extra_labels: &HashMap<String, String>,
) -> Result<(), MakeError> {
    let mut request = network_request(instance, agent_id, confined);
    if let Some(labels) = request.labels.as_mut() {
        labels.extend(extra_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let failed = |error: bollard::errors::Error| match status_of(&error) {
        Some(409) => MakeError::Conflict,
        _ => MakeError::Failed(engine(error)),
    };
    let Some(subnets) = subnets else {
        return docker.create_network(request).await.map(|_| ()).map_err(failed);
    };
    sync_once(docker, subnets).await.map_err(MakeError::Failed)?;
    for attempt in 0..OVERLAP_RETRIES {
        let block = subnets.allocator.lock().allocate(agent_id);
        let block = match block {
            Some(block) => block,
            None if attempt == 0 => {
                // What others removed since is free again.
                let _ = sync(docker, subnets).await;
                subnets.allocator.lock().allocate(agent_id).ok_or(MakeError::Full)?
            }
            None => return Err(MakeError::Full),
        };
        request.ipam = Some(Ipam {
            driver: Some("default".to_owned()),
            config: Some(vec![IpamConfig {
                subnet: Some(block.to_string()),
                gateway: Some(block.gateway().to_string()),
                ..Default::default()
            }]),
            options: None,
        });
        match docker.create_network(request.clone()).await {
            Ok(_) => return Ok(()),
            Err(error) if overlaps(&error) => {
                tracing::debug!(subnet = %block, "the engine says the block overlaps a network; trying another");
                subnets.allocator.lock().refused(agent_id);
                if attempt == 0 {
                    let _ = sync(docker, subnets).await;
                }
            }
            Err(error) => {
                subnets.allocator.lock().release(agent_id);
                return Err(failed(error));
            }
        }
    }
    Err(MakeError::Failed(DriverError::Engine("every subnet tried overlaps a network on the engine".to_owned())))
}

/// Whether the engine refused a subnet because it overlaps one it has.
fn overlaps(error: &bollard::errors::Error) -> bool {
    matches!(error, bollard::errors::Error::DockerResponseServerError { status_code: 403 | 400 | 500, message }
        if message.contains("overlaps"))
}

fn full(pool: &SubnetPool) -> DriverError {
    DriverError::Capacity(format!(
        "no free subnet: the pool {} holds {} agent networks (AGENTHOLD_SANDBOX_SUBNET_POOL)",
        pool.pool(),
        pool.blocks()
    ))
}

/// The name of an agent's network.
pub fn network_name(instance: &str, agent_id: AgentId) -> String {
    format!("{instance}-net-{agent_id}")
}

/// An agent's network: a bridge; when confined, `internal` and with the bridge name the host's
/// firewall rules match ([`super::firewall::bridge_name`]).
fn network_request(instance: &str, agent_id: AgentId, confined: bool) -> NetworkCreateRequest {
    let options = confined
        .then(|| HashMap::from([(BRIDGE_NAME_OPTION.to_owned(), super::firewall::bridge_name(instance, agent_id))]));
    NetworkCreateRequest {
        name: network_name(instance, agent_id),
        driver: Some("bridge".to_owned()),
        internal: Some(confined),
        options,
        labels: Some(super::docker::agent_labels(instance, agent_id)),
        ..Default::default()
    }
}

/// A network's (first) gateway address.
fn gateway(network: &bollard::models::NetworkInspect) -> Option<String> {
    let configs = network.ipam.as_ref()?.config.as_ref()?;
    configs.iter().find_map(|c| c.gateway.clone().filter(|g| !g.is_empty() && !g.contains(':')))
}

fn status_of(error: &bollard::errors::Error) -> Option<u16> {
    match error {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

fn engine(error: bollard::errors::Error) -> DriverError {
    DriverError::Engine(error.to_string())
}
