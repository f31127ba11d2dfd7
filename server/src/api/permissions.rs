//! `/api/v1/permissions`: the questions harnesses asked that wait for a person (the approvals
//! inbox across every agent the caller operates) and their answers. The first answer wins; an
//! answer to a question already answered is `409 ALREADY_ANSWERED`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{Id, Query, RawBody, Upgrade, parse_json};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::permissions::Choice;
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::permissions::Listed;
use crate::store::users::Role;
use crate::supervisor::Command;
use crate::supervisor::core::AnswerError;

/// `GET /api/v1/permissions` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `pending` (default) or `all`.
    state: Option<String>,
    /// At most this many, newest first (default 100, at most 1000).
    limit: Option<i64>,
}

/// `POST /api/v1/permissions/{id}/answer`: a permission question takes
/// `{"decision": "allow" | "allow_for_session" | "deny"}` or `{"option_id"}` (one the harness
/// offered: its kind says allow or deny, and the harness gets a once-answer whatever the option —
/// its "always" options are never passed on); the harness's own question (`kind: "elicitation"`)
/// takes `{"content": {<field>: <value>, …}}` (checked against its schema), `{"text": "…"}` (a
/// one-field question) or `{"decision": "decline"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// `allow`, `allow_for_session` (agenthold approves the same call in this session without
    /// asking again, until revoked), `deny` (a permission question); `decline` (an elicitation).
    decision: Option<String>,
    /// One of the options the harness offered (answered once, allow or deny by its kind).
    option_id: Option<String>,
    /// An elicitation's fields.
    #[schema(value_type = Option<Object>)]
    content: Option<serde_json::Map<String, Value>>,
    /// A one-field elicitation's answer.
    text: Option<String>,
}

/// Questions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionList {
    /// The questions.
    permissions: Vec<Listed>,
}

/// The questions of every agent the caller operates, newest first (the approvals inbox).
#[utoipa::path(
    get,
    path = "/api/v1/permissions",
    operation_id = "list_permissions",
    tag = "permissions",
    params(ListQuery),
    responses(
        (status = 200, description = "The questions", body = PermissionList),
        (status = 400, description = "`INVALID_QUERY`, `INVALID_STATE`, `INVALID_LIMIT`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<ListQuery>,
) -> Result<Json<PermissionList>, ApiError> {
    let pending = match query.state.as_deref().unwrap_or("pending") {
        "pending" => true,
        "all" => false,
        other => {
            return Err(ApiError::bad_request(ErrorCode::InvalidState, format!("state {other:?}: pending or all")));
        }
    };
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(ErrorCode::InvalidLimit, "limit: 1-1000"));
    }
    let questions = store::permissions::list_for_user(&state.pool, principal.user_id, pending, limit).await?;
    Ok(Json(PermissionList { permissions: questions }))
}

/// One question (operators of its agent's workspace).
#[utoipa::path(
    get,
    path = "/api/v1/permissions/{id}",
    operation_id = "show_permission",
    tag = "permissions",
    responses((status = 200, description = "The question", body = Listed)),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<uuid::Uuid>,
) -> Result<Json<Listed>, ApiError> {
    let question = store::permissions::get(&state.pool, id).await?.ok_or(ApiError::NotFound("permission"))?;
    principal.require(&state, question.workspace_id, Role::Operator, "permission").await?;
    Ok(Json(question))
}

