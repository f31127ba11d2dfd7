//! All SQL lives here: one module per table group. Queries are compile-checked (`sqlx::query!`),
//! with the offline data committed in `.sqlx/`. The store names none of the server's other
//! modules: the shapes it stores (a stored event, a sealed value) and the pure rules it applies
//! inside its transactions (the event size budget, the failed-login throttle) are its own.

pub mod agent_prompts;
pub mod agents;
pub mod audit;
pub mod availability;
pub mod browser_sessions;
pub mod events;
pub mod login_throttle;
pub mod notify;
pub mod permissions;
pub mod provider_logins;
pub mod proxy_identities;
pub mod quotas;
pub mod replicas;
pub mod repos;
pub mod sandboxes;
pub mod schedules;
pub mod sealed;
pub mod secrets;
pub mod sessions;
pub mod tokens;
pub mod triggers;
pub mod usage;
pub mod users;
pub mod warm_pool;
pub mod webhooks;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// The migrations in `migrations/`, embedded.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Connects to Postgres and applies the migrations. A query waits at most `acquire_timeout` for a
/// connection (during an outage, that is how long a caller waits before its error).
pub async fn connect(
    database_url: &str,
    max_connections: u32,
    acquire_timeout: std::time::Duration,
) -> anyhow::Result<PgPool> {
    use anyhow::Context;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .connect(database_url)
        .await
        .context("connecting to Postgres")?;
    MIGRATOR.run(&pool).await.context("applying migrations")?;
    Ok(pool)
}
