//! One supervisor per agent: a task that owns everything about the agent's sandbox and harness
//! process — waking the sandbox, starting the harness, the ACP conversation, turning harness
//! output into events, taking a running harness over after a server restart. Handlers and the
//! tunnel talk to it through [`Command`]s; it never shares its state. Its protocol logic is
//! [`core`] (pure: inputs in, effects out, unit-tested without Docker); `shell` performs the
//! effects.

mod alarm;
mod disk;
pub mod harness_log;
pub mod host;
pub mod observed;
mod provider;
mod reads;
mod repo;
pub mod sandbox_env;
pub(crate) mod shell;
pub mod slots;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agenthold_sandboxd::protocol::Control;
use parking_lot::Mutex;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::events::appender::Appender;
use crate::ids::{AgentId, SessionId};
use crate::sandbox::SandboxDriver;
use crate::tunnel::link::{Incoming, Link};

/// The supervisor's protocol logic without IO (the `agenthold-core` crate).
pub use agenthold_core::supervisor as core;
pub use agenthold_core::supervisor::{LifecycleError, Timeouts};

/// The server's `Timeouts::ack_delay`: with a harness streaming tokens, one acknowledgement per
/// quarter second instead of one per line (a message back over the tunnel per event was a fifth of
/// the server's sends with 30 agents streaming; at one per 50 ms they were still a twelfth of its
/// CPU, each a send through the sandbox's network; docs/benchmarks.md). An acknowledgement only
/// lets sandboxd forget output the server has stored (a new link resumes from the stored offset);
/// 256 KiB go at once (`ACK_EAGER_BYTES`). Not longer: a sandboxd whose buffer is set below that
/// (`AGENTHOLD_SANDBOXD_BUFFER_BYTES`) waits for the timer once its buffer is full, so the delay
/// bounds such a harness's output to four buffers a second.
pub const ACK_DELAY: Duration = Duration::from_millis(250);

/// What every supervisor uses.
pub struct Deps {
    /// The database.
    pub pool: PgPool,
    /// The event log's writer.
    pub appender: Appender,
    /// Where sandboxes run.
    pub driver: Arc<dyn SandboxDriver>,
    /// The URL sandboxd dials.
    pub tunnel_url: String,
    /// The CA (PEM) sandboxes trust for a `wss://` tunnel, if the server has a private one.
    pub tunnel_ca_pem: Option<String>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// The posture of agents that name none, and whether `autonomous` is forbidden.
    pub postures: Postures,
    /// The host's awake sandboxes (bounded by `AGENTHOLD_MAX_AWAKE`) and when each was last used.
    pub host: Arc<host::Host>,
    /// How harnesses reach the egress proxy; `None` unless `AGENTHOLD_PROXY_ADDR` is set (and
    /// the driver installs the proxy's CA: Docker only).
    pub proxy: Option<ProxyAccess>,
    /// Where harnesses reach agenthold's MCP server (agents prompting agents); `None`: not
    /// offered (a Docker sandbox without the egress proxy could reach it only holding the
    /// credential itself).
    pub mcp: Option<crate::mcp::servers::Endpoint>,
    /// The server-wide limit on running turns.
    pub turn_slots: Arc<slots::TurnSlots>,
    /// Whether Postgres answers (a sandbox's reconnect grace waits while it does not).
    pub database: crate::store::availability::Availability,
    /// The egress proxy's report of responses cut short (beside the file the feed writes;
    /// `None`: the feed is off).
    pub proxy_report: Option<std::path::PathBuf>,
}

/// The server's permission settings.
#[derive(Debug, Clone, Default)]
pub struct Postures {
    /// The posture of agents that name none (`None`: autonomous).
    pub default: Option<crate::permissions::Posture>,
    /// Whether `autonomous` is refused.
    pub forbid_autonomous: bool,
    /// The server owner's rules, checked before any agent's.
    pub server_rules: Arc<Vec<crate::permissions::policy::Rule>>,
}

