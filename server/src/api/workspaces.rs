//! `/api/v1/workspaces`: shared workspaces, their members (listed to members; changed by admins)
//! and roles, and their audit log.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id, Query};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::state::AppState;
use crate::store;
use crate::store::audit::{AuditRecord, AuditView};
use crate::store::users::{MemberView, MembershipError, MembershipView, Role};

/// `POST /api/v1/workspaces`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkspace {
    /// 1-100 characters.
    name: String,
}

/// A new workspace.
#[derive(Debug, Serialize, ToSchema)]
pub struct Workspace {
    /// Its id.
    id: Uuid,
    /// Its name.
    name: String,
}

/// The caller's workspaces.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkspaceList {
    /// With the caller's role in each.
    workspaces: Vec<MembershipView>,
}

/// A workspace's members.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberList {
    /// Earliest first.
    members: Vec<MemberView>,
}

/// A page of a workspace's audit log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    /// Newest first.
    records: Vec<AuditView>,
    /// The `before` of the next page (`null` when this one is empty).
    #[schema(required = true)]
    next_before: Option<i64>,
}

/// Creates a shared workspace; the caller becomes its admin.
#[utoipa::path(
    post,
    path = "/api/v1/workspaces",
    operation_id = "create_workspace",
    tag = "workspaces",
    request_body = CreateWorkspace,
    responses(
        (status = 201, description = "The workspace", body = Workspace),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateWorkspace>,
) -> Result<(StatusCode, Json<Workspace>), ApiError> {
    let name = body.name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::bad_request(ErrorCode::InvalidName, "a workspace's name is 1-100 characters"));
    }
    let id = store::users::create_workspace(&state.pool, name, principal.user_id).await?;
    audit(&state, &principal, id, "workspace.created", "workspace", id.to_string(), json!({"name": name})).await?;
    Ok((StatusCode::CREATED, Json(Workspace { id, name: name.to_owned() })))
}

