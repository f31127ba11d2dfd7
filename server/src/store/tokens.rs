//! API tokens: owned by a user, stored as SHA-256 hashes, looked up by hash, revocable.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

/// SHA-256 of a token, the form in which tokens are stored.
pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Who a valid token belongs to.
#[derive(Debug, Clone, Copy)]
pub struct TokenOwner {
    /// The token.
    pub token_id: Uuid,
    /// Its user.
    pub user_id: Uuid,
}

/// The owner of the unrevoked token with this value, if any. Marks it used, at most once a
/// minute: a script making many requests does not write the row on each.
pub async fn authenticate(pool: &PgPool, token: &str) -> sqlx::Result<Option<TokenOwner>> {
    let hash = hash_token(token);
    let row = sqlx::query!(
        r#"WITH found AS (
             SELECT id, user_id, last_used_at FROM api_tokens
             WHERE token_hash = $1 AND revoked_at IS NULL AND user_id IS NOT NULL
           ), touched AS (
             UPDATE api_tokens SET last_used_at = now()
             FROM found
             WHERE api_tokens.id = found.id
               AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '1 minute')
           )
           SELECT id AS "id!", user_id AS "user_id!" FROM found"#,
        hash
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| TokenOwner { token_id: r.id, user_id: r.user_id }))
}

/// Whether the token with this id is still valid (not revoked).
pub async fn is_valid(pool: &PgPool, token_id: Uuid) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(r#"SELECT id FROM api_tokens WHERE id = $1 AND revoked_at IS NULL"#, token_id)
        .fetch_optional(pool)
        .await?;
    Ok(found.is_some())
}

/// The token with this name, if any.
pub async fn named(pool: &PgPool, name: &str) -> sqlx::Result<Option<Uuid>> {
    sqlx::query_scalar!(r#"SELECT id FROM api_tokens WHERE name = $1 AND revoked_at IS NULL"#, name)
        .fetch_optional(pool)
        .await
}

/// Stores (the hash of) `token` under `name` for `user_id`, replacing any token of that name.
pub async fn replace_named(pool: &PgPool, name: &str, token: &str, user_id: Uuid) -> sqlx::Result<()> {
    let hash = hash_token(token);
    let mut tx = pool.begin().await?;
    sqlx::query!(r#"DELETE FROM api_tokens WHERE name = $1"#, name).execute(&mut *tx).await?;
    sqlx::query!(
        r#"INSERT INTO api_tokens (id, name, token_hash, user_id) VALUES ($1, $2, $3, $4)
           ON CONFLICT (token_hash) DO UPDATE SET name = EXCLUDED.name, user_id = EXCLUDED.user_id, revoked_at = NULL"#,
        Uuid::new_v4(),
        name,
        hash,
        user_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Creates a token for a user, unless they hold `max` already; returns its id.
pub async fn create(
    pool: &PgPool,
    user_id: Uuid,
    name: &str,
    token: &str,
    max: i64,
) -> Result<Uuid, super::quotas::QuotaError> {
    let id = Uuid::new_v4();
    let mut tx = pool.begin().await?;
    super::quotas::tokens_of_user(&mut tx, user_id, max).await?;
    sqlx::query!(
        r#"INSERT INTO api_tokens (id, name, token_hash, user_id) VALUES ($1, $2, $3, $4)"#,
        id,
        name,
        hash_token(token),
        user_id
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// A token as its owner sees it (never the value).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TokenView {
    /// Its id.
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was last used.
    #[schema(required = true)]
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A user's unrevoked tokens.
pub async fn list(pool: &PgPool, user_id: Uuid) -> sqlx::Result<Vec<TokenView>> {
    sqlx::query_as!(
        TokenView,
        r#"SELECT id, name, created_at, last_used_at FROM api_tokens
           WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at, id"#,
        user_id
    )
    .fetch_all(pool)
    .await
}

/// Revokes one of a user's tokens; false if it has none with this id.
pub async fn revoke(pool: &PgPool, user_id: Uuid, token_id: Uuid) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL"#,
        token_id,
        user_id
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}