/// Answers a waiting question (operators of its agent's workspace); the harness gets the
/// answer once it is recorded.
#[utoipa::path(
    post,
    path = "/api/v1/permissions/{id}/answer",
    operation_id = "answer_permission",
    tag = "permissions",
    request_body = Answer,
    responses(
        (status = 200, description = "The question, answered", body = Listed),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_ANSWER`, `INVALID_OPTION`",
            body = ErrorBody),
        (status = 409, description = "`ALREADY_ANSWERED`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn answer(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<uuid::Uuid>,
    RawBody(body): RawBody,
) -> Result<Json<Listed>, ApiError> {
    let question = store::permissions::get(&state.pool, id).await?.ok_or(ApiError::NotFound("permission"))?;
    principal.require(&state, question.workspace_id, Role::Operator, "permission").await?;
    let body: Answer = parse_json(&body)?;
    let choice = match (body.decision.as_deref(), body.option_id, body.content, body.text) {
        (Some("allow"), None, None, None) => Choice::Allow,
        (Some("allow_for_session"), None, None, None) => Choice::AllowForSession,
        (Some("deny"), None, None, None) => Choice::Deny,
        (Some("decline"), None, None, None) => Choice::Decline,
        (None, Some(option), None, None) => Choice::Option(option),
        (None, None, Some(content), None) => Choice::Content(content),
        (None, None, None, Some(text)) => Choice::Reply(text),
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidAnswer,
                "answer with {\"decision\": \"allow\" | \"allow_for_session\" | \"deny\"} or {\"option_id\": \"<one the harness offered>\"}; \
                 the harness's own question (kind elicitation) with {\"content\": {…}}, {\"text\": \"…\"} or \
                 {\"decision\": \"decline\"}",
            ));
        }
    };
    if question.outcome.is_some() {
        return Err(already_answered());
    }
    let for_session = choice == Choice::AllowForSession;
    let by = json!({"user_id": principal.user_id});
    let agent_id = AgentId(question.agent_id);
    let outcome = state
        .dispatch
        .ask(agent_id, |reply| Command::AnswerPermission { permission_id: id, choice, by, reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?;
    match outcome {
        Ok(()) => {}
        Err(AnswerError::NotPending) => return Err(already_answered()),
        Err(AnswerError::BadChoice(message)) => {
            // An option the harness did not offer; for its own question, content its schema refuses.
            let code = if question.kind == "elicitation" { ErrorCode::InvalidAnswer } else { ErrorCode::InvalidOption };
            return Err(ApiError::bad_request(code, message));
        }
        Err(AnswerError::NotRecorded) => {
            return Err(ApiError::Internal(anyhow::anyhow!("the answer to {id} could not be stored")));
        }
    }
    let question = store::permissions::get(&state.pool, id).await?.ok_or(ApiError::NotFound("permission"))?;
    if for_session {
        let record = AuditRecord {
            workspace_id: question.workspace_id,
            actor_user_id: Some(principal.user_id),
            action: "permission.granted_for_session",
            resource_type: "permission",
            resource_id: id.to_string(),
            detail: json!({
                "agent": question.agent_name,
                "session_id": question.session_id,
                "call": crate::permissions::grant_key(&question.tool_call, &state.driver.home_dir(agent_id)),
            }),
        };
        store::audit::append(&state.pool, record).await?;
    }
    Ok(Json(question))
}

fn already_answered() -> ApiError {
    ApiError::conflict(ErrorCode::AlreadyAnswered, "the question is answered already (or its harness is gone)")
}

/// The caller's approvals inbox, live (WebSocket). On open and
/// after every question asked or answered in the agents the caller operates, one text message
/// `{"type": "pending", "permissions": [...]}` with the waiting questions (newest first, at most
/// 100) — so a browser needs no polling and never has to merge changes.
#[utoipa::path(
    get,
    path = "/api/v1/permissions/stream",
    operation_id = "permissions_stream",
    tag = "permissions",
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "`NOT_A_WEBSOCKET`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn stream(
    State(state): State<AppState>,
    principal: Principal,
    Upgrade(upgrade): Upgrade,
) -> Result<axum::response::Response, ApiError> {
    let changes = state.hub.subscribe_questions();
    let send_timeout = state.config.ws_send_timeout();
    Ok(upgrade
        .max_message_size(64 << 10)
        .read_buffer_size(super::ws::READ_BUFFER_BYTES)
        .on_upgrade(move |socket| inbox(socket, changes, principal, state, send_timeout)))
}

/// The inbox's one message: the waiting questions.
#[derive(Serialize)]
struct Pending {
    /// Always `pending`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Newest first, at most 100.
    permissions: Vec<Listed>,
}

async fn inbox(
    socket: axum::extract::ws::WebSocket,
    mut changes: tokio::sync::broadcast::Receiver<()>,
    principal: Principal,
    state: AppState,
    send_timeout: std::time::Duration,
) {
    use axum::extract::ws::Message;
    use futures_util::StreamExt;
    use tokio::sync::broadcast::error::RecvError;

    let (mut sink, mut incoming) = socket.split();
    let mut check = tokio::time::interval(super::stream::CREDENTIAL_CHECK);
    let mut dirty = true;
    loop {
        if dirty {
            dirty = false;
            let pending = match store::permissions::list_for_user(&state.pool, principal.user_id, true, 100).await {
                Ok(pending) => pending,
                Err(error) => {
                    tracing::error!(%error, "reading the approvals inbox");
                    super::ws::close(&mut sink, super::ws::CLOSE_INTERNAL, "the server could not read the inbox").await;
                    return;
                }
            };
            let message = serde_json::to_string(&Pending { kind: "pending", permissions: pending }).unwrap_or_default();
            match super::ws::send(&mut sink, Message::Text(message.into()), send_timeout).await {
                Ok(()) => {}
                Err(super::ws::SendError::Gone) => return,
                Err(super::ws::SendError::TooSlow) => {
                    super::ws::close_too_slow(&mut sink, "inbox").await;
                    return;
                }
            }
        }
        tokio::select! {
            _ = check.tick() => {
                if !principal.still_valid(&state.pool).await {
                    super::ws::close(&mut sink, super::ws::CLOSE_REVOKED, "the credential was revoked").await;
                    return;
                }
            }
            change = changes.recv() => match change {
                // Lagging only means several changes: one re-read covers them all.
                Ok(()) | Err(RecvError::Lagged(_)) => {
                    // Take what else arrived at once, then re-read once.
                    while changes.try_recv().is_ok() {}
                    dirty = true;
                }
                Err(RecvError::Closed) => return,
            },
            message = incoming.next() => match message {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
