//! `BENCH_ONLY=scale` (issue 34 item 3, "How cost grows"): what the server costs as the agents it
//! holds grow to 10, 100 and 1,000 (`--scale-agents`), most of them asleep — the way a host with
//! many agents mostly is. This module owns the growth (agents created cumulatively, at most
//! [`CREATIONS_IN_FLIGHT`] at once, each woken, and put to sleep unless among the first
//! [`AWAKE_AGENTS`]: a sleeping agent keeps its network holder), the measurements at each level
//! (the server's RSS and idle CPU, the Postgres database's size, the host's used memory, the
//! instance's containers, and the latency of listing, showing and waking agents), the cost per
//! million stored events (one flood), the report's `scale_*` keys and targets, and the chart
//! (drawn by [`crate::svg`]).

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::process::Command;

use crate::api::Api;
use crate::config::Config;
use crate::stats::{median, percentile, round};
use crate::svg::{Panel, Series};
use crate::{progress, startup, throughput};

/// Agents created at once while growing.
pub const CREATIONS_IN_FLIGHT: usize = 8;
/// The first agents stay awake; every later one is put to sleep once started.
pub const AWAKE_AGENTS: usize = 10;
/// The idle window the server's CPU is read over.
pub const IDLE_WINDOW: Duration = Duration::from_secs(10);
/// After a growth, before the idle window: the server's ready networks beyond the usual two are
/// removed 10 s after creations stop (`server/src/sandbox/ready_demand.rs`).
pub const SETTLE: Duration = Duration::from_secs(12);
/// `GET /api/v1/agents` samples per level.
pub const LIST_SAMPLES: usize = 50;
/// `GET /api/v1/agents/{id}` samples per level, spread over the agents.
pub const GET_SAMPLES: usize = 200;
/// Wakes (sleeping → awake) per level, each of another sleeping agent, slept again after.
pub const WAKE_SAMPLES: usize = 10;
/// The list's p99 at the largest level, ms, at most.
pub const LIST_P99_MS: f64 = 100.0;
/// Showing one agent: p99 at the largest level, ms, at most.
pub const GET_P99_MS: f64 = 20.0;
/// How long one agent may take to become awake (created, or woken).
const AWAKE_DEADLINE: Duration = Duration::from_secs(180);
/// Between two looks at an agent's state while it starts (growing).
const GROW_POLL: Duration = Duration::from_millis(100);
/// Between two looks at an agent's state while a timed wake runs.
const WAKE_POLL: Duration = Duration::from_millis(10);

/// What one level measured.
#[derive(Debug, Clone)]
pub struct Level {
    /// Agents held (the first [`AWAKE_AGENTS`] awake, the rest asleep).
    pub agents: usize,
    /// Agents of them awake.
    pub awake: usize,
    /// Growing from the level before to this one, seconds.
    pub grow_s: f64,
    /// The server's CPU while growing, per agent added, ms (`None` without its pid): what
    /// creating, waking and putting an agent to sleep costs the server, as agents grow.
    pub grow_server_cpu_ms_per_agent: Option<f64>,
    /// Each new agent's create → woken → asleep, ms.
    pub each_create_ms: Vec<f64>,
    /// The server's `VmRSS` after the idle window, KiB (`None` without its pid).
    pub server_rss_kib: Option<u64>,
    /// The server's CPU over the idle window, percent of one core (`None` without its pid).
    pub server_idle_cpu_pct: Option<f64>,
    /// `pg_database_size` of the server's database, bytes.
    pub pg_bytes: i64,
    /// The host's used memory (MemTotal − MemAvailable) minus what it was before the first agent,
    /// KiB.
    pub host_used_growth_kib: i64,
    /// Containers labelled with the bench instance (sandboxes, network holders, the warm pool).
    pub containers: usize,
    /// Of those, running.
    pub running_containers: usize,
    /// The running ones' processes and their shims, proportional set size, KiB.
    pub containers_pss_kib: u64,
    /// `GET /api/v1/agents`, each, ms.
    pub list_ms: Vec<f64>,
    /// `GET /api/v1/agents/{id}`, each, ms.
    pub get_ms: Vec<f64>,
    /// `POST …/wake` of a sleeping agent until it is `awake`, each, ms.
    pub wake_ms: Vec<f64>,
}

