//! `/api/v1/agents/{id}/sessions` and `/api/v1/sessions/{id}/…`: sessions, prompts, cancel and
//! the event log as JSON.

use agent_client_protocol::v1::schema::ContentBlock;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id, Query, RawBody};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::events::StoredEvent;
use crate::ids::{AgentId, Seq, SessionId, TurnId};
use crate::state::AppState;
use crate::store;
use crate::store::sessions::{SessionRow, TurnError};
use crate::store::users::Role;
use crate::supervisor::Command;

/// Largest prompt accepted, in bytes of JSON.
const MAX_PROMPT_BYTES: usize = 1 << 20;
/// Most events one `GET …/events` returns.
const MAX_EVENTS_PAGE: i64 = 1000;
/// Most payload bytes one `GET …/events` returns (a single larger event still comes alone).
const MAX_EVENTS_PAGE_BYTES: i64 = 4 << 20;

/// `POST /api/v1/agents/{id}/sessions` (the body may also be empty).
#[derive(Debug, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {}

/// A session: a conversation with an agent and its event log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Session {
    /// Its id.
    id: SessionId,
    /// Its agent.
    agent_id: AgentId,
    /// The seq of its last event (0: none yet).
    #[schema(value_type = i64)]
    last_seq: Seq,
    /// When it was opened.
    created_at: chrono::DateTime<chrono::Utc>,
}

impl From<&SessionRow> for Session {
    fn from(session: &SessionRow) -> Self {
        Self { id: session.id, agent_id: session.agent_id, last_seq: session.last_seq, created_at: session.created_at }
    }
}

/// An agent's sessions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    /// Their ids.
    sessions: Vec<SessionId>,
}

/// A prompt that started a turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct Prompted {
    /// The turn.
    turn_id: TurnId,
    /// The seq of its `prompt` event.
    #[schema(required = true, value_type = Option<i64>)]
    seq: Option<Seq>,
}

/// A prompt that answered the question waiting in the session instead (no turn starts).
#[derive(Debug, Serialize, ToSchema)]
pub struct AnsweredByReply {
    /// The question it answered.
    answered: uuid::Uuid,
    /// `allow` (a clear yes), `deny`, or `reply` (the harness's own question).
    decision: &'static str,
}

/// A cancel under way.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cancelling {
    /// Always `true`.
    cancelling: bool,
}

/// A page of a session's event log. The handler writes this shape around the events' JSON as
/// encoded once when stored (no decoding and encoding again per page); the API tests check real
/// pages against this type's schema.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventsPage {
    /// Oldest first.
    events: Vec<StoredEvent>,
    /// The cursor for the next page (`after`).
    #[schema(value_type = i64)]
    next_after: Seq,
}

/// Loads a session on which the caller has at least the `needed` role (404 if it cannot see it,
/// 403 if its role is too low).
pub async fn visible_session(
    state: &AppState,
    principal: &Principal,
    id: SessionId,
    needed: Role,
) -> Result<SessionRow, ApiError> {
    session_in_workspace(state, principal, id, needed).await.map(|(session, _)| session)
}

/// [`visible_session`], with the workspace it belongs to (what an open stream re-checks).
pub async fn session_in_workspace(
    state: &AppState,
    principal: &Principal,
    id: SessionId,
    needed: Role,
) -> Result<(SessionRow, uuid::Uuid), ApiError> {
    let session = store::sessions::get(&state.pool, id).await?.ok_or(ApiError::NotFound("session"))?;
    match visible_agent(state, principal, session.agent_id, needed).await {
        Ok(agent) => Ok((session, agent.workspace_id)),
        Err(ApiError::NotFound(_)) => Err(ApiError::NotFound("session")),
        Err(other) => Err(other),
    }
}

