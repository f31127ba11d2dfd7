//! agenthold's benchmarks (`make bench`): drives a running server of its own through its REST
//! API and stream WebSocket, plus the same Postgres and Docker engine directly for baselines,
//! and reports one JSON object. Progress goes to stderr.
//!
//! Order matters: start-up latencies first (an idle machine), then the flood and the latency
//! run on a warm agent, the raw-insert baseline with the flood's own payloads, then the
//! replay of a session topped up to the replay size.

#![recursion_limit = "256"]

pub mod api;
pub mod approval;
pub mod burst;
pub mod config;
pub mod creation;
pub mod floor;
pub mod load;
pub mod log_only;
pub mod many;
pub mod metrics_scrape;
pub mod multi;
pub mod raw;
pub mod replay_floor;
pub mod scale;
pub mod server_mem;
pub mod startup;
pub mod startup_only;
pub mod stats;
pub mod svg;
pub mod throughput;
pub mod watch;

use anyhow::{Context, Result};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::api::Api;
use crate::config::Config;
use crate::stats::{median, percentile, round};

/// Prints a progress line on stderr.
pub fn progress(line: &str) {
    eprintln!("[bench] {line}");
}

/// Agents started from the warm pool (`pooled_start_ms` is their median).
const POOLED_REPEATS: usize = 5;

/// Targets the numbers are held to.
pub(crate) mod targets {
    /// Flood delivered ÷ raw insert rate, at least.
    pub const FLOOD_VS_RAW: f64 = 0.6;
    /// p99 emit → receive latency at 1,000 events/s, ms, at most.
    pub const P99_MS: f64 = 50.0;
    /// Replay from seq 0, events/s, at least.
    pub const REPLAY_PER_S: f64 = 50_000.0;
    /// Replay ÷ the replay floor (the same rows read and written to a socket), at least.
    pub const REPLAY_VS_FLOOR: f64 = 0.8;
    /// A burst of 50 agents ≤ this × 50 × (network + docker run) at once on the same engine.
    pub const BURST_VS_PARALLEL: f64 = 1.2;
    /// p95 of 20 cold starts one second apart ≤ this × docker run.
    pub const COLD_P95_FACTOR: f64 = 1.5;
    /// Cold start ≤ this × docker run + harness start.
    pub const COLD_FACTOR: f64 = 1.5;
    /// Idle sandboxd RSS, KiB, at most.
    pub const SANDBOXD_RSS_KIB: u64 = 10 * 1024;
    /// Approval round trip ≤ this × the stream's p50 + [`APPROVAL_SLACK_MS`].
    pub const APPROVAL_FACTOR: f64 = 2.0;
    /// See [`APPROVAL_FACTOR`], ms.
    pub const APPROVAL_SLACK_MS: f64 = 5.0;
    /// Approval round trips measured.
    pub const APPROVAL_ROUNDS: usize = 100;
    /// A pooled start, ms, at most…
    pub const POOLED_MS: f64 = 100.0;
    /// …and at most this × docker run.
    pub const POOLED_FACTOR: f64 = 0.5;
    /// A wake ≤ this × docker run.
    pub const WAKE_FACTOR: f64 = 1.2;
    /// A Prometheus scrape, ms, at most.
    pub const METRICS_SCRAPE_MS: f64 = 50.0;
    /// Cross-replica p99 ≤ this × the single-replica p99 + [`CROSS_REPLICA_SLACK_MS`].
    pub const CROSS_REPLICA_FACTOR: f64 = 2.0;
    /// See [`CROSS_REPLICA_FACTOR`], ms.
    pub const CROSS_REPLICA_SLACK_MS: f64 = 10.0;
    /// Agents in the burst (`burst_create_50_s`).
    pub const BURST_AGENTS: usize = 50;
}

