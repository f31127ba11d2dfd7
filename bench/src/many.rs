//! The many-agents part: `multi` (30 warm agents × 30 events/s × 3 watchers) and `multi_100`
//! (100 agents at the same rate), their figures and targets, and `--only multi`, which runs
//! them with the single flood they are compared with and nothing else.

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use crate::api::Api;
use crate::config::Config;
use crate::floor::{self, Floor};
use crate::multi::{self, Load, Multi};
use crate::stats::round;
use crate::{burst, progress, startup, throughput};

/// The load of a team: each agent streams 30 events/s for 20 s, each session watched thrice.
pub const LOAD: Load = Load { rate: 30, seconds: 20, watchers: 3 };
/// Agents in `multi`.
pub const MULTI_AGENTS: usize = 30;
/// `multi` CPU per event ≤ this × the floor's at the same shape (`multi_cpu_vs_floor`).
pub const MULTI_CPU_VS_FLOOR: f64 = 2.5;
/// `multi` p99 emit → receive, ms, at most.
pub const MULTI_P99_MS: f64 = 50.0;
/// `multi_100` p99 emit → receive, ms, at most.
pub const BIG_P99_MS: f64 = 100.0;

/// Both loads.
pub struct ManyAgents {
    /// `multi`.
    pub multi: Multi,
    /// `multi_100` (`None` when `--multi-big-agents 0`).
    pub big: Option<Multi>,
    /// Every warm session the loads used (the large load's, else `multi`'s).
    pub sessions: Vec<String>,
    /// What forwarding alone costs at the flood's and `multi`'s shapes (`None` if it failed).
    pub floor: Option<Floor>,
}

/// Runs `multi` on the first [`MULTI_AGENTS`] of `sessions` (warm agents), then tops the agents
/// up to `config.multi_big_agents` and runs the large load on all of them.
pub async fn measure(
    config: &Config,
    api: &Api,
    sessions: &[String],
    tag: &str,
    agents: &mut Vec<String>,
) -> Result<ManyAgents> {
    progress("floor: forwarding alone, at the flood's and multi's shapes, then multi's storing each line first");
    let floor = match floor::measure(config.watchers, MULTI_AGENTS, LOAD, Some(&config.scratch_database_url)).await {
        Ok(floor) => {
            progress(&format!(
                "  {:.1} ms CPU per 1,000 lines flooding, {:.1} at multi's shape, {} storing ({} lines per commit)",
                floor.flood_cpu_ms_per_1k,
                floor.multi_cpu_ms_per_1k,
                floor.stored.map_or("?".to_owned(), |s| format!("{:.1}", s.cpu_ms_per_1k)),
                floor.stored.map_or("?".to_owned(), |s| format!("{:.1}", s.lines_per_commit)),
            ));
            Some(floor)
        }
        Err(error) => {
            progress(&format!("  the floor was not measured: {error:#}"));
            None
        }
    };
    let count = sessions.len().min(MULTI_AGENTS);
    let multi = run(config, api, &sessions[..count]).await.context("multi")?;
    let mut all = sessions.to_vec();
    let big = if config.multi_big_agents > 0 {
        let missing = config.multi_big_agents.saturating_sub(all.len());
        if missing > 0 {
            progress(&format!("multi_100: {missing} more agents, created at once"));
            let more = burst::create(api, missing, &format!("{tag}-big"), agents).await?;
            all.extend(more.sessions);
        }
        all.truncate(config.multi_big_agents);
        Some(run(config, api, &all).await.context("multi_100")?)
    } else {
        None
    };
    Ok(ManyAgents { multi, big, sessions: all, floor })
}

async fn run(config: &Config, api: &Api, sessions: &[String]) -> Result<Multi> {
    progress(&format!(
        "multi: {} agents × {} events/s × {} watchers for {} s",
        sessions.len(),
        LOAD.rate,
        LOAD.watchers,
        LOAD.seconds
    ));
    let multi =
        multi::run(api, sessions, LOAD, config.server_pid, &config.scratch_database_url, config.metrics_url.as_deref())
            .await?;
    progress(&format!(
        "  stored {:.0}/s of {:.0} offered; p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms; {} ms CPU per 1,000 events; \
         {} events per appender commit",
        multi.stored_per_s,
        multi.offered_per_s,
        multi.p50_ms,
        multi.p99_ms,
        multi.max_ms,
        multi.cpu_ms_per_1k.map_or("?".to_owned(), |v| format!("{v:.0}")),
        multi.appender_events_per_commit.map_or("?".to_owned(), |v| format!("{v:.1}")),
    ));
    Ok(multi)
}

