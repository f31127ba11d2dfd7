//! What the egress proxy knows about each agent: the `proxy_identities` table (a random proxy
//! username and its password, sealed under the master key) and the `agent_egress` table (the
//! agent's allow-list and presets), plus the one query the proxy feed reads everything with.
//! Triggers (migration 0006) announce every change that alters the proxy's configuration on the
//! Postgres channel [`CHANGED_CHANNEL`]. Plaintext passwords never reach this module.

use sqlx::PgPool;
use uuid::Uuid;

use super::sealed::Sealed;
use crate::ids::AgentId;

/// The `NOTIFY` channel told the id of every agent created, marked for deletion or deleted, and
/// of every agent whose allow-list or proxy identity changed.
pub const CHANGED_CHANNEL: &str = "agenthold_proxy_config";

/// An agent's proxy identity as stored.
#[derive(Debug, Clone)]
pub struct SealedIdentity {
    /// The proxy username.
    pub username: String,
    /// The password, sealed.
    pub sealed: Sealed,
}

/// An agent's egress allow-list as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRow {
    /// `host[:port]`, `*.domain[:port]` entries.
    pub allow: Vec<String>,
    /// Preset names (`package_registries`).
    pub presets: Vec<String>,
}

/// One agent as the proxy feed sees it.
#[derive(Debug, Clone)]
pub struct FeedAgent {
    /// The agent.
    pub agent_id: AgentId,
    /// Its harness adapter's name.
    pub harness: String,
    /// Its workspace.
    pub workspace_id: uuid::Uuid,
    /// Whose provider logins it uses.
    pub login_user_id: Option<uuid::Uuid>,
    /// Its identity, if one was made.
    pub identity: Option<SealedIdentity>,
    /// Its allow-list (empty when none was set).
    pub egress: EgressRow,
    /// The address its sandbox's traffic comes from, when recorded (and parseable).
    pub source_addr: Option<std::net::IpAddr>,
}

/// An agent's identity.
pub async fn get(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Option<SealedIdentity>> {
    let row = sqlx::query!(
        r#"SELECT username, key_id, nonce, ciphertext FROM proxy_identities WHERE agent_id = $1"#,
        agent_id.0
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| SealedIdentity {
        username: r.username,
        sealed: Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext },
    }))
}

/// Stores an identity unless the agent has one (or no longer exists). True if stored.
pub async fn insert_if_absent(pool: &PgPool, agent_id: AgentId, identity: &SealedIdentity) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO proxy_identities (agent_id, username, key_id, nonce, ciphertext)
           SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $1)
           ON CONFLICT (agent_id) DO NOTHING"#,
        agent_id.0,
        identity.username,
        identity.sealed.key_id,
        identity.sealed.nonce,
        identity.sealed.ciphertext,
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Replaces an identity whose password no longer opens (another master key), if it is still the
/// one `stale_username` names. True if replaced.
pub async fn replace(
    pool: &PgPool,
    agent_id: AgentId,
    stale_username: &str,
    identity: &SealedIdentity,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"UPDATE proxy_identities SET username = $3, key_id = $4, nonce = $5, ciphertext = $6, created_at = now()
           WHERE agent_id = $1 AND username = $2"#,
        agent_id.0,
        stale_username,
        identity.username,
        identity.sealed.key_id,
        identity.sealed.nonce,
        identity.sealed.ciphertext,
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The allow-lists of these agents (agents without one are absent).
pub async fn egress(pool: &PgPool, agent_ids: &[Uuid]) -> sqlx::Result<Vec<(Uuid, EgressRow)>> {
    let rows = sqlx::query!(r#"SELECT agent_id, allow, presets FROM agent_egress WHERE agent_id = ANY($1)"#, agent_ids)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|r| (r.agent_id, EgressRow { allow: r.allow, presets: r.presets })).collect())
}

/// Sets an agent's allow-list (not for an agent being deleted). False if there is no such agent.
pub async fn set_egress(pool: &PgPool, agent_id: AgentId, egress: &EgressRow) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO agent_egress (agent_id, allow, presets)
           SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleting_at IS NULL)
           ON CONFLICT (agent_id) DO UPDATE SET allow = EXCLUDED.allow, presets = EXCLUDED.presets,
                                                updated_at = now()"#,
        agent_id.0,
        &egress.allow,
        &egress.presets,
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Every agent not being deleted, with its identity and allow-list, oldest first.
pub async fn feed_agents(pool: &PgPool) -> sqlx::Result<Vec<FeedAgent>> {
    let rows = sqlx::query!(
        r#"SELECT a.id, a.harness, a.workspace_id AS "workspace_id!", a.login_user_id,
                  i.username AS "username?", i.key_id AS "key_id?", i.nonce AS "nonce?",
                  i.ciphertext AS "ciphertext?",
                  e.allow AS "allow?", e.presets AS "presets?",
                  s.source_addr AS "source_addr?"
           FROM agents a
           LEFT JOIN proxy_identities i ON i.agent_id = a.id
           LEFT JOIN agent_egress e ON e.agent_id = a.id
           LEFT JOIN sandboxes s ON s.agent_id = a.id
           WHERE a.deleting_at IS NULL
           ORDER BY a.created_at, a.id"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let identity = match (r.username, r.key_id, r.nonce, r.ciphertext) {
                (Some(username), Some(key_id), Some(nonce), Some(ciphertext)) => {
                    Some(SealedIdentity { username, sealed: Sealed { key_id, nonce, ciphertext } })
                }
                _ => None,
            };
            FeedAgent {
                agent_id: AgentId(r.id),
                harness: r.harness,
                workspace_id: r.workspace_id,
                login_user_id: r.login_user_id,
                identity,
                egress: EgressRow { allow: r.allow.unwrap_or_default(), presets: r.presets.unwrap_or_default() },
                source_addr: r.source_addr.and_then(|a| a.parse().ok()),
            }
        })
        .collect())
}
