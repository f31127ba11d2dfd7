//! The replica's heartbeat, every third of the lease time: renews this replica's row, ends the
//! local supervisors of agents whose lease another replica took (this one missed heartbeats and
//! was taken for dead), takes over the unfinished turns of replicas that died, and forgets
//! replicas long dead. One failed beat is logged and retried at the next.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dispatch::Dispatch;

/// Replicas expired for this many lease times are forgotten (their rows and leases deleted).
const FORGET_AFTER_TTLS: u32 = 20;

/// Beats until the task is aborted.
pub async fn run(dispatch: Arc<Dispatch>, pool: sqlx::PgPool) {
    let replicas = Arc::clone(dispatch.replicas());
    let ttl = replicas.ttl();
    let mut tick = tokio::time::interval(interval(ttl));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(error) = beat(&dispatch, &pool, ttl).await {
            tracing::warn!(%error, replica.id = %replicas.id(), "the replica's heartbeat failed; trying again at the next");
        }
    }
}

/// How often a replica beats: a third of the lease time (two beats may fail before it lapses).
pub fn interval(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(100))
}

async fn beat(dispatch: &Dispatch, pool: &sqlx::PgPool, ttl: Duration) -> sqlx::Result<()> {
    let replicas = dispatch.replicas();
    crate::store::replicas::heartbeat(pool, replicas.me(), ttl.as_secs_f64()).await?;
    let read_at = Instant::now();
    let held: HashSet<_> = crate::store::replicas::held_by(pool, replicas.id()).await?.into_iter().collect();
    let ended = dispatch.supervisors().keep_only(&held, read_at);
    if ended > 0 {
        tracing::warn!(ended, "this replica lost leases to another (missed heartbeats?)");
    }
    let resumed = dispatch.resume_open_turns().await?;
    if resumed > 0 {
        tracing::info!(resumed, "took over the unfinished turns of agents no live replica served");
    }
    crate::store::replicas::forget_expired(pool, (ttl * FORGET_AFTER_TTLS).as_secs_f64()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_three_times_per_lease() {
        assert_eq!(interval(Duration::from_secs(15)), Duration::from_secs(5));
        assert_eq!(interval(Duration::from_millis(90)), Duration::from_millis(100));
    }
}
