//! What the egress proxy knows about each agent: the `proxy_identities` table (a random proxy
//! username and its password, sealed under the master key), the `agent_egress` table (the
//! agent's own allow-list and presets) and the `workspace_egress` table (the workspace's
//! default, which an agent without a list of its own follows), plus the one query the proxy
//! feed reads everything with. Triggers (migrations 0006, 0033) announce every change that
//! alters the proxy's configuration on the Postgres channel [`CHANGED_CHANNEL`]. Plaintext
//! passwords never reach this module.

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
    /// Preset names (`npm`, `package_registries`, …).
    pub presets: Vec<String>,
}

/// An agent's egress in force: its own list, or its workspace's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentEgress {
    /// What it may reach.
    pub row: EgressRow,
    /// True when it follows its workspace's default (it has no list of its own).
    pub inherited: bool,
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
    /// Whether that user is still a member of the agent's workspace (their logins reach it only
    /// then).
    pub login_user_member: bool,
    /// Its identity, if one was made.
    pub identity: Option<SealedIdentity>,
    /// Its allow-list in force: its own, else its workspace's default (empty when neither was
    /// set).
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

/// Stores `identity` as the agent's, whatever it had: for an agent that claims a harness the warm
/// pool started with this identity (its own, made by the feed a moment before, was never used).
pub async fn put(tx: &mut sqlx::PgConnection, agent_id: AgentId, identity: &SealedIdentity) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO proxy_identities (agent_id, username, key_id, nonce, ciphertext)
           SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $1)
           ON CONFLICT (agent_id) DO UPDATE
           SET username = EXCLUDED.username, key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
               ciphertext = EXCLUDED.ciphertext"#,
        agent_id.0,
        identity.username,
        identity.sealed.key_id,
        identity.sealed.nonce,
        identity.sealed.ciphertext,
    )
    .execute(&mut *tx)
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

/// The egress in force for these agents (agents that do not exist are absent).
pub async fn egress(pool: &PgPool, agent_ids: &[Uuid]) -> sqlx::Result<Vec<(Uuid, AgentEgress)>> {
    let rows = sqlx::query!(
        r#"SELECT a.id, e.allow AS "allow?", e.presets AS "presets?",
                  w.allow AS "default_allow?", w.presets AS "default_presets?"
           FROM agents a
           LEFT JOIN agent_egress e ON e.agent_id = a.id
           LEFT JOIN workspace_egress w ON w.workspace_id = a.workspace_id
           WHERE a.id = ANY($1)"#,
        agent_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let egress = match (r.allow, r.presets) {
                (Some(allow), Some(presets)) => AgentEgress { row: EgressRow { allow, presets }, inherited: false },
                _ => AgentEgress {
                    row: EgressRow {
                        allow: r.default_allow.unwrap_or_default(),
                        presets: r.default_presets.unwrap_or_default(),
                    },
                    inherited: true,
                },
            };
            (r.id, egress)
        })
        .collect())
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

/// Removes an agent's own list: it follows its workspace's default again.
pub async fn clear_egress(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<()> {
    sqlx::query!(r#"DELETE FROM agent_egress WHERE agent_id = $1"#, agent_id.0).execute(pool).await?;
    Ok(())
}

/// Returns an agent to its workspace's default if `allowed(own list, default)` agrees; both rows
/// are locked meanwhile, so neither changes between the check and the removal. `Ok(Err(why))`
/// when refused; an agent that already follows the default is left as it is.
pub async fn clear_egress_if(
    pool: &PgPool,
    agent_id: AgentId,
    allowed: impl FnOnce(&EgressRow, &EgressRow) -> Result<(), String>,
) -> sqlx::Result<Result<(), String>> {
    let mut tx = pool.begin().await?;
    let own = sqlx::query!(r#"SELECT allow, presets FROM agent_egress WHERE agent_id = $1 FOR UPDATE"#, agent_id.0)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(own) = own else { return Ok(Ok(())) };
    let default = sqlx::query!(
        r#"SELECT w.allow, w.presets FROM agents a JOIN workspace_egress w ON w.workspace_id = a.workspace_id
           WHERE a.id = $1 FOR SHARE OF w"#,
        agent_id.0
    )
    .fetch_optional(&mut *tx)
    .await?
    .map(|r| EgressRow { allow: r.allow, presets: r.presets })
    .unwrap_or_default();
    if let Err(why) = allowed(&EgressRow { allow: own.allow, presets: own.presets }, &default) {
        return Ok(Err(why));
    }
    sqlx::query!(r#"DELETE FROM agent_egress WHERE agent_id = $1"#, agent_id.0).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Ok(()))
}

/// A workspace's egress default (empty when none was set).
pub async fn workspace_default(pool: &PgPool, workspace_id: Uuid) -> sqlx::Result<EgressRow> {
    let row = sqlx::query!(r#"SELECT allow, presets FROM workspace_egress WHERE workspace_id = $1"#, workspace_id)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| EgressRow { allow: r.allow, presets: r.presets }).unwrap_or_default())
}

/// Sets a workspace's egress default. False if there is no such workspace.
pub async fn set_workspace_default(
    pool: &PgPool,
    workspace_id: Uuid,
    by: Uuid,
    egress: &EgressRow,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO workspace_egress (workspace_id, allow, presets, updated_by)
           SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM workspaces WHERE id = $1)
           ON CONFLICT (workspace_id) DO UPDATE SET allow = EXCLUDED.allow, presets = EXCLUDED.presets,
                                                    updated_by = EXCLUDED.updated_by, updated_at = now()"#,
        workspace_id,
        &egress.allow,
        &egress.presets,
        by,
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Every agent not being deleted, with its identity and allow-list, oldest first.
pub async fn feed_agents(db: impl sqlx::PgExecutor<'_>) -> sqlx::Result<Vec<FeedAgent>> {
    let rows = sqlx::query!(
        r#"SELECT a.id, a.harness, a.workspace_id AS "workspace_id!", a.login_user_id,
                  EXISTS (SELECT 1 FROM memberships m
                          WHERE m.user_id = a.login_user_id AND m.workspace_id = a.workspace_id)
                      AS "login_user_member!",
                  i.username AS "username?", i.key_id AS "key_id?", i.nonce AS "nonce?",
                  i.ciphertext AS "ciphertext?",
                  coalesce(e.allow, w.allow) AS "allow?", coalesce(e.presets, w.presets) AS "presets?",
                  s.source_addr AS "source_addr?"
           FROM agents a
           LEFT JOIN proxy_identities i ON i.agent_id = a.id
           LEFT JOIN agent_egress e ON e.agent_id = a.id
           LEFT JOIN workspace_egress w ON w.workspace_id = a.workspace_id
           LEFT JOIN sandboxes s ON s.agent_id = a.id
           WHERE a.deleting_at IS NULL
           ORDER BY a.created_at, a.id"#
    )
    .fetch_all(db)
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
                login_user_member: r.login_user_member,
                identity,
                egress: EgressRow { allow: r.allow.unwrap_or_default(), presets: r.presets.unwrap_or_default() },
                source_addr: r.source_addr.and_then(|a| a.parse().ok()),
            }
        })
        .collect())
}
