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

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout, Command};

use crate::multi::Load;
use crate::throughput::cpu_seconds;

/// Lines of the flood shape: enough for a CPU reading (10 ms ticks) of a few hundred ms.
const FLOOD_LINES: u64 = 200_000;
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
    let cpu_ms_per_1k = shape(floor.port, floor.pid, 2_000, producers, load.rate, lines, load.watchers)
        .await
        .context("the multi shape, storing")?;
    let said = floor.stop().await.context("forward-floor --store said nothing on exit")?;
    let (stored, commits) = committed(&said).with_context(|| format!("forward-floor --store said {said:?}"))?;
    let expected = producers as u64 * lines;
    if stored != expected || commits == 0 {
        bail!("forward-floor --store stored {stored} lines in {commits} commits, of {expected}");
    }
    Ok(StoredFloor { cpu_ms_per_1k, lines_per_commit: stored as f64 / commits as f64 })
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
/// from the first line written to the last line every watcher read.
async fn shape(
    port: u16,
    pid: u32,
    first_id: usize,
    producers: usize,
    rate: u64,
    lines: u64,
    watchers: usize,
) -> Result<f64> {
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
                let mut read = 0u64;
                while read < expected {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n as u64,
                    }
                }
                read
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
        let mut total = 0u64;
        for reader in reading {
            total += reader.await?;
        }
        Ok::<u64, anyhow::Error>(total)
    };
    let total =
        tokio::time::timeout(SHAPE_TIMEOUT, all_read).await.context("the watchers did not get every line")??;
    let after = cpu_seconds(pid).context("forward-floor's CPU")?;
    for writer in writing {
        drop(writer.await??);
    }
    let expected = (producers * watchers) as u64 * lines * LINE.len() as u64;
    if total != expected {
        bail!("the watchers read {total} bytes of {expected}");
    }
    Ok((after - before) * 1000.0 / (producers as u64 * lines) as f64 * 1000.0)
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