/// Runs every benchmark and returns the report. Agents it created are deleted at the end,
/// also when a step failed.
pub async fn run(config: Config) -> Result<Value> {
    let api = Api::new(&config.url, &config.token)?;
    let mut agents = Vec::new();
    // Every part may start agents the cold way (of the image under its other name): the tag is
    // made whichever part runs (`BENCH_ONLY=log` alone failed on an engine without it).
    startup::tag_cold_image(&config.image).await?;
    let outcome = match config.only {
        Some(config::Only::Multi) => many::only(&config, &api, &mut agents).await,
        Some(config::Only::Load) => load::only(&config, &api, &mut agents).await,
        Some(config::Only::Startup) => startup_only::only(&config, &api, &mut agents).await,
        Some(config::Only::Creation) => creation::only(&config, &api, &mut agents).await,
        Some(config::Only::Log) => log_only::only(&config, &api, &mut agents).await,
        Some(config::Only::Scale) => scale::only(&config, &api, &mut agents).await,
        None => measure(&config, &api, &mut agents).await,
    };
    progress(&format!("deleting {} benchmark agent(s), {DELETIONS_IN_FLIGHT} at once", agents.len()));
    let started = std::time::Instant::now();
    let api = &api;
    let mut deletions = futures_util::stream::iter(&agents)
        .map(|agent_id| async move { (agent_id, api.delete_agent(agent_id).await) })
        .buffer_unordered(DELETIONS_IN_FLIGHT);
    while let Some((agent_id, deleted)) = deletions.next().await {
        if let Err(error) = deleted {
            progress(&format!("could not delete agent {agent_id}: {error:#}"));
        }
    }
    progress(&format!("  deleted in {:.1} s", started.elapsed().as_secs_f64()));
    outcome
}

/// Agents deleted at once when the benchmark ends (the scale part leaves a thousand).
const DELETIONS_IN_FLIGHT: usize = 8;

/// The medians the start-up targets compare, ms.
#[derive(Debug, Clone, Copy)]
pub struct StartupFigures {
    /// `docker run --rm <image> echo hi` → first line.
    pub docker_run: f64,
    /// A cold start (no container yet, pool not used).
    pub cold: f64,
    /// A harness start on an awake sandbox.
    pub harness_start: f64,
    /// A wake from sleep → first update.
    pub wake: f64,
    /// A start from the warm pool (`None` without the metrics listener).
    pub pooled: Option<f64>,
}

/// The start-up targets (`cold_start_ms`, `wake_ms`, `pooled_start_ms`), each with its limit.
pub fn startup_targets(f: StartupFigures) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    let cold_limit = targets::COLD_FACTOR * f.docker_run + f.harness_start;
    map.insert(
        "cold_start_ms".to_owned(),
        json!({"target": format!("<= {} * docker_run_ms + harness_start_ms", targets::COLD_FACTOR), "limit_ms": round(cold_limit, 1), "value": round(f.cold, 1), "pass": f.cold <= cold_limit}),
    );
    let wake_limit = targets::WAKE_FACTOR * f.docker_run;
    map.insert(
        "wake_ms".to_owned(),
        json!({"target": format!("<= {} * docker_run_ms", targets::WAKE_FACTOR), "limit_ms": round(wake_limit, 1), "value": round(f.wake, 1), "pass": f.wake <= wake_limit}),
    );
    if let Some(pooled) = f.pooled {
        let limit = targets::POOLED_MS.min(targets::POOLED_FACTOR * f.docker_run);
        map.insert(
            "pooled_start_ms".to_owned(),
            json!({"target": format!("<= {} and <= {} * docker_run_ms", targets::POOLED_MS, targets::POOLED_FACTOR), "limit_ms": round(limit, 1), "value": round(pooled, 1), "pass": pooled <= limit}),
        );
    }
    map
}

/// The median of [`POOLED_REPEATS`] starts from the warm pool (each once the pool is ready
/// again); `None` without the metrics listener (which says when it is).
pub async fn pooled_starts(config: &Config, api: &Api, tag: &str, agents: &mut Vec<String>) -> Result<Option<f64>> {
    let Some(url) = &config.metrics_url else { return Ok(None) };
    progress(&format!(
        "pooled start: create agent + first prompt → first update, warm pool ready ({POOLED_REPEATS} agents)"
    ));
    let mut pooled = Vec::new();
    for n in 0..POOLED_REPEATS {
        metrics_scrape::wait_pool_ready(url).await?;
        let start = startup::pooled_start(api, &format!("bench-pooled-{tag}-{n}")).await.context("pooled start")?;
        agents.push(start.agent_id.clone());
        startup::report("  pooled start", start.cold_start_ms);
        pooled.push(start.cold_start_ms);
    }
    Ok(Some(median(&pooled)))
}