/// Opens a session on an agent.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/sessions",
    operation_id = "create_session",
    tag = "sessions",
    request_body(content = Option<CreateSession>, description = "Empty, or `{}`"),
    responses(
        (status = 201, description = "The session", body = Session),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`", body = ErrorBody),
        (status = 409, description = "`QUOTA_EXCEEDED` (sessions per agent)", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<Session>), ApiError> {
    if !body.iter().all(u8::is_ascii_whitespace) {
        super::extract::parse_json::<CreateSession>(&body)?;
    }
    visible_agent(&state, &principal, agent_id, Role::Operator).await?;
    let session =
        store::sessions::create(&state.pool, SessionId::new(), agent_id, state.config.max_sessions_per_agent).await?;
    Ok((StatusCode::CREATED, Json(Session::from(&session))))
}

/// Lists an agent's sessions.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/sessions",
    operation_id = "list_sessions",
    tag = "sessions",
    responses((status = 200, description = "The sessions", body = SessionList)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<SessionList>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Viewer).await?;
    let sessions = store::sessions::list_ids(&state.pool, agent_id).await?;
    Ok(Json(SessionList { sessions }))
}

/// Shows a session.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}",
    operation_id = "show_session",
    tag = "sessions",
    responses((status = 200, description = "The session", body = Session)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
) -> Result<Json<Session>, ApiError> {
    let session = visible_session(&state, &principal, id, Role::Viewer).await?;
    Ok(Json(Session::from(&session)))
}

/// Deletes a session with its turns, events and questions (what frees an agent's stored event
/// bytes, `AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT`). Refused while a turn of it runs, or while a
/// schedule or webhook prompts into it. Audited.
#[utoipa::path(
    delete,
    path = "/api/v1/sessions/{id}",
    operation_id = "delete_session",
    tag = "sessions",
    responses(
        (status = 204, description = "Deleted"),
        (status = 409, description = "`TURN_IN_PROGRESS`, `SESSION_IN_USE` (a schedule or webhook prompts into it)", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
) -> Result<StatusCode, ApiError> {
    let (session, workspace_id) = session_in_workspace(&state, &principal, id, Role::Operator).await?;
    match store::sessions::delete(&state.pool, id).await {
        Ok(true) => {}
        Ok(false) => return Err(ApiError::NotFound("session")),
        Err(store::sessions::DeleteError::TurnOpen) => {
            return Err(ApiError::conflict(
                ErrorCode::TurnInProgress,
                "the session has a turn in progress; cancel it first",
            ));
        }
        Err(error @ store::sessions::DeleteError::InUse(_)) => {
            return Err(ApiError::conflict(ErrorCode::SessionInUse, error.to_string()));
        }
        Err(store::sessions::DeleteError::Db(error)) => return Err(error.into()),
    }
    let record = store::audit::AuditRecord {
        workspace_id,
        actor_user_id: Some(principal.user_id),
        action: "session.deleted",
        resource_type: "session",
        resource_id: id.to_string(),
        detail: json!({"agent_id": session.agent_id, "last_seq": session.last_seq}),
    };
    store::audit::append(&state.pool, record).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/sessions/{id}/prompt`: plain text, or ACP content blocks (one of the two).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptBody {
    /// Plain text.
    text: Option<String>,
    /// ACP content blocks.
    prompt: Option<Vec<Value>>,
}

fn prompt_blocks(body: PromptBody) -> Result<Value, ApiError> {
    let blocks: Vec<ContentBlock> = match (body.text, body.prompt) {
        (Some(text), None) => vec![ContentBlock::from(text)],
        (None, Some(raw)) => {
            raw.into_iter().map(serde_json::from_value).collect::<Result<_, _>>().map_err(|e| {
                ApiError::bad_request(ErrorCode::InvalidPrompt, format!("not an ACP content block: {e}"))
            })?
        }
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidPrompt,
                "give either \"text\" or \"prompt\" (content blocks)",
            ));
        }
    };
    if blocks.is_empty() {
        return Err(ApiError::bad_request(ErrorCode::InvalidPrompt, "the prompt is empty"));
    }
    let value = serde_json::to_value(&blocks).map_err(|e| ApiError::Internal(e.into()))?;
    if value.to_string().len() > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request(ErrorCode::InvalidPrompt, "the prompt is over 1 MiB"));
    }
    Ok(value)
}

