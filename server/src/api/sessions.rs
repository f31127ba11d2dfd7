//! `/api/v1/agents/{id}/sessions` and `/api/v1/sessions/{id}/…`: sessions, prompts, cancel and
//! the event log as JSON.

use agent_client_protocol::v1::schema::ContentBlock;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::agents::visible_agent;
use super::error::ApiError;
use super::extract::{Body, Id, Query};
use crate::app::AppState;
use crate::auth::Principal;
use crate::events::{EventKind, NewEvent, SharedEvent};
use crate::ids::{AgentId, Seq, SessionId, TurnId};
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

/// `POST /api/v1/agents/{id}/sessions`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {}

fn session_json(session: &SessionRow) -> Value {
    json!({
        "id": session.id,
        "agent_id": session.agent_id,
        "last_seq": session.last_seq,
        "created_at": session.created_at,
    })
}

/// Loads a session on which the caller has at least the `needed` role (404 if it cannot see it,
/// 403 if its role is too low).
pub async fn visible_session(
    state: &AppState,
    principal: &Principal,
    id: SessionId,
    needed: Role,
) -> Result<SessionRow, ApiError> {
    let session = store::sessions::get(&state.pool, id).await?.ok_or(ApiError::NotFound("session"))?;
    match visible_agent(state, principal, session.agent_id, needed).await {
        Ok(_) => Ok(session),
        Err(ApiError::NotFound(_)) => Err(ApiError::NotFound("session")),
        Err(other) => Err(other),
    }
}

/// Opens a session on an agent.
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if !body.iter().all(u8::is_ascii_whitespace) {
        super::extract::parse_json::<CreateSession>(&body)?;
    }
    visible_agent(&state, &principal, agent_id, Role::Operator).await?;
    let session = store::sessions::create(&state.pool, SessionId::new(), agent_id).await?;
    Ok((StatusCode::CREATED, Json(session_json(&session))))
}

/// Lists an agent's sessions.
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Viewer).await?;
    let ids = store::sessions::list_ids(&state.pool, agent_id).await?;
    Ok(Json(json!({"sessions": ids})))
}

/// Shows a session.
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
) -> Result<Json<Value>, ApiError> {
    let session = visible_session(&state, &principal, id, Role::Viewer).await?;
    Ok(Json(session_json(&session)))
}

/// `POST /api/v1/sessions/{id}/prompt`: plain text, or ACP content blocks.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptBody {
    text: Option<String>,
    prompt: Option<Vec<Value>>,
}

fn prompt_blocks(body: PromptBody) -> Result<Value, ApiError> {
    let blocks: Vec<ContentBlock> = match (body.text, body.prompt) {
        (Some(text), None) => vec![ContentBlock::from(text)],
        (None, Some(raw)) => raw
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| ApiError::bad_request("INVALID_PROMPT", format!("not an ACP content block: {e}")))?,
        _ => {
            return Err(ApiError::bad_request("INVALID_PROMPT", "give either \"text\" or \"prompt\" (content blocks)"));
        }
    };
    if blocks.is_empty() {
        return Err(ApiError::bad_request("INVALID_PROMPT", "the prompt is empty"));
    }
    let value = serde_json::to_value(&blocks).map_err(|e| ApiError::Internal(e.into()))?;
    if value.to_string().len() > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request("INVALID_PROMPT", "the prompt is over 1 MiB"));
    }
    Ok(value)
}

