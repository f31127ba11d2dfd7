//! `BENCH_ONLY=log`: the event log's two throughput figures beside their floors, alone — the
//! flood (`flood <n> 0` to every watcher) against the raw batched insert of its own payloads, and
//! the replay of the session topped up to the replay size against the replay floor (the same
//! rows read and written to a socket); the flood's storing floor beside the raw insert
//! ([`floor::stored_flood`]). Held to the full run's targets (`flood_vs_raw`,
//! `replay_vs_floor`), in a minute or two: for work on the append or the catch-up path (with
//! `BENCH_PERF=1`, a profile of exactly these).

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::api::Api;
use crate::config::Config;
use crate::stats::round;
use crate::{floor, metrics_scrape, progress, raw, replay_floor, startup, targets, throughput};

/// Runs the log part and returns its report.
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    progress("flood agent: create and warm up");
    let agent = startup::cold_start(api, &format!("bench-log-{tag}")).await?;
    agents.push(agent.agent_id.clone());
    let session = agent.session_id.clone();

    progress(&format!("flood {} 0 with {} watchers", config.flood_events, config.watchers));
    let lagged = || async {
        match &config.metrics_url {
            Some(url) => metrics_scrape::counter(url, "agenthold_stream_lagged_total").await.ok(),
            None => None,
        }
    };
    let committing = || async {
        match &config.metrics_url {
            Some(url) => metrics_scrape::histogram_totals(url, "agenthold_commit_duration_seconds").await.ok(),
            None => None,
        }
    };
    let (lagged_before, committing_before) = (lagged().await, committing().await);
    let flood = throughput::flood(api, &session, config.flood_events, 0, config.watchers, config.server_pid).await?;
    // Watchers that fell behind the live feed and read Postgres to catch up.
    let flood_lagged = lagged_before.zip(lagged().await).map(|(before, after)| after - before);
    // The appender's transactions during the flood: how many, and their seconds together.
    let flood_commits = committing_before.zip(committing().await).map(|((count, sum), (count_after, sum_after))| {
        json!({"transactions": count_after - count, "seconds": round(sum_after - sum, 3)})
    });
    let flood_per_s = flood.delivered_per_s();
    let flood_cpu = flood.server_cpu_s.map(|s| s * 1000.0 / config.flood_events as f64 * 1000.0);
    progress(&format!("  {flood_per_s:.0} events/s"));
    let baseline = raw::baseline(&config.scratch_database_url, &flood.payloads(), config.raw_batch).await?;
    let raw_per_s = baseline.plain.rows_per_s();
    progress(&format!("  raw batched insert: {raw_per_s:.0} rows/s"));
    let stored_floor =
        floor::measure_stored_flood(&config.scratch_database_url, config.flood_events, config.watchers).await;

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
        "flood_vs_raw": floor::flood_target(flood_per_s, raw_per_s, stored_floor),
        "replay_vs_floor": {"target": format!(">= {} (replay_events_per_s / replay_floor_events_per_s)", targets::REPLAY_VS_FLOOR), "value": round(replay_vs_floor, 3), "pass": replay_vs_floor >= targets::REPLAY_VS_FLOOR},
    });
    let all_pass = targets.as_object().is_some_and(|t| t.values().all(|v| v["pass"] == json!(true)));
    let mut report = json!({
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
        "details": {"flood": flood.details(config.watchers), "flood_stream_lags": flood_lagged, "flood_appender": flood_commits},
    });
    if let (Some(report), Value::Object(keys)) =
        (report.as_object_mut(), floor::stored_flood_keys(flood_per_s, stored_floor))
    {
        report.extend(keys);
    }
    Ok(report)
}
