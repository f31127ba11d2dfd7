//! Where a command for an agent goes: to its supervisor on this replica (started if need be), to
//! the replica that holds the agent's lease (`crate::replicas::forward`), or nowhere (no such
//! agent). The supervisors ([`Supervisors`]) are this replica's only and know nothing of other
//! replicas; the replicas know the leases and carry forwarded commands. Handlers, the tunnel and
//! the triggers send through here.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::ids::AgentId;
use crate::replicas::{Replicas, Route, forward};
use crate::supervisor::{Command, LifecycleError, Supervisors};
use crate::tunnel::link::{Incoming, Link};

/// The dispatch layer.
pub struct Dispatch {
    supervisors: Arc<Supervisors>,
    replicas: Arc<Replicas>,
}

impl Dispatch {
    /// Dispatches over this replica's supervisors and the lease table.
    pub fn new(supervisors: Arc<Supervisors>, replicas: Arc<Replicas>) -> Self {
        Self { supervisors, replicas }
    }

    /// This replica's supervisors.
    pub fn supervisors(&self) -> &Arc<Supervisors> {
        &self.supervisors
    }

    /// This replica and the lease table.
    pub fn replicas(&self) -> &Arc<Replicas> {
        &self.replicas
    }

    /// Where the agent's supervisor runs: here if it already does, else as its lease says
    /// (taken by this replica when no live one holds it).
    pub async fn route(&self, agent_id: AgentId) -> Route {
        if self.supervisors.is_running(agent_id) {
            return Route::Here;
        }
        self.replicas.route(agent_id).await
    }

    /// Sends a command to the agent's supervisor, wherever it runs: here (started if need be) or
    /// on the replica that holds the agent's lease.
    pub async fn send(&self, agent_id: AgentId, command: Command) -> bool {
        match self.route(agent_id).await {
            Route::Here => self.supervisors.deliver(agent_id, command).await,
            Route::NoAgent => false,
            Route::There(owner) => match forward::split(command) {
                Ok((forwarded, waiting)) => match self.replicas.forward(&owner, agent_id, &forwarded).await {
                    Ok(answer) => {
                        forward::deliver(waiting, answer);
                        true
                    }
                    Err(error) => {
                        tracing::warn!(%error, agent.id = %agent_id, replica.id = %owner.id, "forwarding a command to the agent's replica");
                        false
                    }
                },
                Err(forward::Stays::Terminal(reply)) => {
                    let message = "the agent's sandbox is connected to another replica: open its terminal there";
                    let _ = reply.send(Err(LifecycleError::Failed(message.to_owned())));
                    true
                }
                Err(forward::Stays::Attach | forward::Stays::SandboxExited) => false,
            },
        }
    }

    /// Sends a command and waits for its reply.
    pub async fn ask<T>(&self, agent_id: AgentId, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        if !self.send(agent_id, make(reply)).await {
            return None;
        }
        answer.await.ok()
    }

    /// Runs a command another replica forwarded: only here (never forwarded again); `Err` with
    /// the route when this replica does not hold the agent's lease.
    pub async fn run_forwarded(
        &self,
        agent_id: AgentId,
        forwarded: forward::Forwarded,
    ) -> Result<forward::Answer, Route> {
        match self.route(agent_id).await {
            Route::Here => {
                let (command, answer) = forward::join(forwarded);
                if !self.supervisors.deliver(agent_id, command).await {
                    return Ok(forward::Answer::Gone);
                }
                Ok(answer.await.unwrap_or(forward::Answer::Gone))
            }
            other => Err(other),
        }
    }

    /// Hands a new sandboxd connection to its agent's supervisor.
    pub async fn attach(
        &self,
        agent_id: AgentId,
        link: Link,
        hello: agenthold_sandboxd::protocol::Control,
        inbox: mpsc::Receiver<Incoming>,
    ) -> bool {
        self.send(agent_id, Command::Attach { link, hello, inbox }).await
    }

    /// Nudges the supervisors of agents with unfinished turns that this replica owns or no live
    /// replica does, starting them where none runs here (after a server restart, or a replica's
    /// death), so those turns finish or fail even if their sandbox never reconnects — and a turn
    /// whose nudge was lost (a forwarded one that did not arrive) is sent all the same. Returns
    /// how many supervisors it started.
    pub async fn resume_open_turns(&self) -> sqlx::Result<usize> {
        let me = self.replicas.id();
        let mut started = 0;
        let grace = self.replicas.ttl().as_secs_f64();
        let pool = self.replicas.pool();
        for agent_id in crate::store::replicas::unserved_turn_agents(pool, me, grace).await? {
            let was_running = self.supervisors.is_running(agent_id);
            if self.send(agent_id, Command::Prompt).await && !was_running {
                started += 1;
            }
        }
        Ok(started)
    }
}
