//! What schedules and webhooks share in the database: both are paused together when the user
//! who made them leaves the agent's workspace or loses the operator role there (seed: a trigger
//! acts with its maker's standing).

use sqlx::PgPool;
use uuid::Uuid;

/// Pauses the schedules and webhooks `user` made for the agents of `workspace_id` (they left it,
/// or lost the operator role there); the ids of each that was running.
pub async fn pause_made_by(pool: &PgPool, user: Uuid, workspace_id: Uuid) -> sqlx::Result<(Vec<Uuid>, Vec<Uuid>)> {
    let mut tx = pool.begin().await?;
    let schedules = sqlx::query_scalar!(
        r#"UPDATE schedules SET paused = true, paused_reason = 'creator_left'
           WHERE created_by = $1 AND NOT paused AND agent_id IN (SELECT id FROM agents WHERE workspace_id = $2)
           RETURNING id"#,
        user,
        workspace_id
    )
    .fetch_all(&mut *tx)
    .await?;
    let webhooks = sqlx::query_scalar!(
        r#"UPDATE webhooks SET paused = true, paused_reason = 'creator_left'
           WHERE created_by = $1 AND NOT paused AND agent_id IN (SELECT id FROM agents WHERE workspace_id = $2)
           RETURNING id"#,
        user,
        workspace_id
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok((schedules, webhooks))
}
