//! `/api/v1/agents`: create, list, show, update (the egress allow-list), delete, sleep, wake. An
//! agent's view lists the secrets attached to it (names and presets, never values or
//! placeholders) and its egress allow-list; its plain `env` refuses names that look like
//! credentials (`USE_A_SECRET`).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::extract::{Body, Id, parse_json};
use crate::app::AppState;
use crate::auth::Principal;
use crate::harness;
use crate::ids::{AgentId, AgentName};
use crate::proxy_feed::egress::{self, Egress};
use crate::secrets::validate;
use crate::store;
use crate::store::agents::{AgentRow, InsertError, NewAgent};
use crate::store::audit::AuditRecord;
use crate::store::proxy_identities::EgressRow;
use crate::store::secrets::Attachment;
use crate::store::users::Role;
use crate::supervisor::{Command, LifecycleError};

/// `POST /api/v1/agents`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    name: String,
    harness: String,
    command: Option<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    image: Option<String>,
    limits: Option<Limits>,
    /// The workspace; default: the caller's personal workspace.
    workspace_id: Option<uuid::Uuid>,
    /// What the sandbox may reach besides its secrets' hosts.
    egress: Option<Egress>,
}

/// `PATCH /api/v1/agents/{id}`: what may change after creation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgent {
    /// Replaces the egress allow-list.
    egress: Option<Egress>,
}

/// Resource limits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    cpus: Option<f64>,
    memory_mib: Option<i32>,
    pids: Option<i32>,
}

/// Renders an agent with the secrets attached to it and its egress allow-list (`attachments` and
/// `egress` may hold other agents' too).
pub fn agent_json(
    agent: &AgentRow,
    state: &AppState,
    attachments: &[Attachment],
    egress: &[(uuid::Uuid, EgressRow)],
) -> Value {
    let egress = egress.iter().find(|(id, _)| *id == agent.id.0).map(|(_, row)| Egress::from(row.clone()));
    let secrets: Vec<Value> = attachments
        .iter()
        .filter(|a| a.agent_id == agent.id.0)
        .map(|a| {
            json!({"env_name": a.env_name, "secret_id": a.secret_id, "secret_name": a.secret_name, "preset": a.preset})
        })
        .collect();
    // Agents made before credential-looking names were refused may still hold one in clear.
    let credentials_inside_sandbox = agent.env.iter().any(|(name, _)| validate::looks_like_credential(name));
    json!({
        "id": agent.id,
        "workspace_id": agent.workspace_id,
        "created_by": agent.created_by,
        "name": agent.name,
        "harness": agent.harness,
        "command": agent.command,
        "env": agent.env.iter().cloned().collect::<BTreeMap<_, _>>(),
        "image": agent.image,
        "driver": agent.driver,
        "isolated": agent.driver != "local" && state.driver.isolated(),
        "permission_policy": agent.permission_policy,
        "limits": {"cpus": agent.cpus, "memory_mib": agent.memory_mib, "pids": agent.pids_limit},
        "desired_state": agent.desired_state,
        "created_at": agent.created_at,
        "secrets": secrets,
        "credentials_inside_sandbox": credentials_inside_sandbox,
        "egress": egress.unwrap_or_default(),
    })
}

/// Renders one agent, reading its attached secrets.
async fn render(state: &AppState, agent: &AgentRow) -> Result<Json<Value>, ApiError> {
    let attachments = store::secrets::attachments(&state.pool, &[agent.id.0]).await?;
    let egress = store::proxy_identities::egress(&state.pool, &[agent.id.0]).await?;
    Ok(Json(agent_json(agent, state, &attachments, &egress)))
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128
}

