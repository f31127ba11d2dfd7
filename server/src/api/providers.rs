//! Provider logins in the API (docs/logins.md): `/api/v1/me/providers` — the caller connects,
//! lists and disconnects their own Claude Code and Codex sign-ins (values write-only: checked
//! against the provider, sealed at once, never answered or logged) — and
//! `/api/v1/agents/{id}/logins` — whose logins an agent uses ("use my logins": the caller, an
//! admin of the agent; "stop using": an admin of the agent or the login's owner). A change
//! restarts the affected harnesses once their running turns end, and the proxy follows within
//! seconds. Connecting, disconnecting, attaching and detaching are audited.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Id, RawBody, parse_json};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::logins::chatgpt::{self, RefreshError};
use crate::logins::kinds::{self, LoginKind};
use crate::logins::probe::ProbeError;
use crate::secret::Secret;
use crate::secrets::cipher;
use crate::state::AppState;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::provider_logins::{LoginRow, NewLogin, Using};
use crate::store::users::Role;
use crate::supervisor::Command;

/// `POST /api/v1/me/providers`. No `Debug`: it holds the value.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Connect {
    /// One of the `kinds` the list offers.
    kind: String,
    /// The key or sign-in (write-only: never answered).
    value: String,
}

/// A provider login (never its value).
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderLogin {
    /// Its id.
    id: Uuid,
    /// Its kind.
    kind: String,
    /// Its provider.
    provider: String,
    /// The variable sandboxes see a placeholder under.
    #[schema(required = true)]
    env_name: Option<&'static str>,
    /// `connected`, or `connect_again` when the provider refused it since.
    state: String,
    /// When it was connected.
    connected_at: chrono::DateTime<chrono::Utc>,
    /// When it was last refreshed.
    #[schema(required = true)]
    refreshed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it expires.
    #[schema(required = true)]
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Why it needs connecting again.
    #[schema(required = true)]
    failure: Option<String>,
    /// The agents using it.
    agents: Vec<LoginUse>,
}

/// An agent using a login.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginUse {
    /// The agent.
    agent_id: Uuid,
    /// Its name.
    agent_name: String,
    /// Its workspace.
    workspace_id: Uuid,
}

/// A kind of login that can be connected.
#[derive(Debug, Serialize, ToSchema)]
pub struct LoginKindView {
    /// Its name.
    kind: &'static str,
    /// Its provider.
    provider: &'static str,
    /// The variable sandboxes see a placeholder under.
    env_name: &'static str,
}

/// The caller's logins.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderLoginList {
    /// Its logins.
    logins: Vec<ProviderLogin>,
    /// The kinds that can be connected.
    kinds: Vec<LoginKindView>,
}

/// Whose logins an agent uses now.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentLoginUser {
    /// The agent.
    agent_id: AgentId,
    /// Whose logins it uses (the caller).
    login_user_id: Uuid,
}

fn login_view(login: &LoginRow, using: &[Using]) -> ProviderLogin {
    let kind = LoginKind::parse(&login.kind);
    let agents = using
        .iter()
        .filter(|u| {
            let takes = crate::harness::account_logins(&u.harness);
            kind.is_some_and(|k| takes.contains(&k))
        })
        .map(|u| LoginUse { agent_id: u.agent_id, agent_name: u.agent_name.clone(), workspace_id: u.workspace_id })
        .collect();
    ProviderLogin {
        id: login.id,
        kind: login.kind.clone(),
        provider: login.provider.clone(),
        env_name: kind.map(LoginKind::env_name),
        state: login.state.clone(),
        connected_at: login.connected_at,
        refreshed_at: login.refreshed_at,
        expires_at: login.expires_at,
        failure: login.failure.clone(),
        agents,
    }
}