/// Stores the prompt (a `prompt` event and a turn) and hands the turn to the agent's
/// supervisor, which wakes the sandbox and starts the harness as needed. 409
/// `TURN_IN_PROGRESS` while the session has an unfinished turn.
pub async fn prompt(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
    Body(body): Body<PromptBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let session = visible_session(&state, &principal, id, Role::Operator).await?;
    let blocks = prompt_blocks(body)?;
    // While a question waits, a reply answers it (seed 001): a clear yes approves, anything
    // else denies. No turn starts.
    if let Some(permission_id) = store::permissions::oldest_waiting_in_session(&state.pool, id).await? {
        return answer_by_reply(&state, &principal, session.agent_id, permission_id, &blocks).await;
    }
    let turn_id = TurnId::new();
    let mut tx = state.pool.begin().await?;
    match store::sessions::insert_turn(&mut tx, turn_id, id, session.agent_id, &blocks).await {
        Ok(()) => {}
        Err(TurnError::InProgress) => {
            return Err(ApiError::conflict(
                "TURN_IN_PROGRESS",
                "the session has a turn in progress; cancel it or wait",
            ));
        }
        // The session's agent was deleted since it was looked up (a prompt racing a delete).
        Err(TurnError::Db(sqlx::Error::Database(error))) if error.is_foreign_key_violation() => {
            return Err(ApiError::NotFound("session"));
        }
        Err(TurnError::Db(error)) => return Err(error.into()),
    }
    let event = NewEvent::new(id, EventKind::Prompt, json!({"turn_id": turn_id, "prompt": blocks}));
    let stored = store::events::append(&mut tx, vec![event]).await?;
    tx.commit().await?;
    let shared: Vec<_> = stored.iter().map(|(event, json)| SharedEvent::from_stored(event, json)).collect();
    state.hub.publish(&shared);
    store::agents::set_desired_state(&state.pool, session.agent_id, "awake").await?;
    state.supervisors.send(session.agent_id, Command::Prompt).await;
    state.supervisors.host().touch(session.agent_id, std::time::Instant::now());
    let seq = shared.first().map(|e| e.seq);
    Ok((StatusCode::ACCEPTED, Json(json!({"turn_id": turn_id, "seq": seq}))))
}

/// Answers the waiting question `permission_id` with a reply's text: 200 `{"answered",
/// "decision"}`.
async fn answer_by_reply(
    state: &AppState,
    principal: &Principal,
    agent_id: AgentId,
    permission_id: uuid::Uuid,
    blocks: &Value,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
        .supervisors
        .ask(agent_id, |reply| Command::AnswerPermission { permission_id, choice, by, reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?;
    match outcome {
        Ok(()) => Ok((StatusCode::OK, Json(json!({"answered": permission_id, "decision": decision})))),
        Err(crate::supervisor::core::AnswerError::NotPending) => {
            Err(ApiError::conflict("ALREADY_ANSWERED", "the waiting question was answered meanwhile; post again"))
        }
        Err(crate::supervisor::core::AnswerError::BadChoice(message)) => {
            Err(ApiError::bad_request("INVALID_ANSWER", message))
        }
        Err(error) => Err(ApiError::Internal(anyhow::anyhow!("answering by reply: {error}"))),
    }
}

/// Cancels the session's turn. 409 `NO_TURN_IN_PROGRESS` when there is none.
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<SessionId>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let session = visible_session(&state, &principal, id, Role::Operator).await?;
    let cancelled = state
        .supervisors
        .ask(session.agent_id, |reply| Command::Cancel { session_id: id, reply })
        .await
        .unwrap_or(false);
    if !cancelled {
        return Err(ApiError::conflict("NO_TURN_IN_PROGRESS", "the session has no turn in progress"));
    }
    Ok((StatusCode::ACCEPTED, Json(json!({"cancelling": true}))))
}

/// `?after=&limit=`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    after: Option<Seq>,
    limit: Option<i64>,
}

/// Checks a cursor: a sequence number, 0 or more.
pub fn cursor(after: Option<Seq>) -> Result<Seq, ApiError> {
    match after {
        None => Ok(0),
        Some(after) if after >= 0 => Ok(after),
        Some(_) => Err(ApiError::bad_request("INVALID_CURSOR", "after must be a sequence number, 0 or more")),
    }
}

/// The session's events after the cursor, as JSON.
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
        return Err(ApiError::bad_request("INVALID_LIMIT", format!("limit must be 1-{MAX_EVENTS_PAGE}")));
    }
    // The events as the stream sends them (encoded once, payloads as Postgres holds them).
    // A page stops at `limit` events or at MAX_EVENTS_PAGE_BYTES, whichever comes first.
    let events = store::events::page_encoded(&state.pool, id, after, limit, MAX_EVENTS_PAGE_BYTES).await?.events;
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