/// The cost of stored events, from one flood.
#[derive(Debug, Clone, Copy)]
pub struct EventCost {
    /// Events the flood stored (the session's seq before → after).
    pub stored_events: i64,
    /// `pg_database_size` before → after, bytes.
    pub pg_growth_bytes: i64,
    /// The server's `VmRSS` before and right after the flood, KiB.
    pub server_rss_before_kib: Option<u64>,
    /// See above.
    pub server_rss_after_kib: Option<u64>,
    /// Delivered events/s (one watcher).
    pub events_per_s: f64,
}

impl EventCost {
    /// Postgres bytes per stored event × 10⁶, MiB.
    pub fn pg_mib_per_million(&self) -> f64 {
        self.pg_growth_bytes as f64 / self.stored_events.max(1) as f64 * 1e6 / MIB
    }
}

const MIB: f64 = 1024.0 * 1024.0;

/// The agents the scale part made, by kind.
#[derive(Debug, Default)]
struct Held {
    /// Left awake.
    awake: Vec<String>,
    /// Put to sleep.
    asleep: Vec<String>,
}

impl Held {
    fn len(&self) -> usize {
        self.awake.len() + self.asleep.len()
    }

    fn all(&self) -> impl Iterator<Item = &String> {
        self.awake.iter().chain(&self.asleep)
    }
}

