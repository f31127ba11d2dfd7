//! `/api/v1/sessions/{id}/grants`: the session's "approve for this session" grants — agenthold's
//! own standing decisions (the harness only ever gets once-answers): listed for viewers, revoked
//! by operators. A revocation goes through the agent's supervisor, which stops answering with the
//! grant before it is stored; audited as `permission.grant_revoked`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::Query;
use super::openapi::Access;
use super::sessions::visible_session;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::SessionId;
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::permissions::SessionGrant;
use crate::store::users::Role;
use crate::supervisor::Command;
use crate::supervisor::core::AnswerError;

/// `GET /api/v1/sessions/{id}/grants` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `active` (default: those not revoked) or `all`.
    state: Option<String>,
}

/// A session's grants, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantList {
    /// The grants.
    grants: Vec<SessionGrant>,
}

/// Most grants listed (a session holds at most 100 active ones).
const MAX_LISTED: i64 = 500;

/// `{id}/grants/{grant_id}`.
#[derive(Debug, Deserialize)]
pub struct GrantPath {
    id: SessionId,
    grant_id: uuid::Uuid,
}

/// The session's "approve for this session" grants (viewers of its agent).
#[utoipa::path(
    get,
    path = "/api/v1/sessions/{id}/grants",
    operation_id = "list_session_grants",
    tag = "permissions",
    params(ListQuery),
    responses(
        (status = 200, description = "The grants, newest first", body = GrantList),
        (status = 400, description = "`INVALID_QUERY`, `INVALID_STATE`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    super::extract::Id(id): super::extract::Id<SessionId>,
    Query(query): Query<ListQuery>,
) -> Result<Json<GrantList>, ApiError> {
    let active = match query.state.as_deref().unwrap_or("active") {
        "active" => true,
        "all" => false,
        other => return Err(ApiError::bad_request(ErrorCode::InvalidState, format!("state {other:?}: active or all"))),
    };
    let session = visible_session(&state, &principal, id, Role::Viewer).await?;
    let home_dir = state.driver.home_dir(session.agent_id);
    let mut grants = store::permissions::session_grants(&state.pool, id, active, MAX_LISTED).await?;
    for grant in &mut grants {
        grant.call = crate::permissions::grant_key(&grant.tool_call, &home_dir);
    }
    Ok(Json(GrantList { grants }))
}

/// Revokes a session grant (operators of its agent): agenthold asks about that call again from
/// the next one on. `204` also when it was revoked already; 404 when the session has no such
/// grant.
#[utoipa::path(
    delete,
    path = "/api/v1/sessions/{id}/grants/{grant_id}",
    operation_id = "revoke_session_grant",
    tag = "permissions",
    responses((status = 204, description = "Revoked")),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn revoke(
    State(state): State<AppState>,
    principal: Principal,
    super::extract::Id(id): super::extract::Id<SessionId>,
    path: Result<axum::extract::Path<GrantPath>, axum::extract::rejection::PathRejection>,
) -> Result<StatusCode, ApiError> {
    // The role first: a caller without it learns nothing from the grant's id.
    let session = visible_session(&state, &principal, id, Role::Operator).await?;
    let axum::extract::Path(path) = path.map_err(|_| ApiError::NotFound("grant"))?;
    let Some(grant) = store::permissions::session_grant(&state.pool, path.id, path.grant_id).await? else {
        return Err(ApiError::NotFound("grant"));
    };
    if grant.revoked_at.is_some() {
        return Ok(StatusCode::NO_CONTENT);
    }
    let by = json!({"user_id": principal.user_id});
    let (permission_id, session_id) = (grant.id, path.id);
    let outcome = state
        .dispatch
        .ask(session.agent_id, |reply| Command::RevokeGrant { permission_id, session_id, by, reply })
        .await
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped")))?;
    match outcome {
        Ok(()) => {}
        Err(AnswerError::NotPending) => return Err(ApiError::NotFound("grant")),
        Err(error) => return Err(ApiError::Internal(anyhow::anyhow!("revoking grant {permission_id}: {error}"))),
    }
    let agent = store::agents::get(&state.pool, session.agent_id).await?.ok_or(ApiError::NotFound("session"))?;
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action: "permission.grant_revoked",
        resource_type: "permission",
        resource_id: permission_id.to_string(),
        detail: json!({"agent": agent.name, "session_id": session_id, "call": crate::permissions::grant_key(
            &grant.tool_call,
            &state.driver.home_dir(session.agent_id),
        )}),
    };
    store::audit::append(&state.pool, record).await?;
    Ok(StatusCode::NO_CONTENT)
}
