//! The Docker driver (bollard): one container per agent on a network of its own, a named home
//! volume at `/home/agent` that survives sleep and rebuild, CPU/memory/PID limits, labels that
//! let the server find its containers after a restart, and no Docker socket inside. sandboxd and
//! fakeagent come from the server's own binaries: copied once into a tools volume (named by
//! their content hash) that every sandbox mounts read-only at `/opt/agenthold/`, so any image
//! with a compatible libc works and sandboxd never drifts from the server's version.
//!
//! Containers are hardened: every capability dropped but the few sandboxd needs to hand the
//! harness to the `agent` user, `no-new-privileges` unless root inside is contained (then sudo
//! works: [`super::docker_security`]), no swap beyond the memory limit, a file-descriptor limit, and a size for the home and the writable layer where the
//! engine can enforce one ([`super::docker_disk`]). Each container is labelled with the tools volume and the
//! container settings it was made with; one made by another server version is reported
//! [`SandboxStatus::Stale`], to be recreated around the same home.
//!
//! Networks (one per agent, subnets from agenthold's own pool, a few kept ready) are
//! [`super::docker_networks`]; the sandbox does not attach to its network itself but joins the
//! namespace of the agent's network holder ([`super::docker_netns`]), which lives as long as the
//! agent, so a wake skips the network's setup. With confined egress (the default) each agent's
//! network is `internal` (Docker forwards nothing out of it) with a bridge named for
//! [`super::firewall`], whose host rules let the sandbox reach only the tunnel and the egress
//! proxy; `host.docker.internal` names the network's own gateway, the one host address the
//! sandbox has a path to. The tools volume is [`tools_volume`], the driver's part of the orphan
//! sweep [`sweep`].

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions, StopContainerOptions};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use sha2::Digest;
use tokio::sync::OnceCell;

use super::docker_disk::{self as disk, Disk};
use super::docker_netns::{self as netns, HolderState};
use super::docker_networks::Networks;
use super::docker_security::{self as security, Posture};
use super::{DiskCheck, DiskEnforcement, DiskLimits, DriverError, SandboxDriver, SandboxSpec, SandboxStatus};
use crate::ids::AgentId;

mod sweep;
mod tools_volume;

/// Where agenthold's tools live inside a container.
pub const TOOLS_DIR: &str = "/opt/agenthold";
/// The agent's home inside a container.
pub const HOME_DIR: &str = "/home/agent";
pub use super::docker_security::{CAP_ADD, NOFILE_LIMIT, SUDO_CAP_ADD, SUDO_LABEL, nofile_limit};
/// The label naming the tools volume a container mounts.
pub const TOOLS_LABEL: &str = "agenthold.tools";
/// The label naming the version of the container settings a container was made with.
pub const SPEC_LABEL: &str = "agenthold.spec";
/// The version of the container settings made by [`DockerDriver::create`]: bumped whenever they
/// change, so that containers made before are recreated.
pub const SPEC_VERSION: &str = "3";
/// The label naming the egress proxy's CA a container trusts (a short hash; absent when none).
pub const PROXY_CA_LABEL: &str = "agenthold.proxy-ca";
/// The label saying whether a container's network is confined (`confined` or `open`).
pub const EGRESS_LABEL: &str = "agenthold.egress";

/// The Docker driver.
pub struct DockerDriver {
    docker: Docker,
    /// Prefix of every container, volume and network name, and the `agenthold.instance` label.
    instance: String,
    /// Directory holding the `sandboxd` and `fakeagent` binaries to copy in.
    bin_dir: PathBuf,
    /// The name of the volume holding those binaries (`<instance>-tools-<content hash>`).
    tools_name: OnceCell<String>,
    /// That volume, created and filled once per server process and mounted read-only at
    /// `/opt/agenthold` in every sandbox.
    tools_volume: OnceCell<String>,
    /// The agents' networks, their subnets and the ready ones ([`super::docker_networks`]).
    networks: Networks,
    /// The egress proxy's CA (PEM) sandboxd installs at start (`AGENTHOLD_PROXY_CA_PEM`), and
    /// its short hash (the [`PROXY_CA_LABEL`]); `None` when sandboxes do not use the proxy.
    proxy_ca: Option<(String, String)>,
    /// The open-files limit of its sandboxes (see [`nofile_limit`]).
    nofile: i64,
    /// The URL its sandboxes dial instead of the server's (a remote engine's, docs/engines.md).
    tunnel_url: Option<String>,
    /// The address the egress proxy sees all its sandboxes' traffic come from (a remote engine
    /// whose traffic reaches the proxy through its host); `None`: each sandbox's own address.
    proxy_source_addr: Option<std::net::IpAddr>,
    /// Its sandboxes' disk limits, and what the engine can enforce ([`super::docker_disk`]).
    disk: Disk,
    /// The OCI runtime its sandboxes run under (`AGENTHOLD_SANDBOX_RUNTIME`).
    runtime: String,
    /// What that runtime means on this engine (sudo or not), asked of it once.
    posture: OnceCell<Posture>,
}