/// Runs the scale part and returns its report. Every agent it makes goes to `agents` as soon as
/// it exists (deleted when the benchmark ends, whatever happens).
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let levels = levels(&config.scale_agents)?;
    let url =
        config.database_url.as_deref().context("BENCH_ONLY=scale needs the server's database (--database-url)")?;
    let pool =
        PgPoolOptions::new().max_connections(1).connect(url).await.context("connecting to the server's database")?;
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    startup::tag_cold_image(&config.image).await?;

    let host_used_before = host_used_kib().context("reading /proc/meminfo")?;
    let pg_before = database_bytes(&pool).await?;
    let rss_before = crate::server_mem::read(config.server_pid).map(|m| m.rss_kib);
    progress(&format!(
        "scale: levels {levels:?} ({AWAKE_AGENTS} awake, the rest asleep; {CREATIONS_IN_FLIGHT} creations at once); \
         before: server {} MiB, Postgres {:.1} MiB",
        rss_before.map_or("?".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
        pg_before as f64 / MIB
    ));

    let mut held = Held::default();
    let mut measured = Vec::new();
    for &level in &levels {
        let started = Instant::now();
        let cpu_before = config.server_pid.and_then(throughput::cpu_seconds);
        let each_create_ms = grow(api, tag, &mut held, level, agents).await?;
        let grow_s = started.elapsed().as_secs_f64();
        let grow_cpu_ms_per_agent = cpu_before
            .zip(config.server_pid.and_then(throughput::cpu_seconds))
            .map(|(before, after)| (after - before) * 1000.0 / each_create_ms.len().max(1) as f64);
        progress(&format!(
            "  {level} agents: grown in {grow_s:.1} s (each create → awake → asleep: p50 {:.0} ms, max {:.0} ms; \
             server CPU {} ms per agent)",
            median(&each_create_ms),
            each_create_ms.iter().copied().fold(0.0, f64::max),
            grow_cpu_ms_per_agent.map_or("?".to_owned(), |c| format!("{c:.1}"))
        ));
        let grown = Grown { grow_s, grow_server_cpu_ms_per_agent: grow_cpu_ms_per_agent, each_create_ms };
        let measured_level = measure_level(config, api, &pool, &held, host_used_before, grown)
            .await
            .with_context(|| format!("measuring at {level} agents"))?;
        report_level(&measured_level);
        measured.push(measured_level);
    }

    let cost = event_cost(config, api, &pool, &held).await.context("the flood for the cost of stored events")?;
    progress(&format!(
        "  {} events stored: Postgres +{:.1} MiB ({:.1} MiB per million), server {} → {} MiB",
        cost.stored_events,
        cost.pg_growth_bytes as f64 / MIB,
        cost.pg_mib_per_million(),
        cost.server_rss_before_kib.map_or("?".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
        cost.server_rss_after_kib.map_or("?".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
    ));

    let svg = crate::svg::line_chart(
        "agenthold: what the server costs as agents grow (all but 10 asleep)",
        "agents",
        &chart_panels(&measured),
    );
    write_picture(&config.scale_svg, &svg)?;
    if let Some(plot) = &config.scale_plot {
        write_picture(plot, &svg)?;
    }
    pool.close().await;
    Ok(report(&measured, &cost, pg_before, rss_before))
}

/// The levels asked for, ascending, without repeats; at least one above zero.
fn levels(asked: &[usize]) -> Result<Vec<usize>> {
    let mut levels: Vec<usize> = asked.iter().copied().filter(|n| *n > 0).collect();
    levels.sort_unstable();
    levels.dedup();
    if levels.is_empty() {
        bail!("--scale-agents names no level above 0 (e.g. 10,100,1000)");
    }
    Ok(levels)
}

/// One agent's creation: its id as soon as it existed, and how it went.
struct Made {
    index: usize,
    agent_id: Option<String>,
    outcome: Result<f64>,
}

/// Creates agents until `held` has `level` of them, [`CREATIONS_IN_FLIGHT`] at once: each is
/// created (the cold image: never a warm-pool sandbox), woken until `awake`, and put to sleep
/// unless among the first [`AWAKE_AGENTS`]. Returns each one's create → done, ms. On a failure no
/// new creation starts; those in flight finish, and every agent made is in `agents`.
async fn grow(api: &Api, tag: &str, held: &mut Held, level: usize, agents: &mut Vec<String>) -> Result<Vec<f64>> {
    let failed = AtomicBool::new(false);
    let failed = &failed;
    let mut made = futures_util::stream::iter(held.len()..level)
        .map(|index| async move {
            if failed.load(Ordering::Relaxed) {
                return Made { index, agent_id: None, outcome: Err(anyhow::anyhow!("not started: another failed")) };
            }
            let made = make_agent(api, tag, index).await;
            if made.outcome.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            made
        })
        .buffer_unordered(CREATIONS_IN_FLIGHT);
    let mut each_ms = Vec::new();
    let mut first_error = None;
    while let Some(made) = made.next().await {
        if let Some(agent_id) = &made.agent_id {
            agents.push(agent_id.clone());
        }
        match (made.outcome, made.agent_id) {
            (Ok(ms), Some(agent_id)) => {
                each_ms.push(ms);
                if made.index < AWAKE_AGENTS { held.awake.push(agent_id) } else { held.asleep.push(agent_id) }
            }
            (Err(error), _) => {
                first_error.get_or_insert(error.context(format!("agent {} of the scale part", made.index)));
            }
            (Ok(_), None) => {}
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(each_ms),
    }
}

/// Creates the `index`th agent, wakes it until `awake`, and puts it to sleep unless it is among
/// the first [`AWAKE_AGENTS`]: its id (once it exists) and create → done, ms.
async fn make_agent(api: &Api, tag: &str, index: usize) -> Made {
    let started = Instant::now();
    let agent_id = match api.create_agent_of(&format!("bench-scale-{tag}-{index}"), Some(startup::COLD_IMAGE)).await {
        Ok(id) => id,
        Err(error) => return Made { index, agent_id: None, outcome: Err(error) },
    };
    let outcome = async {
        api.wake(&agent_id).await?;
        wait_until_awake(api, &agent_id, GROW_POLL).await?;
        if index >= AWAKE_AGENTS {
            api.sleep(&agent_id).await?;
        }
        Ok(started.elapsed().as_secs_f64() * 1000.0)
    }
    .await;
    Made { index, agent_id: Some(agent_id), outcome }
}

/// Polls an agent until its state is `awake`; fails on `error` (with its reason) or after
/// [`AWAKE_DEADLINE`].
async fn wait_until_awake(api: &Api, agent_id: &str, poll: Duration) -> Result<()> {
    let deadline = Instant::now() + AWAKE_DEADLINE;
    loop {
        let (state, reason) = api.agent_state(agent_id).await?;
        match state.as_str() {
            "awake" => return Ok(()),
            "error" => bail!("agent {agent_id} is in error: {}", reason.unwrap_or_default()),
            _ if Instant::now() > deadline => {
                bail!("agent {agent_id} not awake after {} s (still {state})", AWAKE_DEADLINE.as_secs())
            }
            _ => tokio::time::sleep(poll).await,
        }
    }
}

/// What growing to a level took.
struct Grown {
    grow_s: f64,
    grow_server_cpu_ms_per_agent: Option<f64>,
    each_create_ms: Vec<f64>,
}

/// The measurements at one level, in this order: a settling pause, the idle window (nothing
/// asked of the server), memory and sizes, then the request latencies and the wakes.
async fn measure_level(
    config: &Config,
    api: &Api,
    pool: &PgPool,
    held: &Held,
    host_used_before: i64,
    grown: Grown,
) -> Result<Level> {
    tokio::time::sleep(SETTLE).await;
    let cpu_before = config.server_pid.and_then(throughput::cpu_seconds);
    let window = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    let cpu_after = config.server_pid.and_then(throughput::cpu_seconds);
    let window_s = window.elapsed().as_secs_f64();
    let server_idle_cpu_pct = cpu_before.zip(cpu_after).map(|(before, after)| (after - before) / window_s * 100.0);
    let server_rss_kib = crate::server_mem::read(config.server_pid).map(|m| m.rss_kib);
    let pg_bytes = database_bytes(pool).await?;
    let host_used_growth_kib = host_used_kib().context("reading /proc/meminfo")? - host_used_before;
    let containers = container_ids(&config.instance, true).await?.len();
    let running = container_ids(&config.instance, false).await?;
    let running_containers = running.len();
    let containers_pss_kib = containers_pss_kib(&running).await?;

    let mut list_ms = Vec::with_capacity(LIST_SAMPLES);
    for _ in 0..LIST_SAMPLES {
        let started = Instant::now();
        let listed = api.list_agents().await?;
        list_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        if listed < held.len() {
            bail!("the agent list has {listed} agents, fewer than the {} made", held.len());
        }
    }
    let all: Vec<&String> = held.all().collect();
    let mut get_ms = Vec::with_capacity(GET_SAMPLES);
    for sample in 0..GET_SAMPLES {
        let agent_id = all[sample * all.len() / GET_SAMPLES];
        let started = Instant::now();
        api.agent_state(agent_id).await?;
        get_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let mut wake_ms = Vec::new();
    let asleep = &held.asleep;
    for sample in 0..WAKE_SAMPLES.min(asleep.len()) {
        let agent_id = &asleep[sample * asleep.len() / WAKE_SAMPLES.min(asleep.len())];
        let started = Instant::now();
        api.wake(agent_id).await?;
        wait_until_awake(api, agent_id, WAKE_POLL).await?;
        wake_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        api.sleep(agent_id).await.with_context(|| format!("putting {agent_id} back to sleep"))?;
    }
    Ok(Level {
        agents: held.len(),
        awake: held.awake.len(),
        grow_s: grown.grow_s,
        grow_server_cpu_ms_per_agent: grown.grow_server_cpu_ms_per_agent,
        each_create_ms: grown.each_create_ms,
        server_rss_kib,
        server_idle_cpu_pct,
        pg_bytes,
        host_used_growth_kib,
        containers,
        running_containers,
        containers_pss_kib,
        list_ms,
        get_ms,
        wake_ms,
    })
}

fn report_level(level: &Level) {
    let p = |samples: &[f64], q: f64| {
        if samples.is_empty() { "-".to_owned() } else { format!("{:.1}", percentile(samples, q)) }
    };
    progress(&format!(
        "  {} agents: server {} MiB, idle CPU {} %; Postgres {:.1} MiB; host {:+.0} MiB; {} containers ({} running, \
         {:.0} MiB PSS with their shims); list p50/p99 {}/{} ms, get {}/{} ms, wake {}/{} ms",
        level.agents,
        level.server_rss_kib.map_or("?".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0)),
        level.server_idle_cpu_pct.map_or("?".to_owned(), |c| format!("{c:.2}")),
        level.pg_bytes as f64 / MIB,
        level.host_used_growth_kib as f64 / 1024.0,
        level.containers,
        level.running_containers,
        level.containers_pss_kib as f64 / 1024.0,
        p(&level.list_ms, 50.0),
        p(&level.list_ms, 99.0),
        p(&level.get_ms, 50.0),
        p(&level.get_ms, 99.0),
        p(&level.wake_ms, 50.0),
        p(&level.wake_ms, 99.0),
    ));
}

/// One flood of [`Config::scale_flood_events`] on a new session of an awake agent, one watcher:
/// the database's growth per stored event, and the server's RSS after.
async fn event_cost(config: &Config, api: &Api, pool: &PgPool, held: &Held) -> Result<EventCost> {
    let agent_id = held.awake.first().context("no awake agent to flood")?;
    let session = api.create_session(agent_id).await?;
    progress(&format!("cost of stored events: flood {} 0 on one session, one watcher", config.scale_flood_events));
    let seq_before = api.last_seq(&session).await?;
    let pg_before = database_bytes(pool).await?;
    let server_rss_before_kib = crate::server_mem::read(config.server_pid).map(|m| m.rss_kib);
    let flood = throughput::flood(api, &session, config.scale_flood_events, 0, 1, config.server_pid).await?;
    let server_rss_after_kib = crate::server_mem::read(config.server_pid).map(|m| m.rss_kib);
    let pg_after = database_bytes(pool).await?;
    let stored_events = api.last_seq(&session).await? - seq_before;
    if stored_events <= 0 {
        bail!("the flood stored no events");
    }
    Ok(EventCost {
        stored_events,
        pg_growth_bytes: pg_after - pg_before,
        server_rss_before_kib,
        server_rss_after_kib,
        events_per_s: flood.delivered_per_s(),
    })
}

/// `pg_database_size` of the database `pool` is connected to, bytes.
async fn database_bytes(pool: &PgPool) -> Result<i64> {
    sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(pool)
        .await
        .context("reading pg_database_size")
}

/// The host's used memory now: MemTotal − MemAvailable, KiB.
fn host_used_kib() -> Result<i64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    used_kib(&meminfo).context("no MemTotal or MemAvailable in /proc/meminfo")
}

/// MemTotal − MemAvailable of a `/proc/meminfo` text, KiB.
fn used_kib(meminfo: &str) -> Option<i64> {
    let field = |name: &str| -> Option<i64> {
        meminfo.lines().find_map(|line| line.strip_prefix(name)?.split_whitespace().next()?.parse().ok())
    };
    Some(field("MemTotal:")? - field("MemAvailable:")?)
}

/// The ids of the containers labelled `agenthold.instance=<instance>`: all of them, or the
/// running ones.
async fn container_ids(instance: &str, all: bool) -> Result<Vec<String>> {
    let filter = format!("label=agenthold.instance={instance}");
    let mut args = vec!["ps", "-q", "--no-trunc", "--filter", &filter];
    if all {
        args.push("-a");
    }
    let output = Command::new("docker").args(&args).stdin(Stdio::null()).output().await.context("docker ps")?;
    if !output.status.success() {
        bail!("docker ps: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// What the running containers cost the host, KiB: the proportional set size of every process
/// in each one's memory cgroup and of the `containerd-shim` that is its first process' parent,
/// read from the host's `/proc` (the benchmark runs on the engine's host). Unlike the host's
/// used memory, nothing else on the machine moves it.
async fn containers_pss_kib(ids: &[String]) -> Result<u64> {
    let mut total = 0;
    for chunk in ids.chunks(100) {
        let output = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Pid}}"])
            .args(chunk)
            .stdin(Stdio::null())
            .output()
            .await
            .context("docker inspect")?;
        // A container that stopped meanwhile is no longer there to cost anything.
        for pid in String::from_utf8_lossy(&output.stdout).lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            if pid != 0 {
                total += container_pss_kib(pid);
            }
        }
    }
    Ok(total)
}

/// The PSS of the processes in the memory cgroup of `pid` and of `pid`'s parent (its shim), KiB;
/// a process gone meanwhile counts nothing.
fn container_pss_kib(pid: u32) -> u64 {
    let procs = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .and_then(|cgroups| memory_cgroup(&cgroups))
        .and_then(|path| std::fs::read_to_string(cgroup_procs_path(&path)).ok())
        .map(|procs| procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()).collect::<Vec<_>>())
        .unwrap_or_else(|| vec![pid]);
    let shim = parent_pid(pid);
    procs.into_iter().chain(shim).filter_map(pss_kib).sum()
}

/// The memory cgroup's path in a `/proc/<pid>/cgroup` text: v1's `memory` line, else v2's `0::`.
fn memory_cgroup(cgroups: &str) -> Option<String> {
    let v1 = cgroups.lines().find_map(|l| {
        let mut fields = l.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == "memory").then(|| path.to_owned())
    });
    v1.or_else(|| cgroups.lines().find_map(|l| l.strip_prefix("0::").map(str::to_owned)))
}

