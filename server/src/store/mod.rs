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

/// What every connection runs first: no JIT compilation of queries. Every query here is a short
/// one on indexed rows, which JIT never speeds up; but the planner's cost estimate for a join of
/// small tables whose statistics autovacuum has just taken can pass `jit_above_cost`, and then
/// every execution compiles the query with LLVM first — measured: the proxy feed's read of the
/// agents (`proxy_identities::feed_agents`) went from 3 ms to ~200 ms on a handful of rows, and
/// every pooled harness's claim waited for it.
pub const NO_JIT: &str = "SET jit = off";

/// What the event log's reader's connections also run ([`connect_log_reader`]): every prepared
/// statement on its generic plan. By default a connection plans a statement's first five
/// executions with their values; for the catch-up's page (`events::page_encoded`) those custom
/// plans made the first catch-up of a large session ~5 × slower than every later one (measured:
/// `BENCH_ONLY=log`'s first replay 100,000–130,000 events/s, later ones and the generic plan
/// 440,000–650,000), and a pooled connection's first five are every catch-up's until the pool is
/// warm. Only that pool's statements run so: a generic plan is the wrong one for some queries.
pub const GENERIC_PLANS: &str = "SET plan_cache_mode = force_generic_plan";

/// The migrations in `migrations/`, embedded.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Connects to Postgres and applies the migrations. A query waits at most `acquire_timeout` for a
/// connection (during an outage, that is how long a caller waits before its error). Each
/// connection turns Postgres's JIT off ([`NO_JIT`]).
pub async fn connect(
    database_url: &str,
    max_connections: u32,
    acquire_timeout: std::time::Duration,
) -> anyhow::Result<PgPool> {
    use anyhow::Context;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::Executor::execute(connection, NO_JIT).await?;
                Ok(())
            })
        })
        .connect(database_url)
        .await
        .context("connecting to Postgres")?;
    MIGRATOR.run(&pool).await.context("applying migrations")?;
    Ok(pool)
}

/// The pool that reads the event log's pages ([`events::page_encoded`] and the session checks
/// around it): its connections run without JIT and on generic plans ([`GENERIC_PLANS`]). Opened
/// after [`connect`] (which applies the migrations); connects lazily.
pub fn connect_log_reader(
    database_url: &str,
    max_connections: u32,
    acquire_timeout: std::time::Duration,
) -> anyhow::Result<PgPool> {
    use anyhow::Context;
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::Executor::execute(&mut *connection, NO_JIT).await?;
                sqlx::Executor::execute(&mut *connection, GENERIC_PLANS).await?;
                Ok(())
            })
        })
        .connect_lazy(database_url)
        .context("the event log reader's pool")
}
