//! The `provider_logins` table (a user's Claude Code and Codex sign-ins, sealed like secrets) and
//! `agents.login_user_id` (whose logins an agent uses).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::secrets::cipher::Sealed;

/// A login as listed (never its value).
#[derive(Debug, Clone)]
pub struct LoginRow {
    /// Its id.
    pub id: Uuid,
    /// Whose.
    pub user_id: Uuid,
    /// Its kind (`claude_subscription`, …).
    pub kind: String,
    /// `anthropic` or `openai`.
    pub provider: String,
    /// `ok` or `connect_again`.
    pub state: String,
    /// What per-agent placeholders are derived from.
    pub placeholder_seed: String,
    /// When it was connected (or last replaced).
    pub connected_at: DateTime<Utc>,
    /// When the server last refreshed it.
    pub refreshed_at: Option<DateTime<Utc>>,
}

/// A login with its sealed value.
#[derive(Debug, Clone)]
pub struct SealedLogin {
    /// The login.
    pub row: LoginRow,
    /// Its value, sealed.
    pub sealed: Sealed,
}

/// The user's login of `kind`, if connected.
pub async fn get_by_kind(pool: &PgPool, user_id: Uuid, kind: &str) -> sqlx::Result<Option<LoginRow>> {
    sqlx::query_as!(
        LoginRow,
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at
           FROM provider_logins WHERE user_id = $1 AND kind = $2"#,
        user_id,
        kind
    )
    .fetch_optional(pool)
    .await
}

/// Stores a login, replacing the user's login of the same kind (same id, new value, state `ok`).
pub async fn upsert(
    pool: &PgPool,
    id: Uuid,
    user_id: Uuid,
    kind: &str,
    provider: &str,
    sealed: &Sealed,
    placeholder_seed: &str,
) -> sqlx::Result<LoginRow> {
    sqlx::query_as!(
        LoginRow,
        r#"INSERT INTO provider_logins (id, user_id, kind, provider, key_id, nonce, ciphertext, placeholder_seed)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (user_id, kind) DO UPDATE
               SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
                   state = 'ok', connected_at = now(), refreshed_at = NULL
           RETURNING id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at"#,
        id,
        user_id,
        kind,
        provider,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext,
        placeholder_seed
    )
    .fetch_one(pool)
    .await
}

/// The user's logins, in kind order.
pub async fn list_for_user(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<LoginRow>> {
    sqlx::query_as!(
        LoginRow,
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at
           FROM provider_logins WHERE user_id = $1 ORDER BY kind"#,
        user_id
    )
    .fetch_all(pool)
    .await
}

/// The user's logins with their sealed values.
pub async fn sealed_for_user(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<SealedLogin>> {
    let rows = sqlx::query!(
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at,
                  key_id, nonce, ciphertext
           FROM provider_logins WHERE user_id = $1 ORDER BY kind"#,
        user_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SealedLogin {
            row: LoginRow {
                id: r.id,
                user_id: r.user_id,
                kind: r.kind,
                provider: r.provider,
                state: r.state,
                placeholder_seed: r.placeholder_seed,
                connected_at: r.connected_at,
                refreshed_at: r.refreshed_at,
            },
            sealed: Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext },
        })
        .collect())
}

/// Removes one of the user's logins; false if they have no such login.
pub async fn delete(pool: &PgPool, user_id: Uuid, id: Uuid) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(r#"DELETE FROM provider_logins WHERE id = $1 AND user_id = $2 RETURNING kind"#, id, user_id)
        .fetch_optional(pool)
        .await
}

/// Every login's sealed value, locked for a key rotation: (id, user, sealed).
pub async fn lock_all_sealed(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
) -> sqlx::Result<Vec<(Uuid, Uuid, Sealed)>> {
    let rows =
        sqlx::query!(r#"SELECT id, user_id, key_id, nonce, ciphertext FROM provider_logins ORDER BY id FOR UPDATE"#)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.user_id, Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext }))
        .collect())
}

/// Replaces a login's sealed value (same plaintext, another key).
pub async fn reseal(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>, id: Uuid, sealed: &Sealed) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE provider_logins SET key_id = $2, nonce = $3, ciphertext = $4 WHERE id = $1"#,
        id,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// An agent using someone's logins.
#[derive(Debug, Clone)]
pub struct Using {
    /// The agent.
    pub agent_id: Uuid,
    /// Its name.
    pub agent_name: String,
    /// Its harness.
    pub harness: String,
    /// Its workspace.
    pub workspace_id: Uuid,
}

/// The agents that use the user's logins (not being deleted), by name.
pub async fn agents_using(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<Using>> {
    sqlx::query_as!(
        Using,
        r#"SELECT id AS agent_id, name AS agent_name, harness, workspace_id AS "workspace_id!"
           FROM agents WHERE login_user_id = $1 AND deleting_at IS NULL ORDER BY name, id"#,
        user_id
    )
    .fetch_all(pool)
    .await
}

/// Makes the agent use `user_id`'s logins (`None`: nobody's); false if there is no such agent.
pub async fn set_login_user(pool: &PgPool, agent_id: AgentId, user_id: Option<Uuid>) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"UPDATE agents SET login_user_id = $2 WHERE id = $1 AND deleting_at IS NULL"#,
        agent_id.0,
        user_id
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// The user whose logins the agent uses, if any.
pub async fn login_user_of(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Option<Uuid>> {
    let user = sqlx::query_scalar!(r#"SELECT login_user_id FROM agents WHERE id = $1"#, agent_id.0)
        .fetch_optional(pool)
        .await?;
    Ok(user.flatten())
}

/// Detaches the user's logins from the workspace's agents (they left it); the agents affected.
pub async fn detach_in_workspace(pool: &PgPool, workspace_id: Uuid, user_id: Uuid) -> sqlx::Result<Vec<AgentId>> {
    let ids = sqlx::query_scalar!(
        r#"UPDATE agents SET login_user_id = NULL WHERE workspace_id = $1 AND login_user_id = $2 RETURNING id"#,
        workspace_id,
        user_id
    )
    .fetch_all(pool)
    .await?;
    Ok(ids.into_iter().map(AgentId).collect())
}