/// Creates an agent (its sandbox is made on first use).
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateAgent>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let workspace_id = match body.workspace_id {
        Some(workspace_id) => workspace_id,
        None => store::users::personal_workspace(&state.pool, principal.user_id)
            .await?
            .ok_or(ApiError::NotFound("workspace"))?,
    };
    principal.require(&state, workspace_id, Role::Admin, "workspace").await?;
    let name = AgentName::parse(&body.name).map_err(|m| ApiError::bad_request("INVALID_NAME", m))?;
    let adapter = harness::adapter(&body.harness).ok_or_else(|| {
        ApiError::bad_request(
            "UNKNOWN_HARNESS",
            format!("unknown harness {:?}; known: {}", body.harness, harness::names().join(", ")),
        )
    })?;
    adapter.validate(body.command.as_deref()).map_err(|m| ApiError::bad_request("INVALID_COMMAND", m))?;
    if body.env.len() > 128 {
        return Err(ApiError::bad_request("INVALID_ENV", "at most 128 environment variables"));
    }
    for (key, value) in &body.env {
        if !valid_env_name(key) || key.starts_with("AGENTHOLD_") || value.len() > 32 * 1024 || value.contains('\0') {
            return Err(ApiError::bad_request(
                "INVALID_ENV",
                format!(
                    "environment variable {key:?}: names are [A-Za-z_][A-Za-z0-9_]* (not AGENTHOLD_*), values at most 32 KiB without NUL"
                ),
            ));
        }
    }
    if let Some(key) = body.env.keys().find(|key| validate::looks_like_credential(key)) {
        return Err(ApiError::bad_request(
            "USE_A_SECRET",
            format!(
                "environment variable {key} looks like a credential (names ending in _KEY, _TOKEN, _SECRET, \
                 _PASSWORD, …): a plain env value is stored in clear and readable in the sandbox. Store it as a \
                 secret (POST /api/v1/workspaces/{{id}}/secrets) and attach it to the agent \
                 (PUT /api/v1/agents/{{id}}/secrets/{key}); the sandbox then only sees a placeholder. See docs/secrets.md"
            ),
        ));
    }
    let egress =
        body.egress.map(egress::validate).transpose().map_err(|m| ApiError::bad_request("INVALID_EGRESS", m))?;
    let limits = body.limits.unwrap_or(Limits { cpus: None, memory_mib: None, pids: None });
    let cpus = limits.cpus.unwrap_or(state.config.default_cpus);
    let memory_mib = limits.memory_mib.unwrap_or(state.config.default_memory_mib);
    let pids_limit = limits.pids.unwrap_or(state.config.default_pids_limit);
    if !(0.05..=256.0).contains(&cpus) || !(64..=1 << 20).contains(&memory_mib) || !(16..=1 << 20).contains(&pids_limit)
    {
        return Err(ApiError::bad_request(
            "INVALID_LIMITS",
            "limits: cpus 0.05-256, memory_mib 64-1048576, pids 16-1048576",
        ));
    }
    let image = body.image.unwrap_or_else(|| state.config.image.clone());
    if image.is_empty() || image.len() > 512 || image.chars().any(char::is_whitespace) {
        return Err(ApiError::bad_request("INVALID_IMAGE", "image must be a Docker image reference"));
    }
    let agent = NewAgent {
        id: state.driver.next_agent_id(),
        workspace_id,
        created_by: principal.user_id,
        name: name.as_str().to_owned(),
        harness: adapter.name().to_owned(),
        command: body.command,
        env: body.env.into_iter().collect(),
        image,
        driver: state.driver.kind().to_owned(),
        cpus,
        memory_mib,
        pids_limit,
    };
    // A placeholder token hash: the real token is minted when the sandbox is created.
    let placeholder = store::tokens::hash_token(&format!("unused-{}", uuid::Uuid::new_v4()));
    match store::agents::insert(&state.pool, &agent, &placeholder).await {
        Ok(()) => {}
        Err(InsertError::NameTaken) => {
            return Err(ApiError::conflict("NAME_TAKEN", format!("an agent named {:?} exists", agent.name)));
        }
        Err(InsertError::Db(error)) => return Err(error.into()),
    }
    if let Some(egress) = &egress {
        store::proxy_identities::set_egress(&state.pool, agent.id, egress).await?;
    }
    let row = store::agents::get(&state.pool, agent.id).await?.ok_or(ApiError::NotFound("agent"))?;
    audit(&state, &principal, &row, "agent.created").await?;
    let egress: Vec<_> = egress.into_iter().map(|e| (agent.id.0, e)).collect();
    Ok((StatusCode::CREATED, Json(agent_json(&row, &state, &[], &egress))))
}

/// Lists the agents of every workspace the caller belongs to.
pub async fn list(State(state): State<AppState>, principal: Principal) -> Result<Json<Value>, ApiError> {
    let agents = store::agents::list_for_user(&state.pool, principal.user_id).await?;
    let ids: Vec<uuid::Uuid> = agents.iter().map(|a| a.id.0).collect();
    let attachments = store::secrets::attachments(&state.pool, &ids).await?;
    let egress = store::proxy_identities::egress(&state.pool, &ids).await?;
    let items: Vec<Value> = agents.iter().map(|a| agent_json(a, &state, &attachments, &egress)).collect();
    Ok(Json(json!({"agents": items})))
}

