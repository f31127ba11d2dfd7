//! Sandbox drivers: where an agent's sandboxd runs. [`docker`] (the default: one container per
//! agent with a persistent home volume), [`kubernetes`] (one Pod per agent with a claim for its
//! home) and [`local`] (sandboxd as a child process, no isolation, for development without Docker). The trait keeps to ideas any scale-out driver
//! (Kubernetes) also has: create with a home volume, start, stop (sleep), destroy, status.

pub mod docker;
mod docker_disk;
mod docker_events;
mod docker_exec;
mod docker_netns;
mod docker_networks;
pub use docker_networks::{MOST_READY_NETWORKS, READY_NETWORKS};
mod docker_oom;
pub mod docker_security;
mod docker_tools;
pub mod engines;
pub mod firewall;
pub mod kubernetes;
mod labelled;
pub use labelled::{Labelled, ObjectKind};
pub mod local;
pub mod multi;
mod ready_demand;
pub mod subnets;

use futures_util::future::BoxFuture;

use crate::ids::AgentId;
use crate::secret::Secret;

/// What a sandbox is made from.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The agent.
    pub agent_id: AgentId,
    /// The image (ignored by the local driver).
    pub image: String,
    /// The URL sandboxd dials.
    pub tunnel_url: String,
    /// The CA (PEM) sandboxd trusts for a `wss://` tunnel besides the public roots.
    pub tunnel_ca_pem: Option<String>,
    /// The token sandboxd presents (its hash is stored before the sandbox is created).
    pub token: Secret,
    /// CPU limit in cores.
    pub cpus: f64,
    /// Memory limit.
    pub memory_mib: i32,
    /// Process limit.
    pub pids_limit: i32,
    /// Disk space (MiB) its home and its writable layer may each hold, where the engine can
    /// limit them; `None`: the driver's default (`AGENTHOLD_SANDBOX_DISK_MIB`).
    pub disk_mib: Option<i32>,
}

pub use agenthold_core::supervisor::says_disk_full;

pub use crate::config::DiskLimits;

/// Which disk limits an engine enforces on its sandboxes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskEnforcement {
    /// The home's (a `size` on its volume: the local volume driver on xfs with project quotas).
    pub home: bool,
    /// The writable layer's (`StorageOpt size`: overlay2 on xfs with project quotas, btrfs).
    pub writable_layer: bool,
    /// Why one is not enforced (`None` when both are).
    pub note: Option<String>,
}

/// How full one part of a sandbox's disk is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fullness {
    /// A small write succeeds.
    #[default]
    Room,
    /// Writes fail: the part reached its own limit (MiB).
    AtLimit(i64),
    /// Writes fail, and the part has no limit of its own: the engine's disk is full.
    EngineFull,
}

/// Where a sandbox's writes fail for want of space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCheck {
    /// Its home.
    pub home: Fullness,
    /// Its writable layer (the files outside the home).
    pub writable_layer: Fullness,
}

/// The engine of the server's own host (`DOCKER_HOST` or the default socket; for the local
/// driver, the host itself): every agent's unless remote engines are configured.
pub const LOCAL_ENGINE: &str = "local";

/// Where a new agent's sandbox goes (docs/engines.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The engine's name ([`LOCAL_ENGINE`] for drivers with one engine).
    pub engine: String,
    /// How many agents it may hold (`None`: no limit); checked again when the agent is stored,
    /// so concurrent creations cannot overshoot it.
    pub capacity: Option<u32>,
}

/// Whether a sandbox exists and runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Nothing exists (never created, or deleted behind the server's back).
    Missing,
    /// It exists but is stopped (asleep).
    Stopped,
    /// It runs.
    Running,
    /// It exists but was made by another server version (other tools, other container
    /// settings): treat it like [`Self::Missing`] after [`SandboxDriver::remove_container`],
    /// which keeps the home, so that sandboxd never drifts from the server's version.
    Stale,
}

/// A driver failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The image does not exist on the engine.
    #[error("image {0} not found")]
    ImageNotFound(String),
    /// The host has no room for one more sandbox (the subnet pool is full).
    #[error("{0}")]
    Capacity(String),
    /// The engine cannot do what the server's settings require (disk limits, when
    /// `AGENTHOLD_SANDBOX_DISK_LIMITS=required`); the message says what and why.
    #[error("{0}")]
    Unsupported(String),
    /// Anything else the engine said.
    #[error("{0}")]
    Engine(String),
}

