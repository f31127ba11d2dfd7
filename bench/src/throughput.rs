//! The event log under load: a flood delivered to many watchers, emit → receive latency at a
//! steady rate, and a replay from seq 0.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures_util::future::try_join_all;

use crate::api::Api;
use crate::stats::percentile;
use crate::watch::{Received, Watcher};

/// How long a flood, fill or replay may take.
const DEADLINE: Duration = Duration::from_secs(600);

/// What every watcher saw of one flood turn.
pub struct FloodRun {
    /// Per watcher, the events of the turn (prompt excluded, `turn_end` included).
    pub watchers: Vec<Vec<Received>>,
    /// Flood chunks the script asked for.
    pub count: u64,
    /// Seconds of server CPU (user + system) during the turn, when the pid is known.
    pub server_cpu_s: Option<f64>,
    /// Seconds of this process's CPU over the same span: the watchers reading and decoding
    /// every event (the floor's watchers only read bytes), on the same cores as the server.
    pub client_cpu_s: Option<f64>,
    /// Wall seconds from the prompt to the last watcher's `turn_end`.
    pub wall_s: f64,
}

/// Runs `flood <count> <rate>` on a session with `watchers` streams open from its current end.
/// The first watcher keeps payloads and `created_at`.
pub async fn flood(
    api: &Api,
    session_id: &str,
    count: u64,
    rate: u64,
    watchers: usize,
    server_pid: Option<u32>,
) -> Result<FloodRun> {
    flood_watched_at(api, api, session_id, count, rate, watchers, server_pid).await
}

/// [`flood`], with the watchers on `watch_api` (another replica of the same server: the events
/// reach them across replicas).
pub async fn flood_watched_at(
    api: &Api,
    watch_api: &Api,
    session_id: &str,
    count: u64,
    rate: u64,
    watchers: usize,
    server_pid: Option<u32>,
) -> Result<FloodRun> {
    let last = api.last_seq(session_id).await?;
    let mut streams = Vec::with_capacity(watchers);
    for index in 0..watchers {
        let watcher = Watcher::connect(watch_api, session_id, last).await?;
        streams.push(if index == 0 { watcher.keep_payloads() } else { watcher });
    }
    // A paced flood gets three times its own length on top (`make chaos` floods for minutes).
    let paced = count.checked_div(rate).map_or(Duration::ZERO, |secs| Duration::from_secs(secs) * 3);
    let deadline = Instant::now() + DEADLINE + paced;
    let cpu_before = server_pid.and_then(cpu_seconds);
    let client_before = cpu_seconds(std::process::id());
    let started = Instant::now();
    let collecting = streams.into_iter().map(|mut watcher| async move {
        let events = watcher.until_turn_end(deadline).await;
        watcher.close().await;
        events
    });
    let collect = tokio::spawn(try_join_all(collecting));
    api.prompt(session_id, &format!("flood {count} {rate}")).await?;
    let watchers = collect.await.context("a watcher task failed")??;
    let wall_s = started.elapsed().as_secs_f64();
    let server_cpu_s = match (cpu_before, server_pid.and_then(cpu_seconds)) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let client_cpu_s = client_before.zip(cpu_seconds(std::process::id())).map(|(before, after)| after - before);
    let run = FloodRun { watchers, count, server_cpu_s, client_cpu_s, wall_s };
    run.check()?;
    Ok(run)
}

impl FloodRun {
    /// Every watcher got every chunk once, in order, with gapless seqs.
    fn check(&self) -> Result<()> {
        for (index, events) in self.watchers.iter().enumerate() {
            for pair in events.windows(2) {
                if pair[1].seq != pair[0].seq + 1 {
                    bail!("watcher {index}: seq {} after {}", pair[1].seq, pair[0].seq);
                }
            }
            let marks: Vec<u64> = events.iter().filter_map(|e| e.flood.map(|f| f.i)).collect();
            if marks.len() as u64 != self.count || marks.iter().enumerate().any(|(k, i)| *i != k as u64 + 1) {
                bail!("watcher {index} got {} of {} flood chunks (or out of order)", marks.len(), self.count);
            }
        }
        Ok(())
    }

    fn floods(&self) -> impl Iterator<Item = &Received> {
        self.watchers.iter().flatten().filter(|e| e.flood.is_some())
    }

