//! `metrics_scrape_ms`: how long a Prometheus scrape of the bench server's `/metrics` takes once
//! every other benchmark has run (every route, event type, stop reason and close reason they
//! exercise has its series), beside a `GET /healthz` on the API through the same client as the
//! baseline. No series carries an agent or a session (docs/operations.md), so the series of
//! 1,000 agents are the series of this run's agents: the count is reported with the time.

use std::time::Instant;

use agenthold_cli::api::{Client, Options};
use agenthold_cli::endpoint::Endpoint;
use anyhow::{Result, anyhow, bail};

use crate::stats::median;

/// Scrapes measured (after one warm-up).
pub const ROUNDS: usize = 20;

/// One measurement.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Median scrape, ms.
    pub scrape_ms: f64,
    /// Median `GET /healthz`, ms.
    pub healthz_ms: f64,
    /// Sample lines in one scrape (series, histogram buckets counted one by one).
    pub samples: usize,
    /// Bytes in one scrape.
    pub bytes: usize,
}

/// Measures `metrics_url` (`http://host:port`) against `api_url`'s `/healthz`.
pub async fn measure(metrics_url: &str, api_url: &str) -> Result<Scrape> {
    let metrics = client(metrics_url)?;
    let api = client(api_url)?;
    let (mut scrapes, mut healthz, mut last) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let started = Instant::now();
        let reply = metrics.send("GET", "/metrics", None).await?;
        let scrape_ms = started.elapsed().as_secs_f64() * 1000.0;
        if reply.status != 200 {
            bail!("GET /metrics: HTTP {}", reply.status);
        }
        let started = Instant::now();
        let health = api.send("GET", "/healthz", None).await?;
        let healthz_ms = started.elapsed().as_secs_f64() * 1000.0;
        if health.status != 200 {
            bail!("GET /healthz: HTTP {}", health.status);
        }
        if round > 0 {
            scrapes.push(scrape_ms);
            healthz.push(healthz_ms);
        }
        last = reply.body;
    }
    let text = String::from_utf8_lossy(&last);
    let samples = text.lines().filter(|line| !line.is_empty() && !line.starts_with('#')).count();
    Ok(Scrape { scrape_ms: median(&scrapes), healthz_ms: median(&healthz), samples, bytes: last.len() })
}

fn client(url: &str) -> Result<Client> {
    let endpoint = Endpoint::parse(url).map_err(|e| anyhow!("{url}: {e}"))?;
    Ok(Client::new(endpoint, None, Options::default())?)
}

/// Waits (up to a minute) until the server's warm pool has a connected sandbox
/// (`agenthold_warm_pool_ready` ≥ 1).
pub async fn wait_pool_ready(metrics_url: &str) -> Result<()> {
    let metrics = client(metrics_url)?;
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let reply = metrics.send("GET", "/metrics", None).await?;
        let text = String::from_utf8_lossy(&reply.body);
        let ready = text
            .lines()
            .find_map(|line| line.strip_prefix("agenthold_warm_pool_ready "))
            .and_then(|value| value.trim().parse::<f64>().ok());
        if ready.is_some_and(|ready| ready >= 1.0) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the warm pool had no sandbox ready within a minute (agenthold_warm_pool_ready: {ready:?})");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The appender's transactions and the events they stored so far
/// (`agenthold_commit_events_count` and `_sum`).
pub async fn commit_totals(metrics_url: &str) -> Result<(f64, f64)> {
    let reply = client(metrics_url)?.send("GET", "/metrics", None).await?;
    let text = String::from_utf8_lossy(&reply.body);
    Ok((value_of(&text, "agenthold_commit_events_count"), value_of(&text, "agenthold_commit_events_sum")))
}

/// A counter's value so far (`name` without labels; 0 before its first increment).
pub async fn counter(metrics_url: &str, name: &str) -> Result<f64> {
    let reply = client(metrics_url)?.send("GET", "/metrics", None).await?;
    Ok(value_of(&String::from_utf8_lossy(&reply.body), name))
}

/// An unlabelled sample's value in a scrape's `text` (0 when the series is absent).
fn value_of(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// A histogram's count and sum so far: `series` is its name with labels, e.g.
/// `agenthold_sandbox_engine_start_duration_seconds{from="stopped"}`; (0, 0) before its first
/// sample.
pub async fn histogram_totals(metrics_url: &str, series: &str) -> Result<(f64, f64)> {
    let reply = client(metrics_url)?.send("GET", "/metrics", None).await?;
    let text = String::from_utf8_lossy(&reply.body);
    let (name, labels) = series.split_once('{').map_or((series, String::new()), |(n, l)| (n, format!("{{{l}")));
    let value = |suffix: &str| {
        let key = format!("{name}{suffix}{labels} ");
        text.lines()
            .find_map(|line| line.strip_prefix(key.as_str()))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((value("_count"), value("_sum")))
}
