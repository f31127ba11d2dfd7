//! `BENCH_ONLY=log`: the event log's two throughput figures beside their floors, alone — the
//! flood (`flood <n> 0` to every watcher) against the raw batched insert of its own payloads, and
//! the replay of the session topped up to the replay size against the replay floor (the same
//! rows read and written to a socket). Held to the full run's targets (`flood_vs_raw`,
//! `replay_vs_floor`), in a minute or two: for work on the append or the catch-up path (with
//! `BENCH_PERF=1`, a profile of exactly these).

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::api::Api;
use crate::config::Config;
use crate::stats::round;
use crate::{progress, raw, replay_floor, startup, targets, throughput};

/// Runs the log part and returns its report.
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    progress("flood agent: create and warm up");
    let agent = startup::cold_start(api, &format!("bench-log-{tag}")).await?;
    agents.push(agent.agent_id.clone());
    let session = agent.session_id.clone();

    progress(&format!("flood {} 0 with {} watchers", config.flood_events, config.watchers));
    let flood = throughput::flood(api, &session, config.flood_events, 0, config.watchers, config.server_pid).await?;
    let flood_per_s = flood.delivered_per_s();
    let flood_cpu = flood.server_cpu_s.map(|s| s * 1000.0 / config.flood_events as f64 * 1000.0);
    progress(&format!("  {flood_per_s:.0} events/s"));
    let baseline = raw::baseline(&config.scratch_database_url, &flood.payloads(), config.raw_batch).await?;
    let raw_per_s = baseline.plain.rows_per_s();
    progress(&format!("  raw batched insert: {raw_per_s:.0} rows/s"));

    let top_up = config.replay_events - api.last_seq(&session).await?;
    if top_up > 0 {
        progress(&format!("replay: filling the session to {} events", config.replay_events));
        throughput::flood(api, &session, u64::try_from(top_up)?, 0, 1, config.server_pid).await?;
    }
    let url = config.database_url.as_deref().context("BENCH_ONLY=log needs the server's database (--database-url)")?;
    progress(&format!(
        "replay: one stream from after=0 until {} events, and its floor, turn about ({} each, the best kept)",
        config.replay_events,
        replay_floor::ROUNDS
    ));
    let compared = replay_floor::compare(api, url, &session, config.replay_events, config.server_pid).await?;
    let (replay, floor) = (compared.replay(), compared.floor());
    let (replay_per_s, floor_per_s, replay_cpu) = (replay.per_s, floor.per_s, replay.server_cpu_ms_per_1k);

    let (flood_vs_raw, replay_vs_floor) = (flood_per_s / raw_per_s, replay_per_s / floor_per_s);
    let targets = json!({
        "flood_vs_raw": {"target": format!(">= {}", targets::FLOOD_VS_RAW), "value": round(flood_vs_raw, 3), "pass": flood_vs_raw >= targets::FLOOD_VS_RAW},
        "replay_vs_floor": {"target": format!(">= {} (replay_events_per_s / replay_floor_events_per_s)", targets::REPLAY_VS_FLOOR), "value": round(replay_vs_floor, 3), "pass": replay_vs_floor >= targets::REPLAY_VS_FLOOR},
    });
    let all_pass = targets.as_object().is_some_and(|t| t.values().all(|v| v["pass"] == json!(true)));
    Ok(json!({
        "flood_events_per_s": round(flood_per_s, 0),
        "flood_cpu_ms_per_1k_events": flood_cpu.map(|v| round(v, 1)),
        "raw_insert_rows_per_s": round(raw_per_s, 0),
        "flood_vs_raw": round(flood_vs_raw, 3),
        "replay_events_per_s": round(replay_per_s, 0),
        "replay_cpu_ms_per_1k_events": replay_cpu.map(|v| round(v, 1)),
        "replay_floor_events_per_s": round(floor_per_s, 0),
        "replay_vs_floor": round(replay_vs_floor, 3),
        "replay_rounds": compared.replays.iter().zip(&compared.floors)
            .map(|(r, f)| json!({"replay_events_per_s": round(r.per_s, 0), "floor_events_per_s": round(f.per_s, 0)}))
            .collect::<Vec<_>>(),
        "targets": targets,
        "all_pass": all_pass,
        "details": {"flood": flood.details(config.watchers)},
    }))
}
