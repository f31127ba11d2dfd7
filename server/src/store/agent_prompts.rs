//! Agents prompting agents: the allow-lists (`agent_prompt_targets`: which agents an agent may
//! prompt through agenthold's MCP server), the chain depth of turns (`turns.chain_depth`), and
//! what the MCP tools read back about a turn (its state, stop reason and final message).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::{AgentId, SessionId, TurnId};

/// One agent an agent may prompt.
#[derive(Debug, Clone)]
pub struct TargetRow {
    /// The agent that may be prompted.
    pub agent_id: AgentId,
    /// Its name.
    pub name: String,
    /// Its harness.
    pub harness: String,
    /// Who put it on the list.
    pub created_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// The agents `agent_id` may prompt, by name.
pub async fn targets(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<TargetRow>> {
    let rows = sqlx::query!(
        r#"SELECT a.id, a.name, a.harness, t.created_by, t.created_at
           FROM agent_prompt_targets t JOIN agents a ON a.id = t.target_agent_id
           WHERE t.agent_id = $1 ORDER BY a.name"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| TargetRow {
            agent_id: AgentId(r.id),
            name: r.name,
            harness: r.harness,
            created_by: r.created_by,
            created_at: r.created_at,
        })
        .collect())
}

/// Puts `target` on `agent`'s list; `false` when it was there already.
pub async fn add(pool: &PgPool, agent: AgentId, target: AgentId, by: Uuid) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"INSERT INTO agent_prompt_targets (agent_id, target_agent_id, created_by) VALUES ($1, $2, $3)
           ON CONFLICT DO NOTHING"#,
        agent.0,
        target.0,
        by
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Takes `target` off `agent`'s list; `false` when it was not there.
pub async fn remove(pool: &PgPool, agent: AgentId, target: AgentId) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        r#"DELETE FROM agent_prompt_targets WHERE agent_id = $1 AND target_agent_id = $2"#,
        agent.0,
        target.0
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `agent` may prompt `target`.
pub async fn allowed(pool: &PgPool, agent: AgentId, target: AgentId) -> sqlx::Result<bool> {
    let row = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM agent_prompt_targets WHERE agent_id = $1 AND target_agent_id = $2)
           AS "allowed!""#,
        agent.0,
        target.0
    )
    .fetch_one(pool)
    .await?;
    Ok(row)
}

/// The deepest chain depth among `agent`'s unfinished turns (0 when it has none): the depth of
/// the turn that is making a call, counted conservatively when several run at once.
pub async fn running_depth(pool: &PgPool, agent: AgentId) -> sqlx::Result<i32> {
    let depth = sqlx::query_scalar!(
        r#"SELECT coalesce(max(chain_depth), 0) AS "depth!" FROM turns WHERE agent_id = $1 AND state <> 'ended'"#,
        agent.0
    )
    .fetch_one(pool)
    .await?;
    Ok(depth)
}

/// Sets a turn's chain depth (inside the transaction that records it).
pub async fn set_depth(tx: &mut sqlx::PgConnection, turn: TurnId, depth: i32) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE turns SET chain_depth = $2 WHERE id = $1"#, turn.0, depth).execute(&mut *tx).await?;
    Ok(())
}

/// A turn as the MCP tools see it.
#[derive(Debug, Clone)]
pub struct TurnView {
    /// Its session.
    pub session_id: SessionId,
    /// Its agent.
    pub agent_id: AgentId,
    /// `pending`, `running` or `ended`.
    pub state: String,
    /// Why it ended.
    pub stop_reason: Option<String>,
}

/// A turn, if it exists.
pub async fn turn(pool: &PgPool, id: TurnId) -> sqlx::Result<Option<TurnView>> {
    let row = sqlx::query!(r#"SELECT session_id, agent_id, state, stop_reason FROM turns WHERE id = $1"#, id.0)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| TurnView {
        session_id: SessionId(r.session_id),
        agent_id: AgentId(r.agent_id),
        state: r.state,
        stop_reason: r.stop_reason,
    }))
}

/// The text of a turn's agent message chunks (between its `prompt` event and the next
/// `turn_end`), at most `max_bytes` of it.
pub async fn final_message(pool: &PgPool, session: SessionId, turn: TurnId, max_bytes: i32) -> sqlx::Result<String> {
    let text = sqlx::query_scalar!(
        r#"WITH p AS (
             SELECT seq FROM events WHERE session_id = $1 AND type = 'prompt' AND payload->>'turn_id' = $2
             ORDER BY seq LIMIT 1
           ), e AS (
             SELECT coalesce(min(ev.seq), 9223372036854775807) AS seq FROM events ev, p
             WHERE ev.session_id = $1 AND ev.type = 'turn_end' AND ev.seq > p.seq
           )
           SELECT left(coalesce(string_agg(ev.payload->'content'->>'text', '' ORDER BY ev.seq), ''), $3)
             AS "text!"
           FROM events ev, p, e
           WHERE ev.session_id = $1 AND ev.type = 'update' AND ev.seq > p.seq AND ev.seq < e.seq
             AND ev.payload->>'sessionUpdate' = 'agent_message_chunk'"#,
        session.0,
        turn.0.to_string(),
        max_bytes
    )
    .fetch_one(pool)
    .await?;
    Ok(text)
}