impl Postures {
    /// The posture an agent runs with: its own, else the default; an error when forbidden or
    /// unreadable.
    pub fn of(&self, agent: &crate::store::agents::AgentRow) -> Result<crate::permissions::Posture, String> {
        let own =
            agent.posture.as_deref().map(crate::permissions::Posture::parse).transpose().map_err(|e| e.to_string())?;
        crate::permissions::posture::resolve(own, self.default, self.forbid_autonomous).map_err(|e| e.to_string())
    }

    /// What answers the agent's permission requests; an error when its posture is forbidden or
    /// a guarded agent has no policy.
    pub fn gate(
        &self,
        agent: &crate::store::agents::AgentRow,
        workdir: &str,
    ) -> Result<crate::permissions::Gate, GateError> {
        use crate::permissions::{decision, policy::Policy};
        let posture = self.of(agent).map_err(GateError::PostureForbidden)?;
        let policy = match &agent.policy {
            Some(value) => Some(Arc::new(Policy::parse(value).map_err(|e| GateError::InvalidPolicy(e.to_string()))?)),
            None => None,
        };
        decision::check_ready(posture, policy.as_deref()).map_err(GateError::NotReady)?;
        Ok(crate::permissions::Gate {
            posture,
            server_rules: Arc::clone(&self.server_rules),
            policy,
            workdir: workdir.to_owned(),
        })
    }
}

/// Why an agent's permission gate cannot be made (its harness does not start; the message,
/// code first, says why).
#[derive(Debug, Clone, thiserror::Error)]
pub enum GateError {
    /// Its posture is forbidden on this server, or unreadable.
    #[error("POSTURE_FORBIDDEN: {0}")]
    PostureForbidden(String),
    /// Its policy does not parse.
    #[error("INVALID_POLICY: {0}")]
    InvalidPolicy(String),
    /// Its posture cannot run as configured (a guarded agent without a policy).
    #[error("{code}: {0}", code = .0.code())]
    NotReady(crate::permissions::decision::DecideError),
}

/// What a harness needs to send its traffic through the egress proxy.
#[derive(Debug, Clone)]
pub struct ProxyAccess {
    /// `host:port` the sandbox reaches the proxy at.
    pub addr: String,
    /// Seals and opens the agents' proxy passwords.
    pub master_key: Arc<crate::secrets::master_key::MasterKey>,
    /// What the proxy feed last wrote (`None`: the feed is off, someone else feeds the proxy).
    pub written: Option<tokio::sync::watch::Receiver<crate::proxy_feed::task::Written>>,
    /// Makes the feed rebuild at once.
    pub nudge: Arc<tokio::sync::Notify>,
}

/// What the terminal endpoint needs to open a terminal in the sandbox.
pub struct TerminalAccess {
    /// The sandbox's tunnel.
    pub link: Link,
    /// A fresh channel for the terminal.
    pub channel: u32,
    /// The agent's home inside the sandbox.
    pub home_dir: String,
    /// The user to run the shell as.
    pub user: Option<String>,
}

