//! The `permission_requests` table: every permission request of a harness's — answered at once by
//! the agent's posture, or waiting for a person (`outcome IS NULL`) until answered. A row is
//! written in the transaction of the line that asked, before the question is shown or answered;
//! its answer in the transaction that journals the answer's frame, before it is sent.

use sqlx::PgPool;

use super::sessions::Question;
use crate::ids::{AgentId, SessionId, TurnId};
use agenthold_core::events::side_effects::GrantScope;

/// Records a question (and its outcome, when answered at once).
pub async fn record(
    tx: &mut sqlx::PgConnection,
    permission_id: uuid::Uuid,
    session_id: SessionId,
    turn_id: Option<TurnId>,
    question: &Question<'_>,
    outcome: Option<&serde_json::Value>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO permission_requests
               (id, session_id, turn_id, request_id, harness_generation, tool_call, options, outcome, resolved_at, kind)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $8::jsonb IS NULL THEN NULL ELSE now() END, $9)
           ON CONFLICT (id) DO NOTHING"#,
        permission_id,
        session_id.0,
        turn_id.map(|t| t.0),
        question.request_id,
        question.generation,
        question.tool_call,
        question.options,
        outcome,
        question.kind
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Records the answer to a waiting question (a question answered already keeps its answer),
/// with the grant it opens: a one-shot grant (an approval given to a parked turn's question) or a
/// session grant ("approve for this session").
pub async fn resolve(
    tx: &mut sqlx::PgConnection,
    permission_id: uuid::Uuid,
    outcome: &serde_json::Value,
    grant: GrantScope,
) -> sqlx::Result<()> {
    let (once, session, granted_by) = match grant {
        GrantScope::None => (false, false, None),
        GrantScope::Once => (true, false, None),
        GrantScope::Session { granted_by } => (false, true, granted_by),
    };
    sqlx::query!(
        r#"UPDATE permission_requests SET outcome = $2, resolved_at = now(), grant_open = $3,
                  session_grant = $4, granted_by = (SELECT id FROM users WHERE id = $5)
           WHERE id = $1 AND outcome IS NULL"#,
        permission_id,
        outcome,
        once,
        session,
        granted_by
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Revokes a session grant (one revoked already keeps its first revocation).
pub async fn revoke_grant(
    tx: &mut sqlx::PgConnection,
    permission_id: uuid::Uuid,
    revoked_by: Option<uuid::Uuid>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE permission_requests SET grant_revoked_at = now(),
                  grant_revoked_by = (SELECT id FROM users WHERE id = $2)
           WHERE id = $1 AND session_grant AND grant_revoked_at IS NULL"#,
        permission_id,
        revoked_by
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Closes a one-shot grant (the call it allowed was asked again and allowed).
pub async fn use_grant(tx: &mut sqlx::PgConnection, permission_id: uuid::Uuid) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE permission_requests SET grant_open = false WHERE id = $1"#, permission_id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A question of an open turn (running or parked), still waiting for a person.
#[derive(Debug, Clone)]
pub struct Parked {
    /// Its turn.
    pub turn_id: TurnId,
    /// The question.
    pub waiting: Waiting,
}

/// The questions of the agent's open turns still waiting, oldest first.
pub async fn of_open_turns(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<Parked>> {
    let rows = sqlx::query!(
        r#"SELECT p.id, p.session_id, p.request_id, p.options, p.tool_call, p.kind, t.id AS turn_id
           FROM permission_requests p JOIN turns t ON t.id = p.turn_id
           WHERE t.agent_id = $1 AND t.state <> 'ended' AND p.outcome IS NULL
           ORDER BY p.created_at, p.id"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Parked {
            turn_id: TurnId(r.turn_id),
            waiting: Waiting {
                permission_id: r.id,
                session_id: SessionId(r.session_id),
                request_id: r.request_id,
                options: r.options,
                tool_call: r.tool_call,
                kind: r.kind,
            },
        })
        .collect())
}

/// An open grant: the call a person approved while its turn was parked (one-shot), or chose to
/// approve for the rest of the session (a session grant, until revoked).
#[derive(Debug, Clone)]
pub struct Grant {
    /// The question whose approval it is.
    pub permission_id: uuid::Uuid,
    /// Its session.
    pub session_id: SessionId,
    /// The call, as the harness described it then.
    pub tool_call: serde_json::Value,
    /// A session grant (else one-shot).
    pub session_grant: bool,
}

/// The agent's open grants (one-shot, and session grants not revoked), oldest first.
pub async fn open_grants(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<Grant>> {
    let rows = sqlx::query!(
        r#"SELECT p.id, p.session_id, p.tool_call, p.session_grant
           FROM permission_requests p JOIN sessions s ON s.id = p.session_id
           WHERE s.agent_id = $1 AND (p.grant_open OR (p.session_grant AND p.grant_revoked_at IS NULL))
           ORDER BY p.resolved_at, p.id"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Grant {
            permission_id: r.id,
            session_id: SessionId(r.session_id),
            tool_call: r.tool_call,
            session_grant: r.session_grant,
        })
        .collect())
}

/// A session grant as the API shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = SessionGrant)]
pub struct SessionGrant {
    /// Its id (the id of the question whose answer made it).
    pub id: uuid::Uuid,
    /// The session.
    pub session_id: uuid::Uuid,
    /// The call it answers: what the server derived of it (`effect`, `paths`, `command`, `url`,
    /// `title`).
    pub call: serde_json::Value,
    /// The tool call, as the harness described it when the person approved it.
    pub tool_call: serde_json::Value,
    /// Who granted it.
    #[schema(required = true)]
    pub created_by: Option<uuid::Uuid>,
    /// When.
    #[schema(required = true)]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it was revoked (`null`: it answers).
    #[schema(required = true)]
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Who revoked it.
    #[schema(required = true)]
    pub revoked_by: Option<uuid::Uuid>,
}

/// One of a session's grants (revoked or not).
pub async fn session_grant(pool: &PgPool, session_id: SessionId, id: uuid::Uuid) -> sqlx::Result<Option<SessionGrant>> {
    sqlx::query_as!(
        SessionGrant,
        r#"SELECT id, session_id, 'null'::jsonb AS "call!", tool_call, granted_by AS created_by,
                  resolved_at AS created_at, grant_revoked_at AS revoked_at, grant_revoked_by AS revoked_by
           FROM permission_requests
           WHERE session_id = $1 AND id = $2 AND session_grant"#,
        session_id.0,
        id
    )
    .fetch_optional(pool)
    .await
}

/// A session's grants, newest first (at most `limit`); only those not revoked when `active`.
pub async fn session_grants(
    pool: &PgPool,
    session_id: SessionId,
    active: bool,
    limit: i64,
) -> sqlx::Result<Vec<SessionGrant>> {
    sqlx::query_as!(
        SessionGrant,
        r#"SELECT id, session_id, 'null'::jsonb AS "call!", tool_call, granted_by AS created_by,
                  resolved_at AS created_at, grant_revoked_at AS revoked_at, grant_revoked_by AS revoked_by
           FROM permission_requests
           WHERE session_id = $1 AND session_grant AND (NOT $2 OR grant_revoked_at IS NULL)
           ORDER BY resolved_at DESC, id
           LIMIT $3"#,
        session_id.0,
        active,
        limit
    )
    .fetch_all(pool)
    .await
}

/// A waiting question, as a takeover needs it.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// Its id.
    pub permission_id: uuid::Uuid,
    /// Its session.
    pub session_id: SessionId,
    /// The harness's JSON-RPC id.
    pub request_id: serde_json::Value,
    /// The options offered.
    pub options: serde_json::Value,
    /// The tool call, as the harness described it (an elicitation: its request).
    pub tool_call: serde_json::Value,
    /// `permission` or `elicitation`.
    pub kind: String,
}

