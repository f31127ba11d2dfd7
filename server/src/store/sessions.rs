//! The `sessions` and `turns` tables.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use agenthold_core::events::usage::{Cost, Tokens};

use crate::ids::{AgentId, SessionId, TurnId};

/// One session as stored.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// Its id.
    pub id: SessionId,
    /// The agent it belongs to.
    pub agent_id: AgentId,
    /// The harness's id for it, once the harness made one.
    pub acp_session_id: Option<String>,
    /// The seq of its newest event (0: none).
    pub last_seq: i64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// One turn as stored.
#[derive(Debug, Clone)]
pub struct TurnRow {
    /// Its id.
    pub id: TurnId,
    /// Its session.
    pub session_id: SessionId,
    /// The prompt's content blocks.
    pub prompt: serde_json::Value,
    /// `pending`, `running` or `ended`.
    pub state: String,
    /// The session/prompt request id once sent.
    pub request_id: Option<String>,
    /// The harness generation it was sent to.
    pub harness_generation: Option<i64>,
    /// The stdin offset just past the prompt request.
    pub request_stdin_end: Option<i64>,
    /// When the prompt arrived.
    pub created_at: DateTime<Utc>,
    /// When it must have ended (set when its prompt is recorded).
    pub deadline_at: Option<DateTime<Utc>>,
    /// The harness's id for its session.
    pub acp_session_id: Option<String>,
    /// The agent's own turn time limit in seconds of activity (`None`: the server's).
    pub time_limit_secs: Option<i32>,
}