/// Messages to a supervisor.
pub enum Command {
    /// sandboxd connected and said hello.
    Attach {
        /// The connection.
        link: Link,
        /// Its hello.
        hello: Control,
        /// Everything it sends that is not terminal traffic.
        inbox: mpsc::Receiver<Incoming>,
    },
    /// A turn was stored (with its `prompt` event); run it.
    Prompt,
    /// Cancel the session's turn; answers whether there was one.
    Cancel {
        /// The session.
        session_id: SessionId,
        /// Whether a turn was in progress.
        reply: oneshot::Sender<bool>,
    },
    /// Stop the sandbox (its home survives).
    Sleep {
        /// The outcome.
        reply: oneshot::Sender<Result<(), LifecycleError>>,
    },
    /// Start the sandbox.
    Wake {
        /// The outcome.
        reply: oneshot::Sender<Result<(), LifecycleError>>,
    },
    /// Remove the sandbox and its home (the agent's rows are deleted by the caller).
    Destroy {
        /// The outcome.
        reply: oneshot::Sender<Result<(), LifecycleError>>,
    },
    /// The agent's environment changed (a secret attached or detached; a new harness, model or
    /// env): its harness restarts with the new one once no turn runs.
    EnvironmentChanged,
    /// A person's answer to a waiting permission question.
    AnswerPermission {
        /// The question.
        permission_id: uuid::Uuid,
        /// The answer.
        choice: crate::permissions::Choice,
        /// Who answered.
        by: serde_json::Value,
        /// The outcome.
        reply: oneshot::Sender<Result<(), core::AnswerError>>,
    },
    /// The agent's posture or policy changed: the running harness's next requests, and its
    /// questions still waiting, are decided by the new one (no restart).
    GateChanged,
    /// The agent names another login method (`auth_method`): the running harness signs in with
    /// it the next time it asks (no restart).
    AuthMethodChanged,
    /// Revoke a session grant ("approve for this session").
    RevokeGrant {
        /// The question whose answer made it.
        permission_id: uuid::Uuid,
        /// Its session.
        session_id: SessionId,
        /// Who revokes it.
        by: serde_json::Value,
        /// The outcome.
        reply: oneshot::Sender<Result<(), core::AnswerError>>,
    },
    /// The sandbox's container stopped on its own (killed, crashed, out of memory) at this time.
    SandboxExited(chrono::DateTime<chrono::Utc>),
    /// Wake the sandbox if needed and hand out a terminal channel.
    Terminal {
        /// The access, once the sandbox is connected.
        reply: oneshot::Sender<Result<TerminalAccess, LifecycleError>>,
    },
}

/// The registry of running supervisors.
pub struct Supervisors {
    deps: Arc<Deps>,
    observed: Arc<observed::Observations>,
    harness_logs: Arc<harness_log::HarnessLogs>,
    actors: Mutex<HashMap<AgentId, Actor>>,
    tasks: Mutex<JoinSet<()>>,
}

/// A running supervisor.
struct Actor {
    sender: mpsc::Sender<Command>,
    /// Ends it at once (its lease went to another replica).
    abort: tokio::task::AbortHandle,
    /// When it started (a lease check that began before must not stop it).
    started: std::time::Instant,
}

impl Supervisors {
    /// An empty registry.
    pub fn new(deps: Deps) -> Self {
        Self {
            deps: Arc::new(deps),
            observed: Arc::default(),
            harness_logs: Arc::default(),
            actors: Mutex::default(),
            tasks: Mutex::new(JoinSet::new()),
        }
    }

    /// How sandboxes reach the egress proxy (`None`: they do not use one).
    pub fn proxy(&self) -> Option<&ProxyAccess> {
        self.deps.proxy.as_ref()
    }

    /// The egress proxy's report file, when the server feeds the proxy.
    pub fn proxy_report(&self) -> Option<&std::path::Path> {
        self.deps.proxy_report.as_deref()
    }

    /// agenthold's MCP server as harnesses are offered it (`None`: not offered).
    pub fn mcp(&self) -> Option<&crate::mcp::servers::Endpoint> {
        self.deps.mcp.as_ref()
    }

    /// The postures agents run with.
    pub fn postures(&self) -> &Postures {
        &self.deps.postures
    }

    /// The agent's supervisor if one runs here.
    fn running(&self, agent_id: AgentId) -> Option<mpsc::Sender<Command>> {
        let actors = self.actors.lock();
        actors.get(&agent_id).filter(|actor| !actor.sender.is_closed()).map(|actor| actor.sender.clone())
    }

