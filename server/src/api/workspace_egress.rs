//! `/api/v1/workspaces/{id}/egress`: the workspace's egress default (docs/proxy.md, "The
//! workspace default") — the presets and allow-list its admins choose once, which every agent of
//! the workspace without a list of its own follows (new agents start so). Read by any member,
//! changed by workspace admins; bounded like an agent's list (`egress::MAX_ALLOW` entries,
//! known presets only).

use axum::Json;
use axum::extract::State;
use serde_json::json;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::proxy_feed::egress::{self, Egress};
use crate::state::AppState;
use crate::store;
use crate::store::users::Role;

/// The workspace's egress default (any member).
#[utoipa::path(
    get,
    path = "/api/v1/workspaces/{id}/egress",
    operation_id = "get_workspace_egress",
    tag = "workspaces",
    responses((status = 200, description = "The default (empty when none was set)", body = Egress)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn get(State(state): State<AppState>, principal: Principal, Id(id): Id<Uuid>) -> Result<Json<Egress>, ApiError> {
    principal.require(&state, id, Role::Viewer, "workspace").await?;
    let row = store::proxy_identities::workspace_default(&state.pool, id).await?;
    Ok(Json(Egress::from(row)))
}

/// Replaces the workspace's egress default (workspace admins). Every agent of the workspace that
/// follows it (`egress_inherited`) gets the new list within seconds; agents with a list of their
/// own keep it. Audited as `workspace.egress_changed`.
#[utoipa::path(
    put,
    path = "/api/v1/workspaces/{id}/egress",
    operation_id = "set_workspace_egress",
    tag = "workspaces",
    request_body = Egress,
    responses(
        (status = 200, description = "The default as stored (normalised)", body = Egress),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_EGRESS`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn set(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
    Body(body): Body<Egress>,
) -> Result<Json<Egress>, ApiError> {
    principal.require(&state, id, Role::Admin, "workspace").await?;
    let row = egress::validate(body).map_err(|m| ApiError::bad_request(ErrorCode::InvalidEgress, m))?;
    if !store::proxy_identities::set_workspace_default(&state.pool, id, principal.user_id, &row).await? {
        return Err(ApiError::NotFound("workspace"));
    }
    let detail = json!({"allow": row.allow, "presets": row.presets});
    super::workspaces::audit(&state, &principal, id, "workspace.egress_changed", "workspace", id.to_string(), detail)
        .await?;
    Ok(Json(Egress::from(row)))
}