/// The caller's workspaces.
#[utoipa::path(
    get,
    path = "/api/v1/workspaces",
    operation_id = "list_workspaces",
    tag = "workspaces",
    responses((status = 200, description = "The workspaces", body = WorkspaceList)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list(State(state): State<AppState>, principal: Principal) -> Result<Json<WorkspaceList>, ApiError> {
    let workspaces = store::users::memberships(&state.pool, principal.user_id).await?;
    Ok(Json(WorkspaceList { workspaces }))
}

/// A workspace's members with their roles (any member of it).
#[utoipa::path(
    get,
    path = "/api/v1/workspaces/{id}/members",
    operation_id = "list_members",
    tag = "workspaces",
    responses((status = 200, description = "The members", body = MemberList)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn members(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<MemberList>, ApiError> {
    principal.require(&state, id, Role::Viewer, "workspace").await?;
    let members = store::users::members(&state.pool, id).await?;
    Ok(Json(MemberList { members }))
}

/// `PUT /api/v1/workspaces/{id}/members/{user}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMember {
    /// The member's role.
    role: Role,
}

/// `{id}/members/{user_id}`.
#[derive(Debug, Deserialize)]
pub struct MemberPath {
    id: Uuid,
    user_id: Uuid,
}

fn member_path(
    path: Result<axum::extract::Path<MemberPath>, axum::extract::rejection::PathRejection>,
) -> Result<MemberPath, ApiError> {
    path.map(|axum::extract::Path(path)| path).map_err(|_| ApiError::NotFound("member"))
}

async fn change_member(
    state: &AppState,
    principal: &Principal,
    path: MemberPath,
    role: Option<Role>,
) -> Result<(), ApiError> {
    principal.require(state, path.id, Role::Admin, "workspace").await?;
    if store::users::get(&state.pool, path.user_id).await?.is_none() {
        return Err(ApiError::NotFound("user"));
    }
    let before = store::users::role_in(&state.pool, path.user_id, path.id).await?;
    if role.is_none() && before.is_none() {
        return Err(ApiError::NotFound("member"));
    }
    match store::users::set_membership(&state.pool, path.id, path.user_id, role).await {
        Ok(()) => {}
        Err(MembershipError::LastAdmin) => {
            return Err(ApiError::conflict(ErrorCode::LastAdmin, "a workspace keeps at least one admin"));
        }
        Err(MembershipError::Db(error)) => return Err(error.into()),
    }
    // Their open streams and terminals on this replica see it at their next check (the other
    // replicas' within the shared answers' freshness).
    crate::auth::recheck::record_role(path.user_id, path.id, role, std::time::Instant::now());
    if role.is_none() {
        // Their logins leave the workspace's agents with them.
        super::providers::member_left(state, path.id, path.user_id).await?;
    }
    // Links between agents stand on someone who administers both sides: no longer an admin here,
    // theirs that touch this workspace's agents are dropped.
    if role != Some(Role::Admin) {
        let dropped = store::agent_prompts::drop_made_by(&state.pool, path.user_id, path.id).await?;
        if !dropped.is_empty() {
            let links: Vec<Value> = dropped.iter().map(|(a, t)| json!({"agent_id": a, "target_agent_id": t})).collect();
            audit(
                state,
                principal,
                path.id,
                "agent.prompt_links_dropped",
                "member",
                path.user_id.to_string(),
                json!({"links": links}),
            )
            .await?;
        }
    }
    // What they made to act on their behalf stops with their standing: paused until an admin
    // resumes it.
    if role.is_none_or(|role| role < Role::Operator) {
        let (schedules, webhooks) = store::triggers::pause_made_by(&state.pool, path.user_id, path.id).await?;
        if !schedules.is_empty() || !webhooks.is_empty() {
            let detail = json!({"schedules": schedules, "webhooks": webhooks, "reason": "creator_left"});
            audit(state, principal, path.id, "triggers.paused", "member", path.user_id.to_string(), detail).await?;
        }
    }
    let action = match (before, role) {
        (None, Some(_)) => "member.added",
        (Some(_), Some(_)) => "member.role_changed",
        _ => "member.removed",
    };
    let detail = json!({"from": before, "to": role});
    audit(state, principal, path.id, action, "member", path.user_id.to_string(), detail).await
}

/// Adds a member or changes its role (workspace admins).
#[utoipa::path(
    put,
    path = "/api/v1/workspaces/{id}/members/{user_id}",
    operation_id = "set_member",
    tag = "workspaces",
    request_body = SetMember,
    responses(
        (status = 204, description = "Added or changed"),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`", body = ErrorBody),
        (status = 409, description = "`LAST_ADMIN`: a workspace keeps at least one admin", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn set_member(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<axum::extract::Path<MemberPath>, axum::extract::rejection::PathRejection>,
    Body(body): Body<SetMember>,
) -> Result<StatusCode, ApiError> {
    change_member(&state, &principal, member_path(path)?, Some(body.role)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a member (workspace admins). 409 `LAST_ADMIN` for the last admin.
#[utoipa::path(
    delete,
    path = "/api/v1/workspaces/{id}/members/{user_id}",
    operation_id = "remove_member",
    tag = "workspaces",
    responses(
        (status = 204, description = "Removed"),
        (status = 409, description = "`LAST_ADMIN`: a workspace keeps at least one admin", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn remove_member(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<axum::extract::Path<MemberPath>, axum::extract::rejection::PathRejection>,
) -> Result<StatusCode, ApiError> {
    change_member(&state, &principal, member_path(path)?, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `?before=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Records older than this id (the previous page's `next_before`).
    before: Option<i64>,
    /// At most this many (default 100, at most 1000).
    limit: Option<i64>,
}

/// The workspace's audit log, newest first (workspace admins). Page with `before=<last id>`.
#[utoipa::path(
    get,
    path = "/api/v1/workspaces/{id}/audit",
    operation_id = "audit_log",
    tag = "workspaces",
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of records", body = AuditPage),
        (status = 400, description = "`INVALID_QUERY`, `INVALID_LIMIT`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn audit_log(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
    Query(query): Query<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    principal.require(&state, id, Role::Admin, "workspace").await?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(ErrorCode::InvalidLimit, "limit must be 1-1000"));
    }
    let records = store::audit::page(&state.pool, id, query.before, limit).await?;
    let next_before = records.last().map(|r| r.id);
    Ok(Json(AuditPage { records, next_before }))
}

/// Records an action of `principal` in a workspace's audit log.
pub(super) async fn audit(
    state: &AppState,
    principal: &Principal,
    workspace_id: Uuid,
    action: &'static str,
    resource_type: &'static str,
    resource_id: String,
    detail: Value,
) -> Result<(), ApiError> {
    let record = AuditRecord {
        workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type,
        resource_id,
        detail,
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}