fn cgroup_procs_path(path: &str) -> String {
    let v1 = format!("/sys/fs/cgroup/memory{path}/cgroup.procs");
    if Path::new(&v1).exists() { v1 } else { format!("/sys/fs/cgroup{path}/cgroup.procs") }
}

/// A process' parent (the fourth field of `/proc/<pid>/stat`).
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// `Pss` of `/proc/<pid>/smaps_rollup`, KiB.
fn pss_kib(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    rollup.lines().find_map(|l| l.strip_prefix("Pss:")?.split_whitespace().next()?.parse().ok())
}

/// The chart's panels: what the host's memory grew by; the server's RSS and the database, MiB;
/// the p99 of listing and showing agents, and of a wake, ms (each on a scale of its own: a wake is
/// a container start, ten times a list).
fn chart_panels(levels: &[Level]) -> Vec<Panel> {
    let points = |value: &dyn Fn(&Level) -> Option<f64>| -> Vec<(f64, f64)> {
        levels.iter().filter_map(|l| Some((l.agents as f64, value(l)?))).collect()
    };
    let p99 = |samples: &[f64]| (!samples.is_empty()).then(|| percentile(samples, 99.0));
    let series =
        |label: &str, color: &'static str, points: Vec<(f64, f64)>| Series { label: label.to_owned(), color, points };
    let panel =
        |title: &str, unit: &str, series: Vec<Series>| Panel { title: title.to_owned(), unit: unit.to_owned(), series };
    vec![
        panel(
            "The host's memory: used (growth since before the first agent); the containers' PSS",
            "MiB",
            vec![
                series("host used (growth)", "#2ca02c", points(&|l| Some(l.host_used_growth_kib as f64 / 1024.0))),
                series("containers + shims (PSS)", "#17becf", points(&|l| Some(l.containers_pss_kib as f64 / 1024.0))),
            ],
        ),
        panel(
            "The server and its database",
            "MiB",
            vec![
                series("server RSS", "#1f77b4", points(&|l| l.server_rss_kib.map(|k| k as f64 / 1024.0))),
                series("Postgres database", "#ff7f0e", points(&|l| Some(l.pg_bytes as f64 / MIB))),
            ],
        ),
        panel(
            "API latency, p99",
            "ms",
            vec![
                series("list agents", "#9467bd", points(&|l| p99(&l.list_ms))),
                series("show one agent", "#8c564b", points(&|l| p99(&l.get_ms))),
            ],
        ),
        panel("A wake, p99", "ms", vec![series("wake → awake", "#d62728", points(&|l| p99(&l.wake_ms)))]),
    ]
}

