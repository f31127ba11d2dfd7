//! The `sandboxes` table: each agent's sandbox token, driver handle, and the state of the harness
//! process running in it — what a restarted server needs to take a running harness over.

use sqlx::PgPool;

use crate::ids::{AgentId, SessionId};

/// One sandbox row.
#[derive(Debug, Clone)]
pub struct SandboxRow {
    /// The driver's handle (a container id, a pid file).
    pub handle: Option<String>,
    /// Bumped on every harness start.
    pub harness_generation: i64,
    /// The current harness process's channel.
    pub harness_channel: Option<i32>,
    /// stdout bytes of the current harness whose effects are stored.
    pub harness_stdout_offset: i64,
    /// The harness's `initialize` answer.
    pub harness_init: Option<serde_json::Value>,
    /// Sessions the current harness knows.
    pub harness_sessions: Vec<SessionId>,
    /// The names of the variables the current harness was started with.
    pub harness_env_names: Vec<String>,
    /// A session the current harness opened before any session of the agent took it.
    pub harness_spare_session: Option<String>,
    /// What the current harness sent about that session meanwhile (its updates, in order).
    pub harness_spare_updates: Vec<serde_json::Value>,
}

/// The sandbox row of an agent.
pub async fn get(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Option<SandboxRow>> {
    let row = sqlx::query!(
        r#"SELECT handle, harness_generation, harness_channel, harness_stdout_offset, harness_init,
                  harness_sessions, harness_env_names, harness_spare_session, harness_spare_updates
           FROM sandboxes WHERE agent_id = $1"#,
        agent_id.0
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| SandboxRow {
        handle: r.handle,
        harness_generation: r.harness_generation,
        harness_channel: r.harness_channel,
        harness_stdout_offset: r.harness_stdout_offset,
        harness_init: r.harness_init,
        harness_sessions: r.harness_sessions.into_iter().map(SessionId).collect(),
        harness_env_names: r.harness_env_names,
        harness_spare_session: r.harness_spare_session,
        harness_spare_updates: match r.harness_spare_updates {
            serde_json::Value::Array(updates) => updates,
            _ => Vec::new(),
        },
    }))
}

