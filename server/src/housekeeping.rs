//! Periodic purges of rows nothing reads any more (`AGENTHOLD_HOUSEKEEPING_SECS`, default every
//! 10 minutes; 0 turns them off): browser sessions past their expiry, and failed logins older
//! than a day (the throttling window is minutes). Stale ready networks and orphaned sandbox
//! objects have their own sweep (`sandbox::orphans`). Any replica may run a round: the deletes
//! are idempotent.

use std::time::Duration;

use sqlx::PgPool;

use crate::store;

/// Failed logins older than this many hours are purged.
pub const LOGIN_FAILURES_KEPT_HOURS: i32 = 24;

/// Runs a round every `every_secs` (the first one at once); `None` when turned off.
pub fn spawn(pool: PgPool, every_secs: u64) -> Option<tokio::task::JoinHandle<()>> {
    (every_secs > 0).then(|| {
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(every_secs));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                round(&pool).await;
            }
        })
    })
}

/// One round; failures are logged and retried next round.
pub async fn round(pool: &PgPool) {
    match store::browser_sessions::purge_expired(pool).await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "purged expired browser sessions"),
        Err(error) => tracing::warn!(%error, "purging expired browser sessions"),
    }
    match store::browser_sessions::purge_failures_older_than(pool, LOGIN_FAILURES_KEPT_HOURS).await {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "purged old failed logins"),
        Err(error) => tracing::warn!(%error, "purging old failed logins"),
    }
}
