//! `/api/v1/agents`: create, list, show, update (settings and the egress allow-list), delete,
//! sleep, wake, rebuild. An agent's plain `env` refuses names that look like credentials
//! (`USE_A_SECRET`). How an agent is shown is [`super::agent_view`]'s.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::agent_settings::{
    FieldChange, Impact, Limits, SettingsPatch, check_auth_method, check_auto_sleep, check_env, check_harness,
    check_image, check_limits, check_model, check_policy, check_posture, check_turn_seconds,
};
use super::agent_view::{Agent, AgentDetail, agent_detail, agent_view};
use super::error::{ApiError, ErrorBody};
use super::extract::{Body, Id, Query, RawBody, parse_json};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::{AgentId, AgentName};
use crate::proxy_feed::egress::{self, Egress};
use crate::state::AppState;
use crate::store;
use crate::store::agents::{AgentRow, InsertError, NewAgent};
use crate::store::audit::AuditRecord;
use crate::store::users::Role;
use crate::supervisor::{Command, LifecycleError};

/// `POST /api/v1/agents`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    /// 1-64 characters of a-z, 0-9, `-`, `_`, `.`, starting with a letter or digit.
    name: String,
    /// `claude-code`, `codex`, `opencode`, `command` (with `command`), `fake` (dev and test).
    harness: String,
    /// The ACP program a `command` harness runs.
    command: Option<Vec<String>>,
    /// The model (`provider/model` for OpenCode); default: the harness's own.
    model: Option<String>,
    /// The permission posture; default: the server's.
    posture: Option<String>,
    /// The policy of a guarded agent.
    policy: Option<Value>,
    /// Plain environment variables (names that look like credentials are refused: use secrets).
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Secrets of the workspace attached at once, by variable (`{"ANTHROPIC_API_KEY": "<secret
    /// id>"}`), as `PUT /api/v1/agents/{id}/secrets/{env_name}` would; at most 32. An agent
    /// created with the secrets a pooled harness was started for takes it running
    /// (docs/design.md, "Pooled harnesses").
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, uuid::Uuid>)]
    secrets: BTreeMap<String, uuid::Uuid>,
    /// The sandbox image; default: the server's (its base image for the real harnesses).
    image: Option<String>,
    /// Resource limits; default: the server's.
    limits: Option<Limits>,
    /// The workspace; default: the caller's personal workspace.
    workspace_id: Option<uuid::Uuid>,
    /// What the sandbox may reach besides its secrets' hosts; default: it follows the
    /// workspace's egress default (`GET /api/v1/workspaces/{id}/egress`).
    egress: Option<Egress>,
    /// The login method (an id from its harness's `authMethods`, at most 128 characters) the
    /// harness is signed in with (ACP `authenticate`) when a session call answers that it must
    /// sign in; default: none (the adapter's own, else the only advertised method whose key the
    /// sandbox holds).
    auth_method: Option<String>,
    /// A repository cloned into the home at the first wake, before the harness starts; sessions
    /// start in its folder (docs/api.md, "An agent for a repository").
    repo: Option<RepoSpec>,
}

/// `repo` on create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoSpec {
    /// `https://host[:port]/path` (at most 2048 bytes; no user, password, query or fragment: a
    /// private repository's token is a `git_token` secret attached for its host).
    url: String,
    /// The branch to clone (git's branch name rules, at most 255 bytes); default: the remote's.
    branch: Option<String>,
}

/// `PATCH /api/v1/agents/{id}`: what may change after creation (each field absent is kept).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgent {
    /// Replaces the egress allow-list (any list: admins may widen the workspace's default for one
    /// agent); `null`: follow the workspace's default again (docs/proxy.md, "The workspace
    /// default"). Operators narrow it with `PUT /api/v1/agents/{id}/egress`.
    #[serde(default, deserialize_with = "present_egress")]
    #[schema(value_type = Option<Egress>)]
    egress: Option<Option<Egress>>,
    /// A new harness (restarts it once no turn runs).
    harness: Option<String>,
    /// A `command` harness's program.
    command: Option<Vec<String>>,
    /// `""` clears it.
    model: Option<String>,
    /// Replaces the plain environment.
    env: Option<BTreeMap<String, String>>,
    /// Applies when the container is made again (`rebuild`).
    image: Option<String>,
    /// Applies when the container is made again (`rebuild`); `turn_seconds` and
    /// `auto_sleep_secs` at once.
    limits: Option<Limits>,
    /// `""` returns to the server's default.
    posture: Option<String>,
    /// `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Object>)]
    policy: Option<Option<Value>>,
    /// The login method the harness is signed in with when it asks (checked against what the
    /// running harness advertised, when one runs); applies the next time it asks (no restart);
    /// `""` clears it.
    auth_method: Option<String>,
}

