//! The `browser_sessions` and `login_failures` tables.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::login_throttle as throttle;
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

/// Counts a login attempt before its password is checked: under a lock on the account and one
/// on the address (so concurrent attempts are counted one after the other), reads the failures
/// that bear on it and, when [`throttle::decide`] lets it go on, records a failure and returns its
/// id — the caller removes it with [`forgive`] if the password matches. `Err(wait)`: throttled,
/// nothing recorded.
pub async fn reserve_attempt(
    pool: &PgPool,
    username: &str,
    address: &str,
    limits: throttle::Limits,
) -> sqlx::Result<Result<i64, std::time::Duration>> {
    let mut tx = pool.begin().await?;
    // Always the account's lock first, then the address's: no two attempts wait on each other
    // in a cycle.
    sqlx::query!(r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(1, hashtext($1))"#, username)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query!(r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(2, hashtext($1))"#, address)
        .fetch_one(&mut *tx)
        .await?;
    let window_secs = limits.window.as_secs_f64();
    let row = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE username = $1 AND address = $2) AS "pair!",
                  extract(epoch FROM now() - max(at) FILTER (WHERE username = $1 AND address = $2))::float8 AS pair_latest_ago,
                  extract(epoch FROM now() - min(at) FILTER (WHERE username = $1 AND address = $2))::float8 AS pair_oldest_ago,
                  count(*) FILTER (WHERE username = $1) AS "account!",
                  count(*) FILTER (WHERE address = $2) AS "address!",
                  extract(epoch FROM now() - min(at) FILTER (WHERE address = $2))::float8 AS address_oldest_ago
           FROM login_failures
           WHERE (username = $1 OR address = $2) AND at > now() - make_interval(secs => $3)"#,
        username,
        address,
        window_secs
    )
    .fetch_one(&mut *tx)
    .await?;
    let ago = |secs: Option<f64>| secs.map(|s| std::time::Duration::from_secs_f64(s.max(0.0)));
    let failures = throttle::Failures {
        pair: row.pair,
        pair_latest_ago: ago(row.pair_latest_ago),
        pair_oldest_ago: ago(row.pair_oldest_ago),
        account: row.account,
        address: row.address,
        address_oldest_ago: ago(row.address_oldest_ago),
    };
    if let throttle::Decision::Wait(wait) = throttle::decide(failures, limits) {
        return Ok(Err(wait));
    }
    let id = sqlx::query_scalar!(
        r#"INSERT INTO login_failures (username, address) VALUES ($1, $2) RETURNING id"#,
        username,
        address
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Ok(id))
}

/// Removes a failure recorded by [`reserve_attempt`] (the password matched, or it was never
/// checked).
pub async fn forgive(pool: &PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query!(r#"DELETE FROM login_failures WHERE id = $1"#, id).execute(pool).await?;
    Ok(())
}

/// Deletes browser sessions that expired before now; returns how many.
pub async fn purge_expired(pool: &PgPool) -> sqlx::Result<u64> {
    let done = sqlx::query!(r#"DELETE FROM browser_sessions WHERE expires_at < now()"#).execute(pool).await?;
    Ok(done.rows_affected())
}

/// Deletes failed logins older than `hours` (far outside any throttling window); returns how many.
pub async fn purge_failures_older_than(pool: &PgPool, hours: i32) -> sqlx::Result<u64> {
    let done = sqlx::query!(r#"DELETE FROM login_failures WHERE at < now() - make_interval(hours => $1)"#, hours)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}
