//! The floor under the many-agents figures: `forward-floor` (its own process, see
//! `src/bin/forward-floor.rs`) forwards lines from producers to watchers over loopback TCP and
//! does nothing else. Its CPU per 1,000 lines is measured for the two shapes agenthold's figures
//! compare — the single flood (one producer as fast as it can, 10 watchers) and `multi` (30
//! producers × 30 lines/s × 3 watchers) — so the report can say what the network work alone
//! costs at each shape on this machine, in the same run.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

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
}

/// Starts `forward-floor` (beside this binary) and measures both shapes.
pub async fn measure(flood_watchers: usize, producers: usize, load: Load) -> Result<Floor> {
    let program = std::env::current_exe()?.with_file_name("forward-floor");
    let mut child = Command::new(&program)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let pid = child.id().context("forward-floor's pid")?;
    let port = read_port(&mut child).await?;
    let flood = shape(port, pid, 0, 1, 0, FLOOD_LINES, flood_watchers).await.context("the flood shape")?;
    let lines = load.rate * load.seconds;
    let multi = shape(port, pid, 1_000, producers, load.rate, lines, load.watchers).await.context("the multi shape")?;
    drop(child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    Ok(Floor { flood_cpu_ms_per_1k: flood, multi_cpu_ms_per_1k: multi })
}

async fn read_port(child: &mut Child) -> Result<u16> {
    let stdout = child.stdout.take().context("forward-floor's stdout")?;
    let mut first = String::new();
    tokio::time::timeout(Duration::from_secs(10), BufReader::new(stdout).read_line(&mut first))
        .await
        .context("forward-floor said nothing")??;
    first.trim().parse().with_context(|| format!("forward-floor's port: {first:?}"))
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