/// The questions of the agent's harness `generation` still waiting for a person, oldest first.
pub async fn waiting(pool: &PgPool, agent_id: AgentId, generation: i64) -> sqlx::Result<Vec<Waiting>> {
    let rows = sqlx::query!(
        r#"SELECT p.id, p.session_id, p.request_id, p.options, p.tool_call, p.kind
           FROM permission_requests p JOIN sessions s ON s.id = p.session_id
           WHERE s.agent_id = $1 AND p.harness_generation = $2 AND p.outcome IS NULL
           ORDER BY p.created_at, p.id"#,
        agent_id.0,
        generation
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Waiting {
            permission_id: r.id,
            session_id: SessionId(r.session_id),
            request_id: r.request_id,
            options: r.options,
            tool_call: r.tool_call,
            kind: r.kind,
        })
        .collect())
}

/// The oldest question of a session still waiting for a person.
pub async fn oldest_waiting_in_session(pool: &PgPool, session_id: SessionId) -> sqlx::Result<Option<uuid::Uuid>> {
    sqlx::query_scalar!(
        r#"SELECT id FROM permission_requests WHERE session_id = $1 AND outcome IS NULL
           ORDER BY created_at, id LIMIT 1"#,
        session_id.0
    )
    .fetch_optional(pool)
    .await
}

