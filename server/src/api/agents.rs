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

use super::agent_settings::{
    Limits, SettingsPatch, check_auto_sleep, check_env, check_harness, check_image, check_limits, check_model,
    check_policy, check_posture, check_turn_seconds,
};
use super::error::ApiError;
use super::extract::{Body, Id, parse_json};
use crate::app::AppState;
use crate::auth::Principal;
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
    /// The model (`provider/model` for OpenCode); default: the harness's own.
    model: Option<String>,
    /// The permission posture; default: the server's.
    posture: Option<String>,
    /// The policy of a guarded agent.
    policy: Option<Value>,
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
    harness: Option<String>,
    command: Option<Vec<String>>,
    /// `""` clears it.
    model: Option<String>,
    env: Option<BTreeMap<String, String>>,
    image: Option<String>,
    limits: Option<Limits>,
    /// `""` returns to the server's default.
    posture: Option<String>,
    /// `null` removes it.
    #[serde(default, deserialize_with = "present")]
    policy: Option<Option<Value>>,
}

/// A field that is present (even `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<Value>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
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
    // ... or someone signed in inside its sandbox (a login method run in its terminal).
    let credentials_inside_sandbox =
        agent.env.iter().any(|(name, _)| validate::looks_like_credential(name)) || agent.sandbox_login_at.is_some();
    json!({
        "id": agent.id,
        "workspace_id": agent.workspace_id,
        "created_by": agent.created_by,
        "name": agent.name,
        "harness": agent.harness,
        "command": agent.command,
        "model": agent.model,
        "env": agent.env.iter().cloned().collect::<BTreeMap<_, _>>(),
        "image": agent.image,
        "driver": agent.driver,
        "isolated": agent.driver != "local" && state.driver.isolated(),
        "permission_policy": agent.permission_policy,
        "posture": state.postures().of(agent).map(|p| p.as_str()).unwrap_or("forbidden"),
        "own_posture": agent.posture,
        "policy": agent.policy,
        "limits": {
            "cpus": agent.cpus,
            "memory_mib": agent.memory_mib,
            "pids": agent.pids_limit,
            "turn_seconds": agent.turn_timeout_secs,
            "auto_sleep_secs": agent.auto_sleep_secs,
        },
        "login_user_id": agent.login_user_id,
        "sandbox_login_at": agent.sandbox_login_at,
        "desired_state": agent.desired_state,
        "created_at": agent.created_at,
        "secrets": secrets,
        "credentials_inside_sandbox": credentials_inside_sandbox,
        "egress": egress.unwrap_or_default(),
    })
}

/// Renders one agent, reading its attached secrets, and what its running harness advertised
/// (`advertised`: its `initialize` answer — capabilities, auth methods, agent info — as it sent
/// it; `null` while no harness runs).
async fn render(state: &AppState, agent: &AgentRow) -> Result<Json<Value>, ApiError> {
    let attachments = store::secrets::attachments(&state.pool, &[agent.id.0]).await?;
    let egress = store::proxy_identities::egress(&state.pool, &[agent.id.0]).await?;
    let mut view = agent_json(agent, state, &attachments, &egress);
    let advertised = store::sandboxes::get(&state.pool, agent.id).await?.and_then(|row| row.harness_init);
    let home_dir = state.driver.home_dir(agent.id);
    let methods = crate::harness::login_methods(agent, advertised.as_ref(), &state.driver.tools_dir(), &home_dir);
    view["login_methods"] = json!(methods);
    view["logins"] = logins_view(state, agent).await?;
    view["advertised"] = advertised.unwrap_or(Value::Null);
    Ok(Json(view))
}

