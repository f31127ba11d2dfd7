//! `load`: many sessions watched by many people for minutes (issue 14's load): the server's
//! resident memory per live session (an awake agent with its session, harness connected) and
//! per idle watcher, then every session streaming at a modest rate to all its watchers for
//! `--load-seconds`, with the emit → receive percentiles and every event delivered once, in
//! order (as in the flood). `make bench` runs it for a minute; `make chaos` for five.

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::api::Api;
use crate::config::Config;
use crate::multi::{self, Load, Multi};
use crate::stats::round;
use crate::watch::Watcher;
use crate::{burst, progress, server_mem};

/// Agents created to measure the memory of a live session.
const SESSIONS_MEASURED: usize = 20;
/// How long the server is left to settle before its memory is read.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// What the load measured.
pub struct LoadRun {
    /// Server RSS growth per live session, KiB (`None` without the server's pid).
    pub rss_kib_per_session: Option<f64>,
    /// Server RSS growth per idle watcher, KiB.
    pub rss_kib_per_watcher: Option<f64>,
    /// Server RSS at the end of the load, KiB.
    pub rss_kib_after: Option<u64>,
    /// The streaming part.
    pub multi: Multi,
}

/// Runs the load on `sessions` (warm agents' sessions; the first `--load-sessions`).
pub async fn measure(
    config: &Config,
    api: &Api,
    sessions: &[String],
    tag: &str,
    agents: &mut Vec<String>,
) -> Result<LoadRun> {
    let sessions = &sessions[..sessions.len().min(config.load_sessions)];
    let rss = || server_mem::read(config.server_pid).map(|m| m.rss_kib as f64);

    progress(&format!("load: server memory per live session ({SESSIONS_MEASURED} more agents)"));
    tokio::time::sleep(SETTLE).await;
    let before = rss();
    burst::create(api, SESSIONS_MEASURED, &format!("{tag}-load"), agents).await.context("the load's agents")?;
    tokio::time::sleep(SETTLE).await;
    let with_sessions = rss();
    let rss_kib_per_session = before.zip(with_sessions).map(|(b, a)| (a - b) / SESSIONS_MEASURED as f64);

    let watchers = sessions.len() * config.load_watchers;
    progress(&format!("load: server memory per idle watcher ({watchers} streams open)"));
    let mut open = Vec::with_capacity(watchers);
    for session in sessions {
        for _ in 0..config.load_watchers {
            // A cursor past the end: the stream sends only what comes next.
            open.push(Watcher::connect(api, session, i64::MAX / 2).await.context("an idle watcher")?);
        }
    }
    tokio::time::sleep(SETTLE).await;
    let with_watchers = rss();
    let rss_kib_per_watcher = with_sessions.zip(with_watchers).map(|(b, a)| (a - b) / watchers as f64);
    for watcher in open {
        watcher.close().await;
    }

    let load = Load { rate: config.load_rate, seconds: config.load_seconds, watchers: config.load_watchers };
    progress(&format!(
        "load: {} sessions × {} events/s × {} watchers for {} s",
        sessions.len(),
        load.rate,
        load.watchers,
        load.seconds
    ));
    let multi = multi::run(api, sessions, load, config.server_pid, &config.scratch_database_url, None).await?;
    let rss_kib_after = server_mem::read(config.server_pid).map(|m| m.rss_kib);
    progress(&format!(
        "  stored {:.0}/s of {:.0} offered; p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms; RSS {} KiB per session, {} KiB per watcher",
        multi.stored_per_s,
        multi.offered_per_s,
        multi.p50_ms,
        multi.p99_ms,
        multi.max_ms,
        rss_kib_per_session.map_or("?".to_owned(), |v| format!("{v:.0}")),
        rss_kib_per_watcher.map_or("?".to_owned(), |v| format!("{v:.1}")),
    ));
    Ok(LoadRun { rss_kib_per_session, rss_kib_per_watcher, rss_kib_after, multi })
}

/// The top-level figures.
pub fn figures(run: &LoadRun) -> Value {
    json!({
        "load_p99_ms": round(run.multi.p99_ms, 1),
        "load_rss_kib_per_session": run.rss_kib_per_session.map(|v| round(v, 0)),
        "load_rss_kib_per_watcher": run.rss_kib_per_watcher.map(|v| round(v, 1)),
    })
}

/// The details.
pub fn details(run: &LoadRun) -> Value {
    let mut details = crate::many::details(&run.multi);
    if let Some(map) = details.as_object_mut() {
        map.insert("server_rss_after_kib".to_owned(), json!(run.rss_kib_after));
        map.insert("sessions_measured_for_memory".to_owned(), json!(SESSIONS_MEASURED));
    }
    details
}

/// `--only load` (`make chaos`): a burst of warm agents, then the load.
pub async fn only(config: &Config, api: &Api, agents: &mut Vec<String>) -> Result<Value> {
    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    progress(&format!("burst: {} agents created at once", config.load_sessions));
    let burst = burst::create(api, config.load_sessions, tag, agents).await?;
    let run = measure(config, api, &burst.sessions, tag, agents).await?;
    let mut report = figures(&run);
    if let Some(map) = report.as_object_mut() {
        map.insert("details".to_owned(), json!({"load": details(&run)}));
    }
    Ok(report)
}
