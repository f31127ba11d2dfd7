//! The orphan sweep: every `AGENTHOLD_ORPHAN_SWEEP_SECS`, the containers, home volumes and
//! networks labelled for this instance whose agent no longer exists in the database (a deletion
//! interrupted before it was recorded, a crash between making an object and storing the agent,
//! objects of a restored database) are removed, once older than `AGENTHOLD_ORPHAN_GRACE_SECS`.
//! Never an object of an existing agent (also one being deleted: that is the deletion's), never
//! one without an agent label (the tools volume), never a ready network the driver holds.
//! What it removes is logged, one line per object and a summary.
//!
//! [`orphans`] decides (pure); [`run`] lists, decides and removes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::ids::AgentId;
use crate::sandbox::{Labelled, ObjectKind, SandboxDriver};

/// The objects to remove: those whose agent is not in `agents`, not made ready by a replica in
/// `alive`, and older than `grace`; containers first (a volume or network in use by one cannot be
/// removed).
pub fn orphans<'a>(
    objects: &'a [Labelled],
    agents: &HashSet<AgentId>,
    alive: &HashSet<uuid::Uuid>,
    now: DateTime<Utc>,
    grace: Duration,
) -> Vec<&'a Labelled> {
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    let mut found: Vec<&Labelled> = objects
        .iter()
        .filter(|o| !agents.contains(&o.agent_id))
        .filter(|o| !o.made_by.is_some_and(|replica| alive.contains(&replica)))
        .filter(|o| o.created.is_some_and(|at| now - at >= grace))
        .collect();
    found.sort_by_key(|o| (o.kind != ObjectKind::Container, o.kind as u8, o.name.clone()));
    found
}

/// Sweeps every `every` until the process ends.
pub async fn run(driver: Arc<dyn SandboxDriver>, pool: sqlx::PgPool, every: Duration, grace: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Not at once: the start has enough to do.
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(error) = sweep(driver.as_ref(), &pool, grace).await {
            tracing::warn!(%error, "sweeping orphaned sandbox objects");
        }
    }
}

/// One sweep; how many objects it removed.
pub async fn sweep(driver: &dyn SandboxDriver, pool: &sqlx::PgPool, grace: Duration) -> anyhow::Result<usize> {
    let objects = driver.labelled_objects().await?;
    if objects.is_empty() {
        return Ok(0);
    }
    let mut ids: Vec<uuid::Uuid> = objects.iter().map(|o| o.agent_id.0).collect();
    ids.sort_unstable();
    ids.dedup();
    // Pooled sandboxes (the warm pool) belong to agents not created yet. The pool is read before
    // the agents: a claim first stores the agent under the sandbox's id, then takes the sandbox out
    // of the pool, so read in this order the id is in one set or the other whenever the claim
    // happens (read the other way round, a claim between the reads was in neither, and the agent's
    // sandbox was taken for an orphan).
    let pooled = crate::store::warm_pool::all(pool).await?;
    let mut agents: HashSet<AgentId> = crate::store::agents::existing(pool, &ids).await?.into_iter().collect();
    agents.extend(pooled);
    // Ready networks (and holders) of live replicas are theirs to hand out.
    let alive: HashSet<uuid::Uuid> = crate::store::replicas::alive(pool).await?.into_iter().collect();
    let mut removed = 0;
    for object in orphans(&objects, &agents, &alive, Utc::now(), grace) {
        let (kind, name, agent) = (object.kind.as_str(), &object.name, object.agent_id);
        match driver.remove_object(object).await {
            Ok(()) => {
                removed += 1;
                tracing::info!(kind, %name, agent.id = %agent, "removed an orphaned sandbox object (its agent no longer exists)");
            }
            Err(error) => tracing::warn!(kind, %name, %error, "removing an orphaned sandbox object"),
        }
    }
    if removed > 0 {
        tracing::info!(removed, "orphan sweep done");
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_objects_of_missing_agents_go_containers_first() {
        let now = Utc::now();
        let (live, gone) = (AgentId::new(), AgentId::new());
        let object = |kind, agent_id, age_secs: Option<i64>| Labelled {
            kind,
            name: format!("{kind:?}-{agent_id}"),
            agent_id,
            created: age_secs.map(|s| now - chrono::Duration::seconds(s)),
            engine: None,
            made_by: None,
        };
        let objects = vec![
            object(ObjectKind::Volume, gone, Some(700)),
            object(ObjectKind::Network, gone, Some(700)),
            object(ObjectKind::Container, gone, Some(700)),
            object(ObjectKind::Container, live, Some(7000)),
            object(ObjectKind::Volume, AgentId::new(), Some(10)), // too young
            object(ObjectKind::Network, AgentId::new(), None),    // age unknown
        ];
        let agents = HashSet::from([live]);
        let none = HashSet::new();
        let found = orphans(&objects, &agents, &none, now, Duration::from_secs(600));
        let kinds: Vec<ObjectKind> = found.iter().map(|o| o.kind).collect();
        assert_eq!(kinds, vec![ObjectKind::Container, ObjectKind::Volume, ObjectKind::Network]);
        assert!(found.iter().all(|o| o.agent_id == gone));
        assert_eq!(orphans(&objects, &agents, &none, now, Duration::ZERO).len(), 4);
    }

    #[test]
    fn a_live_replicas_ready_objects_stay_and_a_dead_ones_go() {
        let now = Utc::now();
        let (live_replica, dead_replica) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let ready = |kind, made_by| Labelled {
            kind,
            name: format!("{kind:?}-{made_by}"),
            agent_id: AgentId::new(),
            created: Some(now - chrono::Duration::seconds(3600)),
            engine: None,
            made_by: Some(made_by),
        };
        let objects = vec![
            ready(ObjectKind::Container, live_replica),
            ready(ObjectKind::Network, live_replica),
            ready(ObjectKind::Container, dead_replica),
            ready(ObjectKind::Network, dead_replica),
        ];
        let alive = HashSet::from([live_replica]);
        let found = orphans(&objects, &HashSet::new(), &alive, now, Duration::from_secs(600));
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|o| o.made_by == Some(dead_replica)), "{found:?}");
    }
}
