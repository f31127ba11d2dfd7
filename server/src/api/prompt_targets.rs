//! `/api/v1/agents/{id}/prompt-targets…`: the agents an agent may prompt through agenthold's MCP
//! server (docs/triggers.md, "Agents prompting agents"). Someone who operates both agents puts
//! one on the list (the caller needs the operator role in the workspace of each); an operator of
//! the prompting agent takes one off; its viewers see the list. Changes are audited with who
//! made them (`agent.prompt_target_added`, `agent.prompt_target_removed`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::Id;
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::audit::AuditRecord;
use crate::store::users::Role;

/// One agent on the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct PromptTarget {
    /// The agent that may be prompted.
    agent_id: AgentId,
    /// Its name.
    name: String,
    /// Its harness.
    harness: String,
    /// Who put it on the list.
    #[schema(required = true)]
    created_by: Option<Uuid>,
    /// When.
    created_at: DateTime<Utc>,
}

/// An agent's list.
#[derive(Debug, Serialize, ToSchema)]
pub struct PromptTargets {
    /// By name.
    targets: Vec<PromptTarget>,
    /// How deep a chain of agents prompting agents may go.
    max_chain_depth: i32,
}

/// `{id}` and `{target_id}`.
#[derive(Debug, Deserialize)]
pub struct TargetPath {
    id: AgentId,
    target_id: AgentId,
}

fn target_path(
    path: Result<Path<TargetPath>, axum::extract::rejection::PathRejection>,
) -> Result<(AgentId, AgentId), ApiError> {
    // An id that does not parse is not found, as everywhere.
    let Path(path) = path.map_err(|_| ApiError::NotFound("agent"))?;
    Ok((path.id, path.target_id))
}

async fn list_of(state: &AppState, agent: AgentId) -> Result<PromptTargets, ApiError> {
    let rows = store::agent_prompts::targets(&state.pool, agent).await?;
    let targets = rows
        .into_iter()
        .map(|r| PromptTarget {
            agent_id: r.agent_id,
            name: r.name,
            harness: r.harness,
            created_by: r.created_by,
            created_at: r.created_at,
        })
        .collect();
    Ok(PromptTargets { targets, max_chain_depth: crate::mcp::MAX_CHAIN_DEPTH })
}

async fn audit(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRow,
    target: AgentId,
    action: &'static str,
) -> Result<(), ApiError> {
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type: "agent",
        resource_id: agent.id.to_string(),
        detail: json!({"name": agent.name, "target_agent_id": target}),
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// The agents this agent may prompt.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/prompt-targets",
    operation_id = "list_prompt_targets",
    tag = "triggers",
    responses((status = 200, description = "The list", body = PromptTargets)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<PromptTargets>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Viewer).await?;
    Ok(Json(list_of(&state, agent_id).await?))
}

/// Lets the agent prompt `target_id` (the caller administers both; idempotent). Audited as
/// `agent.prompt_target_added` in the prompting agent's workspace.
#[utoipa::path(
    put,
    path = "/api/v1/agents/{id}/prompt-targets/{target_id}",
    operation_id = "add_prompt_target",
    tag = "triggers",
    params(("target_id" = Uuid, Path, description = "The agent it may prompt")),
    responses(
        (status = 200, description = "The list", body = PromptTargets),
        (status = 400, description = "`SELF_TARGET`: an agent cannot be on its own list", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn add(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<TargetPath>, axum::extract::rejection::PathRejection>,
) -> Result<Json<PromptTargets>, ApiError> {
    let (agent_id, target_id) = target_path(path)?;
    let agent = visible_agent(&state, &principal, agent_id, Role::Admin).await?;
    visible_agent(&state, &principal, target_id, Role::Admin).await?;
    if agent_id == target_id {
        return Err(ApiError::bad_request(ErrorCode::SelfTarget, "an agent cannot be on its own list"));
    }
    if store::agent_prompts::add(&state.pool, agent_id, target_id, principal.user_id).await? {
        audit(&state, &principal, &agent, target_id, "agent.prompt_target_added").await?;
    }
    Ok(Json(list_of(&state, agent_id).await?))
}

/// Takes `target_id` off the agent's list (the agent's admins; idempotent: 204 also when it
/// was not on it). Audited as `agent.prompt_target_removed`.
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}/prompt-targets/{target_id}",
    operation_id = "remove_prompt_target",
    tag = "triggers",
    params(("target_id" = Uuid, Path, description = "The agent it may no longer prompt")),
    responses(
        (status = 204, description = "Not on the list (any more)"),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn remove(
    State(state): State<AppState>,
    principal: Principal,
    path: Result<Path<TargetPath>, axum::extract::rejection::PathRejection>,
) -> Result<StatusCode, ApiError> {
    let (agent_id, target_id) = target_path(path)?;
    let agent = visible_agent(&state, &principal, agent_id, Role::Admin).await?;
    if store::agent_prompts::remove(&state.pool, agent_id, target_id).await? {
        audit(&state, &principal, &agent, target_id, "agent.prompt_target_removed").await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The agents that may prompt this one.
#[derive(Debug, Serialize, ToSchema)]
pub struct IncomingLinks {
    /// By name; `holds: false` for a link whose maker is no longer an admin of both workspaces
    /// (it answers nothing, and is dropped when that member leaves or is demoted).
    links: Vec<store::agent_prompts::IncomingRow>,
}

/// The agents that may prompt this agent through agenthold's MCP server (its admins): links made
/// from any workspace by someone who administers both.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/prompted-by",
    operation_id = "list_incoming_prompt_links",
    tag = "triggers",
    responses((status = 200, description = "The links", body = IncomingLinks)),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn incoming(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<IncomingLinks>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Admin).await?;
    Ok(Json(IncomingLinks { links: store::agent_prompts::incoming(&state.pool, agent_id).await? }))
}

/// `{id}` and `{source_id}`.
#[derive(Debug, Deserialize)]
pub struct SourcePath {
    id: AgentId,
    source_id: AgentId,
}

/// Revokes the link that lets `source_id` prompt this agent (this agent's admins; idempotent:
/// 204 also when there was none). Audited as `agent.prompt_link_revoked` in this agent's
/// workspace.
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}/prompted-by/{source_id}",
    operation_id = "revoke_incoming_prompt_link",
    tag = "triggers",
    params(("source_id" = Uuid, Path, description = "The agent that may no longer prompt this one")),
    responses((status = 204, description = "It may not (any more)")),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn revoke_incoming(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
    path: Result<Path<SourcePath>, axum::extract::rejection::PathRejection>,
) -> Result<StatusCode, ApiError> {
    // The role first: a caller without it learns nothing from the source's id.
    let agent = visible_agent(&state, &principal, agent_id, Role::Admin).await?;
    let Path(path) = path.map_err(|_| ApiError::NotFound("agent"))?;
    if store::agent_prompts::remove(&state.pool, path.source_id, path.id).await? {
        let record = AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: Some(principal.user_id),
            action: "agent.prompt_link_revoked",
            resource_type: "agent",
            resource_id: agent.id.to_string(),
            detail: json!({"name": agent.name, "source_agent_id": path.source_id}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