/// How long a remote engine has to answer a ping before it is taken as unavailable.
const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Seconds one request to a remote engine may take (bollard's read/write timeout).
const REMOTE_TIMEOUT_SECS: u64 = 120;

impl DockerDriver {
    /// Connects to the local engine (`DOCKER_HOST` or the default socket).
    pub fn connect(instance: String, bin_dir: PathBuf) -> Result<Self, DriverError> {
        let docker = Docker::connect_with_defaults().map_err(engine)?;
        Ok(Self::on(docker, instance, bin_dir))
    }

    /// Connects to a remote engine over TCP with TLS client certificates, as Docker documents
    /// (`dockerd --tlsverify`): `host` is `tcp://name:port`, `ca` the CA that signed the
    /// engine's certificate, `cert` and `key` the client's. Nothing is sent yet ([`Self::ping`]).
    pub fn connect_tls(
        instance: String,
        bin_dir: PathBuf,
        host: &str,
        ca: &std::path::Path,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> Result<Self, DriverError> {
        let docker = Docker::connect_with_ssl(host, key, cert, ca, REMOTE_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
            .map_err(engine)?;
        Ok(Self::on(docker, instance, bin_dir))
    }

    fn on(docker: Docker, instance: String, bin_dir: PathBuf) -> Self {
        Self {
            networks: Networks::new(docker.clone(), instance.clone()),
            docker,
            instance,
            bin_dir,
            tools_name: OnceCell::new(),
            tools_volume: OnceCell::new(),
            nofile: nofile_limit(),
            proxy_ca: None,
            tunnel_url: None,
            proxy_source_addr: None,
            disk: Disk::new(DiskLimits::Auto, disk::DEFAULT_MIB),
            runtime: security::DEFAULT_RUNTIME.to_owned(),
            posture: OnceCell::new(),
        }
    }

    /// Whether the engine answers (within [`PING_TIMEOUT`]); the error says why not (a refused
    /// certificate, an unreachable host).
    pub async fn ping(&self) -> Result<(), DriverError> {
        let mut why = String::new();
        for _ in 0..2 {
            match tokio::time::timeout(PING_TIMEOUT, self.docker.ping()).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(error)) => why = describe(&error),
                Err(_) => return Err(DriverError::Engine(format!("no answer within {} s", PING_TIMEOUT.as_secs()))),
            }
            // hyper's client can report a connection that failed before it was ready (a TLS
            // handshake the engine refused) as a cancelled request, without the failure: asking
            // once more gets the cause.
            if !why.contains("connection was not ready") {
                break;
            }
        }
        Err(DriverError::Engine(why))
    }

    /// Its sandboxes dial `url` instead of the server's tunnel URL (`None`: the server's).
    #[must_use]
    pub fn with_tunnel_url(mut self, url: Option<String>) -> Self {
        self.tunnel_url = url;
        self
    }

    /// The egress proxy sees all its sandboxes' traffic come from `addr` (`None`: from each
    /// sandbox's own address).
    #[must_use]
    pub fn with_proxy_source_addr(mut self, addr: Option<std::net::IpAddr>) -> Self {
        self.proxy_source_addr = addr;
        self
    }

    /// Whether sandboxes made from now on have confined egress (the default) or an open
    /// network; a container made the other way is [`SandboxStatus::Stale`].
    #[must_use]
    pub fn with_confined_egress(mut self, confined: bool) -> Self {
        self.networks.confined = confined;
        self
    }

    /// The replica this driver's server is: its ready networks and their holders are labelled
    /// with it, so that at start it removes only what it left, never another live replica's.
    #[must_use]
    pub fn with_replica(mut self, replica: uuid::Uuid) -> Self {
        self.networks.set_replica(replica.to_string());
        self
    }

    /// Where agent networks' subnets come from: blocks of agenthold's own pool (the default,
    /// [`super::subnets::DEFAULT_POOL`] in /28s), or the engine's pools (`None`).
    #[must_use]
    pub fn with_subnet_pool(mut self, pool: Option<super::subnets::SubnetPool>) -> Self {
        self.networks.set_pool(pool);
        self
    }

    /// Makes the agent's network (a sandbox's first step; public for tests that make networks
    /// only). Returns its gateway.
    pub async fn make_network(&self, agent_id: AgentId) -> Result<Option<String>, DriverError> {
        self.networks.ensure(agent_id).await
    }

    fn egress_label(&self) -> &'static str {
        if self.networks.confined { "confined" } else { "open" }
    }

    /// Sandboxes made from now on trust the egress proxy's CA (`AGENTHOLD_PROXY_CA_PEM` for
    /// sandboxd); a container made with another CA, or none, is [`SandboxStatus::Stale`].
    pub fn with_proxy_ca(mut self, pem: Option<String>) -> Self {
        self.proxy_ca = pem.map(|pem| {
            let digest = sha2::Sha256::digest(pem.as_bytes());
            (pem, hex::encode(&digest[..8]))
        });
        self
    }

    /// Sandboxes made from now on get disk limits per `mode`, of `default_mib` (MiB) each for
    /// the home and the writable layer when their spec names none.
    #[must_use]
    pub fn with_disk_limits(mut self, mode: DiskLimits, default_mib: i32) -> Self {
        self.disk = Disk::new(mode, default_mib);
        self
    }

    /// Its sandboxes run under the engine's runtime `name` (`runc`, `runsc`, …).
    #[must_use]
    pub fn with_runtime(mut self, name: String) -> Self {
        self.runtime = name;
        self
    }

    /// What its sandboxes' runtime means on the engine (sudo or not); an engine without the
    /// runtime is an error saying what to do. Asked once.
    pub async fn posture(&self) -> Result<Posture, DriverError> {
        self.posture.get_or_try_init(|| security::probe(&self.docker, &self.runtime)).await.cloned()
    }

    /// Sets the open-files limit of its sandboxes (`None`: [`nofile_limit`]).
    #[must_use]
    pub fn with_nofile_limit(mut self, limit: Option<i64>) -> Self {
        self.nofile = limit.unwrap_or_else(nofile_limit);
        self
    }

    fn container(&self, agent_id: AgentId) -> String {
        format!("{}-{agent_id}", self.instance)
    }

    fn volume(&self, agent_id: AgentId) -> String {
        format!("{}-home-{agent_id}", self.instance)
    }

    fn network(&self, agent_id: AgentId) -> String {
        self.networks.name(agent_id)
    }

    fn holder(&self, agent_id: AgentId) -> String {
        netns::holder_name(&self.instance, agent_id)
    }

    fn labels(&self, agent_id: AgentId) -> HashMap<String, String> {
        agent_labels(&self.instance, agent_id)
    }

    /// A container's labels: the agent's, plus the tools volume and settings version it is made with.
    fn labels_with_versions(&self, agent_id: AgentId, tools: &str, posture: &Posture) -> HashMap<String, String> {
        let mut labels = self.labels(agent_id);
        labels.insert(SUDO_LABEL.to_owned(), posture.sudo_word().to_owned());
        labels.insert(TOOLS_LABEL.to_owned(), tools.to_owned());
        labels.insert(SPEC_LABEL.to_owned(), SPEC_VERSION.to_owned());
        labels.insert(EGRESS_LABEL.to_owned(), self.egress_label().to_owned());
        if let Some((_, hash)) = &self.proxy_ca {
            labels.insert(PROXY_CA_LABEL.to_owned(), hash.clone());
        }
        labels
    }

    fn labels_of_instance(&self) -> HashMap<String, String> {
        HashMap::from([("agenthold.instance".to_owned(), self.instance.clone())])
    }

    /// The agent's home volume, of `size` (the local driver's option) when it is made (creating
    /// an existing one is a no-op: it keeps the size it was made with).
    async fn ensure_home(&self, agent_id: AgentId, size: Option<String>) -> Result<(), DriverError> {
        let volume = VolumeCreateRequest {
            name: Some(self.volume(agent_id)),
            labels: Some(self.labels(agent_id)),
            driver_opts: size.map(|size| HashMap::from([("size".to_owned(), size)])),
            ..Default::default()
        };
        self.docker.create_volume(volume).await.map(|_| ()).map_err(engine)
    }

    async fn create_inner(&self, spec: SandboxSpec) -> Result<String, DriverError> {
        let agent_id = spec.agent_id;
        let holder = self.holder(agent_id);
        // A holder made for the other egress setting goes with its network (made again below).
        let mut known = netns::inspect(&self.docker, &holder).await?;
        if let HolderState::Present { confined, .. } = known
            && confined != self.networks.confined
        {
            remove_container(&self.docker, &holder).await?;
            known = HolderState::Missing;
        }
        // Asked of the engine once (at start, usually): nothing to wait for here.
        let disk = self.disk.plan(&self.docker, &self.instance, &spec.image, spec.disk_mib).await?;
        let posture = self.posture().await?;
        // Independent engine calls, at once: they are most of a cold start's overhead.
        let (gateway, (), tools) = tokio::try_join!(
            self.networks.ensure(agent_id),
            self.ensure_home(agent_id, disk.home.clone()),
            self.tools_volume(&spec.image)
        )?;
        let holder_spec = netns::HolderSpec {
            image: spec.image.clone(),
            tools: tools.clone(),
            network: self.network(agent_id),
            gateway,
            confined: self.networks.confined,
        };
        let (holder_id, holder_running) =
            netns::ensure_made(&self.docker, &holder, known, &holder_spec, self.labels(agent_id), TOOLS_DIR).await?;
        let mut host_config = HostConfig {
            mounts: Some(vec![
                Mount {
                    target: Some(HOME_DIR.to_owned()),
                    source: Some(self.volume(agent_id)),
                    typ: Some(MountType::VOLUME),
                    ..Default::default()
                },
                Mount {
                    target: Some(TOOLS_DIR.to_owned()),
                    source: Some(tools.clone()),
                    typ: Some(MountType::VOLUME),
                    read_only: Some(true),
                    ..Default::default()
                },
            ]),
            // The holder's namespace: its address, DNS and hosts (`host.docker.internal`).
            network_mode: Some(netns::joined(&holder_id)),
            storage_opt: disk.writable_layer.map(|size| HashMap::from([("size".to_owned(), size)])),
            ..Default::default()
        };
        security::limit(&mut host_config, &spec, self.nofile);
        posture.apply(&mut host_config);
        let mut labels = self.labels_with_versions(agent_id, &tools, &posture);
        if let Some(mib) = disk.label {
            labels.insert(disk::DISK_LABEL.to_owned(), mib);
        }
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(vec![format!("{TOOLS_DIR}/sandboxd")]),
            cmd: Some(vec![]),
            user: Some("root".to_owned()),
            working_dir: Some("/".to_owned()),
            env: Some(
                [
                    Some(format!("AGENTHOLD_TUNNEL_URL={}", self.tunnel_url.as_ref().unwrap_or(&spec.tunnel_url))),
                    Some(format!("AGENTHOLD_SANDBOX_TOKEN={}", spec.token.expose())),
                    spec.tunnel_ca_pem.as_ref().map(|pem| format!("AGENTHOLD_TUNNEL_CA_PEM={pem}")),
                    self.proxy_ca.as_ref().map(|(pem, _)| format!("AGENTHOLD_PROXY_CA_PEM={pem}")),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
            labels: Some(labels),
            host_config: Some(host_config),
            ..Default::default()
        };
        let options = CreateContainerOptions { name: Some(self.container(agent_id)), ..Default::default() };
        // A holder made just now starts while the sandbox is made (each takes the engine a while).
        let start_holder =
            async { if holder_running { Ok(()) } else { start_container(&self.docker, &holder_id).await } };
        let create = async {
            match self.docker.create_container(Some(options), body).await {
                Ok(created) => Ok(created.id),
                Err(error) if status_of(&error) == Some(404) => Err(DriverError::ImageNotFound(spec.image.clone())),
                Err(error) => Err(engine(error)),
            }
        };
        let ((), id) = tokio::try_join!(start_holder, create)?;
        Ok(id)
    }
}

impl SandboxDriver for DockerDriver {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn next_agent_id(&self) -> AgentId {
        self.networks.next_agent_id()
    }

    fn room_for_agent(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        self.networks.room().boxed()
    }

    fn prepare<'a>(&'a self, image: &'a str) -> BoxFuture<'a, ()> {
        async move {
            match self.tools_volume(image).await {
                Ok(tools) => self.networks.hold_ready_with(image, &tools, TOOLS_DIR),
                Err(error) => tracing::warn!(%error, image, "preparing the tools volume (it is retried on first use)"),
            }
            if self.disk.mode != DiskLimits::Off
                && let Err(error) = self.disk.support(&self.docker, &self.instance, image).await
            {
                tracing::warn!(%error, image, "asking the engine which disk limits it enforces (asked again on first use)");
            }
            self.networks.prepare().await;
        }
        .boxed()
    }

    fn isolated(&self) -> bool {
        true
    }

    fn home_dir(&self, _agent_id: AgentId) -> String {
        HOME_DIR.to_owned()
    }

    fn sandbox_user(&self) -> Option<String> {
        Some("agent".to_owned())
    }

    fn tools_dir(&self) -> String {
        TOOLS_DIR.to_owned()
    }

    fn create(&self, spec: SandboxSpec) -> BoxFuture<'_, Result<String, DriverError>> {
        self.create_inner(spec).boxed()
    }

    fn start(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            let container = self.container(agent_id);
            // The holder first: a sandbox cannot start without the namespace it joins.
            if let HolderState::Present { id, running: false, .. } =
                netns::inspect(&self.docker, &self.holder(agent_id)).await?
            {
                start_container(&self.docker, &id).await?;
                // A sandbox still running in the namespace of the holder that stopped has only a
                // loopback left: it starts again in the new one.
                let options = bollard::query_parameters::RestartContainerOptions { t: Some(1), ..Default::default() };
                return self.docker.restart_container(&container, Some(options)).await.map_err(engine);
            }
            start_container(&self.docker, &container).await
        }
        .boxed()
    }

    fn stop(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            let options = StopContainerOptions { t: Some(5), ..Default::default() };
            match self.docker.stop_container(&self.container(agent_id), Some(options)).await {
                Ok(()) => Ok(()),
                Err(error) if matches!(status_of(&error), Some(304 | 404)) => Ok(()),
                Err(error) => Err(engine(error)),
            }
        }
        .boxed()
    }

    fn destroy(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            self.remove_container(agent_id).await?;
            remove_container(&self.docker, &self.holder(agent_id)).await?;
            match self
                .docker
                .remove_volume(&self.volume(agent_id), None::<bollard::query_parameters::RemoveVolumeOptions>)
                .await
            {
                Ok(()) => {}
                Err(error) if status_of(&error) == Some(404) => {}
                Err(error) => return Err(engine(error)),
            }
            self.networks.remove(agent_id).await
        }
        .boxed()
    }

    fn status(&self, agent_id: AgentId) -> BoxFuture<'_, Result<SandboxStatus, DriverError>> {
        async move {
            let (container, holder) = (self.container(agent_id), self.holder(agent_id));
            let (info, holder) =
                tokio::join!(self.docker.inspect_container(&container, None), netns::inspect(&self.docker, &holder));
            let info = match info {
                Ok(info) => info,
                Err(error) if status_of(&error) == Some(404) => return Ok(SandboxStatus::Missing),
                Err(error) => return Err(engine(error)),
            };
            // The holder the sandbox joined (the engine keeps its id): gone, the sandbox cannot
            // start any more and is made again; stopped, the sandbox has no network.
            let joined = info.host_config.as_ref().and_then(|h| h.network_mode.clone());
            let holder_running = match holder? {
                HolderState::Present { id, running, .. } if joined == Some(netns::joined(&id)) => running,
                _ => return Ok(SandboxStatus::Stale),
            };
            let labels = info.config.and_then(|c| c.labels).unwrap_or_default();
            let tools = self.tools_name().await?;
            if labels.get(TOOLS_LABEL) != Some(&tools)
                || labels.get(SPEC_LABEL).map(String::as_str) != Some(SPEC_VERSION)
                || labels.get(EGRESS_LABEL).map(String::as_str) != Some(self.egress_label())
                || labels.get(PROXY_CA_LABEL) != self.proxy_ca.as_ref().map(|(_, hash)| hash)
                || labels.get(SUDO_LABEL).map(String::as_str) != Some(self.posture().await?.sudo_word())
            {
                return Ok(SandboxStatus::Stale);
            }
            let running = info.state.and_then(|s| s.running).unwrap_or(false) && holder_running;
            Ok(if running { SandboxStatus::Running } else { SandboxStatus::Stopped })
        }
        .boxed()
    }

    fn remove_container(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move { remove_container(&self.docker, &self.container(agent_id)).await }.boxed()
    }

    fn follow_exits(
        &self,
        exits: tokio::sync::mpsc::Sender<(AgentId, chrono::DateTime<chrono::Utc>)>,
    ) -> BoxFuture<'static, ()> {
        super::docker_events::follow_exits(self.docker.clone(), self.instance.clone(), exits).boxed()
    }

    fn source_addr(&self, agent_id: AgentId) -> BoxFuture<'_, Result<Option<std::net::IpAddr>, DriverError>> {
        async move {
            if let Some(addr) = self.proxy_source_addr {
                return Ok(Some(addr));
            }
            // The holder's: the sandbox joined its namespace.
            let info = match self.docker.inspect_container(&self.holder(agent_id), None).await {
                Ok(info) => info,
                Err(error) if status_of(&error) == Some(404) => return Ok(None),
                Err(error) => return Err(engine(error)),
            };
            let networks = info.network_settings.and_then(|n| n.networks).unwrap_or_default();
            Ok(networks.get(&self.network(agent_id)).and_then(|n| n.ip_address.as_deref()).and_then(|a| a.parse().ok()))
        }
        .boxed()
    }

    fn labelled_objects(&self) -> BoxFuture<'_, Result<Vec<super::Labelled>, DriverError>> {
        self.list_labelled().boxed()
    }

    fn remove_object<'a>(&'a self, object: &'a super::Labelled) -> BoxFuture<'a, Result<(), DriverError>> {
        self.remove_labelled(object).boxed()
    }

    fn update_limits(
        &self,
        agent_id: AgentId,
        cpus: f64,
        memory_mib: i32,
        pids_limit: i32,
    ) -> BoxFuture<'_, Result<(), DriverError>> {
        let memory = i64::from(memory_mib) * 1024 * 1024;
        let body = bollard::models::ContainerUpdateBody {
            nano_cpus: Some((cpus * 1e9) as i64),
            memory: Some(memory),
            memory_swap: Some(memory),
            pids_limit: Some(i64::from(pids_limit)),
            ..Default::default()
        };
        let name = self.container(agent_id);
        async move { self.docker.update_container(&name, body).await.map_err(engine) }.boxed()
    }

    fn oom_killed(&self, agent_id: AgentId) -> BoxFuture<'_, Result<bool, DriverError>> {
        async move { super::docker_oom::oom_killed(&self.docker, &self.container(agent_id)).await }.boxed()
    }

    fn disk_enforcement(&self, _engine: &str) -> Option<DiskEnforcement> {
        self.disk.enforcement()
    }

    fn disk_check(&self, agent_id: AgentId) -> BoxFuture<'_, Result<DiskCheck, DriverError>> {
        async move { disk::check(&self.docker, &self.container(agent_id), &self.volume(agent_id)).await }.boxed()
    }

    fn run(
        &self,
        agent_id: AgentId,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'_, Result<super::RunOutput, DriverError>> {
        async move {
            let user = self.sandbox_user();
            let home = self.home_dir(agent_id);
            super::docker_exec::run(&self.docker, &self.container(agent_id), user.as_deref(), &home, argv, env).await
        }
        .boxed()
    }
}