async fn measure(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let repeats = config.repeats.max(1);
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];

    // --- start-up -----------------------------------------------------------------------
    let docker_runs = startup::docker_runs(&config.image, repeats).await?;

    startup::tag_cold_image(&config.image).await?;

    let parallel_s = creation::docker_run_parallel(&config.image, &config.instance, tag).await?;
    progress(&format!("burst: {} agents created at once, each prompted, until all are awake", targets::BURST_AGENTS));
    let burst = burst::create(api, targets::BURST_AGENTS, tag, agents).await?;
    progress(&format!(
        "  all awake after {:.1} s (each: median {:.0} ms, max {:.0} ms)",
        burst.all_awake_s,
        median(&burst.each_ms),
        burst.each_ms.iter().copied().fold(0.0, f64::max)
    ));

    let colds = startup::cold_starts(api, tag, repeats, agents).await?;
    let pooled = pooled_starts(config, api, tag, agents).await?;
    let spaced = creation::spaced_cold_starts(api, tag, agents).await?;
    let main_agent = colds[0].clone();
    let container = format!("{}-{}", config.instance, main_agent.agent_id);

    progress("warm prompt → first update (harness running, session known)");
    let mut warm = Vec::new();
    let (mut warm_stored, mut warm_received) = (Vec::new(), Vec::new());
    for _ in 0..repeats.max(5) {
        let timing = startup::prompt_and_wait(api, &main_agent.session_id, "text hi", None).await?;
        warm.push(timing.first_update_ms);
        warm_stored.extend(timing.stored_gap_ms);
        warm_received.extend(timing.received_gap_ms);
    }
    progress(&format!(
        "  warm prompt → first update {:.1} ms (median); prompt event → update: stored {:.1} ms apart, received {:.1} ms apart",
        median(&warm),
        median(&warm_stored),
        median(&warm_received)
    ));

    progress(&format!("idle sandboxd memory in {container}"));
    let rss = startup::sandboxd_rss(&container).await?;
    progress(&format!("  VmRSS {} KiB, VmHWM {} KiB", rss.rss_kib, rss.hwm_kib));
    let idle_agent_kib = startup::container_rss_kib(&container).await?;
    progress(&format!("  the whole idle agent (sandboxd + fakeagent): {idle_agent_kib} KiB"));
    let holder = format!("{}-netns-{}", config.instance, main_agent.agent_id);
    let holder_kib = match startup::holder_pss_kib(&holder).await {
        Ok(kib) => {
            progress(&format!("  its network holder (what it keeps while asleep): {kib} KiB proportional"));
            Some(kib)
        }
        Err(error) => {
            progress(&format!("  its network holder: not measured ({error:#})"));
            None
        }
    };

    let harness = startup::harness_starts(api, &main_agent, repeats).await?;

    progress("wake: sleep the agent, then prompt → first update");
    let wakes =
        startup::wakes(api, &main_agent.agent_id, &main_agent.session_id, repeats, config.metrics_url.as_deref())
            .await?;

    // --- the event log under load --------------------------------------------------------
    progress("flood agent: create and warm up");
    let flood_agent = startup::cold_start(api, &format!("bench-flood-{tag}")).await?;
    agents.push(flood_agent.agent_id.clone());
    let session = flood_agent.session_id.clone();

    let server_idle = server_mem::read(config.server_pid);
    progress(&format!("flood {} 0 with {} watchers", config.flood_events, config.watchers));
    let flood = throughput::flood(api, &session, config.flood_events, 0, config.watchers, config.server_pid).await?;
    let server_flood = server_mem::read(config.server_pid);
    if let (Some(idle), Some(after)) = (server_idle, server_flood) {
        progress(&format!(
            "  server VmRSS {} KiB idle → {} KiB after the flood (peak {} KiB)",
            idle.rss_kib, after.rss_kib, after.hwm_kib
        ));
    }
    let commits = flood.commit_sizes();
    progress(&format!(
        "  delivered {:.0} events/s to every watcher ({:.2} s); fakeagent emitted {:.0}/s; {} commits, mean {:.1} events",
        flood.delivered_per_s(),
        flood.delivery_window_s(),
        flood.emitted_per_s(),
        commits.len(),
        commits.iter().sum::<usize>() as f64 / commits.len().max(1) as f64
    ));

    progress(&format!(
        "latency: flood {} {} with {} watchers",
        config.latency_events, config.latency_rate, config.watchers
    ));
    let latency = throughput::flood(
        api,
        &session,
        config.latency_events,
        config.latency_rate,
        config.watchers,
        config.server_pid,
    )
    .await?;
    let latency_commits = latency.commit_sizes();
    let (emit_to_stored, stored_to_receive) = latency.split_at_store();
    progress(&format!(
        "  p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latency.latency_percentile_ms(50.0),
        latency.latency_percentile_ms(99.0),
        latency.latency_percentile_ms(100.0)
    ));

    let cross_replica = match &config.replica_url {
        Some(url) => {
            progress(&format!(
                "cross-replica latency: flood {} {} on the first replica, {} watchers on the second ({url})",
                config.latency_events, config.latency_rate, config.watchers
            ));
            let replica = Api::new(url, &config.token)?;
            let run = throughput::flood_watched_at(
                api,
                &replica,
                &session,
                config.latency_events,
                config.latency_rate,
                config.watchers,
                None,
            )
            .await
            .context("the cross-replica latency run")?;
            progress(&format!(
                "  p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                run.latency_percentile_ms(50.0),
                run.latency_percentile_ms(99.0),
                run.latency_percentile_ms(100.0)
            ));
            Some(run)
        }
        None => None,
    };

    let payloads = flood.payloads();
    progress(&format!(
        "raw insert baseline: {} flood payloads, {} rows per INSERT … UNNEST",
        payloads.len(),
        config.raw_batch
    ));
    let baseline = raw::baseline(&config.scratch_database_url, &payloads, config.raw_batch).await?;
    progress(&format!(
        "  {:.0} rows/s plain; {:.0} rows/s with the server's per-event offset UPDATE",
        baseline.plain.rows_per_s(),
        baseline.with_offset_updates.rows_per_s()
    ));

    let stored_floor =
        floor::measure_stored_flood(&config.scratch_database_url, config.flood_events, config.watchers).await;

    let stored = api.last_seq(&session).await?;
    let top_up = config.replay_events - stored;
    let mut fill = None;
    if top_up > 0 {
        progress(&format!(
            "replay: filling the session to {} events (flood {top_up} 0, one watcher)",
            config.replay_events
        ));
        let run = throughput::flood(api, &session, u64::try_from(top_up)?, 0, 1, config.server_pid).await?;
        progress(&format!("  stored and delivered {:.0} events/s", run.delivered_per_s()));
        fill = Some(run);
    }
    progress(&format!(
        "approval round trip: ask → permission at a watcher → answer → the harness has it ({} turns)",
        targets::APPROVAL_ROUNDS
    ));
    let approvals =
        approval::roundtrips(api, targets::APPROVAL_ROUNDS, tag, agents).await.context("approval round trip")?;
    progress(&format!("  median {:.2} ms", median(&approvals)));
    let (replay_per_s, replay_s, replay_floor) = match &config.database_url {
        Some(url) => {
            progress(&format!(
                "replay: one stream from after=0 until {} events, and its floor (the same rows read and written to a \
                 socket), turn about ({} each, the best kept)",
                config.replay_events,
                replay_floor::ROUNDS
            ));
            let compared = replay_floor::compare(api, url, &session, config.replay_events, config.server_pid).await?;
            let (replay, floor) = (compared.replay(), compared.floor());
            (replay.per_s, replay.seconds, Some((floor.per_s, floor.seconds)))
        }
        None => {
            progress(&format!("replay: one stream from after=0 until {} events", config.replay_events));
            let (per_s, seconds) = throughput::replay(api, &session, config.replay_events).await?;
            progress(&format!("  {per_s:.0} events/s ({seconds:.2} s)"));
            (per_s, seconds, None)
        }
    };

    // --- many agents at once ----------------------------------------------------------------
    let many = many::measure(config, api, &burst.sessions, tag, agents).await?;
    let load = if config.load_sessions > 0 {
        Some(load::measure(config, api, &many.sessions, tag, agents).await.context("load")?)
    } else {
        None
    };

    // --- operating it ---------------------------------------------------------------------
    let scrape = match &config.metrics_url {
        Some(url) => {
            progress(&format!("metrics scrape ({} rounds) beside GET /healthz", metrics_scrape::ROUNDS));
            let scrape = metrics_scrape::measure(url, &config.url).await?;
            progress(&format!(
                "  scrape {:.2} ms ({} samples, {} bytes), healthz {:.2} ms",
                scrape.scrape_ms, scrape.samples, scrape.bytes, scrape.healthz_ms
            ));
            Some(scrape)
        }
        None => None,
    };

    // --- the report ----------------------------------------------------------------------
    let flood_per_s = flood.delivered_per_s();
    let raw_per_s = baseline.plain.rows_per_s();
    let flood_vs_raw = flood_per_s / raw_per_s;
    let p50 = latency.latency_percentile_ms(50.0);
    let p99 = latency.latency_percentile_ms(99.0);
    let cold = median(&colds.iter().map(|c| c.cold_start_ms).collect::<Vec<_>>());
    let docker_run = median(&docker_runs);
    let harness_start = median(&harness);
    let wake = median(&wakes.each.iter().map(|w| w.wake_ms).collect::<Vec<_>>());
    let approval = median(&approvals);
    let approval_limit = targets::APPROVAL_FACTOR * p50 + targets::APPROVAL_SLACK_MS;
    let mean = |sizes: &[usize]| round(sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64, 1);
    let rounded = |samples: &[f64]| samples.iter().map(|v| round(*v, 1)).collect::<Vec<_>>();

    let targets = json!({
        "flood_vs_raw": floor::flood_target(flood_per_s, raw_per_s, stored_floor),
        "p99_ms": {"target": format!("<= {}", targets::P99_MS), "value": round(p99, 2), "pass": p99 <= targets::P99_MS},
        "cross_replica_p99_ms": cross_replica.as_ref().map(|run| {
            let (value, limit) = (run.latency_percentile_ms(99.0), targets::CROSS_REPLICA_FACTOR * p99 + targets::CROSS_REPLICA_SLACK_MS);
            json!({"target": format!("<= {} × p99_ms + {} = {}", targets::CROSS_REPLICA_FACTOR, targets::CROSS_REPLICA_SLACK_MS, round(limit, 2)), "value": round(value, 2), "pass": value <= limit})
        }),
        "replay_events_per_s": {"target": format!(">= {}", targets::REPLAY_PER_S), "value": round(replay_per_s, 0), "pass": replay_per_s >= targets::REPLAY_PER_S},
        "replay_vs_floor": replay_floor.map(|(floor, _)| {
            let ratio = replay_per_s / floor;
            json!({"target": format!(">= {} (replay_events_per_s / replay_floor_events_per_s)", targets::REPLAY_VS_FLOOR), "value": round(ratio, 3), "pass": ratio >= targets::REPLAY_VS_FLOOR})
        }),
        "burst_create_50_s": {
            "target": format!("<= {} * docker_run_50_parallel_s", targets::BURST_VS_PARALLEL),
            "limit_s": round(targets::BURST_VS_PARALLEL * parallel_s, 2),
            "value": round(burst.all_awake_s, 2),
            "pass": burst.all_awake_s <= targets::BURST_VS_PARALLEL * parallel_s,
        },
        "cold_start_p95_ms": {
            "target": format!("<= {} * docker_run_ms", targets::COLD_P95_FACTOR),
            "limit_ms": round(targets::COLD_P95_FACTOR * median(&docker_runs), 1),
            "value": round(percentile(&spaced, 95.0), 1),
            "pass": percentile(&spaced, 95.0) <= targets::COLD_P95_FACTOR * median(&docker_runs),
        },
        "sandboxd_rss_kib": {"target": format!("<= {}", targets::SANDBOXD_RSS_KIB), "value": rss.rss_kib, "pass": rss.rss_kib <= targets::SANDBOXD_RSS_KIB},
        "approval_roundtrip_ms": {
            "target": format!("<= {} * p50_ms + {}", targets::APPROVAL_FACTOR, targets::APPROVAL_SLACK_MS),
            "limit_ms": round(approval_limit, 2),
            "value": round(approval, 2),
            "pass": approval <= approval_limit,
        },
    });
    let mut targets = targets;
    if let Some(map) = targets.as_object_mut() {
        map.extend(startup_targets(StartupFigures { docker_run, cold, harness_start, wake, pooled }));
        let flood_cpu = flood.server_cpu_s.map(|s| s * 1000.0 / config.flood_events as f64 * 1000.0);
        many::targets(&many, flood_cpu, map);
    }
    if let (Some(scrape), Some(map)) = (&scrape, targets.as_object_mut()) {
        map.insert(
            "metrics_scrape_ms".to_owned(),
            json!({"target": format!("<= {}", targets::METRICS_SCRAPE_MS), "value": round(scrape.scrape_ms, 2), "pass": scrape.scrape_ms <= targets::METRICS_SCRAPE_MS}),
        );
    }
    let all_pass =
        targets.as_object().is_some_and(|t| t.values().filter(|v| !v.is_null()).all(|v| v["pass"] == json!(true)));

    let mut report = json!({
        "flood_events_per_s": round(flood_per_s, 0),
        "raw_insert_rows_per_s": round(raw_per_s, 0),
        "flood_vs_raw": round(flood_vs_raw, 3),
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "cross_replica_p50_ms": cross_replica.as_ref().map(|run| round(run.latency_percentile_ms(50.0), 2)),
        "cross_replica_p99_ms": cross_replica.as_ref().map(|run| round(run.latency_percentile_ms(99.0), 2)),
        "replay_events_per_s": round(replay_per_s, 0),
        "replay_floor_events_per_s": replay_floor.map(|(f, _)| round(f, 0)),
        "replay_vs_floor": replay_floor.map(|(f, _)| round(replay_per_s / f, 3)),
        "cold_start_p95_ms": round(percentile(&spaced, 95.0), 1),
        "docker_run_50_parallel_s": round(parallel_s, 2),
        "burst_vs_parallel": round(burst.all_awake_s / parallel_s, 2),
        "cold_start_ms": round(cold, 1),
        "pooled_start_ms": pooled.map(|p| round(p, 1)),
        "docker_run_ms": round(docker_run, 1),
        "harness_start_ms": round(harness_start, 1),
        "cold_vs_docker_run": round(cold / docker_run, 2),
        "wake_ms": round(wake, 1),
        "wake_engine_ms": wakes.engine_ms.map(|e| round(e, 1)),
        "burst_create_50_s": round(burst.all_awake_s, 2),
        "approval_roundtrip_ms": round(approval, 2),
        "flood_cpu_ms_per_1k_events": flood.server_cpu_s.map(|s| round(s * 1000.0 / config.flood_events as f64 * 1000.0, 1)),
        "metrics_scrape_ms": scrape.as_ref().map(|s| round(s.scrape_ms, 2)),
        "metrics_healthz_ms": scrape.as_ref().map(|s| round(s.healthz_ms, 2)),
        "metrics_samples": scrape.as_ref().map(|s| s.samples),
        "sandboxd_rss_kib": rss.rss_kib,
        "fake_idle_agent_rss_mib": round(idle_agent_kib as f64 / 1024.0, 1),
        "sleeping_agent_holder_kib": holder_kib,
        "server_rss_idle_kib": server_idle.map(|m| m.rss_kib),
        "server_rss_flood_kib": server_flood.map(|m| m.rss_kib),
        "targets": targets,
        "all_pass": all_pass,
        "details": {
            "flood": flood.details(config.watchers),
            "multi": many::details(&many.multi),
            "multi_100": many.big.as_ref().map(many::details),
            "load": load.as_ref().map(load::details),
            "latency": {
                "events": config.latency_events,
                "rate_per_s": config.latency_rate,
                "watchers": config.watchers,
                "samples": latency.latencies_ms().len(),
                "p90_ms": round(latency.latency_percentile_ms(90.0), 2),
                "best_watcher_p50_ms": round(percentile(&latency.best_watcher_latencies_ms(), 50.0), 2),
                "best_watcher_p99_ms": round(percentile(&latency.best_watcher_latencies_ms(), 99.0), 2),
                "emit_to_stored_p50_ms": round(percentile(&emit_to_stored, 50.0), 2),
                "emit_to_stored_p99_ms": round(percentile(&emit_to_stored, 99.0), 2),
                "stored_to_receive_p50_ms": round(percentile(&stored_to_receive, 50.0), 2),
                "stored_to_receive_p99_ms": round(percentile(&stored_to_receive, 99.0), 2),
                "p999_ms": round(latency.latency_percentile_ms(99.9), 2),
                "max_ms": round(latency.latency_percentile_ms(100.0), 2),
                "commits": latency_commits.len(),
                "mean_events_per_commit": mean(&latency_commits),
                "server_cpu_s": latency.server_cpu_s.map(|s| round(s, 2)),
            },
            "raw_insert": {
                "rows": baseline.plain.rows,
                "rows_per_insert": config.raw_batch,
                "transactions": baseline.plain.batches,
                "seconds": round(baseline.plain.seconds, 3),
                "with_server_offset_updates_rows_per_s": round(baseline.with_offset_updates.rows_per_s(), 0),
            },
            "replay": {
                "events": config.replay_events,
                "seconds": round(replay_s, 3),
                "floor_seconds": replay_floor.map(|(_, s)| round(s, 3)),
                "fill_events_per_s_one_watcher": fill.as_ref().map(|f| round(f.delivered_per_s(), 0)),
            },
            "startup_samples_ms": {
                "docker_run": rounded(&docker_runs),
                "cold_start": rounded(&colds.iter().map(|c| c.cold_start_ms).collect::<Vec<_>>()),
                "harness_start": rounded(&harness),
                "wake": rounded(&wakes.each.iter().map(|w| w.wake_ms).collect::<Vec<_>>()),
                "sleep": rounded(&wakes.each.iter().map(|w| w.sleep_ms).collect::<Vec<_>>()),
                "warm_prompt": rounded(&warm),
                "cold_start_spaced_1s": rounded(&spaced),
            },
            "burst": {
                "agents": burst.agents,
                "each_create_to_first_update_p50_ms": round(median(&burst.each_ms), 1),
                "each_create_to_first_update_max_ms": round(burst.each_ms.iter().copied().fold(0.0, f64::max), 1),
            },
            "warm_prompt_ms": round(median(&warm), 1),
            "warm_prompt_event_to_update_stored_ms": rounded(&warm_stored),
            "warm_prompt_event_to_update_received_ms": rounded(&warm_received),
            "sandboxd_hwm_kib": rss.hwm_kib,
            "server_memory": {
                "idle_before_flood_rss_kib": server_idle.map(|m| m.rss_kib),
                "after_flood_rss_kib": server_flood.map(|m| m.rss_kib),
                "after_flood_hwm_kib": server_flood.map(|m| m.hwm_kib),
                "flood_growth_kib": server_idle.zip(server_flood).map(|(i, f)| f.rss_kib as i64 - i.rss_kib as i64),
            },
        },
    });
    if let Some(map) = report.as_object_mut() {
        if let Value::Object(keys) = floor::stored_flood_keys(flood_per_s, stored_floor) {
            map.extend(keys);
        }
        many::figures(&many, map);
        if let Some(Value::Object(figures)) = load.as_ref().map(load::figures) {
            map.extend(figures);
        }
    }
    Ok(report)
}