/// Creates a session, unless the agent holds `max_sessions` already.
pub async fn create(
    pool: &PgPool,
    id: SessionId,
    agent_id: AgentId,
    max_sessions: i64,
) -> Result<SessionRow, super::quotas::QuotaError> {
    let mut tx = pool.begin().await?;
    super::quotas::sessions_of_agent(&mut tx, agent_id, max_sessions).await?;
    let row =
        sqlx::query!(r#"INSERT INTO sessions (id, agent_id) VALUES ($1, $2) RETURNING created_at"#, id.0, agent_id.0)
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(SessionRow { id, agent_id, acp_session_id: None, last_seq: 0, created_at: row.created_at })
}

/// Creates a session inside `tx` (a trigger's run or an agent's prompt that opens a new one), unless the agent holds
/// `max_sessions` already.
pub async fn create_in(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    agent_id: AgentId,
    max_sessions: i64,
) -> Result<(), super::quotas::QuotaError> {
    super::quotas::sessions_of_agent(tx, agent_id, max_sessions).await?;
    sqlx::query!(r#"INSERT INTO sessions (id, agent_id) VALUES ($1, $2)"#, id.0, agent_id.0).execute(&mut *tx).await?;
    Ok(())
}

/// Why a session was not deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// It has a turn that has not ended.
    #[error("the session has a turn in progress; cancel it first")]
    TurnOpen,
    /// A schedule or webhook prompts into it.
    #[error("a schedule or webhook prompts into this session ({0}); change or delete it first")]
    InUse(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Deletes a session with its turns, events and questions (`false`: it was gone already).
pub async fn delete(pool: &PgPool, id: SessionId) -> Result<bool, DeleteError> {
    let mut tx = pool.begin().await?;
    // The row lock orders this after any append or prompt in flight on the session.
    let found = sqlx::query_scalar!(r#"SELECT id FROM sessions WHERE id = $1 FOR UPDATE"#, id.0)
        .fetch_optional(&mut *tx)
        .await?;
    if found.is_none() {
        return Ok(false);
    }
    let open =
        sqlx::query_scalar!(r#"SELECT 1 AS "x!" FROM turns WHERE session_id = $1 AND state <> 'ended' LIMIT 1"#, id.0)
            .fetch_optional(&mut *tx)
            .await?;
    if open.is_some() {
        return Err(DeleteError::TurnOpen);
    }
    let users = sqlx::query_scalar!(
        r#"SELECT 'schedule ' || name AS "name!" FROM schedules WHERE session_id = $1
           UNION ALL SELECT 'webhook ' || name FROM webhooks WHERE session_id = $1 LIMIT 5"#,
        id.0
    )
    .fetch_all(&mut *tx)
    .await?;
    if !users.is_empty() {
        return Err(DeleteError::InUse(users.join(", ")));
    }
    sqlx::query!(r#"DELETE FROM sessions WHERE id = $1"#, id.0).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(true)
}

/// One session.
pub async fn get(pool: &PgPool, id: SessionId) -> sqlx::Result<Option<SessionRow>> {
    let row =
        sqlx::query!(r#"SELECT id, agent_id, acp_session_id, last_seq, created_at FROM sessions WHERE id = $1"#, id.0)
            .fetch_optional(pool)
            .await?;
    Ok(row.map(|r| SessionRow {
        id: SessionId(r.id),
        agent_id: AgentId(r.agent_id),
        acp_session_id: r.acp_session_id,
        last_seq: r.last_seq,
        created_at: r.created_at,
    }))
}

/// The ids of an agent's sessions, oldest first.
pub async fn list_ids(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<SessionId>> {
    let ids = sqlx::query_scalar!(r#"SELECT id FROM sessions WHERE agent_id = $1 ORDER BY created_at, id"#, agent_id.0)
        .fetch_all(pool)
        .await?;
    Ok(ids.into_iter().map(SessionId).collect())
}

/// When the last event of each of `agent_ids`' sessions was stored (agents without events are
/// left out).
pub async fn last_event_at(
    pool: &PgPool,
    agent_ids: &[uuid::Uuid],
) -> sqlx::Result<Vec<(AgentId, chrono::DateTime<chrono::Utc>)>> {
    let rows = sqlx::query!(
        r#"SELECT s.agent_id, max(e.created_at) AS "at!"
           FROM sessions s JOIN events e ON e.session_id = s.id AND e.seq = s.last_seq
           WHERE s.agent_id = ANY($1) GROUP BY s.agent_id"#,
        agent_ids
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (AgentId(r.agent_id), r.at)).collect())
}

/// Records the harness's id for a session.
pub async fn set_acp_session_id(tx: &mut sqlx::PgConnection, id: SessionId, acp_id: &str) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE sessions SET acp_session_id = $2 WHERE id = $1"#, id.0, acp_id).execute(&mut *tx).await?;
    Ok(())
}

/// Creating a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The session has an unfinished turn.
    #[error("a turn is in progress")]
    InProgress,
    /// The agent's sessions store as many bytes of events as the server allows.
    #[error("{0}")]
    Quota(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Inserts a pending turn inside `tx`; fails with [`TurnError::InProgress`] if one is open.
pub async fn insert_turn(
    tx: &mut sqlx::PgConnection,
    id: TurnId,
    session_id: SessionId,
    agent_id: AgentId,
    prompt: &serde_json::Value,
) -> Result<(), TurnError> {
    let inserted = sqlx::query!(
        r#"INSERT INTO turns (id, session_id, agent_id, prompt, state) VALUES ($1, $2, $3, $4, 'pending')
           ON CONFLICT (session_id) WHERE state <> 'ended' DO NOTHING"#,
        id.0,
        session_id.0,
        agent_id.0,
        prompt
    )
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(TurnError::InProgress);
    }
    Ok(())
}

/// The unfinished turns of an agent, oldest first.
pub async fn open_turns(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<TurnRow>> {
    let rows = sqlx::query!(
        r#"SELECT t.id, t.session_id, t.prompt, t.state, t.request_id, t.harness_generation,
                  t.request_stdin_end, t.created_at, t.deadline_at, s.acp_session_id, a.turn_timeout_secs
           FROM turns t JOIN sessions s ON s.id = t.session_id JOIN agents a ON a.id = t.agent_id
           WHERE t.agent_id = $1 AND t.state <> 'ended' ORDER BY t.created_at, t.id"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| TurnRow {
            id: TurnId(r.id),
            session_id: SessionId(r.session_id),
            prompt: r.prompt,
            state: r.state,
            request_id: r.request_id,
            harness_generation: r.harness_generation,
            request_stdin_end: r.request_stdin_end,
            created_at: r.created_at,
            deadline_at: r.deadline_at,
            acp_session_id: r.acp_session_id,
            time_limit_secs: r.turn_timeout_secs,
        })
        .collect())
}

/// Records, in the transaction that journals it, that the prompt of a turn is being sent.
pub async fn mark_sent(
    tx: &mut sqlx::PgConnection,
    id: TurnId,
    request_id: &str,
    generation: i64,
    stdin_end: i64,
    deadline_at: DateTime<Utc>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE turns SET state = 'running', request_id = $2, harness_generation = $3,
                  request_stdin_end = $4, deadline_at = $5
           WHERE id = $1 AND state <> 'ended'"#,
        id.0,
        request_id,
        generation,
        stdin_end,
        deadline_at
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Ends a turn inside `tx` (in the transaction that stores its `turn_end`); `false` when it had
/// already ended (its `turn_end` must then not be stored again).
pub async fn end_turn(
    tx: &mut sqlx::PgConnection,
    id: TurnId,
    stop_reason: &str,
    tokens: Option<&Tokens>,
    session_cost: Option<&Cost>,
) -> sqlx::Result<bool> {
    let count = |pick: fn(&Tokens) -> Option<u64>| tokens.and_then(pick).and_then(|n| i64::try_from(n).ok());
    let updated = sqlx::query!(
        r#"WITH prev AS (
               SELECT p.session_cost FROM turns p JOIN turns t ON t.id = $1
               WHERE p.session_id = t.session_id AND p.id <> $1 AND p.session_cost IS NOT NULL
                 AND p.cost_currency = $9
               ORDER BY p.ended_at DESC LIMIT 1)
           UPDATE turns SET state = 'ended', stop_reason = $2, ended_at = now(),
                  input_tokens = $3, output_tokens = $4, cached_read_tokens = $5,
                  cached_write_tokens = $6, thought_tokens = $7,
                  session_cost = $8, cost_currency = $9,
                  turn_cost = CASE
                      WHEN $8::float8 IS NULL THEN NULL
                      WHEN (SELECT session_cost FROM prev) IS NULL OR (SELECT session_cost FROM prev) > $8 THEN $8
                      ELSE $8 - (SELECT session_cost FROM prev) END
           WHERE id = $1 AND state <> 'ended'"#,
        id.0,
        stop_reason,
        count(|t| t.input),
        count(|t| t.output),
        count(|t| t.cached_read),
        count(|t| t.cached_write),
        count(|t| t.thought),
        session_cost.map(|c| c.amount),
        session_cost.map(|c| c.currency.as_str()),
    )
    .execute(&mut *tx)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Parks a turn: its sandbox was lost while a question of its waited for a person; it is no
/// longer running in any harness and resumes once answered.
pub async fn park_turn(tx: &mut sqlx::PgConnection, id: TurnId) -> sqlx::Result<bool> {
    let updated = sqlx::query!(
        r#"UPDATE turns SET state = 'parked', request_id = NULL, harness_generation = NULL,
                  request_stdin_end = NULL, request_delivered = false, deadline_at = NULL
           WHERE id = $1 AND state <> 'ended'"#,
        id.0
    )
    .execute(&mut *tx)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Resumes a parked turn with the prompt that continues it (sent like a new one).
pub async fn unpark_turn(tx: &mut sqlx::PgConnection, id: TurnId, prompt: &serde_json::Value) -> sqlx::Result<bool> {
    let updated = sqlx::query!(
        r#"UPDATE turns SET state = 'pending', prompt = $2 WHERE id = $1 AND state = 'parked'"#,
        id.0,
        prompt
    )
    .execute(&mut *tx)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// A harness's question for a person (a permission request or an elicitation), as it asked it.
pub struct Question<'a> {
    /// `permission` or `elicitation`.
    pub kind: &'a str,
    /// Its JSON-RPC id, as sent.
    pub request_id: &'a serde_json::Value,
    /// The harness generation that asked.
    pub generation: i64,
    /// The tool call it is about.
    pub tool_call: &'a serde_json::Value,
    /// The options offered.
    pub options: &'a serde_json::Value,
}

/// Moves a turn's time limit (`None`: stopped while a question waits for a person).
pub async fn set_deadline(
    tx: &mut sqlx::PgConnection,
    turn_id: TurnId,
    deadline_at: Option<DateTime<Utc>>,
) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE turns SET deadline_at = $2 WHERE id = $1"#, turn_id.0, deadline_at)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