/// Loads an agent on which the caller has at least the `needed` role: 404 if it does not exist
/// or is in a workspace the caller does not belong to, 403 if the caller's role is too low.
pub async fn visible_agent(
    state: &AppState,
    principal: &Principal,
    id: AgentId,
    needed: Role,
) -> Result<AgentRow, ApiError> {
    let agent = store::agents::get(&state.pool, id).await?.ok_or(ApiError::NotFound("agent"))?;
    principal.require(state, agent.workspace_id, needed, "agent").await?;
    Ok(agent)
}

/// Records an action on an agent in its workspace's audit log.
async fn audit(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRow,
    action: &'static str,
) -> Result<(), ApiError> {
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type: "agent",
        resource_id: agent.id.to_string(),
        detail: json!({"name": agent.name}),
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// Shows an agent.
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Viewer).await?;
    render(&state, &agent).await
}

/// Changes an agent (agent admins; the role is checked before the body is read). Only `egress`
/// for now: it replaces the allow-list, and the proxy follows within seconds.
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    let body: UpdateAgent = parse_json(&body)?;
    if let Some(egress) = body.egress {
        let egress = egress::validate(egress).map_err(|m| ApiError::bad_request("INVALID_EGRESS", m))?;
        if !store::proxy_identities::set_egress(&state.pool, id, &egress).await? {
            return Err(ApiError::NotFound("agent"));
        }
        let record = AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: Some(principal.user_id),
            action: "agent.egress_changed",
            resource_type: "agent",
            resource_id: agent.id.to_string(),
            detail: json!({"name": agent.name, "allow": egress.allow, "presets": egress.presets}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    render(&state, &agent).await
}

/// A lifecycle failure as the client sees it: a stable code and a generic message; the
/// engine's own text is logged here, once, and never answered.
pub(super) fn lifecycle_error(error: LifecycleError) -> ApiError {
    match error {
        LifecycleError::Busy => ApiError::conflict("TURN_IN_PROGRESS", "the agent has a turn in progress"),
        LifecycleError::Failed(detail) => {
            tracing::warn!(error = %detail, "a sandbox operation failed");
            ApiError::Unavailable {
                code: "SANDBOX_FAILED",
                message: "the agent's sandbox could not be reached or changed; the server log has the details"
                    .to_owned(),
            }
        }
    }
}

fn supervisor_gone() -> ApiError {
    ApiError::Internal(anyhow::anyhow!("the agent's supervisor stopped"))
}

/// Deletes an agent: its sandbox, home volume, sessions and their events. The agent is first
/// marked as being deleted (committed before anything is torn down), so a prompt arriving
/// meanwhile finds no agent and the supervisor creates nothing for it; then the sandbox is
/// destroyed, then the rows deleted. A delete that failed halfway is finished by a retry (the
/// agent stays visible to this handler) or at the next server start.
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<StatusCode, ApiError> {
    let agent = store::agents::get_including_deleting(&state.pool, id).await?.ok_or(ApiError::NotFound("agent"))?;
    principal.require(&state, agent.workspace_id, Role::Admin, "agent").await?;
    if !store::agents::mark_deleting(&state.pool, id).await? {
        return Err(ApiError::NotFound("agent"));
    }
    let outcome = state.supervisors.ask(id, |reply| Command::Destroy { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    state.supervisors.forget(id);
    let sessions = store::sessions::list_ids(&state.pool, id).await?;
    store::agents::delete(&state.pool, id).await?;
    state.hub.close(&sessions);
    audit(&state, &principal, &agent, "agent.deleted").await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stops the agent's sandbox; its home survives. A prompt wakes it.
pub async fn sleep(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    visible_agent(&state, &principal, id, Role::Admin).await?;
    let outcome = state.supervisors.ask(id, |reply| Command::Sleep { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    store::agents::set_desired_state(&state.pool, id, "asleep").await?;
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    audit(&state, &principal, &agent, "agent.slept").await?;
    render(&state, &agent).await
}

/// Starts the agent's sandbox.
pub async fn wake(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    visible_agent(&state, &principal, id, Role::Admin).await?;
    store::agents::set_desired_state(&state.pool, id, "awake").await?;
    let outcome = state.supervisors.ask(id, |reply| Command::Wake { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    audit(&state, &principal, &agent, "agent.woken").await?;
    render(&state, &agent).await
}
