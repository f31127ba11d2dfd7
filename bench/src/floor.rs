//! The floor under the many-agents figures: `forward-floor` (its own process, see
//! `src/bin/forward-floor.rs`) forwards lines from producers to watchers over loopback TCP and
//! does nothing else. Its CPU per 1,000 lines is measured for the two shapes agenthold's figures
//! compare — the single flood (one producer as fast as it can, 10 watchers) and `multi` (30
//! producers × 30 lines/s × 3 watchers) — so the report can say what the network work alone
//! costs at each shape on this machine, in the same run.
//!
//! Beside it, at `multi`'s shape, `forward-floor --store` (given a scratch database): the same
//! forwarding with every line committed to Postgres first, by one group committer — what a
//! server that keeps a log, and lets no one see a line before it is stored, cannot do without.
//! And at the flood's shape, storing ([`stored_flood`]): how fast such a server can deliver a
//! flood to its watchers on this machine — the floor under `flood_events_per_s`, measured the
//! same way (from the first line any watcher got to the last line the slowest got).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout, Command};

use crate::multi::Load;
use crate::stats::round;
use crate::throughput::cpu_seconds;

/// Lines of the flood shape: enough for a CPU reading (10 ms ticks) of a few hundred ms.
const FLOOD_LINES: u64 = 200_000;
/// Floods of the flood's storing floor (the fastest kept).
const STORED_FLOOD_ROUNDS: usize = 3;
/// The longest a shape may take before the run is called failed.
const SHAPE_TIMEOUT: Duration = Duration::from_secs(120);
/// A line as a harness writes one: an ACP `session/update` with a short text chunk.
const LINE: &[u8] = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk 000000 of a flood, about as long as a few tokens"}}}}
"#;

/// The floor's CPU for both shapes.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// One producer flooding to `watchers` watchers: CPU ms per 1,000 lines.
    pub flood_cpu_ms_per_1k: f64,
    /// `multi`'s shape: CPU ms per 1,000 lines.
    pub multi_cpu_ms_per_1k: f64,
    /// `multi`'s shape with every line committed first (`None` without a database, or if it
    /// failed: said in the progress).
    pub stored: Option<StoredFloor>,
}

/// The flood's shape, every line committed before it is forwarded.
#[derive(Debug, Clone, Copy)]
pub struct StoredFlood {
    /// Lines per second delivered to every watcher: (lines − 1) over the time from the first
    /// line any watcher read to the last line the slowest read.
    pub lines_per_s: f64,
    /// The floor process's CPU ms per 1,000 lines.
    pub cpu_ms_per_1k: f64,
    /// Lines per commit, over every round.
    pub lines_per_commit: f64,
}

/// What one shape measured.
#[derive(Debug, Clone, Copy)]
struct Shaped {
    /// The floor process's CPU ms per 1,000 lines.
    cpu_ms_per_1k: f64,
    /// Lines per second delivered to every watcher, as [`StoredFlood::lines_per_s`].
    lines_per_s: f64,
}

/// `multi`'s shape, every line committed before it is forwarded.
#[derive(Debug, Clone, Copy)]
pub struct StoredFloor {
    /// The floor process's CPU ms per 1,000 lines (Postgres's own not counted, as the server's
    /// figure does not count it).
    pub cpu_ms_per_1k: f64,
    /// Lines per commit.
    pub lines_per_commit: f64,
}

/// Starts `forward-floor` (beside this binary) and measures both shapes; then, given a
/// database, `multi`'s shape storing.
pub async fn measure(flood_watchers: usize, producers: usize, load: Load, store: Option<&str>) -> Result<Floor> {
    let floor = start(None).await?;
    let flood = shape(floor.port, floor.pid, 0, 1, 0, FLOOD_LINES, flood_watchers).await.context("the flood shape")?;
    let lines = load.rate * load.seconds;
    let multi = shape(floor.port, floor.pid, 1_000, producers, load.rate, lines, load.watchers)
        .await
        .context("the multi shape")?;
    let (flood, multi) = (flood.cpu_ms_per_1k, multi.cpu_ms_per_1k);
    floor.stop().await;
    let stored = match store {
        None => None,
        Some(url) => match measure_stored(url, producers, load).await {
            Ok(stored) => Some(stored),
            Err(error) => {
                crate::progress(&format!("  the storing floor was not measured: {error:#}"));
                None
            }
        },
    };
    Ok(Floor { flood_cpu_ms_per_1k: flood, multi_cpu_ms_per_1k: multi, stored })
}

async fn measure_stored(url: &str, producers: usize, load: Load) -> Result<StoredFloor> {
    let floor = start(Some(url)).await?;
    let lines = load.rate * load.seconds;
    let shaped = shape(floor.port, floor.pid, 2_000, producers, load.rate, lines, load.watchers)
        .await
        .context("the multi shape, storing")?;
    let lines_per_commit = stopped_storing(floor, producers as u64 * lines).await?;
    Ok(StoredFloor { cpu_ms_per_1k: shaped.cpu_ms_per_1k, lines_per_commit })
}

