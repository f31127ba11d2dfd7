//! The `secrets` and `agent_secrets` tables: encrypted secret values with their injection
//! rules, per workspace, and the secrets attached to agents under environment variables (with
//! the placeholder the sandbox sees). Every change to what an agent has attached is announced on
//! the Postgres channel [`CHANGED_CHANNEL`] (payload: the agent's id), so whoever feeds the proxy
//! can reload at once. Plaintext values never reach this module.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::sealed::Sealed;
use crate::ids::AgentId;

/// The marker of the value in a format.
pub const SECRET: &str = "{secret}";

/// Where the proxy injects a secret: only into `header` (exactly once, whose whole value is the
/// placeholder in `format`) of HTTPS requests to `host:port` whose path starts with
/// `path_prefix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InjectionRule {
    /// The destination host (lower case, no trailing dot).
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// The path prefix (starts with `/`).
    pub path_prefix: String,
    /// The header (lower case).
    pub header: String,
    /// The header's value, `{secret}` standing for the value (`{secret}`, `Bearer {secret}`).
    pub format: String,
}

impl InjectionRule {
    /// The header value the sandbox sends for `placeholder` (what the proxy replaces).
    pub fn render(&self, value: &str) -> String {
        self.format.replacen(SECRET, value, 1)
    }
}

/// The `NOTIFY` channel told the id of every agent whose attached secrets changed.
pub const CHANGED_CHANNEL: &str = "agenthold_agent_secrets";

/// A secret to store.
#[derive(Debug, Clone)]
pub struct NewSecret {
    /// Its id (bound into the ciphertext).
    pub id: Uuid,
    /// Its workspace (bound into the ciphertext).
    pub workspace_id: Uuid,
    /// Its name, unique in the workspace.
    pub name: String,
    /// Its preset's name.
    pub preset: String,
    /// Where it may be injected.
    pub rule: InjectionRule,
    /// The value, sealed.
    pub sealed: Sealed,
    /// Who created it.
    pub created_by: Uuid,
}

/// A secret as listed (no value).
#[derive(Debug, Clone)]
pub struct SecretRow {
    /// Its id.
    pub id: Uuid,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its preset's name.
    pub preset: String,
    /// Where it may be injected.
    pub rule: InjectionRule,
    /// Who created it.
    pub created_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A secret in use: which agent has it under which variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// The secret.
    pub secret_id: Uuid,
    /// The agent.
    pub agent_id: Uuid,
    /// The agent's name.
    pub agent_name: String,
    /// The variable.
    pub env_name: String,
}

/// An agent's attached secret, as the agent's view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The agent.
    pub agent_id: Uuid,
    /// The variable.
    pub env_name: String,
    /// The secret.
    pub secret_id: Uuid,
    /// Its name.
    pub secret_name: String,
    /// Its preset.
    pub preset: String,
}

/// An attached secret with everything the proxy needs, still sealed.
#[derive(Debug, Clone)]
pub struct SealedAttachment {
    /// The variable.
    pub env_name: String,
    /// What the sandbox sees.
    pub placeholder: String,
    /// The secret.
    pub secret_id: Uuid,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// Where it may be injected.
    pub rule: InjectionRule,
    /// The value, sealed.
    pub sealed: Sealed,
}

/// Most secrets a workspace may hold.
pub const MAX_PER_WORKSPACE: i64 = 256;
/// Most secrets one agent may have attached.
pub const MAX_PER_AGENT: i64 = 32;