/// The figures of one load, for `details`.
pub fn details(multi: &Multi) -> Value {
    json!({
        "agents": multi.agents,
        "rate_per_s": multi.load.rate,
        "seconds": multi.load.seconds,
        "watchers": multi.load.watchers,
        "offered_events_per_s": round(multi.offered_per_s, 0),
        "stored_events_per_s": round(multi.stored_per_s, 0),
        "emit_to_receive_p50_ms": round(multi.p50_ms, 1),
        "emit_to_receive_p99_ms": round(multi.p99_ms, 1),
        "emit_to_receive_max_ms": round(multi.max_ms, 1),
        "server_cpu_ms_per_1k_events": multi.cpu_ms_per_1k.map(|v| round(v, 1)),
        "mean_events_per_commit_per_session": round(multi.mean_per_commit, 1),
        "appender_events_per_commit": multi.appender_events_per_commit.map(|v| round(v, 1)),
        "postgres_commits_per_s": multi.commits_per_s.map(|v| round(v, 0)),
    })
}

/// The top-level figures (`multi_cpu_ms_per_1k_events`, `multi_p99_ms`, `multi_100_p99_ms`).
pub fn figures(many: &ManyAgents, report: &mut Map<String, Value>) {
    report.insert("multi_cpu_ms_per_1k_events".to_owned(), json!(many.multi.cpu_ms_per_1k.map(|v| round(v, 1))));
    report.insert("multi_p99_ms".to_owned(), json!(round(many.multi.p99_ms, 1)));
    if let Some(big) = &many.big {
        report.insert("multi_100_p99_ms".to_owned(), json!(round(big.p99_ms, 1)));
        report.insert("multi_100_cpu_ms_per_1k_events".to_owned(), json!(big.cpu_ms_per_1k.map(|v| round(v, 1))));
    }
    if let Some(floor) = &many.floor {
        report.insert("floor_flood_cpu_ms_per_1k_lines".to_owned(), json!(round(floor.flood_cpu_ms_per_1k, 1)));
        report.insert("floor_multi_cpu_ms_per_1k_lines".to_owned(), json!(round(floor.multi_cpu_ms_per_1k, 1)));
        report.insert(
            "floor_multi_stored_cpu_ms_per_1k_lines".to_owned(),
            json!(floor.stored.map(|s| round(s.cpu_ms_per_1k, 1))),
        );
        report.insert(
            "floor_multi_stored_lines_per_commit".to_owned(),
            json!(floor.stored.map(|s| round(s.lines_per_commit, 1))),
        );
    }
    report.insert("multi_cpu_vs_floor".to_owned(), json!(cpu_vs_floor(many).map(|v| round(v, 2))));
    report.insert("multi_cpu_vs_stored_floor".to_owned(), json!(cpu_vs_stored_floor(many).map(|v| round(v, 2))));
}

/// `multi_cpu_ms_per_1k_events ÷ floor_multi_cpu_ms_per_1k_lines` (`None` without either).
pub fn cpu_vs_floor(many: &ManyAgents) -> Option<f64> {
    let floor = many.floor.as_ref().map(|f| f.multi_cpu_ms_per_1k).filter(|f| *f > 0.0)?;
    Some(many.multi.cpu_ms_per_1k? / floor)
}

/// `multi_cpu_ms_per_1k_events ÷ floor_multi_stored_cpu_ms_per_1k_lines`: against the least a
/// server that commits each event before forwarding it does (`None` without either).
pub fn cpu_vs_stored_floor(many: &ManyAgents) -> Option<f64> {
    let stored = many.floor.as_ref()?.stored.map(|s| s.cpu_ms_per_1k).filter(|f| *f > 0.0)?;
    Some(many.multi.cpu_ms_per_1k? / stored)
}

