//! Finishing agent deletions that stopped halfway: an agent marked as being deleted whose rows
//! still exist (the server died, or the engine failed, between the mark and the end). At server
//! start each such agent's sandbox (container, home volume, network) is destroyed and then its
//! rows are deleted; one that fails again stays marked for the next start or a retried `DELETE`.

use sqlx::PgPool;

use crate::sandbox::SandboxDriver;
use crate::store;

/// Finishes every pending deletion; returns how many were finished.
pub async fn finish_pending(pool: &PgPool, driver: &dyn SandboxDriver) -> usize {
    let pending = match store::agents::deleting(pool).await {
        Ok(pending) => pending,
        Err(error) => {
            tracing::error!(%error, "listing agents left being deleted");
            return 0;
        }
    };
    let mut finished = 0;
    for agent_id in pending {
        if let Err(error) = driver.destroy(agent_id).await {
            tracing::warn!(%error, agent.id = %agent_id, "removing the sandbox of a deleted agent (retried at the next start)");
            continue;
        }
        match store::agents::delete(pool, agent_id).await {
            Ok(_) => {
                tracing::info!(agent.id = %agent_id, "finished deleting an agent");
                finished += 1;
            }
            Err(error) => tracing::warn!(%error, agent.id = %agent_id, "deleting the rows of a deleted agent"),
        }
    }
    finished
}