/// Whose provider logins the agent uses and their state for its harness: the kinds delivered,
/// and `connect_again` when one it would use needs connecting again (docs/logins.md).
async fn logins_view(state: &AppState, agent: &AgentRow) -> Result<Value, ApiError> {
    let Some(user_id) = agent.login_user_id else { return Ok(Value::Null) };
    let delivered = crate::logins::delivered(&state.pool, agent.into()).await?;
    let takes = crate::harness::adapter(&agent.harness).map(|a| a.profile().account_logins).unwrap_or_default();
    let logins = store::provider_logins::list_for_user(&state.pool, user_id).await?;
    let connect_again: Vec<&str> = logins
        .iter()
        .filter(|l| l.state == "connect_again")
        .filter(|l| crate::logins::kinds::LoginKind::parse(&l.kind).is_some_and(|k| takes.contains(&k)))
        .map(|l| l.kind.as_str())
        .collect();
    Ok(json!({
        "user_id": user_id,
        "delivered": delivered.iter().map(|(kind, _)| kind.as_str()).collect::<Vec<_>>(),
        "connect_again": connect_again,
    }))
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
    let adapter = check_harness(&state, &body.harness, body.command.as_deref())?;
    let model = check_model(body.model)?;
    let posture = check_posture(&state, body.posture)?;
    let policy = check_policy(body.policy)?;
    check_env(&body.env)?;
    let egress =
        body.egress.map(egress::validate).transpose().map_err(|m| ApiError::bad_request("INVALID_EGRESS", m))?;
    let limits = body.limits.unwrap_or_default();
    let cpus = limits.cpus.unwrap_or(state.config.default_cpus);
    let memory_mib = limits.memory_mib.unwrap_or(state.config.default_memory_mib);
    let pids_limit = limits.pids.unwrap_or(state.config.default_pids_limit);
    check_limits(cpus, memory_mib, pids_limit)?;
    let turn_timeout_secs = check_turn_seconds(limits.turn_seconds, None)?;
    let auto_sleep_secs = check_auto_sleep(limits.auto_sleep_secs.flatten())?;
    let default_image = if adapter.profile().in_base_image { &state.config.base_image } else { &state.config.image };
    let image = body.image.unwrap_or_else(|| default_image.clone());
    check_image(&image)?;
    // Room for its sandbox's network (a full subnet pool is a capacity error, not an engine one).
    state.driver.room_for_agent().await.map_err(|e| match e {
        crate::sandbox::DriverError::Capacity(message) => ApiError::Unavailable { code: "CAPACITY", message },
        other => ApiError::Internal(anyhow::anyhow!(other).context("checking room for a sandbox")),
    })?;
    // A sandbox started ahead (the warm pool) gives the agent its id.
    let claimed = state.warm_pool.as_ref().and_then(|pool| pool.claim(&image));
    let agent = NewAgent {
        id: claimed.as_ref().map_or_else(|| state.driver.next_agent_id(), |claimed| claimed.agent_id),
        workspace_id,
        created_by: principal.user_id,
        name: name.as_str().to_owned(),
        harness: adapter.name().to_owned(),
        command: body.command,
        model,
        posture,
        policy,
        env: body.env.into_iter().collect(),
        image,
        driver: state.driver.kind().to_owned(),
        cpus,
        memory_mib,
        pids_limit,
        turn_timeout_secs,
        auto_sleep_secs,
    };
    // A placeholder token hash: the real token is minted when the sandbox is created.
    let placeholder = store::tokens::hash_token(&format!("unused-{}", uuid::Uuid::new_v4()));
    let max_agents = state.config.max_agents.map(i64::from);
    let inserted = store::agents::insert(&state.pool, &agent, &placeholder, max_agents).await;
    let claimed = match (inserted.is_ok(), claimed, &state.warm_pool) {
        (false, Some(claimed), Some(pool)) => {
            pool.give_back(claimed);
            None
        }
        (_, claimed, _) => claimed,
    };
    match inserted {
        Ok(()) => {}
        Err(full @ InsertError::Full(_)) => {
            return Err(ApiError::Unavailable { code: "CAPACITY", message: full.to_string() });
        }
        Err(InsertError::NameTaken) => {
            return Err(ApiError::conflict("NAME_TAKEN", format!("an agent named {:?} exists", agent.name)));
        }
        Err(InsertError::Db(error)) => return Err(error.into()),
    }
    if let Some(claimed) = claimed {
        let limits = (agent.cpus, agent.memory_mib, agent.pids_limit);
        super::warm_claim::take_over(&state, agent.id, limits, claimed).await;
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

/// The host runs as many sandboxes as it may.
pub fn host_full() -> ApiError {
    ApiError::Unavailable {
        code: "CAPACITY",
        message: "this host runs as many sandboxes as it may (AGENTHOLD_MAX_AWAKE); put one to sleep, or prompt: a prompt waits for a slot".to_owned(),
    }
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

/// Changes an agent (agent admins; the role is checked before the body is read): `egress`
/// replaces the allow-list (the proxy follows within seconds); harness, command, model and env
/// restart the harness once no turn runs (its sessions are loaded again, or start anew with a
/// `CONTEXT_RESET` notice when the new harness cannot load them); image and limits apply when
/// the container is made again (`POST /api/v1/agents/{id}/rebuild`). Audited as
/// `agent.changed` with the changed fields (env: names only).
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    let body: UpdateAgent = parse_json(&body)?;
    // Everything is checked before anything is written.
    let patch = SettingsPatch {
        harness: body.harness,
        command: body.command,
        model: body.model,
        env: body.env,
        image: body.image,
        limits: body.limits,
        posture: body.posture,
        policy: body.policy,
    };
    let (settings, change) = super::agent_settings::apply(&state, &agent, patch)?;
    let egress =
        body.egress.map(egress::validate).transpose().map_err(|m| ApiError::bad_request("INVALID_EGRESS", m))?;
    if let Some(egress) = egress {
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
    if !change.fields.is_empty() {
        if !store::agents::update(&state.pool, id, &settings).await? {
            return Err(ApiError::NotFound("agent"));
        }
        if change.restarts_harness {
            state.supervisors.send(id, Command::EnvironmentChanged).await;
        }
        let record = AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: Some(principal.user_id),
            action: "agent.changed",
            resource_type: "agent",
            resource_id: agent.id.to_string(),
            detail: json!({"name": agent.name, "changed": change.fields, "needs_rebuild": change.needs_rebuild}),
        };
        store::audit::append(&state.pool, record).await?;
    }
    let agent = store::agents::get(&state.pool, id).await?.ok_or(ApiError::NotFound("agent"))?;
    render(&state, &agent).await
}

/// Makes the agent's container again from its current image and limits, around the same home
/// volume (agent admins): 409 `TURN_IN_PROGRESS` while a turn runs. The sandbox is stopped, its
/// container removed, and started anew (the harness starts at the next prompt). Audited as
/// `agent.rebuilt`.
pub async fn rebuild(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    let stopped = state.supervisors.ask(id, |reply| Command::Sleep { reply }).await.ok_or_else(supervisor_gone)?;
    stopped.map_err(lifecycle_error)?;
    state.driver.remove_container(id).await.map_err(|e| lifecycle_error(LifecycleError::Failed(e.to_string())))?;
    let woken = state.supervisors.ask(id, |reply| Command::Wake { reply }).await.ok_or_else(supervisor_gone)?;
    woken.map_err(lifecycle_error)?;
    audit(&state, &principal, &agent, "agent.rebuilt").await?;
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
    // A person asking is told at once rather than kept waiting (a prompt waits instead).
    if !state.supervisors.host().has_room_for(id) {
        return Err(host_full());
    }
    store::agents::set_desired_state(&state.pool, id, "awake").await?;
    let outcome = state.supervisors.ask(id, |reply| Command::Wake { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    audit(&state, &principal, &agent, "agent.woken").await?;
    render(&state, &agent).await
}
