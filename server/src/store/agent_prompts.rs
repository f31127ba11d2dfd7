//! Agents prompting agents: the allow-lists (`agent_prompt_targets`: which agents an agent may
//! prompt through agenthold's MCP server), the chain depth and prompting agent of turns
//! (`turns.chain_depth`, `turns.origin_agent_id`), and what the MCP tools read back about a turn
//! (its state, stop reason and final message). A link holds only while the person who made it
//! is an admin of both agents' workspaces: it is checked at each use, not only when made.

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

/// The agents `agent_id` may prompt, by name: the links whose maker is still an admin of both
/// agents' workspaces.
pub async fn targets(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<TargetRow>> {
    let rows = sqlx::query!(
        r#"SELECT a.id, a.name, a.harness, t.created_by, t.created_at
           FROM agent_prompt_targets t JOIN agents a ON a.id = t.target_agent_id JOIN agents s ON s.id = t.agent_id
           WHERE t.agent_id = $1 AND a.deleting_at IS NULL
             AND EXISTS (SELECT 1 FROM memberships m
                         WHERE m.user_id = t.created_by AND m.workspace_id = s.workspace_id AND m.role = 'admin')
             AND EXISTS (SELECT 1 FROM memberships m
                         WHERE m.user_id = t.created_by AND m.workspace_id = a.workspace_id AND m.role = 'admin')
           ORDER BY a.name"#,
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

/// One agent that may prompt an agent (an incoming link), as the prompted agent's admins see it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct IncomingRow {
    /// The agent that may prompt.
    pub agent_id: Uuid,
    /// Its name.
    pub name: String,
    /// Its workspace.
    pub workspace_id: Uuid,
    /// Who made the link.
    #[schema(required = true)]
    pub created_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Whether it holds: its maker is still an admin of both workspaces.
    pub holds: bool,
}

/// The agents that may prompt `target` (every link, holding or not), by name.
pub async fn incoming(pool: &PgPool, target: AgentId) -> sqlx::Result<Vec<IncomingRow>> {
    sqlx::query_as!(
        IncomingRow,
        r#"SELECT s.id AS agent_id, s.name, s.workspace_id AS "workspace_id!", t.created_by, t.created_at,
                  (EXISTS (SELECT 1 FROM memberships m
                           WHERE m.user_id = t.created_by AND m.workspace_id = s.workspace_id AND m.role = 'admin')
                   AND EXISTS (SELECT 1 FROM memberships m
                               WHERE m.user_id = t.created_by AND m.workspace_id = a.workspace_id AND m.role = 'admin'))
                  AS "holds!"
           FROM agent_prompt_targets t JOIN agents s ON s.id = t.agent_id JOIN agents a ON a.id = t.target_agent_id
           WHERE t.target_agent_id = $1 ORDER BY s.name"#,
        target.0
    )
    .fetch_all(pool)
    .await
}

/// Drops the links `user` made that touch an agent of `workspace_id` (they left it, or are no
/// longer its admin); the (agent, target) pairs dropped.
pub async fn drop_made_by(pool: &PgPool, user: Uuid, workspace_id: Uuid) -> sqlx::Result<Vec<(Uuid, Uuid)>> {
    let rows = sqlx::query!(
        r#"DELETE FROM agent_prompt_targets t USING agents s, agents a
           WHERE t.created_by = $1 AND s.id = t.agent_id AND a.id = t.target_agent_id
             AND (s.workspace_id = $2 OR a.workspace_id = $2)
           RETURNING t.agent_id, t.target_agent_id"#,
        user,
        workspace_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.agent_id, r.target_agent_id)).collect())
}

/// The deepest chain depth among `agent`'s unfinished turns (`None` when it has none): the
/// depth of the turn that is making a call, counted conservatively when several run at once.
pub async fn running_depth(pool: &PgPool, agent: AgentId) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar!(r#"SELECT max(chain_depth) FROM turns WHERE agent_id = $1 AND state <> 'ended'"#, agent.0)
        .fetch_one(pool)
        .await
}

/// The agent that prompted `agent`'s latest turn at chain depth `depth`, if an agent did: one step
/// up the chain a loop is reported with (the turns above may have ended by then).
pub async fn prompted_by(pool: &PgPool, agent: AgentId, depth: i32) -> sqlx::Result<Option<Uuid>> {
    let row = sqlx::query_scalar!(
        r#"SELECT origin_agent_id FROM turns WHERE agent_id = $1 AND chain_depth = $2
           ORDER BY created_at DESC LIMIT 1"#,
        agent.0,
        depth
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.flatten())
}

/// How many turns `agent` prompted in the last hour.
pub async fn prompted_last_hour(pool: &PgPool, agent: AgentId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM turns WHERE origin_agent_id = $1 AND created_at > now() - interval '1 hour'"#,
        agent.0
    )
    .fetch_one(pool)
    .await
}

/// Whether `agent` prompted a turn in `session` (the sessions it may read back).
pub async fn prompted_in(pool: &PgPool, agent: AgentId, session: SessionId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM turns WHERE session_id = $1 AND origin_agent_id = $2) AS "prompted!""#,
        session.0,
        agent.0
    )
    .fetch_one(pool)
    .await
}

/// Sets a turn's chain depth and the agent that prompted it (inside the transaction that
/// records it).
pub async fn set_origin(tx: &mut sqlx::PgConnection, turn: TurnId, depth: i32, agent: Uuid) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE turns SET chain_depth = $2, origin_agent_id = $3 WHERE id = $1"#, turn.0, depth, agent)
        .execute(&mut *tx)
        .await?;
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
    /// The agent that prompted it, if one did.
    pub origin_agent_id: Option<Uuid>,
}

/// A turn, if it exists.
pub async fn turn(pool: &PgPool, id: TurnId) -> sqlx::Result<Option<TurnView>> {
    let row = sqlx::query!(
        r#"SELECT session_id, agent_id, state, stop_reason, origin_agent_id FROM turns WHERE id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| TurnView {
        session_id: SessionId(r.session_id),
        agent_id: AgentId(r.agent_id),
        state: r.state,
        stop_reason: r.stop_reason,
        origin_agent_id: r.origin_agent_id,
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