/// The agent whose sandbox token has this hash.
pub async fn agent_for_token(pool: &PgPool, token_hash: &[u8]) -> sqlx::Result<Option<AgentId>> {
    let id = sqlx::query_scalar!(r#"SELECT agent_id FROM sandboxes WHERE token_hash = $1"#, token_hash)
        .fetch_optional(pool)
        .await?;
    Ok(id.map(AgentId))
}

/// Replaces the sandbox token (a new container gets a new one).
pub async fn set_token(pool: &PgPool, agent_id: AgentId, token_hash: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE sandboxes SET token_hash = $2, updated_at = now() WHERE agent_id = $1"#,
        agent_id.0,
        token_hash
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Records the driver's handle.
pub async fn set_handle(pool: &PgPool, agent_id: AgentId, handle: Option<&str>) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE sandboxes SET handle = $2, updated_at = now() WHERE agent_id = $1"#, agent_id.0, handle)
        .execute(pool)
        .await?;
    Ok(())
}

/// Records the address the sandbox's traffic comes from (`None`: unknown). Says whether it
/// changed (a change is announced to the proxy feed by a trigger).
pub async fn set_source_addr(
    db: impl sqlx::PgExecutor<'_>,
    agent_id: AgentId,
    addr: Option<std::net::IpAddr>,
) -> sqlx::Result<bool> {
    let addr = addr.map(|a| a.to_string());
    let done = sqlx::query!(
        r#"UPDATE sandboxes SET source_addr = $2 WHERE agent_id = $1 AND source_addr IS DISTINCT FROM $2"#,
        agent_id.0,
        addr,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Takes the next unused channel number of the sandbox.
pub async fn allocate_channel(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<u32> {
    let next = sqlx::query_scalar!(
        r#"UPDATE sandboxes SET next_channel = next_channel + 1 WHERE agent_id = $1
           RETURNING next_channel - 1 AS "channel!""#,
        agent_id.0
    )
    .fetch_one(pool)
    .await?;
    Ok(u32::try_from(next).unwrap_or(u32::MAX))
}

/// Makes sure channel numbers start above every channel sandboxd still holds.
pub async fn bump_next_channel(tx: &mut sqlx::PgConnection, agent_id: AgentId, above: u32) -> sqlx::Result<()> {
    let above = i32::try_from(above).unwrap_or(i32::MAX - 1);
    sqlx::query!(
        r#"UPDATE sandboxes SET next_channel = GREATEST(next_channel, $2 + 1) WHERE agent_id = $1"#,
        agent_id.0,
        above
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Records a new harness process on `channel`, started with variables of these names; returns
/// its generation.
pub async fn start_harness(pool: &PgPool, agent_id: AgentId, channel: u32, env_names: &[String]) -> sqlx::Result<i64> {
    let channel = i32::try_from(channel).unwrap_or(i32::MAX);
    sqlx::query_scalar!(
        r#"UPDATE sandboxes SET harness_generation = harness_generation + 1, harness_channel = $2,
                  harness_stdout_offset = 0, harness_init = NULL, harness_sessions = '{}',
                  harness_env_names = $3, harness_spare_session = NULL,
                  harness_spare_updates = '[]', updated_at = now()
           WHERE agent_id = $1 RETURNING harness_generation"#,
        agent_id.0,
        channel,
        env_names
    )
    .fetch_one(pool)
    .await
}

/// A harness the warm pool started and initialised, as the agent that claimed its sandbox
/// records it (docs/design.md, "Pooled harnesses").
#[derive(Debug, Clone)]
pub struct AdoptedHarness {
    /// Its channel.
    pub channel: u32,
    /// stdout bytes the pool read (up to the end of the `initialize` answer).
    pub stdout_offset: u64,
    /// Its `initialize` answer.
    pub init: serde_json::Value,
    /// The names of the variables it was started with.
    pub env_names: Vec<String>,
    /// The session the pool opened on it for the agent (its ACP id), if any.
    pub spare_session: Option<String>,
}

/// Records a harness the pool started as the agent's current one, and makes later channels
/// start above its own; returns its generation. Inside the claim's transaction.
pub async fn adopt_harness(
    tx: &mut sqlx::PgConnection,
    agent_id: AgentId,
    harness: &AdoptedHarness,
) -> sqlx::Result<i64> {
    let channel = i32::try_from(harness.channel).unwrap_or(i32::MAX - 1);
    let offset = i64::try_from(harness.stdout_offset).unwrap_or(i64::MAX);
    sqlx::query_scalar!(
        r#"UPDATE sandboxes SET harness_generation = harness_generation + 1, harness_channel = $2,
                  harness_stdout_offset = $3, harness_init = $4, harness_sessions = '{}',
                  harness_env_names = $5, harness_spare_session = $6, harness_spare_updates = '[]',
                  next_channel = GREATEST(next_channel, $2 + 1), updated_at = now()
           WHERE agent_id = $1 RETURNING harness_generation"#,
        agent_id.0,
        channel,
        offset,
        &harness.init,
        &harness.env_names,
        harness.spare_session.as_deref()
    )
    .fetch_one(&mut *tx)
    .await
}

/// Records the harness's `initialize` answer.
pub async fn set_harness_init(
    tx: &mut sqlx::PgConnection,
    agent_id: AgentId,
    generation: i64,
    init: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE sandboxes SET harness_init = $3 WHERE agent_id = $1 AND harness_generation = $2"#,
        agent_id.0,
        generation,
        init
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Keeps an update the current harness sent for its spare session `acp_session_id` (no session
/// has taken it yet), for the session that takes it.
pub async fn add_spare_update(
    tx: &mut sqlx::PgConnection,
    agent_id: AgentId,
    generation: i64,
    acp_session_id: &str,
    update: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE sandboxes SET harness_spare_updates = harness_spare_updates || jsonb_build_array($4::jsonb)
           WHERE agent_id = $1 AND harness_generation = $2 AND harness_spare_session = $3"#,
        agent_id.0,
        generation,
        acp_session_id,
        update
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Records that the current harness knows a session (as `acp_session_id`: no longer spare, and
/// what was kept for the spare session is the session's now).
pub async fn add_harness_session(
    tx: &mut sqlx::PgConnection,
    agent_id: AgentId,
    generation: i64,
    session_id: SessionId,
    acp_session_id: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE sandboxes SET harness_sessions = array_append(array_remove(harness_sessions, $3), $3),
                  harness_spare_session = NULLIF(harness_spare_session, $4),
                  harness_spare_updates = CASE WHEN harness_spare_session = $4 THEN '[]'
                                               ELSE harness_spare_updates END
           WHERE agent_id = $1 AND harness_generation = $2"#,
        agent_id.0,
        generation,
        session_id.0,
        acp_session_id
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Records that the harness process of `generation` is gone.
pub async fn clear_harness(tx: &mut sqlx::PgConnection, agent_id: AgentId, generation: i64) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE sandboxes SET harness_channel = NULL, harness_init = NULL, harness_sessions = '{}',
                  harness_spare_session = NULL, harness_spare_updates = '[]'
           WHERE agent_id = $1 AND harness_generation = $2"#,
        agent_id.0,
        generation
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(r#"DELETE FROM stdin_journal WHERE agent_id = $1 AND generation <= $2"#, agent_id.0, generation)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Inside the transaction that stores events derived from harness stdout: moves each harness's
/// stored stdout offset from its chain's `from` to its `to`, all in one statement — `false`
/// unless every one was at its `from` (a line before was not stored, and these must not be
/// either: the caller rolls back).
pub async fn advance_stdout_offsets(tx: &mut sqlx::PgConnection, chains: &[StdoutChain]) -> sqlx::Result<bool> {
    if chains.is_empty() {
        return Ok(true);
    }
    let agent_ids: Vec<uuid::Uuid> = chains.iter().map(|c| c.agent_id.0).collect();
    let generations: Vec<i64> = chains.iter().map(|c| c.generation).collect();
    let froms: Vec<i64> = chains.iter().map(|c| c.from).collect();
    let tos: Vec<i64> = chains.iter().map(|c| c.to).collect();
    let updated = sqlx::query!(
        r#"WITH locked AS (SELECT agent_id FROM sandboxes WHERE agent_id = ANY($1::uuid[]) ORDER BY agent_id FOR UPDATE)
           UPDATE sandboxes s SET harness_stdout_offset = v.to_offset
           FROM UNNEST($1::uuid[], $2::int8[], $3::int8[], $4::int8[]) AS v(agent_id, generation, from_offset, to_offset)
           WHERE s.agent_id = v.agent_id AND s.harness_generation = v.generation
             AND s.harness_stdout_offset = v.from_offset AND s.agent_id IN (SELECT agent_id FROM locked)"#,
        &agent_ids,
        &generations,
        &froms,
        &tos
    )
    .execute(&mut *tx)
    .await?;
    Ok(updated.rows_affected() == chains.len() as u64)
}

/// One harness's stdout stored from `from` to `to` (see [`advance_stdout_offsets`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutChain {
    /// The agent.
    pub agent_id: AgentId,
    /// Its harness generation.
    pub generation: i64,
    /// The stored offset the chain starts at.
    pub from: i64,
    /// The offset just past its last line.
    pub to: i64,
}

/// Journals a stdin frame about to be sent (and forgets the frames sandboxd wrote).
pub async fn journal_stdin(
    tx: &mut sqlx::PgConnection,
    agent_id: AgentId,
    generation: i64,
    offset: i64,
    bytes: &[u8],
    written: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"DELETE FROM stdin_journal WHERE agent_id = $1 AND (generation <> $2 OR end_offset <= $3)"#,
        agent_id.0,
        generation,
        written
    )
    .execute(&mut *tx)
    .await?;
    let end = offset.saturating_add(i64::try_from(bytes.len()).unwrap_or(i64::MAX));
    sqlx::query!(
        r#"INSERT INTO stdin_journal (agent_id, generation, start_offset, end_offset, bytes)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"#,
        agent_id.0,
        generation,
        offset,
        end,
        bytes
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The journaled stdin frames of a harness generation, in offset order.
pub async fn stdin_journal(pool: &PgPool, agent_id: AgentId, generation: i64) -> sqlx::Result<Vec<(u64, Vec<u8>)>> {
    let rows = sqlx::query!(
        r#"SELECT start_offset, bytes FROM stdin_journal WHERE agent_id = $1 AND generation = $2
           ORDER BY start_offset"#,
        agent_id.0,
        generation
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (u64::try_from(r.start_offset).unwrap_or(0), r.bytes)).collect())
}