/// A question as the API shows it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Permission)]
pub struct Listed {
    /// Its id.
    pub id: uuid::Uuid,
    /// The agent.
    pub agent_id: uuid::Uuid,
    /// The agent's name.
    pub agent_name: String,
    /// The agent's workspace.
    pub workspace_id: uuid::Uuid,
    /// The session.
    pub session_id: uuid::Uuid,
    /// The turn, if one was open.
    #[schema(required = true)]
    pub turn_id: Option<uuid::Uuid>,
    /// `permission` (a tool call to allow or deny) or `elicitation` (the harness's own question:
    /// `tool_call` holds its request — `message`, `requestedSchema`).
    pub kind: String,
    /// The tool call, as the harness sent it.
    pub tool_call: serde_json::Value,
    /// The options it offered.
    pub options: serde_json::Value,
    /// The answer (`null` while it waits).
    #[schema(required = true)]
    pub outcome: Option<serde_json::Value>,
    /// When it was asked.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it was answered.
    #[schema(required = true)]
    pub resolved_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// One question, with its agent (for the caller's role check).
pub async fn get(pool: &PgPool, id: uuid::Uuid) -> sqlx::Result<Option<Listed>> {
    sqlx::query_as!(
        Listed,
        r#"SELECT p.id, a.id AS agent_id, a.name AS agent_name, a.workspace_id AS "workspace_id!", p.session_id,
                  p.turn_id, p.kind, p.tool_call, p.options, p.outcome, p.created_at, p.resolved_at
           FROM permission_requests p JOIN sessions s ON s.id = p.session_id JOIN agents a ON a.id = s.agent_id
           WHERE p.id = $1 AND a.deleting_at IS NULL"#,
        id
    )
    .fetch_optional(pool)
    .await
}

/// The questions of the agents the user may operate (operator or admin of their workspace),
/// newest first; only waiting ones when `pending`.
pub async fn list_for_user(pool: &PgPool, user_id: uuid::Uuid, pending: bool, limit: i64) -> sqlx::Result<Vec<Listed>> {
    sqlx::query_as!(
        Listed,
        r#"SELECT p.id, a.id AS agent_id, a.name AS agent_name, a.workspace_id AS "workspace_id!", p.session_id,
                  p.turn_id, p.kind, p.tool_call, p.options, p.outcome, p.created_at, p.resolved_at
           FROM permission_requests p JOIN sessions s ON s.id = p.session_id JOIN agents a ON a.id = s.agent_id
           JOIN memberships m ON m.workspace_id = a.workspace_id AND m.user_id = $1
           WHERE a.deleting_at IS NULL AND m.role IN ('operator', 'admin') AND (NOT $2 OR p.outcome IS NULL)
           ORDER BY p.created_at DESC, p.id
           LIMIT $3"#,
        user_id,
        pending,
        limit
    )
    .fetch_all(pool)
    .await
}