    /// The agent's supervisor, started here if it is not running (the caller holds the lease).
    fn handle(&self, agent_id: AgentId) -> mpsc::Sender<Command> {
        let mut actors = self.actors.lock();
        if let Some(actor) = actors.get(&agent_id)
            && !actor.sender.is_closed()
        {
            return actor.sender.clone();
        }
        let (sender, receiver) = mpsc::channel(256);
        let (deps, observed) = (Arc::clone(&self.deps), Arc::clone(&self.observed));
        let run = shell::run(agent_id, deps, observed, Arc::clone(&self.harness_logs), receiver);
        let abort = self.tasks.lock().spawn(run);
        actors.insert(agent_id, Actor { sender: sender.clone(), abort, started: std::time::Instant::now() });
        sender
    }

    /// Ends the supervisors of agents whose lease this replica no longer holds (`held`, read at
    /// `read_at`; supervisors started since are kept): their sandboxes' connections close and
    /// reconnect to the owner. Returns how many were ended.
    pub fn keep_only(&self, held: &std::collections::HashSet<AgentId>, read_at: std::time::Instant) -> usize {
        let mut actors = self.actors.lock();
        let lost: Vec<AgentId> = actors
            .iter()
            .filter(|(agent_id, actor)| !held.contains(agent_id) && actor.started < read_at)
            .map(|(agent_id, _)| *agent_id)
            .collect();
        for agent_id in &lost {
            self.harness_logs.forget(*agent_id);
            if let Some(actor) = actors.remove(agent_id) {
                tracing::warn!(agent.id = %agent_id, "another replica holds this agent's lease: its supervisor here ends");
                actor.abort.abort();
            }
        }
        lost.len()
    }

    /// The URL sandboxd dials.
    pub fn tunnel_url(&self) -> &str {
        &self.deps.tunnel_url
    }

    /// The CA sandboxes trust for a `wss://` tunnel, if the server has a private one.
    pub fn tunnel_ca_pem(&self) -> Option<&str> {
        self.deps.tunnel_ca_pem.as_deref()
    }

    /// The host's awake sandboxes.
    pub fn host(&self) -> &Arc<host::Host> {
        &self.deps.host
    }

    /// The agent's sandbox as observed: its supervisor's last published state; without one,
    /// awake if the host counts it so (a sandbox found running), else asleep.
    pub fn observed(&self, agent_id: AgentId) -> core::Observed {
        self.observed.get(agent_id).unwrap_or_else(|| {
            if self.deps.host.is_awake(agent_id) { core::Observed::Awake } else { core::Observed::Asleep }
        })
    }

    /// What the agent's harness wrote on stderr lately, if its supervisor runs here.
    pub fn harness_log(&self, agent_id: AgentId) -> Option<harness_log::Snapshot> {
        self.harness_logs.snapshot(agent_id)
    }

    /// Whether the agent's supervisor runs here.
    pub fn is_running(&self, agent_id: AgentId) -> bool {
        self.running(agent_id).is_some()
    }

    /// Sends a command to the agent's supervisor here, started if need be (the caller routed it
    /// here: `crate::dispatch`).
    pub async fn deliver(&self, agent_id: AgentId, command: Command) -> bool {
        self.handle(agent_id).send(command).await.is_ok()
    }

    /// Sends a command to the agent's supervisor if one runs here (none is started for it).
    pub async fn send_if_running(&self, agent_id: AgentId, command: Command) -> bool {
        match self.running(agent_id) {
            Some(sender) => sender.send(command).await.is_ok(),
            None => false,
        }
    }

    /// Forgets a deleted agent's supervisor.
    pub fn forget(&self, agent_id: AgentId) {
        self.harness_logs.forget(agent_id);
        self.actors.lock().remove(&agent_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_errors_read_code_first() {
        assert_eq!(GateError::PostureForbidden("no".to_owned()).to_string(), "POSTURE_FORBIDDEN: no");
        assert_eq!(GateError::InvalidPolicy("bad rule".to_owned()).to_string(), "INVALID_POLICY: bad rule");
        let missing = GateError::NotReady(crate::permissions::decision::DecideError::PolicyMissing);
        assert!(missing.to_string().starts_with("POLICY_MISSING: the agent is guarded"), "{missing}");
    }
}
