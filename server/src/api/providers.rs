//! Provider logins in the API (docs/logins.md): `/api/v1/me/providers` — the caller connects,
//! lists and disconnects their own Claude Code and Codex sign-ins (values write-only: checked
//! against the provider, sealed at once, never answered or logged) — and
//! `/api/v1/agents/{id}/logins` — whose logins an agent uses ("use my logins": the caller, an
//! admin of the agent; "stop using": an admin of the agent or the login's owner). A change
//! restarts the affected harnesses once their running turns end, and the proxy follows within
//! seconds. Connecting, disconnecting, attaching and detaching are audited.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use rand::RngCore;
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::ApiError;
use super::extract::{Id, parse_json};
use crate::app::AppState;
use crate::auth::Principal;
use crate::ids::AgentId;
use crate::logins::chatgpt::{self, RefreshError};
use crate::logins::kinds::{self, LoginKind};
use crate::logins::probe::ProbeError;
use crate::secret::Secret;
use crate::secrets::cipher;
use crate::store;
use crate::store::audit::AuditRecord;
use crate::store::provider_logins::{LoginRow, NewLogin, Using};
use crate::store::users::Role;
use crate::supervisor::Command;

/// `POST /api/v1/me/providers`. No `Debug`: it holds the value.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connect {
    kind: String,
    value: String,
}

fn login_json(login: &LoginRow, using: &[Using]) -> Value {
    let kind = LoginKind::parse(&login.kind);
    let agents: Vec<Value> = using
        .iter()
        .filter(|u| {
            let takes = crate::harness::adapter(&u.harness).map(|a| a.profile().account_logins).unwrap_or_default();
            kind.is_some_and(|k| takes.contains(&k))
        })
        .map(|u| json!({"agent_id": u.agent_id, "agent_name": u.agent_name, "workspace_id": u.workspace_id}))
        .collect();
    json!({
        "id": login.id,
        "kind": login.kind,
        "provider": login.provider,
        "env_name": kind.map(LoginKind::env_name),
        "state": login.state,
        "connected_at": login.connected_at,
        "refreshed_at": login.refreshed_at,
        "expires_at": login.expires_at,
        "failure": login.failure,
        "agents": agents,
    })
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
        state.supervisors.send(agent_id, Command::EnvironmentChanged).await;
    }
}

/// The caller's logins, and the kinds that can be connected.
pub async fn list(State(state): State<AppState>, principal: Principal) -> Result<Json<Value>, ApiError> {
    let logins = store::provider_logins::list_for_user(&state.pool, principal.user_id).await?;
    let using = store::provider_logins::agents_using(&state.pool, principal.user_id).await?;
    let kinds: Vec<Value> = kinds::ALL
        .iter()
        .map(|k| json!({"kind": k.as_str(), "provider": k.provider(), "env_name": k.env_name()}))
        .collect();
    Ok(Json(json!({
        "logins": logins.iter().map(|l| login_json(l, &using)).collect::<Vec<_>>(),
        "kinds": kinds,
    })))
}

/// Connects a login (replacing the caller's login of the same kind): its shape checked, then the
/// provider asked; sealed at once.
pub async fn connect(
    State(state): State<AppState>,
    principal: Principal,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body: Connect = parse_json(&body)?;
    let kind = LoginKind::parse(&body.kind).ok_or_else(|| {
        let names: Vec<&str> = kinds::ALL.iter().map(|k| k.as_str()).collect();
        ApiError::bad_request("UNKNOWN_LOGIN_KIND", format!("kind: one of {}", names.join(", ")))
    })?;
    let value = Secret::new(body.value.trim());
    if value.expose().len() > kinds::MAX_VALUE_BYTES {
        return Err(ApiError::bad_request("INVALID_LOGIN", format!("at most {} bytes", kinds::MAX_VALUE_BYTES)));
    }
    let (value, expires_at, public) = match kind {
        // A ChatGPT login is refreshed once at once: that checks it and takes it over (Codex where
        // it came from must sign in again).
        LoginKind::ChatgptLogin => {
            let tokens =
                chatgpt::parse_auth_json(value.expose()).map_err(|m| ApiError::bad_request("INVALID_LOGIN", m))?;
            let tokens = state.login_probe.refresh(&tokens).await.map_err(|e| match e {
                RefreshError::Permanent(reason) => ApiError::bad_request("LOGIN_REJECTED", reason),
                RefreshError::Transient(reason) => {
                    ApiError::Unavailable { code: "PROVIDER_UNREACHABLE", message: reason }
                }
            })?;
            let json = serde_json::to_string(&tokens).map_err(|e| ApiError::Internal(e.into()))?;
            (Secret::new(json), chatgpt::expires_at(&tokens.access_token), chatgpt::public_part(&tokens))
        }
        _ => {
            kind.check_shape(value.expose()).map_err(|m| ApiError::bad_request("INVALID_LOGIN", m))?;
            match state.login_probe.check(kind, &value).await {
                Ok(()) => {}
                Err(ProbeError::Rejected(reason)) => return Err(ApiError::bad_request("LOGIN_REJECTED", reason)),
                Err(ProbeError::Unreachable(reason)) => {
                    return Err(ApiError::Unavailable { code: "PROVIDER_UNREACHABLE", message: reason });
                }
            }
            (value, None, json!({}))
        }
    };
    let existing = store::provider_logins::get_by_kind(&state.pool, principal.user_id, kind.as_str()).await?;
    let id = existing.as_ref().map_or_else(Uuid::new_v4, |l| l.id);
    let identity = crate::logins::row_identity(principal.user_id, id);
    let sealed = cipher::seal(&state.master_key, identity, value.expose().as_bytes())
        .map_err(|_| ApiError::bad_request("INVALID_LOGIN", "the value could not be encrypted"))?;
    // A new seed on every connect: the placeholders change with the login.
    let mut seed = [0u8; 16];
    rand::rng().fill_bytes(&mut seed);
    let seed: String = seed.iter().map(|b| format!("{b:02x}")).collect();
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
    Ok((StatusCode::CREATED, Json(login_json(&login, &using))))
}

/// Disconnects one of the caller's logins.
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

/// "Use my logins": the agent uses the caller's provider logins (admins of the agent only: only
/// you can attach your logins, only to agents you administer).
pub async fn use_mine(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
) -> Result<Json<Value>, ApiError> {
    let agent = visible_agent(&state, &principal, id, Role::Admin).await?;
    store::provider_logins::set_login_user(&state.pool, id, Some(principal.user_id)).await?;
    let detail = json!({"name": agent.name, "login_user_id": principal.user_id, "before": agent.login_user_id});
    audit_agent(&state, &principal, &agent, "agent.logins_attached", detail).await?;
    restart_harnesses(&state, vec![id]).await;
    Ok(Json(json!({"agent_id": id, "login_user_id": principal.user_id})))
}

/// "Stop using": the agent uses nobody's logins (an admin of the agent, or the login's owner).
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
