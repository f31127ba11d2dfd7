//! The `pooled_sandboxes` table: sandboxes of the warm pool, waiting for an agent.

use sqlx::PgPool;

use crate::ids::AgentId;

/// Records a pooled sandbox of replica `replica_id` before its container is made.
pub async fn insert(
    pool: &PgPool,
    agent_id: AgentId,
    token_hash: &[u8],
    image: &str,
    replica_id: uuid::Uuid,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO pooled_sandboxes (agent_id, token_hash, image, replica_id) VALUES ($1, $2, $3, $4)"#,
        agent_id.0,
        token_hash,
        image,
        replica_id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The pooled sandbox whose token has this hash.
pub async fn agent_for_token(pool: &PgPool, token_hash: &[u8]) -> sqlx::Result<Option<AgentId>> {
    let id = sqlx::query_scalar!(r#"SELECT agent_id FROM pooled_sandboxes WHERE token_hash = $1"#, token_hash)
        .fetch_optional(pool)
        .await?;
    Ok(id.map(AgentId))
}

/// Every pooled sandbox recorded (this process's and those an earlier one left).
pub async fn all(pool: &PgPool) -> sqlx::Result<Vec<AgentId>> {
    let ids = sqlx::query_scalar!(r#"SELECT agent_id FROM pooled_sandboxes"#).fetch_all(pool).await?;
    Ok(ids.into_iter().map(AgentId).collect())
}

/// The pooled sandboxes left by an earlier run of replica `me`, by a replica no longer alive, or
/// by a server before replicas were recorded; never those of another live replica.
pub async fn leftovers(pool: &PgPool, me: uuid::Uuid) -> sqlx::Result<Vec<AgentId>> {
    let ids = sqlx::query_scalar!(
        r#"SELECT p.agent_id FROM pooled_sandboxes p
           WHERE p.replica_id IS NULL OR p.replica_id = $1
              OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = p.replica_id AND r.expires_at > now())"#,
        me
    )
    .fetch_all(pool)
    .await?;
    Ok(ids.into_iter().map(AgentId).collect())
}

/// Forgets a pooled sandbox (removed, or never made).
pub async fn delete(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<()> {
    sqlx::query!(r#"DELETE FROM pooled_sandboxes WHERE agent_id = $1"#, agent_id.0).execute(pool).await?;
    Ok(())
}

/// Hands a pooled sandbox to the agent created with its id: its token and the driver's handle
/// move to the agent's `sandboxes` row, in one statement. False when it was not pooled (any
/// more).
pub async fn claim(db: impl sqlx::PgExecutor<'_>, agent_id: AgentId, handle: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"WITH taken AS (DELETE FROM pooled_sandboxes WHERE agent_id = $1 RETURNING token_hash)
           UPDATE sandboxes SET token_hash = taken.token_hash, handle = $2, updated_at = now()
           FROM taken WHERE sandboxes.agent_id = $1"#,
        agent_id.0,
        handle
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