/// Storing a secret failed.
#[derive(Debug, thiserror::Error)]
pub enum InsertError {
    /// The workspace has a secret of this name.
    #[error("a secret with this name exists")]
    NameTaken,
    /// The workspace holds [`MAX_PER_WORKSPACE`] secrets.
    #[error("the workspace holds the most secrets it may")]
    TooMany,
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn rule(host: String, port: i32, path_prefix: String, header: String, format: String) -> InjectionRule {
    InjectionRule { host, port: u16::try_from(port).unwrap_or(0), path_prefix, header, format }
}

/// Stores a secret.
pub async fn insert(pool: &PgPool, secret: &NewSecret) -> Result<(), InsertError> {
    let inserted = sqlx::query!(
        r#"INSERT INTO secrets (id, workspace_id, name, preset, host, port, path_prefix, header, format,
                               key_id, nonce, ciphertext, created_by)
           SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
           WHERE (SELECT count(*) FROM secrets WHERE workspace_id = $2) < $14
           ON CONFLICT (workspace_id, name) DO NOTHING"#,
        secret.id,
        secret.workspace_id,
        secret.name,
        secret.preset,
        secret.rule.host,
        i32::from(secret.rule.port),
        secret.rule.path_prefix,
        secret.rule.header,
        secret.rule.format,
        secret.sealed.key_id,
        secret.sealed.nonce,
        secret.sealed.ciphertext,
        secret.created_by,
        MAX_PER_WORKSPACE,
    )
    .execute(pool)
    .await?;
    if inserted.rows_affected() > 0 {
        return Ok(());
    }
    let taken = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM secrets WHERE workspace_id = $1 AND name = $2) AS "taken!""#,
        secret.workspace_id,
        secret.name
    )
    .fetch_one(pool)
    .await?;
    Err(if taken { InsertError::NameTaken } else { InsertError::TooMany })
}

/// A workspace's secrets, by name.
pub async fn list(pool: &PgPool, workspace_id: Uuid) -> sqlx::Result<Vec<SecretRow>> {
    let rows = sqlx::query!(
        r#"SELECT id, workspace_id, name, preset, host, port, path_prefix, header, format, created_by, created_at
           FROM secrets WHERE workspace_id = $1 ORDER BY name"#,
        workspace_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SecretRow {
            id: r.id,
            workspace_id: r.workspace_id,
            name: r.name,
            preset: r.preset,
            rule: rule(r.host, r.port, r.path_prefix, r.header, r.format),
            created_by: r.created_by,
            created_at: r.created_at,
        })
        .collect())
}

/// One secret of a workspace.
pub async fn get(pool: &PgPool, workspace_id: Uuid, id: Uuid) -> sqlx::Result<Option<SecretRow>> {
    let row = sqlx::query!(
        r#"SELECT id, workspace_id, name, preset, host, port, path_prefix, header, format, created_by, created_at
           FROM secrets WHERE workspace_id = $1 AND id = $2"#,
        workspace_id,
        id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| SecretRow {
        id: r.id,
        workspace_id: r.workspace_id,
        name: r.name,
        preset: r.preset,
        rule: rule(r.host, r.port, r.path_prefix, r.header, r.format),
        created_by: r.created_by,
        created_at: r.created_at,
    }))
}

/// Which agents use the workspace's secrets.
pub async fn uses(pool: &PgPool, workspace_id: Uuid) -> sqlx::Result<Vec<Use>> {
    sqlx::query_as!(
        Use,
        r#"SELECT x.secret_id, x.agent_id, a.name AS agent_name, x.env_name
           FROM agent_secrets x JOIN secrets s ON s.id = x.secret_id JOIN agents a ON a.id = x.agent_id
           WHERE s.workspace_id = $1 AND a.deleting_at IS NULL
           ORDER BY a.name, x.env_name"#,
        workspace_id
    )
    .fetch_all(pool)
    .await
}

async fn notify(tx: &mut Transaction<'_, Postgres>, agent_id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(r#"SELECT pg_notify($1, $2)"#, CHANGED_CHANNEL, agent_id.to_string()).execute(&mut **tx).await?;
    Ok(())
}