/// The agents of the caller's workspaces.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    /// Every agent the caller can see.
    agents: Vec<Agent>,
}

/// A field that is present (even `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<Value>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

/// `egress` present (even `null`) is `Some`.
fn present_egress<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<Egress>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

/// How many times a creation is placed when the engine it was placed on fills up meanwhile.
const MAX_PLACEMENTS: u32 = 3;

/// Creates an agent (its sandbox is made on first use; admins of the target workspace).
#[utoipa::path(
    post,
    path = "/api/v1/agents",
    operation_id = "create_agent",
    tag = "agents",
    request_body = CreateAgent,
    responses(
        (status = 201, description = "The agent", body = Agent),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`, `UNKNOWN_HARNESS`, \
            `INVALID_COMMAND`, `INVALID_MODEL`, `UNKNOWN_POSTURE`, `AUTONOMOUS_FORBIDDEN`, `INVALID_POLICY`, \
            `INVALID_ENV`, `USE_A_SECRET`, `INVALID_EGRESS`, `INVALID_LIMITS`, `LIMIT_TOO_HIGH`, `INVALID_IMAGE`, `IMAGE_NOT_ALLOWED`, \
            `UNKNOWN_AUTH_METHOD`, `INVALID_REPO`", body = ErrorBody),
        (status = 404, description = "`NOT_FOUND`: no such workspace of the caller's", body = ErrorBody),
        (status = 409, description = "`NAME_TAKEN`, `QUOTA_EXCEEDED` (agents per workspace or per user)", body = ErrorBody),
        (status = 503, description = "`CAPACITY`: the host holds as many agents as it may", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Body(body): Body<CreateAgent>,
) -> Result<(StatusCode, Json<Agent>), ApiError> {
    let workspace_id = match body.workspace_id {
        Some(workspace_id) => workspace_id,
        None => store::users::personal_workspace(&state.pool, principal.user_id)
            .await?
            .ok_or(ApiError::NotFound("workspace"))?,
    };
    principal.require(&state, workspace_id, Role::Admin, "workspace").await?;
    let name = AgentName::parse(&body.name).map_err(|m| ApiError::bad_request(ErrorCode::InvalidName, m))?;
    let adapter = check_harness(&state, &body.harness, body.command.as_deref())?;
    let model = check_model(body.model)?;
    let posture = check_posture(&state, body.posture)?;
    let policy = check_policy(body.policy)?;
    check_env(&body.env)?;
    let secrets = super::create_secrets::check(&state, workspace_id, &body.env, &body.secrets).await?;
    let secret_variables: Vec<String> = secrets.iter().map(|named| named.env_name().to_owned()).collect();
    let egress = body
        .egress
        .map(egress::validate)
        .transpose()
        .map_err(|m| ApiError::bad_request(ErrorCode::InvalidEgress, m))?;
    let limits = body.limits.unwrap_or_default();
    // The server's defaults, within its ceilings (a small host's ceilings may be below them).
    let (max_cpus, max_memory, max_pids) = state.config.limit_ceilings();
    let cpus = limits.cpus.unwrap_or(state.config.default_cpus.min(max_cpus));
    let memory_mib = limits.memory_mib.unwrap_or(state.config.default_memory_mib.min(max_memory));
    let pids_limit = limits.pids.unwrap_or(state.config.default_pids_limit.min(max_pids));
    let disk_mib = limits.disk_mib.unwrap_or_else(|| state.config.default_disk_mib());
    check_limits(&state, cpus, memory_mib, pids_limit, disk_mib)?;
    let turn_timeout_secs = check_turn_seconds(&state, limits.turn_seconds, None)?;
    let auto_sleep_secs = check_auto_sleep(limits.auto_sleep_secs.flatten())?;
    let default_image = if adapter.profile().in_base_image { &state.config.base_image } else { &state.config.image };
    let image = body.image.unwrap_or_else(|| default_image.clone());
    check_image(&state, &image)?;
    // No harness has advertised anything yet: checked against its methods once one has.
    let auth_method = check_auth_method(body.auth_method, None)?;
    let repo = body
        .repo
        .map(|r| agenthold_core::repo::Repo::parse(&r.url, r.branch.as_deref()))
        .transpose()
        .map_err(|m| ApiError::bad_request(ErrorCode::InvalidRepo, m))?;
    let mut agent = NewAgent {
        id: AgentId::new(), // placed below
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
        disk_mib,
        turn_timeout_secs,
        auto_sleep_secs,
        auth_method,
        engine: (crate::sandbox::LOCAL_ENGINE.to_owned(), None),
    };
    // A placeholder token hash: the real token is minted when the sandbox is created.
    let placeholder = store::tokens::hash_token(&format!("unused-{}", uuid::Uuid::new_v4()));
    let max_agents = state.config.max_agents.map(i64::from);
    let mut placements = 0;
    let claimed = loop {
        // The engine its sandbox goes on, for life (docs/engines.md), with room for its network
        // (no engine with room, or a full subnet pool, is a capacity error, not an engine one).
        let placement = state.driver.place().await.map_err(|e| match e {
            crate::sandbox::DriverError::Capacity(message) => {
                ApiError::Unavailable { code: ErrorCode::Capacity, message }
            }
            other => ApiError::Internal(anyhow::anyhow!(other).context("checking room for a sandbox")),
        })?;
        placements += 1;
        // A sandbox started ahead (the warm pool, on the local engine) gives the agent its id;
        // not to one with a disk size of its own (a sandbox's size is fixed when it is made).
        let wanted = crate::fleet::warm_pool::Wanted {
            harness: &agent.harness,
            model: agent.model.as_deref(),
            variables: &secret_variables,
        };
        let claimed = match (&state.warm_pool, placement.engine == crate::sandbox::LOCAL_ENGINE) {
            (Some(pool), true) if disk_mib == state.config.default_disk_mib() => {
                pool.claim(&agent.image, Some(wanted)).await
            }
            _ => None,
        };
        agent.id = claimed
            .as_ref()
            .map_or_else(|| state.driver.next_agent_id_on(&placement.engine), |claimed| claimed.agent_id);
        agent.engine = (placement.engine, placement.capacity.map(i64::from));
        let quota = store::agents::AgentQuota {
            per_workspace: state.config.max_agents_per_workspace,
            per_user: state.config.max_agents_per_user,
        };
        let inserted = store::agents::insert(&state.pool, &agent, &placeholder, max_agents, quota).await;
        let claimed = match (inserted.is_ok(), claimed, &state.warm_pool) {
            (false, Some(claimed), Some(pool)) => {
                pool.give_back(claimed);
                None
            }
            (_, claimed, _) => claimed,
        };
        match inserted {
            Ok(()) => break claimed,
            // Another creation took the engine's last room meanwhile: placed again (another
            // engine may have room), a few times.
            Err(InsertError::EngineFull(engine)) if placements < MAX_PLACEMENTS => {
                tracing::debug!(%engine, "the engine filled up meanwhile; placing the agent again");
            }
            Err(full @ (InsertError::Full(_) | InsertError::EngineFull(_))) => {
                return Err(ApiError::Unavailable { code: ErrorCode::Capacity, message: full.to_string() });
            }
            Err(quota @ InsertError::Quota(_)) => {
                return Err(ApiError::conflict(ErrorCode::QuotaExceeded, quota.to_string()));
            }
            Err(InsertError::NameTaken) => {
                return Err(ApiError::conflict(
                    ErrorCode::NameTaken,
                    format!("an agent named {:?} exists", agent.name),
                ));
            }
            Err(InsertError::Db(error)) => return Err(error.into()),
        }
    };
    // Under the pooled harness's placeholders when it has one in the variable.
    let pooled_placeholder = |variable: &str| match claimed.as_ref().map(|c| &c.taken) {
        Some(crate::fleet::warm_pool::Taken::Harness(warmed)) => warmed.plan.placeholder(variable).map(str::to_owned),
        _ => None,
    };
    let attached =
        super::create_secrets::attach(&state, &principal, agent.id, workspace_id, secrets, pooled_placeholder).await;
    // The sandbox is the agent's whatever happened to its secrets.
    if let Some(claimed) = claimed {
        let limits = (agent.cpus, agent.memory_mib, agent.pids_limit);
        super::warm_claim::take_over(&state, agent.id, limits, claimed).await;
    }
    attached?;
    if let Some(egress) = &egress {
        store::proxy_identities::set_egress(&state.pool, agent.id, egress).await?;
    }
    if let Some(repo) = &repo {
        store::repos::insert(&state.pool, agent.id, &repo.url, repo.branch.as_deref(), &repo.dir).await?;
    }
    let row = store::agents::get(&state.pool, agent.id).await?.ok_or(ApiError::NotFound("agent"))?;
    audit(&state, &principal, &row, "agent.created").await?;
    // Without a list of its own it follows the workspace's default.
    let egress = store::proxy_identities::egress(&state.pool, &[agent.id.0]).await?;
    let repos = store::repos::for_agents(&state.pool, &[agent.id.0]).await?;
    let attachments = store::secrets::attachments(&state.pool, &[agent.id.0]).await?;
    Ok((StatusCode::CREATED, Json(agent_view(&row, &state, &attachments, &egress, &repos))))
}

/// Lists the agents of every workspace the caller belongs to.
#[utoipa::path(
    get,
    path = "/api/v1/agents",
    operation_id = "list_agents",
    tag = "agents",
    responses((status = 200, description = "The agents", body = AgentList)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list(State(state): State<AppState>, principal: Principal) -> Result<Json<AgentList>, ApiError> {
    let agents = store::agents::list_for_user(&state.pool, principal.user_id).await?;
    let ids: Vec<uuid::Uuid> = agents.iter().map(|a| a.id.0).collect();
    let attachments = store::secrets::attachments(&state.pool, &ids).await?;
    let egress = store::proxy_identities::egress(&state.pool, &ids).await?;
    let repos = store::repos::for_agents(&state.pool, &ids).await?;
    let agents = agents.iter().map(|a| agent_view(a, &state, &attachments, &egress, &repos)).collect();
    Ok(Json(AgentList { agents }))
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
        code: ErrorCode::Capacity,
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
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}",
    operation_id = "show_agent",
    tag = "agents",
    responses((status = 200, description = "The agent", body = AgentDetail)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentDetail>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Viewer).await?;
    Ok(Json(agent_detail(&state, &agent).await?))
}

/// Changes an agent (agent admins; the role is checked before the body is read): `egress`
/// replaces the allow-list (the proxy follows within seconds); `posture` and `policy` apply at
/// once, to the running turn's next permission request and to its questions still waiting (each
/// one the new rules settle is answered, with `"redecided": true`); `auth_method` the next time
/// the harness asks to sign in (no restart); harness, command, model and env
/// restart the harness once no turn runs (its sessions are loaded again, or start anew with a
/// `CONTEXT_RESET` notice when the new harness cannot load them); image and limits apply when
/// the container is made again (`POST /api/v1/agents/{id}/rebuild`). Audited as
/// `agent.changed` with the changed fields (env: names only). The answer's `changed` says when
/// each change applies; `?dry_run=true` checks the body the same way and answers that alone,
/// writing nothing (a form's preview).
#[utoipa::path(
    patch,
    path = "/api/v1/agents/{id}",
    operation_id = "update_agent",
    tag = "agents",
    request_body = UpdateAgent,
    params(UpdateQuery),
    responses(
        (status = 200, description = "The agent as changed, with what the change did (with `dry_run`: the agent \
            unchanged, with what the change would do)", body = UpdatedAgent),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `UNKNOWN_HARNESS`, `INVALID_COMMAND`, \
            `INVALID_MODEL`, `UNKNOWN_POSTURE`, `AUTONOMOUS_FORBIDDEN`, `INVALID_POLICY`, `INVALID_ENV`, \
            `USE_A_SECRET`, `INVALID_EGRESS`, `INVALID_LIMITS`, `LIMIT_TOO_HIGH`, `INVALID_IMAGE`, `IMAGE_NOT_ALLOWED`, \
            `UNKNOWN_AUTH_METHOD` (naming the methods the running harness advertises), `INVALID_QUERY`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    Query(query): Query<UpdateQuery>,
    RawBody(body): RawBody,
) -> Result<Json<UpdatedAgent>, ApiError> {
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
        auth_method: body.auth_method,
    };
    // A login method is checked against what the running harness advertised (its stored
    // `initialize` answer), when one runs.
    let advertised = match &patch.auth_method {
        Some(method) if !method.is_empty() => {
            store::sandboxes::get(&state.pool, id).await?.and_then(|row| row.harness_init)
        }
        _ => None,
    };
    let (settings, mut change) = super::agent_settings::apply(&state, &agent, patch, advertised.as_ref())?;
    let egress = match body.egress {
        None => None,
        Some(None) => Some(None),
        // Admins may give an agent any list, wider than the workspace's default too.
        Some(Some(egress)) => {
            Some(Some(egress::validate(egress).map_err(|m| ApiError::bad_request(ErrorCode::InvalidEgress, m))?))
        }
    };
    if query.dry_run {
        // Checked whole, nothing written: what saving would do (the form's preview).
        if egress.is_some() {
            change.impacts.push(FieldChange { field: "egress".to_owned(), impact: Impact::Proxy });
        }
        return Ok(Json(UpdatedAgent { agent: agent_detail(&state, &agent).await?, changed: change.impacts }));
    }
    if let Some(egress) = egress {
        let detail = match &egress {
            Some(row) => {
                if !store::proxy_identities::set_egress(&state.pool, id, row).await? {
                    return Err(ApiError::NotFound("agent"));
                }
                json!({"name": agent.name, "allow": row.allow, "presets": row.presets})
            }
            None => {
                store::proxy_identities::clear_egress(&state.pool, id).await?;
                json!({"name": agent.name, "inherited": true})
            }
        };
        let record = AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: Some(principal.user_id),
            action: "agent.egress_changed",
            resource_type: "agent",
            resource_id: agent.id.to_string(),
            detail,
        };
        store::audit::append(&state.pool, record).await?;
        change.impacts.push(FieldChange { field: "egress".to_owned(), impact: Impact::Proxy });
    }
    if !change.fields.is_empty() {
        if !store::agents::update(&state.pool, id, &settings).await? {
            return Err(ApiError::NotFound("agent"));
        }
        if change.restarts_harness {
            state.dispatch.send(id, Command::EnvironmentChanged).await;
        }
        if change.gate_changed {
            state.dispatch.send(id, Command::GateChanged).await;
        }
        if change.auth_method_changed {
            state.dispatch.send(id, Command::AuthMethodChanged).await;
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
    Ok(Json(UpdatedAgent { agent: agent_detail(&state, &agent).await?, changed: change.impacts }))
}

/// `PATCH /api/v1/agents/{id}`'s query.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UpdateQuery {
    /// Check the change and answer what it would do, changing nothing.
    #[serde(default)]
    dry_run: bool,
}

/// An agent as a change left it, and what the change did.
#[derive(Debug, Serialize, ToSchema)]
pub struct UpdatedAgent {
    /// The agent.
    #[serde(flatten)]
    agent: AgentDetail,
    /// Each setting the change made and when it reaches the running agent (empty: nothing
    /// changed; `egress` whenever the body sets it).
    changed: Vec<FieldChange>,
}

/// Makes the agent's container again from its current image and limits, around the same home
/// volume (agent admins): 409 `TURN_IN_PROGRESS` while a turn runs. The sandbox is stopped, its
/// container removed, and started anew (the harness starts at the next prompt). Audited as
/// `agent.rebuilt`.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/rebuild",
    operation_id = "rebuild_agent",
    tag = "agents",
    responses(
        (status = 200, description = "The agent, its container made again", body = AgentDetail),
        (status = 409, description = "`TURN_IN_PROGRESS`", body = ErrorBody),
        (status = 503, description = "`SANDBOX_FAILED`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn rebuild(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentDetail>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    let stopped = state.dispatch.ask(id, |reply| Command::Sleep { reply }).await.ok_or_else(supervisor_gone)?;
    stopped.map_err(lifecycle_error)?;
    state.driver.remove_container(id).await.map_err(|e| lifecycle_error(LifecycleError::Failed(e.to_string())))?;
    let woken = state.dispatch.ask(id, |reply| Command::Wake { reply }).await.ok_or_else(supervisor_gone)?;
    woken.map_err(lifecycle_error)?;
    audit(&state, &principal, &agent, "agent.rebuilt").await?;
    Ok(Json(agent_detail(&state, &agent).await?))
}

/// A lifecycle failure as the client sees it: a stable code and a generic message; the
/// engine's own text is logged here, once, and never answered.
pub(super) fn lifecycle_error(error: LifecycleError) -> ApiError {
    match error {
        LifecycleError::Busy => ApiError::conflict(ErrorCode::TurnInProgress, "the agent has a turn in progress"),
        LifecycleError::Failed(detail) => {
            tracing::warn!(error = %detail, "a sandbox operation failed");
            ApiError::Unavailable {
                code: ErrorCode::SandboxFailed,
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
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}",
    operation_id = "delete_agent",
    tag = "agents",
    responses(
        (status = 204, description = "Deleted"),
        (status = 409, description = "`TURN_IN_PROGRESS`", body = ErrorBody),
        (status = 503, description = "`SANDBOX_FAILED`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
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
    let outcome = state.dispatch.ask(id, |reply| Command::Destroy { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    state.supervisors.forget(id);
    let sessions = store::sessions::list_ids(&state.pool, id).await?;
    store::agents::delete(&state.pool, id).await?;
    state.hub.close(&sessions);
    // Their streams on the other replicas close too.
    if let Err(error) = crate::store::notify::announce_closed(&state.pool, &sessions).await {
        tracing::warn!(%error, "telling the other replicas of deleted sessions");
    }
    audit(&state, &principal, &agent, "agent.deleted").await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stops the agent's sandbox; its home survives. A prompt wakes it.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/sleep",
    operation_id = "sleep_agent",
    tag = "agents",
    responses(
        (status = 200, description = "The agent, asleep", body = AgentDetail),
        (status = 409, description = "`TURN_IN_PROGRESS`", body = ErrorBody),
        (status = 503, description = "`SANDBOX_FAILED`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn sleep(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentDetail>, ApiError> {
    visible_agent(&state, &principal, id, Role::Admin).await?;
    let outcome = state.dispatch.ask(id, |reply| Command::Sleep { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    store::agents::set_desired_state(&state.pool, id, "asleep").await?;
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    audit(&state, &principal, &agent, "agent.slept").await?;
    Ok(Json(agent_detail(&state, &agent).await?))
}

/// Starts the agent's sandbox.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/wake",
    operation_id = "wake_agent",
    tag = "agents",
    responses(
        (status = 200, description = "The agent, awake", body = AgentDetail),
        (status = 503, description = "`CAPACITY`: the host runs as many sandboxes as it may; `SANDBOX_FAILED`",
            body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn wake(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentDetail>, ApiError> {
    visible_agent(&state, &principal, id, Role::Admin).await?;
    // A person asking is told at once rather than kept waiting (a prompt waits instead).
    if !state.supervisors.host().has_room_for(id) {
        return Err(host_full());
    }
    store::agents::set_desired_state(&state.pool, id, "awake").await?;
    let outcome = state.dispatch.ask(id, |reply| Command::Wake { reply }).await.ok_or_else(supervisor_gone)?;
    outcome.map_err(lifecycle_error)?;
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    audit(&state, &principal, &agent, "agent.woken").await?;
    Ok(Json(agent_detail(&state, &agent).await?))
}
