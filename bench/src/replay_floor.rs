//! The floor under `replay_events_per_s`: the same rows of the same session, read from the
//! server's own database with the catch-up's page size, and written to a loopback TCP socket
//! whose other end counts them — the least any server can do to replay a stored log, measured in
//! the same run right after agenthold's replay. No WebSocket, no framing beyond one line per
//! event, no JSON parsing on either side; the next page is read while the current one is written
//! (as the server's catch-up does), so the floor is the faster of Postgres and the socket.

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
    let pool = PgPoolOptions::new()
        .max_connections(2)
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
