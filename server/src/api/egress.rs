//! Egress by workspace and by agent (docs/proxy.md, "The workspace default"):
//! `/api/v1/workspaces/{id}/egress` is the presets and allow-list the workspace's admins choose
//! once, which every agent of the workspace without a list of its own follows (new agents start
//! so); `/api/v1/agents/{id}/egress` gives one agent a list of its own (operators: only within
//! the workspace's default — narrowing; admins: any) or returns it to the default (operators:
//! only when that narrows it too). Every list is bounded (`egress::MAX_ALLOW` entries, known
//! presets only) and audited.

use axum::Json;
use axum::extract::State;
use serde_json::json;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::proxy_feed::egress::{self, Egress};
use crate::state::AppState;
use crate::store;
use crate::store::proxy_identities::AgentEgress;
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
pub async fn get(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<Egress>, ApiError> {
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

/// An agent's egress in force.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct AgentEgressView {
    /// What its sandbox may reach besides its secrets' hosts.
    egress: Egress,
    /// True when that is its workspace's default, which it follows.
    inherited: bool,
}

impl From<AgentEgress> for AgentEgressView {
    fn from(e: AgentEgress) -> Self {
        Self { egress: Egress::from(e.row), inherited: e.inherited }
    }
}

/// Gives an agent a list of its own (operators of its workspace: only within the workspace's
/// default, e.g. fewer presets; admins: any, wider too). The proxy follows within seconds.
/// Audited as `agent.egress_changed`.
#[utoipa::path(
    put,
    path = "/api/v1/agents/{id}/egress",
    operation_id = "set_agent_egress",
    tag = "agents",
    request_body = Egress,
    responses(
        (status = 200, description = "The agent's egress in force", body = AgentEgressView),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_EGRESS`", body = ErrorBody),
        (status = 403, description = "`EGRESS_WIDENED`: an operator asked for more than the workspace's default \
            (the message names what); `FORBIDDEN` below operator", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn set_agent(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    Body(body): Body<Egress>,
) -> Result<Json<AgentEgressView>, ApiError> {
    let agent = super::agents::visible_agent(&state, &principal, id, Role::Operator).await?;
    let row = egress::validate(body).map_err(|m| ApiError::bad_request(ErrorCode::InvalidEgress, m))?;
    let role = store::users::role_in(&state.pool, principal.user_id, agent.workspace_id).await?;
    if role < Some(Role::Admin) {
        let default = store::proxy_identities::workspace_default(&state.pool, agent.workspace_id).await?;
        egress::within(&row, &default).map_err(|message| ApiError::Refused {
            status: axum::http::StatusCode::FORBIDDEN,
            code: ErrorCode::EgressWidened,
            message,
        })?;
    }
    if !store::proxy_identities::set_egress(&state.pool, id, &row).await? {
        return Err(ApiError::NotFound("agent"));
    }
    let detail = json!({"name": agent.name, "allow": row.allow, "presets": row.presets});
    super::workspaces::audit(
        &state,
        &principal,
        agent.workspace_id,
        "agent.egress_changed",
        "agent",
        id.to_string(),
        detail,
    )
    .await?;
    Ok(Json(AgentEgressView::from(AgentEgress { row, inherited: false })))
}

/// Returns an agent to its workspace's default (admins; operators only when that narrows what it
/// reaches: not when an admin gave it less than the default). Audited as `agent.egress_changed`.
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}/egress",
    operation_id = "reset_agent_egress",
    tag = "agents",
    responses(
        (status = 200, description = "The agent's egress in force (the workspace's default)", body = AgentEgressView),
        (status = 403, description = "`EGRESS_WIDENED`: an operator's reset would give the agent more than an admin \
            left it (the message names what); `FORBIDDEN` below operator", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn reset_agent(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentEgressView>, ApiError> {
    let agent = super::agents::visible_agent(&state, &principal, id, Role::Operator).await?;
    let role = store::users::role_in(&state.pool, principal.user_id, agent.workspace_id).await?;
    if role < Some(Role::Admin) {
        store::proxy_identities::clear_egress_if(&state.pool, id, egress::reset_narrows).await?.map_err(|message| {
            ApiError::Refused { status: axum::http::StatusCode::FORBIDDEN, code: ErrorCode::EgressWidened, message }
        })?;
    } else {
        store::proxy_identities::clear_egress(&state.pool, id).await?;
    }
    let detail = json!({"name": agent.name, "inherited": true});
    super::workspaces::audit(
        &state,
        &principal,
        agent.workspace_id,
        "agent.egress_changed",
        "agent",
        id.to_string(),
        detail,
    )
    .await?;
    let mut now = store::proxy_identities::egress(&state.pool, &[id.0]).await?;
    let (_, egress) = now.pop().ok_or(ApiError::NotFound("agent"))?;
    Ok(Json(AgentEgressView::from(egress)))
}
