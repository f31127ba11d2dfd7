//! The `pooled_sandboxes` table: sandboxes of the warm pool, waiting for an agent.

use std::net::IpAddr;

use sqlx::PgPool;

use super::proxy_identities::SealedIdentity;
use super::sealed::Sealed;
use crate::ids::AgentId;

/// Records a pooled sandbox of replica `replica_id` before its container is made, with the proxy
/// identity its harness is started with (sealed for its id), if it has one.
pub async fn insert(
    pool: &PgPool,
    agent_id: AgentId,
    token_hash: &[u8],
    image: &str,
    replica_id: uuid::Uuid,
    identity: Option<&SealedIdentity>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO pooled_sandboxes
               (agent_id, token_hash, image, replica_id, proxy_username, proxy_key_id, proxy_nonce, proxy_ciphertext)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"#,
        agent_id.0,
        token_hash,
        image,
        replica_id,
        identity.map(|i| i.username.as_str()),
        identity.map(|i| i.sealed.key_id.as_str()),
        identity.map(|i| i.sealed.nonce.as_slice()),
        identity.map(|i| i.sealed.ciphertext.as_slice()),
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Records the address a pooled sandbox's traffic comes from (the proxy admits its identity from
/// there only). False when it is not pooled (any more).
pub async fn set_source_addr(pool: &PgPool, agent_id: AgentId, addr: IpAddr) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"UPDATE pooled_sandboxes SET source_addr = $2 WHERE agent_id = $1"#,
        agent_id.0,
        addr.to_string()
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A pooled sandbox the proxy knows before any agent claims it.
#[derive(Debug, Clone)]
pub struct FeedPooled {
    /// The id its agent will get.
    pub agent_id: AgentId,
    /// Its harness's proxy identity.
    pub identity: SealedIdentity,
    /// Its address.
    pub source_addr: IpAddr,
}

/// The pooled sandboxes with a proxy identity and an address, and no agent of their id yet
/// (once one is created, the agent's own entry stands for the sandbox).
pub async fn feed_pooled(db: impl sqlx::PgExecutor<'_>) -> sqlx::Result<Vec<FeedPooled>> {
    let rows = sqlx::query!(
        r#"SELECT p.agent_id, p.proxy_username AS "username!", p.proxy_key_id AS "key_id!",
                  p.proxy_nonce AS "nonce!", p.proxy_ciphertext AS "ciphertext!", p.source_addr AS "source_addr!"
           FROM pooled_sandboxes p
           WHERE p.proxy_username IS NOT NULL AND p.source_addr IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = p.agent_id)
           ORDER BY p.created_at, p.agent_id"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(FeedPooled {
                agent_id: AgentId(r.agent_id),
                identity: SealedIdentity {
                    username: r.username,
                    sealed: Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext },
                },
                source_addr: r.source_addr.parse().ok()?,
            })
        })
        .collect())
}

/// Whether `agent_id` is a pooled sandbox's (no agent has claimed it yet).
pub async fn is_pooled(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pooled_sandboxes WHERE agent_id = $1) AS "found!""#,
        agent_id.0
    )
    .fetch_one(pool)
    .await?;
    Ok(found)
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