/// The flood's shape storing: one producer writes `lines` lines as fast as it can to `watchers`
/// watchers through `forward-floor --store <url>`, every line committed before any watcher gets
/// it; [`STORED_FLOOD_ROUNDS`] floods, the fastest kept (a floor is the best this machine did:
/// a flood of 20,000 lines lasts a fifth of a second, and one run may share its cores).
pub async fn stored_flood(url: &str, lines: u64, watchers: usize) -> Result<StoredFlood> {
    let floor = start(Some(url)).await?;
    let mut best: Option<Shaped> = None;
    for round in 0..STORED_FLOOD_ROUNDS {
        let shaped = shape(floor.port, floor.pid, 3_000 + round, 1, 0, lines, watchers)
            .await
            .context("the flood shape, storing")?;
        if best.is_none_or(|best| shaped.lines_per_s > best.lines_per_s) {
            best = Some(shaped);
        }
    }
    let lines_per_commit = stopped_storing(floor, STORED_FLOOD_ROUNDS as u64 * lines).await?;
    let best = best.context("no round of the flood's storing floor")?;
    Ok(StoredFlood { lines_per_s: best.lines_per_s, cpu_ms_per_1k: best.cpu_ms_per_1k, lines_per_commit })
}

/// Stops a storing floor and checks it stored every one of `expected` lines; its lines per
/// commit.
async fn stopped_storing(floor: Running, expected: u64) -> Result<f64> {
    let said = floor.stop().await.context("forward-floor --store said nothing on exit")?;
    let (stored, commits) = committed(&said).with_context(|| format!("forward-floor --store said {said:?}"))?;
    if stored != expected || commits == 0 {
        bail!("forward-floor --store stored {stored} lines in {commits} commits, of {expected}");
    }
    Ok(stored as f64 / commits as f64)
}

/// The flood's storing floor, measured and said in the progress (`None`, said, if it failed).
pub async fn measure_stored_flood(url: &str, lines: u64, watchers: usize) -> Option<StoredFlood> {
    crate::progress(&format!(
        "the flood's floor: {lines} lines to {watchers} watchers, each committed first (the best of {STORED_FLOOD_ROUNDS})"
    ));
    match stored_flood(url, lines, watchers).await {
        Ok(floor) => {
            crate::progress(&format!(
                "  {:.0} lines/s delivered; {:.1} ms CPU per 1,000 lines; {:.0} lines per commit (all rounds)",
                floor.lines_per_s, floor.cpu_ms_per_1k, floor.lines_per_commit
            ));
            Some(floor)
        }
        Err(error) => {
            crate::progress(&format!("  the flood's storing floor was not measured: {error:#}"));
            None
        }
    }
}

/// The `flood_vs_raw` target, with the storing floor beside it: `stored_floor_vs_raw` (how
/// near the raw insert a server that stores and delivers the flood can come here) and
/// `vs_stored_floor` (the flood against that floor).
pub fn flood_target(flood_per_s: f64, raw_per_s: f64, stored: Option<StoredFlood>) -> Value {
    let ratio = flood_per_s / raw_per_s;
    json!({"target": format!(">= {} (flood_events_per_s / raw_insert_rows_per_s)", crate::targets::FLOOD_VS_RAW),
           "value": round(ratio, 3),
           "stored_floor_vs_raw": stored.map(|floor| round(floor.lines_per_s / raw_per_s, 3)),
           "vs_stored_floor": stored.map(|floor| round(flood_per_s / floor.lines_per_s, 3)),
           "pass": ratio >= crate::targets::FLOOD_VS_RAW})
}

/// The report's keys of the flood's storing floor (`null` when it was not measured).
pub fn stored_flood_keys(flood_per_s: f64, stored: Option<StoredFlood>) -> Value {
    json!({
        "floor_flood_stored_lines_per_s": stored.map(|floor| round(floor.lines_per_s, 0)),
        "floor_flood_stored_cpu_ms_per_1k_lines": stored.map(|floor| round(floor.cpu_ms_per_1k, 1)),
        "floor_flood_stored_lines_per_commit": stored.map(|floor| round(floor.lines_per_commit, 1)),
        "flood_vs_stored_floor": stored.map(|floor| round(flood_per_s / floor.lines_per_s, 3)),
    })
}

/// Lines and commits from what `forward-floor --store` says on exit: `<lines> lines in
/// <commits> commits`.
fn committed(said: &str) -> Option<(u64, u64)> {
    let (lines, commits) = said.trim().split_once(" lines in ")?;
    Some((lines.parse().ok()?, commits.strip_suffix(" commits")?.parse().ok()?))
}

