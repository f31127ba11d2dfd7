//! `multi`: a team's load rather than one flood — N warm agents each streaming at a modest rate
//! (`flood <count> <rate>`, all at once), each session watched by W streams. Every watcher must
//! get every chunk once, in order (as in the flood). Reported: stored events/s against offered,
//! emit → receive percentiles over every watcher, the server's CPU per 1,000 stored events, mean
//! events per commit (by `created_at`, per session), and Postgres commits/s (`pg_stat_database`).

use std::time::Instant;

use anyhow::{Context, Result};
use futures_util::future::try_join_all;
use sqlx::Connection;

use crate::api::Api;
use crate::stats::percentile;
use crate::throughput::{self, FloodRun};

/// The load.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Events per second each agent emits.
    pub rate: u64,
    /// Seconds each agent emits for.
    pub seconds: u64,
    /// Stream watchers per session.
    pub watchers: usize,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Multi {
    /// Agents flooding.
    pub agents: usize,
    /// The load.
    pub load: Load,
    /// Events per second asked for, all agents together.
    pub offered_per_s: f64,
    /// Events per second stored and delivered (all chunks over the window from the first to the
    /// last chunk received anywhere).
    pub stored_per_s: f64,
    /// Emit → receive over every watcher, ms.
    pub p50_ms: f64,
    /// See [`Self::p50_ms`].
    pub p99_ms: f64,
    /// See [`Self::p50_ms`].
    pub max_ms: f64,
    /// Server CPU ms per 1,000 stored events (`None` without the server's pid).
    pub cpu_ms_per_1k: Option<f64>,
    /// Mean events per commit.
    pub mean_per_commit: f64,
    /// Postgres commits per second, the whole cluster (`None` if the statistics were unreadable).
    pub commits_per_s: Option<f64>,
    /// Events per appender transaction, every session together (`None` without the metrics).
    pub appender_events_per_commit: Option<f64>,
}

/// Runs the load on `sessions` (one per warm agent).
pub async fn run(
    api: &Api,
    sessions: &[String],
    load: Load,
    server_pid: Option<u32>,
    database_url: &str,
    metrics_url: Option<&str>,
) -> Result<Multi> {
    let count = load.rate * load.seconds;
    let commits_before = commits(database_url).await;
    let appender_before = match metrics_url {
        Some(url) => Some(crate::metrics_scrape::commit_totals(url).await?),
        None => None,
    };
    let cpu_before = server_pid.and_then(throughput::cpu_seconds);
    let started = Instant::now();
    let runs: Vec<FloodRun> = try_join_all(
        sessions.iter().map(|session| throughput::flood(api, session, count, load.rate, load.watchers, None)),
    )
    .await
    .context("a multi flood failed")?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = match (cpu_before, server_pid.and_then(throughput::cpu_seconds)) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let commits_after = commits(database_url).await;
    let appender_after = match metrics_url {
        Some(url) => Some(crate::metrics_scrape::commit_totals(url).await?),
        None => None,
    };
    let appender_events_per_commit = match (appender_before, appender_after) {
        (Some((c0, e0)), Some((c1, e1))) if c1 > c0 => Some((e1 - e0) / (c1 - c0)),
        _ => None,
    };
    let stored = (count as usize * sessions.len()) as f64;
    let first = runs.iter().filter_map(FloodRun::first_received).min();
    let last = runs.iter().filter_map(FloodRun::last_received).max();
    let window_s = match (first, last) {
        (Some(first), Some(last)) if last > first => (last - first).as_secs_f64(),
        _ => wall_s,
    };
    let latencies: Vec<f64> = runs.iter().flat_map(FloodRun::latencies_ms).collect();
    let sizes: Vec<usize> = runs.iter().flat_map(FloodRun::commit_sizes).collect();
    Ok(Multi {
        agents: sessions.len(),
        load,
        offered_per_s: (load.rate as usize * sessions.len()) as f64,
        stored_per_s: stored / window_s,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        max_ms: latencies.iter().copied().fold(0.0, f64::max),
        cpu_ms_per_1k: cpu_s.map(|s| s * 1000.0 / stored * 1000.0),
        mean_per_commit: sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64,
        commits_per_s: match (commits_before, commits_after) {
            (Some(before), Some(after)) => Some((after - before) as f64 / wall_s),
            _ => None,
        },
        appender_events_per_commit,
    })
}

/// Transactions committed in the whole cluster so far.
async fn commits(database_url: &str) -> Option<i64> {
    let mut connection = sqlx::PgConnection::connect(database_url).await.ok()?;
    // The backends' pending counters are flushed at most every second.
    sqlx::query("SELECT pg_stat_clear_snapshot()").execute(&mut connection).await.ok()?;
    sqlx::query_scalar::<_, i64>("SELECT sum(xact_commit)::bigint FROM pg_stat_database")
        .fetch_one(&mut connection)
        .await
        .ok()
}
