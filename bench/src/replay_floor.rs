//! The floor under `replay_events_per_s`: the same rows of the same session, read from the
//! server's own database with the catch-up's page size, and written to a loopback TCP socket
//! whose other end counts them — the least any server can do to replay a stored log, measured in
//! the same run right after agenthold's replay. No WebSocket, no framing beyond one line per
//! event, no JSON parsing on either side; the next page is read while the current one is written
//! (as the server's catch-up does), so the floor is the faster of Postgres and the socket.
//! [`compare`] takes the replay and the floor turn about, [`ROUNDS`] times each, and keeps the
//! best of each: on this shared machine one run of either spread by a third.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use sqlx::postgres::PgPoolOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

/// Rows per page: the server's catch-up page (`events::stream::BACKFILL_PAGE`).
const PAGE: i64 = 2000;
/// The longest the floor may take before the run is called failed.
const DEADLINE: Duration = Duration::from_secs(120);

/// How many times the replay and its floor are each taken (turn about).
pub const ROUNDS: usize = 3;

/// One replay or floor run: events per second, seconds, and the server's CPU per 1,000 events
/// (the replay's, when its pid is known).
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// Events per second.
    pub per_s: f64,
    /// How long it took.
    pub seconds: f64,
    /// The server's CPU per 1,000 events, ms.
    pub server_cpu_ms_per_1k: Option<f64>,
}

/// The replay and its floor, [`ROUNDS`] of each, turn about (after [`settle`]).
#[derive(Debug, Clone)]
pub struct Compared {
    /// The replay's runs, in order.
    pub replays: Vec<Run>,
    /// The floor's runs, in order.
    pub floors: Vec<Run>,
}

impl Compared {
    /// The fastest replay.
    pub fn replay(&self) -> Run {
        best(&self.replays)
    }
    /// The fastest floor.
    pub fn floor(&self) -> Run {
        best(&self.floors)
    }
}

fn best(runs: &[Run]) -> Run {
    runs.iter().copied().fold(Run { per_s: 0.0, seconds: 0.0, server_cpu_ms_per_1k: None }, |a, b| {
        if b.per_s > a.per_s { b } else { a }
    })
}

/// Settles the table, then replays `count` events of `session_id` through the server and reads
/// them as the floor does, turn about, [`ROUNDS`] times each.
pub async fn compare(
    api: &crate::api::Api,
    database_url: &str,
    session_id: &str,
    count: i64,
    server_pid: Option<u32>,
) -> Result<Compared> {
    settle(database_url).await?;
    let mut compared = Compared { replays: Vec::new(), floors: Vec::new() };
    for round in 1..=ROUNDS {
        let cpu_before = server_pid.and_then(crate::throughput::cpu_seconds);
        let (per_s, seconds) = crate::throughput::replay(api, session_id, count).await?;
        let server_cpu_ms_per_1k = server_pid
            .and_then(crate::throughput::cpu_seconds)
            .zip(cpu_before)
            .map(|(after, before)| (after - before) * 1000.0 / count as f64 * 1000.0);
        compared.replays.push(Run { per_s, seconds, server_cpu_ms_per_1k });
        let (floor_per_s, floor_seconds) = measure(database_url, session_id, count).await?;
        compared.floors.push(Run { per_s: floor_per_s, seconds: floor_seconds, server_cpu_ms_per_1k: None });
        crate::progress(&format!(
            "  round {round}: replay {per_s:.0} events/s ({seconds:.2} s), floor {floor_per_s:.0} events/s ({floor_seconds:.2} s)"
        ));
    }
    Ok(compared)
}

/// Vacuums the server's `events` table, so the replay and its floor read rows in the same state:
/// the first read of rows a flood has just committed checks each one's transaction and sets its
/// hint bits (writing the pages again), a cost the first reader pays and the second does not —
/// measured, the replay taken first ran at 53,000–100,000 events/s where later ones ran at
/// 285,000–545,000. A log being replayed is mostly older than that.
pub async fn settle(database_url: &str) -> Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(database_url)
        .await
        .context("connecting to the server's database")?;
    sqlx::query("VACUUM events").execute(&pool).await.context("vacuuming the events table")?;
    pool.close().await;
    Ok(())
}

/// Reads `count` events of `session_id` (seq 1..=count) from `database_url` page by page and
/// writes each as a line (seq, type, created_at, payload) to a loopback socket; returns events/s
/// from before the first query until the reader has counted the last line, and the seconds.
pub async fn measure(database_url: &str, session_id: &str, count: i64) -> Result<(f64, f64)> {
    let session = Uuid::parse_str(session_id).context("the session id")?;
    // Postgres's generic plan for the page query, as the server reads it (`page_encoded`).
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query("SET plan_cache_mode = force_generic_plan").execute(conn).await?;
                Ok(())
            })
        })
        .connect(database_url)
        .await
        .context("connecting to the server's database")?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let expected = usize::try_from(count)?;
    let counter = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await?;
        let mut buf = vec![0u8; 64 << 10];
        let mut lines = 0usize;
        while lines < expected {
            let n = socket.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            lines += buf[..n].iter().filter(|b| **b == b'\n').count();
        }
        anyhow::Ok((lines, Instant::now()))
    });
    let mut socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;

    let started = Instant::now();
    let (pages_tx, mut pages_rx) = tokio::sync::mpsc::channel::<Vec<(i64, String, String, DateTime<Utc>)>>(1);
    let reader = tokio::spawn(async move {
        let mut after = 0i64;
        while after < count {
            let rows: Vec<(i64, String, String, DateTime<Utc>)> = sqlx::query_as(
                "SELECT seq, type, payload::text, created_at FROM events
                 WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .bind(session)
            .bind(after)
            .bind(PAGE.min(count - after))
            .fetch_all(&pool)
            .await?;
            let Some(last) = rows.last() else { bail!("the session has only {after} events") };
            after = last.0;
            if pages_tx.send(rows).await.is_err() {
                break;
            }
        }
        anyhow::Ok(())
    });
    let mut out = Vec::with_capacity(1 << 20);
    let mut written = 0i64;
    let send = async {
        while let Some(rows) = pages_rx.recv().await {
            out.clear();
            for (seq, kind, payload, created_at) in rows {
                out.extend_from_slice(
                    format!("{seq}\t{kind}\t{}\t", created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
                        .as_bytes(),
                );
                out.extend_from_slice(payload.as_bytes());
                out.push(b'\n');
                written += 1;
            }
            socket.write_all(&out).await?;
        }
        socket.flush().await?;
        anyhow::Ok(())
    };
    tokio::time::timeout(DEADLINE, send).await.context("the replay floor took too long")??;
    reader.await??;
    let (lines, done) = tokio::time::timeout(DEADLINE, counter).await.context("the replay floor's reader")???;
    if written != count || lines != expected {
        bail!("the replay floor wrote {written} and counted {lines} of {count} events");
    }
    let seconds = done.duration_since(started).as_secs_f64();
    Ok((count as f64 / seconds, seconds))
}
