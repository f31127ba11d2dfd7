//! Server replicas on one database (docs/replicas.md). Every server is a replica: it heartbeats
//! its row in `replicas` and owns the agents whose lease it holds (`agent_leases`); a lease
//! holds while its replica's row has not expired (`AGENTHOLD_LEASE_TTL_SECS`, 15 s). What this
//! module owns:
//! - [`Replicas::route`]: where an agent's supervisor runs — here (taking the lease when nobody
//!   alive holds it) or on another replica (commands go there: [`forward`]; a sandbox's tunnel
//!   connection is redirected there).
//! - the heartbeat (`crate::fleet::heartbeat`) renews the row, stops local supervisors whose
//!   lease another replica took, and takes over the unfinished turns of replicas that died;
//!   `crate::dispatch` sends each command where [`Replicas::route`] says.
//! - [`fanout`]: events stored by one replica reach the watchers of every other.
//!
//! One server alone is a replica too: its leases are always its own, so it behaves as before.

pub mod fanout;
pub mod forward;
pub mod signing;

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::store::replicas::{Lease, ReplicaRow};

/// Where an agent's supervisor runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// On this replica.
    Here,
    /// On another live replica.
    There(ReplicaRow),
    /// Nowhere: the agent does not exist.
    NoAgent,
}

/// This replica: who it is, how others reach it, how long its leases last.
pub struct Replicas {
    pool: PgPool,
    me: ReplicaRow,
    ttl: Duration,
    /// The key replicas sign their calls to each other with (derived from the master key, which
    /// every replica shares; never stored).
    call_key: signing::CallKey,
    /// The client of those calls (the server's outbound one: kept-alive connections).
    http: reqwest::Client,
}

impl Replicas {
    /// Registers this replica (its first heartbeat) and names it as the sender of its event
    /// notifications.
    pub async fn register(
        pool: PgPool,
        me: ReplicaRow,
        ttl: Duration,
        master_key: &crate::secrets::master_key::MasterKey,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        crate::store::replicas::heartbeat(&pool, &me, ttl.as_secs_f64()).await.context("registering the replica")?;
        crate::store::notify::set_sender(me.id);
        tracing::info!(replica.id = %me.id, tunnel_url = %me.tunnel_url, internal_url = %me.internal_url, "replica registered");
        let http = crate::outbound::client().context("the client of calls to other replicas")?;
        Ok(Self { pool, me, ttl, call_key: signing::CallKey::derive(master_key), http })
    }

    /// This replica's id.
    pub fn id(&self) -> Uuid {
        self.me.id
    }

    /// This replica as the others see it.
    pub fn me(&self) -> &ReplicaRow {
        &self.me
    }

    /// How long a lease lasts without a heartbeat.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// How long a lease lasts without renewal.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The key of calls between replicas.
    pub(crate) fn call_key(&self) -> &signing::CallKey {
        &self.call_key
    }

    /// Sends a command to the replica that owns the agent and waits for its answer
    /// ([`forward::call`]).
    pub async fn forward(
        &self,
        owner: &ReplicaRow,
        agent_id: AgentId,
        command: &forward::Forwarded,
    ) -> Result<forward::Answer, String> {
        forward::call(&self.http, owner, &self.call_key, agent_id, command).await
    }

    /// Where the agent's supervisor runs, taking its lease if no live replica holds it. When the
    /// database cannot tell, here (as a single server would: the next heartbeat settles it).
    pub async fn route(&self, agent_id: AgentId) -> Route {
        match crate::store::replicas::acquire(&self.pool, agent_id, self.me.id).await {
            Ok(Lease::Mine | Lease::Unsettled) => Route::Here,
            Ok(Lease::Theirs(owner)) => Route::There(owner),
            Ok(Lease::NoAgent) => Route::NoAgent,
            Err(error) => {
                tracing::warn!(%error, agent.id = %agent_id, "reading the agent's lease; serving it here");
                Route::Here
            }
        }
    }

    /// Another live replica holding the agent's lease, if one does; read only (nothing is
    /// taken), for reads that must not move an agent.
    pub async fn other_holder(&self, agent_id: AgentId) -> sqlx::Result<Option<ReplicaRow>> {
        let holder = crate::store::replicas::live_holder(&self.pool, agent_id).await?;
        Ok(holder.filter(|owner| owner.id != self.me.id))
    }

    /// The client of calls between replicas.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Gives up every lease and the row (a graceful stop): the other replicas take the agents
    /// over at once instead of after the lease expiry.
    pub async fn retire(&self) {
        if let Err(error) = crate::store::replicas::retire(&self.pool, self.me.id).await {
            tracing::warn!(%error, "giving up the replica's leases");
        }
    }
}

/// This replica's id: `AGENTHOLD_REPLICA_ID`, else the one kept in the data directory (made on
/// first start), so that a restarted server is the same replica and keeps its leases.
pub fn replica_id(configured: Option<Uuid>, data_dir: &std::path::Path) -> anyhow::Result<Uuid> {
    use anyhow::Context as _;
    if let Some(id) = configured {
        return Ok(id);
    }
    let path = data_dir.join("replica-id");
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().with_context(|| format!("{} does not hold a replica id", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = Uuid::new_v4();
            std::fs::write(&path, format!("{id}\n")).with_context(|| format!("writing {}", path.display()))?;
            Ok(id)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_keeps_its_id_across_restarts() {
        let dir = std::env::temp_dir().join(format!("replica-id-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = replica_id(None, &dir).expect("made");
        assert_eq!(replica_id(None, &dir).expect("read"), first);
        let configured = Uuid::new_v4();
        assert_eq!(replica_id(Some(configured), &dir).expect("configured"), configured);
        std::fs::write(dir.join("replica-id"), "garbage").expect("write");
        assert!(replica_id(None, &dir).is_err(), "a damaged id stops the start");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