/// Writes the chart, making its directory.
fn write_picture(path: &Path, svg: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    progress(&format!("  chart: {}", path.display()));
    Ok(())
}

/// The report: `scale_<N>_*` per level, the cost of stored events, targets at the largest level,
/// and `details.scale`.
fn report(levels: &[Level], cost: &EventCost, pg_before: i64, rss_before: Option<u64>) -> Value {
    let mib = |kib: u64| round(kib as f64 / 1024.0, 1);
    let pct = |samples: &[f64], p: f64| (!samples.is_empty()).then(|| round(percentile(samples, p), 2));
    let mut report = Map::new();
    report.insert("scale_agents".to_owned(), json!(levels.iter().map(|l| l.agents).collect::<Vec<_>>()));
    for level in levels {
        let key = |name: &str| format!("scale_{}_{name}", level.agents);
        let figures = [
            ("server_rss_mib", json!(level.server_rss_kib.map(mib))),
            ("server_idle_cpu_pct", json!(level.server_idle_cpu_pct.map(|c| round(c, 2)))),
            ("grow_server_cpu_ms_per_agent", json!(level.grow_server_cpu_ms_per_agent.map(|c| round(c, 1)))),
            ("pg_mib", json!(round(level.pg_bytes as f64 / MIB, 1))),
            ("host_used_mib", json!(round(level.host_used_growth_kib as f64 / 1024.0, 0))),
            ("containers", json!(level.containers)),
            ("containers_pss_mib", json!(round(level.containers_pss_kib as f64 / 1024.0, 1))),
            ("list_p50_ms", json!(pct(&level.list_ms, 50.0))),
            ("list_p99_ms", json!(pct(&level.list_ms, 99.0))),
            ("get_p50_ms", json!(pct(&level.get_ms, 50.0))),
            ("get_p99_ms", json!(pct(&level.get_ms, 99.0))),
            ("wake_p50_ms", json!(pct(&level.wake_ms, 50.0))),
            ("wake_p99_ms", json!(pct(&level.wake_ms, 99.0))),
        ];
        for (name, value) in figures {
            report.insert(key(name), value);
        }
    }
    report.insert("scale_pg_mib_per_million_events".to_owned(), json!(round(cost.pg_mib_per_million(), 1)));
    report.insert("scale_server_rss_after_flood_mib".to_owned(), json!(cost.server_rss_after_kib.map(mib)));

    let mut targets = Map::new();
    if let Some(largest) = levels.last() {
        let checks = [
            ("scale_list_p99_ms", "GET /api/v1/agents", &largest.list_ms, LIST_P99_MS),
            ("scale_get_p99_ms", "GET /api/v1/agents/{id}", &largest.get_ms, GET_P99_MS),
        ];
        for (name, what, samples, limit) in checks {
            let value = percentile(samples, 99.0);
            targets.insert(
                name.to_owned(),
                json!({"target": format!("<= {limit} ({what}, p99 at {} agents)", largest.agents),
                       "agents": largest.agents, "value": round(value, 2), "pass": value <= limit}),
            );
        }
    }
    let all_pass = targets.values().all(|v| v["pass"] == json!(true));
    report.insert("targets".to_owned(), Value::Object(targets));
    report.insert("all_pass".to_owned(), json!(all_pass));

    let level_details: Vec<Value> = levels
        .iter()
        .map(|l| {
            json!({
                "agents": l.agents,
                "awake": l.awake,
                "grow_s": round(l.grow_s, 1),
                "each_create_to_asleep_p50_ms": round(median(&l.each_create_ms), 0),
                "each_create_to_asleep_max_ms": round(l.each_create_ms.iter().copied().fold(0.0, f64::max), 0),
                "server_rss_kib": l.server_rss_kib,
                "pg_bytes": l.pg_bytes,
                "host_used_growth_kib": l.host_used_growth_kib,
                "containers": l.containers,
                "running_containers": l.running_containers,
                "list_max_ms": pct(&l.list_ms, 100.0),
                "get_max_ms": pct(&l.get_ms, 100.0),
                "wake_ms": l.wake_ms.iter().map(|v| round(*v, 1)).collect::<Vec<_>>(),
            })
        })
        .collect();
    report.insert(
        "details".to_owned(),
        json!({"scale": {
            "awake_agents": AWAKE_AGENTS,
            "creations_in_flight": CREATIONS_IN_FLIGHT,
            "settle_s": SETTLE.as_secs(),
            "idle_window_s": IDLE_WINDOW.as_secs(),
            "before": {"server_rss_kib": rss_before, "pg_bytes": pg_before},
            "levels": level_details,
            "flood": {
                "stored_events": cost.stored_events,
                "pg_growth_bytes": cost.pg_growth_bytes,
                "pg_bytes_per_event": round(cost.pg_growth_bytes as f64 / cost.stored_events.max(1) as f64, 1),
                "events_per_s": round(cost.events_per_s, 0),
                "server_rss_before_kib": cost.server_rss_before_kib,
                "server_rss_after_kib": cost.server_rss_after_kib,
            },
        }}),
    );
    Value::Object(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_sorted_distinct_and_positive() {
        assert_eq!(levels(&[100, 10, 0, 1000, 10]).ok(), Some(vec![10, 100, 1000]));
        assert!(levels(&[0]).is_err());
        assert!(levels(&[]).is_err());
    }

    #[test]
    fn host_used_is_total_minus_available() {
        let meminfo = "MemTotal:       24684000 kB\nMemFree:         9000000 kB\nMemAvailable:   23000000 kB\n";
        assert_eq!(used_kib(meminfo), Some(1_684_000));
        assert_eq!(used_kib("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn finds_the_memory_cgroup() {
        let v1 = "12:pids:/docker/abc\n9:memory:/docker/abc\n1:name=systemd:/docker/abc\n";
        assert_eq!(memory_cgroup(v1).as_deref(), Some("/docker/abc"));
        let v2 = "0::/system.slice/docker-abc.scope\n";
        assert_eq!(memory_cgroup(v2).as_deref(), Some("/system.slice/docker-abc.scope"));
        assert_eq!(memory_cgroup(""), None);
    }

    #[test]
    fn reads_its_own_process() {
        let me = std::process::id();
        assert!(pss_kib(me).is_some_and(|kib| kib > 0));
        assert!(parent_pid(me).is_some());
    }

    #[test]
    fn cost_per_million_events() {
        let cost = EventCost {
            stored_events: 200_002,
            pg_growth_bytes: 80_000_800,
            server_rss_before_kib: None,
            server_rss_after_kib: None,
            events_per_s: 0.0,
        };
        // 400 bytes an event: 400 MB per million, 381.5 MiB.
        assert!((cost.pg_mib_per_million() - 400e6 / MIB).abs() < 1e-6);
    }
}
