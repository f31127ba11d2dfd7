//! `BENCH_ONLY=startup`: the start-up figures alone — a bare `docker run`, cold, pooled and
//! harness starts, and wakes with the engine's part of them — held to the same targets as in the
//! full run, in a minute or two: for work on a start path. Unlike the full run, no burst of 50
//! agents runs beside them. Then one flood on the woken agent (`flood_events_per_s`, no target
//! here): the runtimes part (`scripts/bench/runtimes.sh`) compares it across runtimes.

use anyhow::Result;
use serde_json::{Value, json};

use crate::config::Config;
use crate::stats::{median, round};
use crate::{StartupFigures, api::Api, startup};

/// Runs the start-up part and returns its report.
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let repeats = config.repeats.max(1);
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let docker_runs = startup::docker_runs(&config.image, repeats).await?;
    startup::tag_cold_image(&config.image).await?;
    let colds = startup::cold_starts(api, tag, repeats, agents).await?;
    let pooled = crate::pooled_starts(config, api, tag, agents).await?;
    let harness = startup::harness_starts(api, &colds[0], repeats).await?;
    crate::progress("wake: sleep the agent, then prompt → first update");
    let wakes =
        startup::wakes(api, &colds[0].agent_id, &colds[0].session_id, repeats, config.metrics_url.as_deref()).await?;

    crate::progress(&format!("flood {} 0 with {} watchers", config.flood_events, config.watchers));
    let flood =
        crate::throughput::flood(api, &colds[0].session_id, config.flood_events, 0, config.watchers, config.server_pid)
            .await?;
    let flood_per_s = flood.delivered_per_s();
    crate::progress(&format!("  {flood_per_s:.0} events/s"));

    let wake_each: Vec<f64> = wakes.each.iter().map(|w| w.wake_ms).collect();
    let figures = StartupFigures {
        docker_run: median(&docker_runs),
        cold: median(&colds.iter().map(|c| c.cold_start_ms).collect::<Vec<_>>()),
        harness_start: median(&harness),
        wake: median(&wake_each),
        pooled,
    };
    let targets = crate::startup_targets(figures);
    let all_pass = targets.values().all(|v| v["pass"] == json!(true));
    let rounded = |samples: &[f64]| samples.iter().map(|v| round(*v, 1)).collect::<Vec<_>>();
    Ok(json!({
        "docker_run_ms": round(figures.docker_run, 1),
        "cold_start_ms": round(figures.cold, 1),
        "pooled_start_ms": pooled.map(|p| round(p, 1)),
        "harness_start_ms": round(figures.harness_start, 1),
        "wake_ms": round(figures.wake, 1),
        "wake_engine_ms": wakes.engine_ms.map(|e| round(e, 1)),
        "flood_events_per_s": round(flood_per_s, 0),
        "targets": targets,
        "all_pass": all_pass,
        "details": {
            "docker_run": rounded(&docker_runs),
            "cold_start": rounded(&colds.iter().map(|c| c.cold_start_ms).collect::<Vec<_>>()),
            "harness_start": rounded(&harness),
            "wake": rounded(&wake_each),
        },
    }))
}