/// Records an action on the caller's logins in their personal workspace's audit log.
async fn audit_own(
    state: &AppState,
    user_id: Uuid,
    action: &str,
    login_id: Uuid,
    detail: Value,
) -> Result<(), ApiError> {
    let Some(workspace_id) = store::users::personal_workspace(&state.pool, user_id).await? else { return Ok(()) };
    let record = AuditRecord {
        workspace_id,
        actor_user_id: Some(user_id),
        action,
        resource_type: "provider_login",
        resource_id: login_id.to_string(),
        detail,
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// Tells the harnesses of these agents that their environment changed (they restart with the new
/// logins once no turn runs).
async fn restart_harnesses(state: &AppState, agents: Vec<AgentId>) {
    for agent_id in agents {
        state.dispatch.send(agent_id, Command::EnvironmentChanged).await;
    }
}

/// The caller's provider logins (never their values), and the kinds that can be connected.
#[utoipa::path(
    get,
    path = "/api/v1/me/providers",
    operation_id = "list_provider_logins",
    tag = "me",
    responses((status = 200, description = "The logins", body = ProviderLoginList)),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn list(State(state): State<AppState>, principal: Principal) -> Result<Json<ProviderLoginList>, ApiError> {
    let logins = store::provider_logins::list_for_user(&state.pool, principal.user_id).await?;
    let using = store::provider_logins::agents_using(&state.pool, principal.user_id).await?;
    let kinds = kinds::ALL
        .iter()
        .map(|k| LoginKindView { kind: k.as_str(), provider: k.provider(), env_name: k.env_name() })
        .collect();
    Ok(Json(ProviderLoginList { logins: logins.iter().map(|l| login_view(l, &using)).collect(), kinds }))
}

/// Connects a login (replacing the caller's login of the same kind): its shape checked, then the
/// provider asked; sealed at once (write-only).
#[utoipa::path(
    post,
    path = "/api/v1/me/providers",
    operation_id = "connect_provider_login",
    tag = "me",
    request_body = Connect,
    responses(
        (status = 201, description = "The login (never its value)", body = ProviderLogin),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `UNKNOWN_LOGIN_KIND`, `INVALID_LOGIN`, \
            `LOGIN_REJECTED`: the provider refused it", body = ErrorBody),
        (status = 503, description = "`PROVIDER_UNREACHABLE`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn connect(
    State(state): State<AppState>,
    principal: Principal,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<ProviderLogin>), ApiError> {
    let body: Connect = parse_json(&body)?;
    let kind = LoginKind::parse(&body.kind).ok_or_else(|| {
        let names: Vec<&str> = kinds::ALL.iter().map(|k| k.as_str()).collect();
        ApiError::bad_request(ErrorCode::UnknownLoginKind, format!("kind: one of {}", names.join(", ")))
    })?;
    let value = Secret::new(body.value.trim());
    if value.expose().len() > kinds::MAX_VALUE_BYTES {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidLogin,
            format!("at most {} bytes", kinds::MAX_VALUE_BYTES),
        ));
    }
    let (value, expires_at, public) = match kind {
        // A ChatGPT login is refreshed once at once: that checks it and takes it over (Codex where
        // it came from must sign in again).
        LoginKind::ChatgptLogin => {
            let tokens = chatgpt::parse_auth_json(value.expose())
                .map_err(|m| ApiError::bad_request(ErrorCode::InvalidLogin, m))?;
            let tokens = state.login_probe.refresh(&tokens).await.map_err(|e| match e {
                RefreshError::Permanent(reason) => ApiError::bad_request(ErrorCode::LoginRejected, reason),
                RefreshError::Transient(reason) => {
                    ApiError::Unavailable { code: ErrorCode::ProviderUnreachable, message: reason }
                }
            })?;
            let json = serde_json::to_string(&tokens).map_err(|e| ApiError::Internal(e.into()))?;
            (Secret::new(json), chatgpt::expires_at(&tokens.access_token), chatgpt::public_part(&tokens))
        }
        _ => {
            kind.check_shape(value.expose()).map_err(|m| ApiError::bad_request(ErrorCode::InvalidLogin, m))?;
            match state.login_probe.check(kind, &value).await {
                Ok(()) => {}
                Err(ProbeError::Rejected(reason)) => {
                    return Err(ApiError::bad_request(ErrorCode::LoginRejected, reason));
                }
                Err(ProbeError::Unreachable(reason)) => {
                    return Err(ApiError::Unavailable { code: ErrorCode::ProviderUnreachable, message: reason });
                }
            }
            (value, None, json!({}))
        }
    };
    let existing = store::provider_logins::get_by_kind(&state.pool, principal.user_id, kind.as_str()).await?;
    let id = existing.as_ref().map_or_else(Uuid::new_v4, |l| l.id);
    let identity = crate::secrets::cipher::RowIdentity::provider_login(principal.user_id, id);
    let sealed = cipher::seal(&state.master_key, identity, value.expose().as_bytes())
        .map_err(|_| ApiError::bad_request(ErrorCode::InvalidLogin, "the value could not be encrypted"))?;
    // A new seed on every connect: the placeholders change with the login.
    let seed = hex::encode(rand::random::<[u8; 16]>());
    let new = NewLogin {
        id,
        user_id: principal.user_id,
        kind: kind.as_str(),
        provider: kind.provider(),
        sealed: &sealed,
        placeholder_seed: &seed,
        expires_at,
        public,
    };
    let login = store::provider_logins::upsert(&state.pool, new).await?;
    let action = if existing.is_some() { "provider_login.replaced" } else { "provider_login.connected" };
    audit_own(&state, principal.user_id, action, login.id, json!({"kind": kind.as_str()})).await?;
    let using = store::provider_logins::agents_using(&state.pool, principal.user_id).await?;
    restart_harnesses(&state, using.iter().map(|u| AgentId(u.agent_id)).collect()).await;
    Ok((StatusCode::CREATED, Json(login_view(&login, &using))))
}

/// Disconnects one of the caller's logins.
#[utoipa::path(
    delete,
    path = "/api/v1/me/providers/{id}",
    operation_id = "disconnect_provider_login",
    tag = "me",
    responses(
        (status = 204, description = "Disconnected"),
        (status = 404, description = "`NOT_FOUND`: no such login of the caller's", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::SignedIn))),
)]
pub async fn disconnect(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<StatusCode, ApiError> {
    let kind = store::provider_logins::delete(&state.pool, principal.user_id, id)
        .await?
        .ok_or(ApiError::NotFound("provider login"))?;
    audit_own(&state, principal.user_id, "provider_login.disconnected", id, json!({"kind": kind})).await?;
    let using = store::provider_logins::agents_using(&state.pool, principal.user_id).await?;
    restart_harnesses(&state, using.iter().map(|u| AgentId(u.agent_id)).collect()).await;
    Ok(StatusCode::NO_CONTENT)
}

/// Records an attach or detach on the agent's workspace.
async fn audit_agent(
    state: &AppState,
    principal: &Principal,
    agent: &store::agents::AgentRow,
    action: &str,
    detail: Value,
) -> Result<(), ApiError> {
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type: "agent",
        resource_id: agent.id.to_string(),
        detail,
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// Uses the caller's provider logins for the agent ("use my logins"; admins of the agent only:
/// only you can attach your logins, only to agents you administer).
#[utoipa::path(
    put,
    path = "/api/v1/agents/{id}/logins",
    operation_id = "use_my_logins",
    tag = "agents",
    responses((status = 200, description = "The agent uses the caller's logins", body = AgentLoginUser)),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn use_mine(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<AgentLoginUser>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    store::provider_logins::set_login_user(&state.pool, id, Some(principal.user_id)).await?;
    let detail = json!({"name": agent.name, "login_user_id": principal.user_id, "before": agent.login_user_id});
    audit_agent(&state, &principal, &agent, "agent.logins_attached", detail).await?;
    restart_harnesses(&state, vec![id]).await;
    Ok(Json(AgentLoginUser { agent_id: id, login_user_id: principal.user_id }))
}

/// Stops the agent using anyone's provider logins ("stop using"; an admin of the agent, or the
/// login's owner).
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}/logins",
    operation_id = "stop_using_logins",
    tag = "agents",
    responses((status = 204, description = "The agent uses nobody's logins")),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn stop_using(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<StatusCode, ApiError> {
    let agent = store::agents::get(&state.pool, id).await?.ok_or(ApiError::NotFound("agent"))?;
    if agent.login_user_id != Some(principal.user_id) {
        visible_agent(&state, &principal, id, Role::Admin).await?;
    }
    let Some(user_id) = agent.login_user_id else { return Ok(StatusCode::NO_CONTENT) };
    store::provider_logins::set_login_user(&state.pool, id, None).await?;
    let detail = json!({"name": agent.name, "login_user_id": user_id});
    audit_agent(&state, &principal, &agent, "agent.logins_detached", detail).await?;
    restart_harnesses(&state, vec![id]).await;
    Ok(StatusCode::NO_CONTENT)
}

/// A member left a workspace: their logins are detached from its agents.
pub async fn member_left(state: &AppState, workspace_id: Uuid, user_id: Uuid) -> Result<(), ApiError> {
    let detached = store::provider_logins::detach_in_workspace(&state.pool, workspace_id, user_id).await?;
    restart_harnesses(state, detached).await;
    Ok(())
}