/// Deletes a secret and detaches it from every agent. `None` if the workspace has no such
/// secret; else the (agent, variable) pairs it was attached to.
pub async fn delete(pool: &PgPool, workspace_id: Uuid, id: Uuid) -> sqlx::Result<Option<Vec<(Uuid, String)>>> {
    let mut tx = pool.begin().await?;
    let found = sqlx::query_scalar!(
        r#"SELECT id FROM secrets WHERE id = $1 AND workspace_id = $2 FOR UPDATE"#,
        id,
        workspace_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    if found.is_none() {
        return Ok(None);
    }
    let detached = sqlx::query!(r#"DELETE FROM agent_secrets WHERE secret_id = $1 RETURNING agent_id, env_name"#, id)
        .fetch_all(&mut *tx)
        .await?;
    sqlx::query!(r#"DELETE FROM secrets WHERE id = $1"#, id).execute(&mut *tx).await?;
    let detached: Vec<(Uuid, String)> = detached.into_iter().map(|r| (r.agent_id, r.env_name)).collect();
    for agent_id in detached.iter().map(|(agent, _)| *agent).collect::<std::collections::BTreeSet<_>>() {
        notify(&mut tx, agent_id).await?;
    }
    tx.commit().await?;
    Ok(Some(detached))
}

/// What attaching did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attached {
    /// The agent has [`MAX_PER_AGENT`] secrets attached: nothing changed.
    TooMany,
    /// The variable already held this secret: nothing changed.
    Unchanged,
    /// The variable now holds the secret (`replaced`: the secret it held before).
    Changed {
        /// The secret the variable held before, if any.
        replaced: Option<Uuid>,
    },
}

/// Attaches a secret to an agent under a variable (replacing what the variable held). The
/// placeholder is the one the agent already has for this secret under another variable, else
/// `new_placeholder`.
pub async fn attach(
    pool: &PgPool,
    agent_id: AgentId,
    env_name: &str,
    secret_id: Uuid,
    new_placeholder: &str,
    by: Uuid,
) -> sqlx::Result<Attached> {
    let mut tx = pool.begin().await?;
    // Serialises attachments per agent (placeholder reuse reads, then writes).
    sqlx::query!(r#"SELECT id FROM agents WHERE id = $1 FOR UPDATE"#, agent_id.0).fetch_optional(&mut *tx).await?;
    let before = sqlx::query_scalar!(
        r#"SELECT secret_id FROM agent_secrets WHERE agent_id = $1 AND env_name = $2"#,
        agent_id.0,
        env_name
    )
    .fetch_optional(&mut *tx)
    .await?;
    if before == Some(secret_id) {
        return Ok(Attached::Unchanged);
    }
    let attached = sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM agent_secrets WHERE agent_id = $1 AND env_name <> $2"#,
        agent_id.0,
        env_name
    )
    .fetch_one(&mut *tx)
    .await?;
    if attached >= MAX_PER_AGENT {
        return Ok(Attached::TooMany);
    }
    let placeholder = sqlx::query_scalar!(
        r#"SELECT placeholder FROM agent_secrets WHERE agent_id = $1 AND secret_id = $2 LIMIT 1"#,
        agent_id.0,
        secret_id
    )
    .fetch_optional(&mut *tx)
    .await?
    .unwrap_or_else(|| new_placeholder.to_owned());
    sqlx::query!(
        r#"INSERT INTO agent_secrets (agent_id, env_name, secret_id, placeholder, created_by)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (agent_id, env_name) DO UPDATE
           SET secret_id = EXCLUDED.secret_id, placeholder = EXCLUDED.placeholder,
               created_by = EXCLUDED.created_by, created_at = now()"#,
        agent_id.0,
        env_name,
        secret_id,
        placeholder,
        by
    )
    .execute(&mut *tx)
    .await?;
    notify(&mut tx, agent_id.0).await?;
    tx.commit().await?;
    Ok(Attached::Changed { replaced: before })
}

/// Detaches whatever the variable holds. The secret it held, `None` if it held none.
pub async fn detach(pool: &PgPool, agent_id: AgentId, env_name: &str) -> sqlx::Result<Option<Uuid>> {
    let mut tx = pool.begin().await?;
    let removed = sqlx::query_scalar!(
        r#"DELETE FROM agent_secrets WHERE agent_id = $1 AND env_name = $2 RETURNING secret_id"#,
        agent_id.0,
        env_name
    )
    .fetch_optional(&mut *tx)
    .await?;
    if removed.is_some() {
        notify(&mut tx, agent_id.0).await?;
    }
    tx.commit().await?;
    Ok(removed)
}

/// The secrets attached to these agents, by agent and variable.
pub async fn attachments(pool: &PgPool, agent_ids: &[Uuid]) -> sqlx::Result<Vec<Attachment>> {
    sqlx::query_as!(
        Attachment,
        r#"SELECT x.agent_id, x.env_name, x.secret_id, s.name AS secret_name, s.preset
           FROM agent_secrets x JOIN secrets s ON s.id = x.secret_id
           WHERE x.agent_id = ANY($1)
           ORDER BY x.agent_id, x.env_name"#,
        agent_ids
    )
    .fetch_all(pool)
    .await
}

/// An agent's attached secrets, sealed, by variable. Only secrets of the agent's own workspace,
/// and nothing for an agent being deleted.
pub async fn sealed_for_agent(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<SealedAttachment>> {
    Ok(sealed_for_agents(pool, &[agent_id.0]).await?.into_iter().map(|(_, sealed)| sealed).collect())
}

/// [`sealed_for_agent`] for many agents in one statement: (agent, attachment), by agent and
/// variable.
pub async fn sealed_for_agents(
    db: impl sqlx::PgExecutor<'_>,
    agent_ids: &[Uuid],
) -> sqlx::Result<Vec<(AgentId, SealedAttachment)>> {
    let rows = sqlx::query!(
        r#"SELECT x.agent_id, x.env_name, x.placeholder, s.id, s.workspace_id, s.host, s.port, s.path_prefix,
                  s.header, s.format, s.key_id, s.nonce, s.ciphertext
           FROM agent_secrets x
           JOIN secrets s ON s.id = x.secret_id
           JOIN agents a ON a.id = x.agent_id AND a.workspace_id = s.workspace_id
           WHERE x.agent_id = ANY($1) AND a.deleting_at IS NULL
           ORDER BY x.agent_id, x.env_name"#,
        agent_ids
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let sealed = SealedAttachment {
                env_name: r.env_name,
                placeholder: r.placeholder,
                secret_id: r.id,
                workspace_id: r.workspace_id,
                rule: rule(r.host, r.port, r.path_prefix, r.header, r.format),
                sealed: Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext },
            };
            (AgentId(r.agent_id), sealed)
        })
        .collect())
}

