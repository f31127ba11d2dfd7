//! All SQL lives here: one module per table group. Queries are compile-checked (`sqlx::query!`),
//! with the offline data committed in `.sqlx/`.

pub mod agents;
pub mod audit;
pub mod browser_sessions;
pub mod events;
pub mod permissions;
pub mod provider_logins;
pub mod proxy_identities;
pub mod sandboxes;
pub mod secrets;
pub mod sessions;
pub mod tokens;
pub mod users;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// The migrations in `migrations/`, embedded.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Connects to Postgres and applies the migrations.
pub async fn connect(database_url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    use anyhow::Context;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(database_url)
        .await
        .context("connecting to Postgres")?;
    MIGRATOR.run(&pool).await.context("applying migrations")?;
    Ok(pool)
}