/// The labels of an agent's container, volume and network.
pub(super) fn agent_labels(instance: &str, agent_id: AgentId) -> HashMap<String, String> {
    HashMap::from([
        ("agenthold.instance".to_owned(), instance.to_owned()),
        ("agenthold.agent".to_owned(), agent_id.to_string()),
    ])
}

/// Starts the container `name` (running already is fine).
pub(super) async fn start_container(docker: &Docker, name: &str) -> Result<(), DriverError> {
    match docker.start_container(name, None).await {
        Ok(()) => Ok(()),
        Err(error) if status_of(&error) == Some(304) => Ok(()),
        Err(error) => Err(engine(error)),
    }
}

/// Removes the container `name`, stopping it, keeping its volumes (gone already is fine).
pub(super) async fn remove_container(docker: &Docker, name: &str) -> Result<(), DriverError> {
    let options = RemoveContainerOptions { force: true, v: false, ..Default::default() };
    match docker.remove_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(error) if status_of(&error) == Some(404) => Ok(()),
        Err(error) => Err(engine(error)),
    }
}

pub(super) fn status_of(error: &BollardError) -> Option<u16> {
    match error {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// A bollard error with its causes (a TLS failure's reason is in the source chain).
pub(super) fn describe(error: &BollardError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

pub(super) fn engine(error: BollardError) -> DriverError {
    DriverError::Engine(describe(&error))
}
