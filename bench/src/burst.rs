//! A burst of new agents: `burst_create_50_s` — 50 agents created at once (concurrent requests),
//! each with a session and a prompt, until every one of them is awake (its first `update`
//! reached a watcher: container made and started, sandboxd connected, harness answering).

use std::time::Instant;

use anyhow::{Context, Result};

use crate::api::Api;
use crate::startup;

/// What a burst measured.
#[derive(Debug, Clone)]
pub struct Burst {
    /// Agents created.
    pub agents: usize,
    /// From before the first creation until the last agent's first update, seconds.
    pub all_awake_s: f64,
    /// Each agent's create → first update, milliseconds.
    pub each_ms: Vec<f64>,
    /// Each agent's session (warm: its harness answered).
    pub sessions: Vec<String>,
}

/// Creates `count` agents at once and waits until all are awake; their ids go to `created`
/// (deleted when the benchmark ends), whatever happens.
pub async fn create(api: &Api, count: usize, tag: &str, created: &mut Vec<String>) -> Result<Burst> {
    let started = Instant::now();
    let colds = futures_util::future::join_all(
        (0..count).map(|n| async move { startup::cold_start(api, &format!("bench-burst-{tag}-{n}")).await }),
    )
    .await;
    let all_awake_s = started.elapsed().as_secs_f64();
    let mut each_ms = Vec::new();
    let mut sessions = Vec::new();
    let mut failed = None;
    for cold in colds {
        match cold {
            Ok(cold) => {
                created.push(cold.agent_id);
                each_ms.push(cold.cold_start_ms);
                sessions.push(cold.session_id);
            }
            Err(error) => failed = Some(error),
        }
    }
    if let Some(error) = failed {
        return Err(error).context("an agent of the burst did not wake");
    }
    Ok(Burst { agents: count, all_awake_s, each_ms, sessions })
}