    /// Chunks per second delivered to every watcher: (count − 1) over the time from the first
    /// chunk any watcher received to the last chunk the slowest watcher received.
    pub fn delivered_per_s(&self) -> f64 {
        let first = self.floods().map(|e| e.at).min();
        let last = self.floods().map(|e| e.at).max();
        match (first, last) {
            (Some(first), Some(last)) if last > first => (self.count - 1) as f64 / (last - first).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// The same window, in seconds.
    pub fn delivery_window_s(&self) -> f64 {
        let first = self.floods().map(|e| e.at).min();
        let last = self.floods().map(|e| e.at).max();
        match (first, last) {
            (Some(first), Some(last)) => (last - first).as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Chunks per second as fakeagent wrote them (first to last `emittedAtUs`).
    pub fn emitted_per_s(&self) -> f64 {
        let marks: Vec<i64> =
            self.watchers.first().into_iter().flatten().filter_map(|e| e.flood.map(|f| f.emitted_at_us)).collect();
        match (marks.iter().min(), marks.iter().max()) {
            (Some(first), Some(last)) if last > first => (self.count - 1) as f64 / ((last - first) as f64 / 1e6),
            _ => 0.0,
        }
    }

    /// When the first chunk reached any watcher.
    pub fn first_received(&self) -> Option<Instant> {
        self.floods().map(|e| e.at).min()
    }

    /// When the last chunk reached the slowest watcher.
    pub fn last_received(&self) -> Option<Instant> {
        self.floods().map(|e| e.at).max()
    }

    /// Emit → receive latencies over all watchers, ms.
    pub fn latencies_ms(&self) -> Vec<f64> {
        self.floods().filter_map(|e| e.flood.map(|f| (e.at_unix_us - f.emitted_at_us) as f64 / 1000.0)).collect()
    }

    /// The latency percentile `p`, ms.
    pub fn latency_percentile_ms(&self, p: f64) -> f64 {
        percentile(&self.latencies_ms(), p)
    }

    /// Per chunk, the lowest emit → receive latency over all watchers, ms. A delay that shows
    /// here hit every watcher (upstream of the fan-out: tunnel, appender, commit); one that shows
    /// only in [`Self::latencies_ms`] hit single sockets.
    pub fn best_watcher_latencies_ms(&self) -> Vec<f64> {
        let mut best: std::collections::HashMap<u64, f64> = std::collections::HashMap::new();
        for event in self.floods() {
            let Some(mark) = event.flood else { continue };
            let latency = (event.at_unix_us - mark.emitted_at_us) as f64 / 1000.0;
            let slot = best.entry(mark.i).or_insert(latency);
            *slot = slot.min(latency);
        }
        best.into_values().collect()
    }

    /// For the first watcher's chunks, ms: emit → `created_at` (the storing transaction's
    /// `now()`, taken when it began) and `created_at` → receive.
    pub fn split_at_store(&self) -> (Vec<f64>, Vec<f64>) {
        let mut to_store = Vec::new();
        let mut to_receive = Vec::new();
        for event in self.watchers.first().into_iter().flatten() {
            let (Some(mark), Some(created)) = (event.flood, event.created_at.as_deref()) else { continue };
            let Ok(created) = chrono::DateTime::parse_from_rfc3339(created) else { continue };
            let stored_us = created.timestamp_micros();
            to_store.push((stored_us - mark.emitted_at_us) as f64 / 1000.0);
            to_receive.push((event.at_unix_us - stored_us) as f64 / 1000.0);
        }
        (to_store, to_receive)
    }

    /// What explains a flood's figure, for `details.flood`: the delivery window, fakeagent's own
    /// rate, the server's commits, its CPU, and the latency split at the store (emit → the
    /// storing transaction's `now()` → received).
    pub fn details(&self, watchers: usize) -> serde_json::Value {
        let commits = self.commit_sizes();
        let (to_store, to_receive) = self.split_at_store();
        let r1 = |v: f64| crate::stats::round(v, 1);
        serde_json::json!({
            "events": self.count,
            "watchers": watchers,
            "delivery_window_s": crate::stats::round(self.delivery_window_s(), 3),
            "prompt_to_last_turn_end_s": crate::stats::round(self.wall_s, 3),
            "fakeagent_emitted_per_s": crate::stats::round(self.emitted_per_s(), 0),
            "commits": commits.len(),
            "mean_events_per_commit": r1(commits.iter().sum::<usize>() as f64 / commits.len().max(1) as f64),
            "max_events_per_commit": commits.iter().max(),
            "server_cpu_s": self.server_cpu_s.map(|s| crate::stats::round(s, 2)),
            "client_cpu_s": self.client_cpu_s.map(|s| crate::stats::round(s, 2)),
            "emit_to_receive_p50_ms": r1(self.latency_percentile_ms(50.0)),
            "emit_to_receive_p99_ms": r1(self.latency_percentile_ms(99.0)),
            "best_watcher_p50_ms": r1(percentile(&self.best_watcher_latencies_ms(), 50.0)),
            "emit_to_stored_p50_ms": r1(percentile(&to_store, 50.0)),
            "emit_to_stored_p99_ms": r1(percentile(&to_store, 99.0)),
            "stored_to_receive_p50_ms": r1(percentile(&to_receive, 50.0)),
            "stored_to_receive_p99_ms": r1(percentile(&to_receive, 99.0)),
        })
    }

    /// The flood payloads the first watcher kept (JSON text), for the raw baseline.
    pub fn payloads(&self) -> Vec<String> {
        self.watchers
            .first()
            .into_iter()
            .flatten()
            .filter(|e| e.flood.is_some())
            .filter_map(|e| e.payload.clone())
            .collect()
    }

    /// Sizes of the server's commits of flood chunks: events that share `created_at` (the
    /// storing transaction's `now()`) were committed together.
    pub fn commit_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = Vec::new();
        let mut current: Option<&str> = None;
        for event in self.watchers.first().into_iter().flatten().filter(|e| e.flood.is_some()) {
            let created = event.created_at.as_deref();
            if created.is_some() && created == current {
                if let Some(last) = sizes.last_mut() {
                    *last += 1;
                }
            } else {
                sizes.push(1);
                current = created;
            }
        }
        sizes
    }
}

/// Times one new stream from `after=0` until `count` events arrived; returns events per second.
pub async fn replay(api: &Api, session_id: &str, count: i64) -> Result<(f64, f64)> {
    let started = Instant::now();
    let mut watcher = Watcher::connect(api, session_id, 0).await?;
    let last_seq = watcher.count(usize::try_from(count)?, Instant::now() + DEADLINE).await?;
    let seconds = started.elapsed().as_secs_f64();
    watcher.close().await;
    if last_seq != count {
        bail!("the {count}th event replayed has seq {last_seq}");
    }
    Ok((count as f64 / seconds, seconds))
}

/// utime + stime of a process, seconds (Linux `/proc/<pid>/stat`, assuming 100 ticks/s).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
