//! The server's database connections (docs/operations.md, "Postgres's JIT is off"): each runs
//! with JIT compilation off, whatever the cluster's setting — the planner's estimate for a join
//! of small, freshly analyzed tables can pass `jit_above_cost`, and then every execution of the
//! proxy feed's read compiled the query first (3 ms → ~200 ms measured).

use std::time::Duration;

use crate::support::server::create_database;

#[tokio::test]
async fn every_connection_of_the_pool_runs_without_jit() {
    let url = create_database().await;
    let pool = agenthold_server::store::connect(&url, 3, Duration::from_secs(10)).await.expect("connects");
    // Three connections at once: each was opened by the pool, each says the same.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(pool.acquire().await.expect("a connection"));
    }
    for connection in &mut held {
        let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(&mut **connection).await.expect("SHOW jit");
        assert_eq!(jit, "off");
    }
    // The cluster's own setting is untouched: a connection of another client still has it on
    // (Postgres's default), so the test shows the pool's doing.
    let other = sqlx::PgPool::connect(&url).await.expect("another client");
    let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(&other).await.expect("SHOW jit");
    assert_eq!(jit, "on", "the cluster's default is on: this test would prove nothing otherwise");
}

/// The event log reader's connections plan every statement generically (the catch-up's first
/// pages on custom plans were ~5 × slower) and run without JIT; the main pool's keep Postgres's
/// default plan choice.
#[tokio::test]
async fn the_event_log_reader_plans_generically_and_the_main_pool_does_not() {
    let url = create_database().await;
    let pool = agenthold_server::store::connect(&url, 2, Duration::from_secs(10)).await.expect("connects");
    let reader = agenthold_server::store::connect_log_reader(&url, 2, Duration::from_secs(10)).expect("a pool");
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(reader.acquire().await.expect("a connection"));
    }
    for connection in &mut held {
        let mode: String = sqlx::query_scalar("SHOW plan_cache_mode").fetch_one(&mut **connection).await.expect("SHOW");
        assert_eq!(mode, "force_generic_plan");
        let jit: String = sqlx::query_scalar("SHOW jit").fetch_one(&mut **connection).await.expect("SHOW jit");
        assert_eq!(jit, "off");
    }
    let mode: String = sqlx::query_scalar("SHOW plan_cache_mode").fetch_one(&pool).await.expect("SHOW");
    assert_eq!(mode, "auto", "the main pool keeps Postgres's choice");
}