/// A running `forward-floor`.
struct Running {
    child: Child,
    stdout: BufReader<ChildStdout>,
    port: u16,
    pid: u32,
}

impl Running {
    /// Closes its stdin, and returns the line it says then (if any) once it has exited.
    async fn stop(mut self) -> Option<String> {
        drop(self.child.stdin.take());
        let mut last = String::new();
        let said = tokio::time::timeout(Duration::from_secs(5), self.stdout.read_line(&mut last)).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        matches!(said, Ok(Ok(n)) if n > 0).then(|| last.trim().to_owned())
    }
}

async fn start(store: Option<&str>) -> Result<Running> {
    let program = std::env::current_exe()?.with_file_name("forward-floor");
    let mut command = Command::new(&program);
    if let Some(url) = store {
        command.arg("--store").arg(url);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id().context("forward-floor's pid")?;
    let mut stdout = BufReader::new(child.stdout.take().context("forward-floor's stdout")?);
    let mut first = String::new();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_line(&mut first))
        .await
        .context("forward-floor said nothing")??;
    let port = first.trim().parse().with_context(|| format!("forward-floor's port: {first:?}"))?;
    Ok(Running { child, stdout, port, pid })
}

/// `producers` producers (numbered from `first_id`) each write `lines` lines at `rate` per second
/// (0: as fast as they can) to `watchers` watchers each; the floor's CPU ms per 1,000 lines,
/// from the first line written to the last line every watcher read, and the lines delivered per
/// second.
async fn shape(
    port: u16,
    pid: u32,
    first_id: usize,
    producers: usize,
    rate: u64,
    lines: u64,
    watchers: usize,
) -> Result<Shaped> {
    let mut reading = Vec::new();
    for producer in first_id..first_id + producers {
        for _ in 0..watchers {
            let mut socket = TcpStream::connect(("127.0.0.1", port)).await?;
            socket.write_all(format!("W {producer}\n").as_bytes()).await?;
            let mut ok = [0u8; 3];
            socket.read_exact(&mut ok).await?;
            let expected = lines * LINE.len() as u64;
            reading.push(tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 * 1024];
                let (mut read, mut first, mut last) = (0u64, None, None);
                while read < expected {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let now = Instant::now();
                            first.get_or_insert(now);
                            last = Some(now);
                            read += n as u64;
                        }
                    }
                }
                (read, first, last)
            }));
        }
    }
    let before = cpu_seconds(pid).context("forward-floor's CPU")?;
    let mut writing = Vec::new();
    for producer in first_id..first_id + producers {
        let mut socket = TcpStream::connect(("127.0.0.1", port)).await?;
        socket.set_nodelay(true)?;
        socket.write_all(format!("P {producer}\n").as_bytes()).await?;
        writing.push(tokio::spawn(async move {
            let mut tick = (rate > 0).then(|| tokio::time::interval(Duration::from_micros(1_000_000 / rate)));
            for _ in 0..lines {
                if let Some(tick) = tick.as_mut() {
                    tick.tick().await;
                }
                socket.write_all(LINE).await?;
            }
            // Kept open until the watchers have read everything.
            Ok::<TcpStream, std::io::Error>(socket)
        }));
    }
    let all_read = async {
        let (mut total, mut first, mut last) = (0u64, None::<Instant>, None::<Instant>);
        for reader in reading {
            let (read, their_first, their_last) = reader.await?;
            total += read;
            first = first.into_iter().chain(their_first).min();
            last = last.into_iter().chain(their_last).max();
        }
        Ok::<_, anyhow::Error>((total, first, last))
    };
    let (total, first, last) =
        tokio::time::timeout(SHAPE_TIMEOUT, all_read).await.context("the watchers did not get every line")??;
    let after = cpu_seconds(pid).context("forward-floor's CPU")?;
    for writer in writing {
        drop(writer.await??);
    }
    let expected = (producers * watchers) as u64 * lines * LINE.len() as u64;
    if total != expected {
        bail!("the watchers read {total} bytes of {expected}");
    }
    let all_lines = producers as u64 * lines;
    let window = match (first, last) {
        (Some(first), Some(last)) => (last - first).as_secs_f64(),
        _ => 0.0,
    };
    Ok(Shaped {
        cpu_ms_per_1k: (after - before) * 1000.0 / all_lines as f64 * 1000.0,
        lines_per_s: if window > 0.0 { all_lines.saturating_sub(1) as f64 / window } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::committed;

    #[test]
    fn the_storing_floors_last_line_gives_lines_and_commits() {
        assert_eq!(committed("18000 lines in 5806 commits\n"), Some((18_000, 5_806)));
        assert_eq!(committed("18000 lines"), None);
        assert_eq!(committed("many lines in 3 commits"), None);
        assert_eq!(committed("12 lines in 3 batches"), None);
    }
}