/// The storing floor's CPU ÷ the forwarding floor's, at `multi`'s shape.
fn stored_floor_vs_floor(many: &ManyAgents) -> Option<f64> {
    let floor = many.floor.as_ref()?;
    let stored = floor.stored?.cpu_ms_per_1k;
    (floor.multi_cpu_ms_per_1k > 0.0).then(|| stored / floor.multi_cpu_ms_per_1k)
}

/// The targets, beside the single flood's CPU per 1,000 events of the same run.
pub fn targets(many: &ManyAgents, flood_cpu_ms_per_1k: Option<f64>, targets: &mut Map<String, Value>) {
    if let (Some(ratio), Some(multi_cpu)) = (cpu_vs_floor(many), many.multi.cpu_ms_per_1k) {
        // Against what a server that only forwards the lines costs at the same shape, same run;
        // the single flood's CPU beside it (the old baseline, which sat below the floor), and
        // the storing floor's: how far the forwarding floor itself is from a log's least.
        targets.insert(
            "multi_cpu_vs_floor".to_owned(),
            json!({"target": format!("<= {MULTI_CPU_VS_FLOOR} (multi_cpu_ms_per_1k_events / floor_multi_cpu_ms_per_1k_lines)"),
                   "value": round(ratio, 2), "multi_cpu_ms_per_1k_events": round(multi_cpu, 1),
                   "flood_cpu_ms_per_1k_events": flood_cpu_ms_per_1k.map(|v| round(v, 1)),
                   "stored_floor_vs_floor": stored_floor_vs_floor(many).map(|v| round(v, 2)),
                   "vs_stored_floor": cpu_vs_stored_floor(many).map(|v| round(v, 2)),
                   "pass": ratio <= MULTI_CPU_VS_FLOOR}),
        );
    }
    let p99 = many.multi.p99_ms;
    targets.insert(
        "multi_p99_ms".to_owned(),
        json!({"target": format!("<= {MULTI_P99_MS}"), "value": round(p99, 1), "pass": p99 <= MULTI_P99_MS}),
    );
    if let Some(big) = &many.big {
        // Delivered completely: a flood with a missing, repeated or out-of-order chunk fails.
        targets.insert(
            "multi_100_p99_ms".to_owned(),
            json!({"target": format!("<= {BIG_P99_MS}, every event delivered"), "value": round(big.p99_ms, 1), "pass": big.p99_ms <= BIG_P99_MS}),
        );
    }
}

/// `--only multi`: a warm flood agent's single flood (the CPU baseline), a burst of warm agents,
/// then both loads.
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    progress("flood agent: create and warm up");
    let flood_agent = startup::cold_start(api, &format!("bench-flood-{tag}")).await?;
    agents.push(flood_agent.agent_id.clone());
    progress(&format!("flood {} 0 with {} watchers", config.flood_events, config.watchers));
    let flood =
        throughput::flood(api, &flood_agent.session_id, config.flood_events, 0, config.watchers, config.server_pid)
            .await?;
    let flood_cpu = flood.server_cpu_s.map(|s| s * 1000.0 / config.flood_events as f64 * 1000.0);
    progress(&format!(
        "  {:.0} events/s; {} ms CPU per 1,000 events",
        flood.delivered_per_s(),
        flood_cpu.map_or("?".to_owned(), |v| format!("{v:.1}"))
    ));
    progress(&format!("burst: {MULTI_AGENTS} agents created at once"));
    let burst = burst::create(api, MULTI_AGENTS, tag, agents).await?;
    let many = measure(config, api, &burst.sessions, tag, agents).await?;

    let mut report = Map::new();
    figures(&many, &mut report);
    report.insert("flood_cpu_ms_per_1k_events".to_owned(), json!(flood_cpu.map(|v| round(v, 1))));
    let mut target_map = Map::new();
    targets(&many, flood_cpu, &mut target_map);
    let all_pass = target_map.values().all(|v| v["pass"] == json!(true));
    report.insert("targets".to_owned(), Value::Object(target_map));
    report.insert("all_pass".to_owned(), json!(all_pass));
    report.insert(
        "details".to_owned(),
        json!({"multi": details(&many.multi), "multi_100": many.big.as_ref().map(details)}),
    );
    Ok(Value::Object(report))
}
