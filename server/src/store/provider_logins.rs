//! The `provider_logins` table (a user's Claude Code and Codex sign-ins, sealed like secrets) and
//! `agents.login_user_id` (whose logins an agent uses).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::sealed::Sealed;
use crate::ids::AgentId;

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
    /// When its access token expires (ChatGPT logins).
    pub expires_at: Option<DateTime<Utc>>,
    /// Why it needs connecting again.
    pub failure: Option<String>,
    /// What is kept in clear (ChatGPT logins: account id, identity claims).
    pub public: serde_json::Value,
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
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at,
                  expires_at, failure, public
           FROM provider_logins WHERE user_id = $1 AND kind = $2"#,
        user_id,
        kind
    )
    .fetch_optional(pool)
    .await
}

/// What connecting a login stores.
pub struct NewLogin<'a> {
    /// Its id (the existing one when replacing).
    pub id: Uuid,
    /// Whose.
    pub user_id: Uuid,
    /// Its kind.
    pub kind: &'a str,
    /// Its provider.
    pub provider: &'a str,
    /// Its value, sealed.
    pub sealed: &'a Sealed,
    /// A fresh placeholder seed.
    pub placeholder_seed: &'a str,
    /// When its access token expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// What is kept in clear.
    pub public: serde_json::Value,
}

/// Stores a login, replacing the user's login of the same kind (same id, new value, state `ok`).
pub async fn upsert(pool: &PgPool, login: NewLogin<'_>) -> sqlx::Result<LoginRow> {
    sqlx::query_as!(
        LoginRow,
        r#"INSERT INTO provider_logins (id, user_id, kind, provider, key_id, nonce, ciphertext, placeholder_seed,
                                       expires_at, public, refreshed_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, CASE WHEN $9::timestamptz IS NULL THEN NULL ELSE now() END)
           ON CONFLICT (user_id, kind) DO UPDATE
               SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
                   placeholder_seed = EXCLUDED.placeholder_seed, expires_at = EXCLUDED.expires_at,
                   public = EXCLUDED.public, state = 'ok', failure = NULL, connected_at = now(),
                   refreshed_at = EXCLUDED.refreshed_at
           RETURNING id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at,
                     expires_at, failure, public"#,
        login.id,
        login.user_id,
        login.kind,
        login.provider,
        login.sealed.key_id,
        login.sealed.nonce,
        login.sealed.ciphertext,
        login.placeholder_seed,
        login.expires_at,
        login.public
    )
    .fetch_one(pool)
    .await
}

/// A ChatGPT login due for refresh, locked for this transaction (another replica skips it):
/// (id, user, sealed). `None` when none is due (or the due ones are locked).
pub async fn lock_due_for_refresh(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    before: DateTime<Utc>,
    skip: &[Uuid],
) -> sqlx::Result<Option<(Uuid, Uuid, Sealed)>> {
    let row = sqlx::query!(
        r#"SELECT id, user_id, key_id, nonce, ciphertext FROM provider_logins
           WHERE kind = 'chatgpt_login' AND state = 'ok' AND (expires_at IS NULL OR expires_at < $1)
                 AND NOT (id = ANY($2))
           ORDER BY expires_at NULLS FIRST, id LIMIT 1 FOR UPDATE SKIP LOCKED"#,
        before,
        skip
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| (r.id, r.user_id, Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext })))
}

/// One ChatGPT login to refresh now, locked for this transaction: (user, sealed). `None` when it
/// is gone, not usable (`connect_again`) or being refreshed elsewhere (locked).
pub async fn lock_for_refresh(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: Uuid,
) -> sqlx::Result<Option<(Uuid, Sealed)>> {
    let row = sqlx::query!(
        r#"SELECT user_id, key_id, nonce, ciphertext FROM provider_logins
           WHERE id = $1 AND kind = 'chatgpt_login' AND state = 'ok' FOR UPDATE SKIP LOCKED"#,
        id
    )
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.map(|r| (r.user_id, Sealed { key_id: r.key_id, nonce: r.nonce, ciphertext: r.ciphertext })))
}

/// Stores a refreshed login's new tokens.
pub async fn store_refreshed(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: Uuid,
    sealed: &Sealed,
    expires_at: Option<DateTime<Utc>>,
    public: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE provider_logins SET key_id = $2, nonce = $3, ciphertext = $4, expires_at = $5, public = $6,
                  refreshed_at = now() WHERE id = $1"#,
        id,
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext,
        expires_at,
        public
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Marks a login "connect again" (the provider refused its refresh), with the reason.
pub async fn mark_connect_again(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: Uuid,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE provider_logins SET state = 'connect_again', failure = $2 WHERE id = $1"#, id, reason)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The user's logins, in kind order.
pub async fn list_for_user(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<LoginRow>> {
    sqlx::query_as!(
        LoginRow,
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at,
                  expires_at, failure, public
           FROM provider_logins WHERE user_id = $1 ORDER BY kind"#,
        user_id
    )
    .fetch_all(pool)
    .await
}

/// The user's logins with their sealed values.
pub async fn sealed_for_user(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<SealedLogin>> {
    sealed_for_users(pool, &[user_id]).await
}

/// [`sealed_for_user`] for many users in one statement, by user and kind.
pub async fn sealed_for_users(db: impl sqlx::PgExecutor<'_>, user_ids: &[Uuid]) -> sqlx::Result<Vec<SealedLogin>> {
    let rows = sqlx::query!(
        r#"SELECT id, user_id, kind, provider, state, placeholder_seed, connected_at, refreshed_at,
                  expires_at, failure, public, key_id, nonce, ciphertext
           FROM provider_logins WHERE user_id = ANY($1) ORDER BY user_id, kind"#,
        user_ids
    )
    .fetch_all(db)
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
                expires_at: r.expires_at,
                failure: r.failure,
                public: r.public,
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
