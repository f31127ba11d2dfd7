//! The baseline for the flood figure: the same Postgres, no server. Batched INSERTs of the
//! flood's own payloads into a scratch copy of the `events` table (a scratch database with the
//! migrations applied), `batch` rows per `INSERT … SELECT * FROM UNNEST(…)`, one transaction
//! each — the shape of the server's group commit, without its bookkeeping.
//!
//! A second, diagnostic run adds what the server's appender does in the same transaction for a
//! flood: the `sessions.last_seq` bump once per transaction and, per event, the
//! `UPDATE sandboxes SET harness_stdout_offset = …` side effect each harness line carries.

use std::time::Instant;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

/// What one baseline run measured.
#[derive(Debug, Clone, Copy)]
pub struct RawRun {
    /// Rows inserted (timed).
    pub rows: usize,
    /// Transactions.
    pub batches: usize,
    /// Seconds taken.
    pub seconds: f64,
}

impl RawRun {
    /// Rows per second.
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds
    }
}

/// Both baseline runs.
#[derive(Debug, Clone, Copy)]
pub struct Baseline {
    /// Plain batched inserts.
    pub plain: RawRun,
    /// Inserts plus the server's per-event offset update and per-batch seq bump.
    pub with_offset_updates: RawRun,
}

/// Runs the baselines against the scratch database at `url` with these payloads (JSON text).
pub async fn baseline(url: &str, payloads: &[String], batch: usize) -> Result<Baseline> {
    let pool =
        PgPoolOptions::new().max_connections(1).connect(url).await.context("connecting to the scratch database")?;
    let payloads: Vec<Value> = payloads.iter().map(|p| serde_json::from_str(p)).collect::<Result<_, _>>()?;
    let agent_id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO agents (id, name, harness, image, driver, cpus, memory_mib, pids_limit)
         VALUES ($1, $2, 'fake', 'bench', 'docker', 1, 1024, 64)",
    )
    .bind(agent_id)
    .bind(format!("raw-baseline-{agent_id}"))
    .execute(&pool)
    .await?;
    sqlx::query("INSERT INTO sandboxes (agent_id, token_hash, harness_generation) VALUES ($1, $2, 1)")
        .bind(agent_id)
        .bind(agent_id.as_bytes().to_vec())
        .execute(&pool)
        .await?;

    // Warm-up (untimed): one batch into a session of its own.
    let warm = new_session(&pool, agent_id).await?;
    run(&pool, warm, agent_id, &payloads[..batch.min(payloads.len())], batch, false).await?;

    let plain_session = new_session(&pool, agent_id).await?;
    let plain = run(&pool, plain_session, agent_id, &payloads, batch, false).await?;
    let shaped_session = new_session(&pool, agent_id).await?;
    let with_offset_updates = run(&pool, shaped_session, agent_id, &payloads, batch, true).await?;
    pool.close().await;
    Ok(Baseline { plain, with_offset_updates })
}

async fn new_session(pool: &PgPool, agent_id: Uuid) -> Result<Uuid> {
    let id = Uuid::new_v4();
    sqlx::query("INSERT INTO sessions (id, agent_id) VALUES ($1, $2)").bind(id).bind(agent_id).execute(pool).await?;
    Ok(id)
}

async fn run(
    pool: &PgPool,
    session: Uuid,
    agent_id: Uuid,
    payloads: &[Value],
    batch: usize,
    server_shaped: bool,
) -> Result<RawRun> {
    let started = Instant::now();
    let mut seq = 0i64;
    let mut batches = 0;
    let mut offset = 0i64;
    for chunk in payloads.chunks(batch) {
        let mut tx = pool.begin().await?;
        if server_shaped {
            sqlx::query("UPDATE sessions SET last_seq = last_seq + $2 WHERE id = $1 RETURNING last_seq, now()")
                .bind(session)
                .bind(chunk.len() as i64)
                .fetch_one(&mut *tx)
                .await?;
        }
        let now: DateTime<Utc> = Utc::now();
        let ids = vec![session; chunk.len()];
        let seqs: Vec<i64> = (1..=chunk.len() as i64).map(|i| seq + i).collect();
        let kinds = vec!["update".to_owned(); chunk.len()];
        let times = vec![now; chunk.len()];
        sqlx::query(
            "INSERT INTO events (session_id, seq, type, payload, created_at)
             SELECT * FROM UNNEST($1::uuid[], $2::int8[], $3::text[], $4::jsonb[], $5::timestamptz[])",
        )
        .bind(&ids)
        .bind(&seqs)
        .bind(&kinds)
        .bind(chunk)
        .bind(&times)
        .execute(&mut *tx)
        .await?;
        if server_shaped {
            for _ in chunk {
                offset += 200;
                offset_update(&mut tx, agent_id, offset).await?;
            }
        }
        tx.commit().await?;
        seq += chunk.len() as i64;
        batches += 1;
    }
    Ok(RawRun { rows: payloads.len(), batches, seconds: started.elapsed().as_secs_f64() })
}

async fn offset_update(tx: &mut Transaction<'_, Postgres>, agent_id: Uuid, offset: i64) -> Result<()> {
    sqlx::query(
        "UPDATE sandboxes SET harness_stdout_offset = GREATEST(harness_stdout_offset, $3)
         WHERE agent_id = $1 AND harness_generation = $2",
    )
    .bind(agent_id)
    .bind(1i64)
    .bind(offset)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
