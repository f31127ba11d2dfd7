//! API tokens: stored as SHA-256 hashes, looked up by hash.

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

/// SHA-256 of a token, the form in which tokens are stored.
pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// The id of the token with this value, if any; marks it used.
pub async fn authenticate(pool: &PgPool, token: &str) -> sqlx::Result<Option<Uuid>> {
    let hash = hash_token(token);
    let row =
        sqlx::query_scalar!(r#"UPDATE api_tokens SET last_used_at = now() WHERE token_hash = $1 RETURNING id"#, hash)
            .fetch_optional(pool)
            .await?;
    Ok(row)
}

/// Whether a token with this name exists.
pub async fn exists_named(pool: &PgPool, name: &str) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(r#"SELECT id FROM api_tokens WHERE name = $1"#, name).fetch_optional(pool).await?;
    Ok(found.is_some())
}

/// Stores (the hash of) `token` under `name`, replacing any token of that name.
pub async fn replace_named(pool: &PgPool, name: &str, token: &str) -> sqlx::Result<()> {
    let hash = hash_token(token);
    let mut tx = pool.begin().await?;
    sqlx::query!(r#"DELETE FROM api_tokens WHERE name = $1"#, name).execute(&mut *tx).await?;
    sqlx::query!(
        r#"INSERT INTO api_tokens (id, name, token_hash) VALUES ($1, $2, $3)
           ON CONFLICT (token_hash) DO UPDATE SET name = EXCLUDED.name"#,
        Uuid::new_v4(),
        name,
        hash
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}