/// Prompts the session (a turn starts, or the question waiting in it is answered). Stores the
/// prompt (a `prompt` event and a turn) and hands the turn to the agent's
/// supervisor, which wakes the sandbox and starts the harness as needed. 409
/// `TURN_IN_PROGRESS` while the session has an unfinished turn. While a question waits in the
/// session, the prompt answers it instead (200).
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/prompt",
    operation_id = "prompt",
    tag = "sessions",
    request_body = PromptBody,
    responses(
        (status = 202, description = "A turn started", body = Prompted),
        (status = 200, description = "The prompt answered the waiting question", body = AnsweredByReply),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_PROMPT`, `INVALID_ANSWER`",
            body = ErrorBody),
        (status = 409, description = "`TURN_IN_PROGRESS`, `ALREADY_ANSWERED`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn prompt(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
    Body(body): Body<PromptBody>,
) -> Result<Response, ApiError> {
    let session = visible_session(&state, &principal, id, Role::Operator).await?;
    let blocks = prompt_blocks(body)?;
    // While a question waits, a reply answers it (seed 001): a clear yes approves, anything
    // else denies. No turn starts.
    if let Some(permission_id) = store::permissions::oldest_waiting_in_session(&state.pool, id).await? {
        return answer_by_reply(&state, &principal, session.agent_id, permission_id, &blocks).await;
    }
    let origin = crate::prompting::Origin::of(&principal);
    let mut tx = state.pool.begin().await?;
    let max_bytes = state.config.max_event_bytes_per_agent;
    let recorded =
        match crate::prompting::record(&mut tx, TurnId::new(), id, session.agent_id, &blocks, &origin, max_bytes).await
        {
            Ok(recorded) => recorded,
            Err(TurnError::InProgress) => {
                return Err(ApiError::conflict(
                    ErrorCode::TurnInProgress,
                    "the session has a turn in progress; cancel it or wait",
                ));
            }
            Err(TurnError::Quota(message)) => return Err(ApiError::conflict(ErrorCode::QuotaExceeded, message)),
            // The session's agent was deleted since it was looked up (a prompt racing a delete).
            Err(TurnError::Db(sqlx::Error::Database(error))) if error.is_foreign_key_violation() => {
                return Err(ApiError::NotFound("session"));
            }
            Err(TurnError::Db(error)) => return Err(error.into()),
        };
    let turn_id = recorded.turn_id;
    let seq = crate::prompting::hand_over(&state, tx, recorded).await?;
    Ok((StatusCode::ACCEPTED, Json(Prompted { turn_id, seq })).into_response())
}

/// Answers the waiting question `permission_id` with a reply's text: 200 `{"answered",
/// "decision"}`.
async fn answer_by_reply(
    state: &AppState,
    principal: &Principal,
    agent_id: AgentId,
    permission_id: uuid::Uuid,
    blocks: &Value,
) -> Result<Response, ApiError> {
    let text: String = blocks
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let elicitation =
        store::permissions::get(&state.pool, permission_id).await?.is_some_and(|q| q.kind == "elicitation");
    let decision = match (elicitation, crate::permissions::is_clear_yes(&text)) {
        (true, _) => "reply",
        (false, true) => "allow",
        (false, false) => "deny",
    };
    let choice = crate::permissions::Choice::Reply(text);
    let by = json!({"user_id": principal.user_id, "via": "reply"});
    let outcome = state
        .dispatch
        .ask(agent_id, |reply| Command::AnswerPermission { permission_id, choice, by, reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?;
    match outcome {
        Ok(()) => Ok(Json(AnsweredByReply { answered: permission_id, decision }).into_response()),
        Err(crate::supervisor::core::AnswerError::NotPending) => Err(ApiError::conflict(
            ErrorCode::AlreadyAnswered,
            "the waiting question was answered meanwhile; post again",
        )),
        Err(crate::supervisor::core::AnswerError::BadChoice(message)) => {
            Err(ApiError::bad_request(ErrorCode::InvalidAnswer, message))
        }
        Err(error) => Err(ApiError::Internal(anyhow::anyhow!("answering by reply: {error}"))),
    }
}

/// Cancels the session's turn. 409 `NO_TURN_IN_PROGRESS` when there is none.
#[utoipa::path(
    post,
    path = "/api/v1/sessions/{id}/cancel",
    operation_id = "cancel",
    tag = "sessions",
    responses(
        (status = 202, description = "Cancelling", body = Cancelling),
        (status = 409, description = "`NO_TURN_IN_PROGRESS`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
) -> Result<(StatusCode, Json<Cancelling>), ApiError> {
    let session = visible_session(&state, &principal, id, Role::Operator).await?;
    let cancelled =
        state.dispatch.ask(session.agent_id, |reply| Command::Cancel { session_id: id, reply }).await.unwrap_or(false);
    if !cancelled {
        return Err(ApiError::conflict(ErrorCode::NoTurnInProgress, "the session has no turn in progress"));
    }
    Ok((StatusCode::ACCEPTED, Json(Cancelling { cancelling: true })))
}

/// `?after=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The cursor: events after this seq (default 0).
    #[param(value_type = Option<i64>)]
    after: Option<Seq>,
    /// At most this many (default 100, at most 1000; a page also stops at 4 MiB of payloads).
    limit: Option<i64>,
}

/// Checks a cursor: a sequence number, 0 or more.
pub fn cursor(after: Option<Seq>) -> Result<Seq, ApiError> {
    match after {
        None => Ok(0),
        Some(after) if after >= 0 => Ok(after),
        Some(_) => Err(ApiError::bad_request(ErrorCode::InvalidCursor, "after must be a sequence number, 0 or more")),
    }
}

/// The session's events after the cursor, as JSON.
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/events",
    operation_id = "events",
    tag = "sessions",
    params(EventsQuery),
    responses(
        (status = 200, description = "A page of events", body = EventsPage),
        (status = 400, description = "`INVALID_QUERY`, `INVALID_CURSOR`, `INVALID_LIMIT`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn events(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
    Query(query): Query<EventsQuery>,
) -> Result<impl IntoResponse, ApiError> {
    visible_session(&state, &principal, id, Role::Viewer).await?;
    let after = cursor(query.after)?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_EVENTS_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(ErrorCode::InvalidLimit, format!("limit must be 1-{MAX_EVENTS_PAGE}")));
    }
    // The events as the stream sends them (encoded once, payloads as Postgres holds them).
    // A page stops at `limit` events or at MAX_EVENTS_PAGE_BYTES, whichever comes first.
    let events = store::events::page_encoded(&state.log_reads, id, after, limit, MAX_EVENTS_PAGE_BYTES).await?.events;
    let next_after = events.last().map_or(after, |e| e.seq);
    let joined: Vec<&str> = events.iter().map(|e| e.json.as_ref()).collect();
    let body = format!(r#"{{"events":[{}],"next_after":{next_after}}}"#, joined.join(","));
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body))
}

/// `{id}/events/{seq}/payload`.
#[derive(Debug, Deserialize)]
pub struct PayloadPath {
    id: SessionId,
    seq: Seq,
}

/// The whole payload of one event (also when the event holds an excerpt).
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/events/{seq}/payload",
    operation_id = "event_payload",
    tag = "sessions",
    responses((status = 200, description = "The payload, as the harness sent it", body = Object)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn full_payload(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<axum::extract::Path<PayloadPath>, axum::extract::rejection::PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let axum::extract::Path(path) = path.map_err(|_| ApiError::NotFound("event"))?;
    visible_session(&state, &principal, path.id, Role::Viewer).await?;
    let payload =
        store::events::full_payload(&state.pool, path.id, path.seq).await?.ok_or(ApiError::NotFound("event"))?;
    Ok(Json(payload))
}