/// An agent's placeholder environment: (variable, placeholder), by variable.
pub async fn placeholders(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<(String, String)>> {
    let rows = sqlx::query!(
        r#"SELECT x.env_name, x.placeholder
           FROM agent_secrets x
           JOIN secrets s ON s.id = x.secret_id
           JOIN agents a ON a.id = x.agent_id AND a.workspace_id = s.workspace_id
           WHERE x.agent_id = $1 AND a.deleting_at IS NULL
           ORDER BY x.env_name"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.env_name, r.placeholder)).collect())
}

/// How many secrets are sealed under a key other than `key_id` (they will not open).
pub async fn count_under_other_keys(pool: &PgPool, key_id: &str) -> sqlx::Result<i64> {
    let count = sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM secrets WHERE key_id <> $1"#, key_id)
        .fetch_one(pool)
        .await?;
    Ok(count)
}

/// A sealed value with the row it belongs to, for rotation.
#[derive(Debug, Clone)]
pub struct SealedRow {
    /// The secret.
    pub id: Uuid,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// The value, sealed.
    pub sealed: Sealed,
}

/// Every secret's sealed value, locked for update until the transaction ends.
pub async fn lock_all_sealed(tx: &mut Transaction<'_, Postgres>) -> sqlx::Result<Vec<SealedRow>> {
    let rows =
        sqlx::query!(r#"SELECT id, workspace_id, key_id, nonce, ciphertext FROM secrets ORDER BY id FOR UPDATE"#)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows
        .into_iter()
        .map(|r| SealedRow {
            id: r.id,
            workspace_id: r.workspace_id,
            sealed: Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext },
        })
        .collect())
}

/// Replaces a secret's sealed value (same plaintext, another key).
pub async fn reseal(tx: &mut Transaction<'_, Postgres>, id: Uuid, sealed: &Sealed) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE secrets SET key_id = $2, nonce = $3, ciphertext = $4 WHERE id = $1"#,
        id,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}
