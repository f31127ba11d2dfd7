//! The `browser_sessions` and `login_failures` tables.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::tokens::hash_token;

/// A live browser session.
#[derive(Debug, Clone)]
pub struct BrowserSession {
    /// Its id.
    pub id: Uuid,
    /// Its user.
    pub user_id: Uuid,
    /// What state-changing requests must echo in `X-CSRF-Token`.
    pub csrf_token: String,
}

/// Starts a session for a user (the cookie holds `token`).
pub async fn create(
    pool: &PgPool,
    user_id: Uuid,
    token: &str,
    csrf_token: &str,
    expires_at: DateTime<Utc>,
) -> sqlx::Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query!(
        r#"INSERT INTO browser_sessions (id, token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, $3, $4, $5)"#,
        id,
        hash_token(token),
        user_id,
        csrf_token,
        expires_at
    )
    .execute(pool)
    .await?;
    Ok(id)
}

/// The unexpired session with this cookie value.
pub async fn find(pool: &PgPool, token: &str) -> sqlx::Result<Option<BrowserSession>> {
    sqlx::query_as!(
        BrowserSession,
        r#"SELECT id, user_id, csrf_token FROM browser_sessions WHERE token_hash = $1 AND expires_at > now()"#,
        hash_token(token)
    )
    .fetch_optional(pool)
    .await
}

/// Ends a session.
pub async fn delete(pool: &PgPool, id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(r#"DELETE FROM browser_sessions WHERE id = $1"#, id).execute(pool).await?;
    Ok(())
}

/// Whether the session still exists and has not expired.
pub async fn is_valid(pool: &PgPool, id: Uuid) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(r#"SELECT id FROM browser_sessions WHERE id = $1 AND expires_at > now()"#, id)
        .fetch_optional(pool)
        .await?;
    Ok(found.is_some())
}

/// Records a failed login.
pub async fn record_failure(pool: &PgPool, username: &str, address: &str) -> sqlx::Result<()> {
    sqlx::query!(r#"INSERT INTO login_failures (username, address) VALUES ($1, $2)"#, username, address)
        .execute(pool)
        .await?;
    Ok(())
}

/// Failed logins in the last `minutes` for the account and for the address.
pub async fn recent_failures(pool: &PgPool, username: &str, address: &str, minutes: i32) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM login_failures WHERE username = $1 AND at > now() - make_interval(mins => $3)) AS "by_user!",
             (SELECT count(*) FROM login_failures WHERE address = $2 AND at > now() - make_interval(mins => $3)) AS "by_address!""#,
        username,
        address,
        minutes
    )
    .fetch_one(pool)
    .await?;
    Ok((row.by_user, row.by_address))
}