/// Where and how a sandbox runs.
pub trait SandboxDriver: Send + Sync {
    /// `docker`, `kubernetes` or `local`.
    fn kind(&self) -> &'static str;
    /// The id for a new agent. A driver may hand out ids it has prepared for (the Docker driver
    /// keeps a network ready for the next agent, so a first prompt need not wait for one).
    fn next_agent_id(&self) -> AgentId {
        AgentId::new()
    }
    /// Whether the host has room for one more agent's sandbox ([`DriverError::Capacity`] when not).
    fn room_for_agent(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// The engine a new agent's sandbox goes on ([`DriverError::Capacity`] when none has room).
    /// Drivers with one engine place every agent on [`LOCAL_ENGINE`] when it has room.
    fn place(&self) -> BoxFuture<'_, Result<Placement, DriverError>> {
        Box::pin(async move {
            self.room_for_agent().await?;
            Ok(Placement { engine: LOCAL_ENGINE.to_owned(), capacity: None })
        })
    }
    /// The id for a new agent placed on `engine` (see [`Self::next_agent_id`]).
    fn next_agent_id_on(&self, _engine: &str) -> AgentId {
        self.next_agent_id()
    }
    /// The `host:port` the agent's sandbox reaches the egress proxy at, when its engine has one
    /// of its own (`None`: the server's `AGENTHOLD_PROXY_ADDR`).
    fn proxy_addr(&self, _agent_id: AgentId) -> BoxFuture<'_, Result<Option<String>, DriverError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Work a first sandbox would otherwise wait for, done ahead (at server start).
    fn prepare<'a>(&'a self, _image: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
    /// Whether processes in its sandboxes are isolated from the host (false: loudly labelled).
    fn isolated(&self) -> bool;
    /// The agent's home directory as processes in the sandbox see it.
    fn home_dir(&self, agent_id: AgentId) -> String;
    /// The user harnesses and terminals run as (`None`: sandboxd's own).
    fn sandbox_user(&self) -> Option<String>;
    /// Where agenthold's own tools (sandboxd, fakeagent) are inside the sandbox.
    fn tools_dir(&self) -> String;
    /// Creates the sandbox (and its home volume if new); does not start it.
    fn create(&self, spec: SandboxSpec) -> BoxFuture<'_, Result<String, DriverError>>;
    /// Starts a created sandbox.
    fn start(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>>;
    /// Stops it (sleep); its home survives.
    fn stop(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>>;
    /// Removes it with its home and network.
    fn destroy(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>>;
    /// Whether it exists and runs, or must be made again.
    fn status(&self, agent_id: AgentId) -> BoxFuture<'_, Result<SandboxStatus, DriverError>>;
    /// Removes the sandbox itself (stopping it) but keeps its home and network, so that
    /// [`Self::create`] makes it again around the same home (for a [`SandboxStatus::Stale`] one).
    fn remove_container(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>>;
    /// The address the sandbox's traffic comes from as the host sees it (the egress proxy admits
    /// its credentials only from there); `None` when the driver cannot tell.
    fn source_addr(&self, _agent_id: AgentId) -> BoxFuture<'_, Result<Option<std::net::IpAddr>, DriverError>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// Reports, on `exits`, the agent (and when) of every sandbox that stops on its own (a killed or crashed
    /// container); drivers that cannot tell report nothing. Runs until `exits` closes.
    fn follow_exits(
        &self,
        _exits: tokio::sync::mpsc::Sender<(AgentId, chrono::DateTime<chrono::Utc>)>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }
    /// The containers, volumes and networks labelled for this instance and an agent (not the
    /// driver's ready networks), for the orphan sweep; drivers without such objects list none.
    fn labelled_objects(&self) -> BoxFuture<'_, Result<Vec<Labelled>, DriverError>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
    /// Removes one object [`Self::labelled_objects`] listed (gone already is fine).
    fn remove_object<'a>(&'a self, _object: &'a Labelled) -> BoxFuture<'a, Result<(), DriverError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Applies new limits to a running sandbox (a pooled one taken by an agent with limits of
    /// its own); drivers without limits ignore them.
    fn update_limits(
        &self,
        _agent_id: AgentId,
        _cpus: f64,
        _memory_mib: i32,
        _pids_limit: i32,
    ) -> BoxFuture<'_, Result<(), DriverError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Whether the engine killed a process of the sandbox for want of memory (since it last
    /// started). Drivers without memory limits say false.
    fn oom_killed(&self, agent_id: AgentId) -> BoxFuture<'_, Result<bool, DriverError>>;
    /// Which disk limits the engine `engine` enforces (`None`: not known yet, the engine was not
    /// asked yet). Drivers without disk limits enforce none.
    fn disk_enforcement(&self, _engine: &str) -> Option<DiskEnforcement> {
        Some(DiskEnforcement {
            note: Some(format!("the {} driver has no disk limits", self.kind())),
            ..Default::default()
        })
    }
    /// Whether writes in the sandbox's home and writable layer fail for want of space now
    /// (asked when a turn reported ENOSPC or EDQUOT). Drivers that cannot tell say there is room.
    fn disk_check(&self, _agent_id: AgentId) -> BoxFuture<'_, Result<DiskCheck, DriverError>> {
        Box::pin(std::future::ready(Ok(DiskCheck::default())))
    }
    /// Runs `argv` in the agent's running sandbox as [`Self::sandbox_user`], in its home, with
    /// exactly `env` added, and waits for it to exit; its output (stdout and stderr together) is
    /// kept up to [`MAX_RUN_OUTPUT`] bytes, the newest. The caller bounds the wait. Used for the
    /// agent's repository clone before its harness starts. Drivers that cannot run a command
    /// this way say so ([`DriverError::Unsupported`]).
    fn run(
        &self,
        _agent_id: AgentId,
        _argv: Vec<String>,
        _env: Vec<(String, String)>,
    ) -> BoxFuture<'_, Result<RunOutput, DriverError>> {
        let kind = self.kind();
        Box::pin(std::future::ready(Err(DriverError::Unsupported(format!(
            "the {kind} driver cannot run a command in the sandbox before its harness starts"
        )))))
    }
}

/// The most of a [`SandboxDriver::run`]'s output kept (the newest bytes).
pub const MAX_RUN_OUTPUT: usize = 16 * 1024;

/// What a command [`SandboxDriver::run`] ran did.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    /// Its exit status (`None`: the engine did not say).
    pub exit_code: Option<i64>,
    /// The end of its output, stdout and stderr together, lossily decoded.
    pub output: String,
}

impl RunOutput {
    /// Appends `bytes`, keeping the newest [`MAX_RUN_OUTPUT`] bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.output.push_str(&String::from_utf8_lossy(bytes));
        if self.output.len() > MAX_RUN_OUTPUT {
            let mut cut = self.output.len() - MAX_RUN_OUTPUT;
            while !self.output.is_char_boundary(cut) {
                cut += 1;
            }
            self.output.drain(..cut);
        }
    }
}
