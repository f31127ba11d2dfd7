//! Secrets in the API: `/api/v1/workspaces/{id}/secrets` (create, list, delete; workspace
//! admins) and `/api/v1/agents/{id}/secrets/{env_name}` (attach, detach; agent admins). Values
//! are write-only: checked here, sealed at once, never answered, logged or put into an event.
//! The caller's role is checked before the body is read, so a caller without the role learns
//! nothing from validation errors. Every change is audited.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Id, RawBody, parse_json};
use super::openapi::Access;
use super::workspaces;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::secrets::cipher::{self, RowIdentity};
use crate::secrets::presets::{self, CustomRule, InjectionRule, Preset};
use crate::secrets::validate;
use crate::state::AppState;
use crate::store;
use crate::store::secrets::{Attached, InsertError, NewSecret, SecretRow, Use};
use crate::store::users::Role;
use crate::supervisor::Command;

/// `POST /api/v1/workspaces/{id}/secrets`. No `Debug`: it holds the value.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSecret {
    /// Its name, unique in the workspace.
    name: String,
    /// Where its value belongs (`custom`: `host`, `header` and `format` say).
    preset: Preset,
    /// The value (write-only: never answered).
    value: String,
    /// A custom or `git_token` secret's host (for `git_token`: the git server, like `github.com`).
    host: Option<String>,
    /// A `git_token` secret's HTTP Basic username (default `x-access-token`; GitLab OAuth tokens
    /// want `oauth2`).
    username: Option<String>,
    /// A custom secret's header.
    header: Option<String>,
    /// A custom secret's header value, `{secret}` standing for the value.
    format: Option<String>,
    /// A custom secret's port (default 443).
    port: Option<u16>,
    /// A custom secret's path prefix (default `/`).
    path_prefix: Option<String>,
}

/// `PUT /api/v1/agents/{id}/secrets/{env_name}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachSecret {
    /// A secret of the agent's workspace.
    secret_id: Uuid,
}

/// A secret (never its value).
#[derive(Debug, Serialize, ToSchema)]
pub struct Secret {
    /// Its id.
    id: Uuid,
    /// Its workspace.
    workspace_id: Uuid,
    /// Its name.
    name: String,
    /// Its preset.
    preset: String,
    /// Where the proxy puts its value.
    rule: InjectionRule,
    /// Who stored it.
    #[schema(required = true)]
    created_by: Option<Uuid>,
    /// When.
    created_at: chrono::DateTime<chrono::Utc>,
    /// The agents it is attached to.
    used_by: Vec<SecretUse>,
}

/// An agent a secret is attached to.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretUse {
    /// The agent.
    agent_id: Uuid,
    /// Its name.
    agent_name: String,
    /// The variable the secret is attached under.
    env_name: String,
}

/// A workspace's secrets.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretList {
    /// The secrets.
    secrets: Vec<Secret>,
}

/// A secret attached to an agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct Attachment {
    /// The variable the sandbox sees a placeholder under.
    env_name: String,
    /// The secret.
    secret_id: Uuid,
    /// Its name.
    secret_name: String,
    /// Its preset.
    preset: String,
}

/// `{id}/secrets/{secret_id}`.
#[derive(Debug, Deserialize)]
pub struct SecretPath {
    id: Uuid,
    secret_id: Uuid,
}

/// `{id}/secrets/{env_name}`.
#[derive(Debug, Deserialize)]
pub struct EnvPath {
    id: AgentId,
    env_name: String,
}

type PathResult<T> = Result<axum::extract::Path<T>, axum::extract::rejection::PathRejection>;

fn secret_view(secret: &SecretRow, uses: &[Use]) -> Secret {
    let used_by = uses
        .iter()
        .filter(|u| u.secret_id == secret.id)
        .map(|u| SecretUse { agent_id: u.agent_id, agent_name: u.agent_name.clone(), env_name: u.env_name.clone() })
        .collect();
    Secret {
        id: secret.id,
        workspace_id: secret.workspace_id,
        name: secret.name.clone(),
        preset: secret.preset.clone(),
        rule: secret.rule.clone(),
        created_by: secret.created_by,
        created_at: secret.created_at,
        used_by,
    }
}

/// Stores a secret (workspace admins). 400 `INVALID_SECRET_VALUE` for an empty, over-long or
/// control-character value, `INVALID_RULE` for a bad custom rule, `HOST_NOT_COVERED` for a host
/// the egress proxy's CA does not cover, 409 `NAME_TAKEN` and `TOO_MANY_SECRETS`.
#[utoipa::path(
    post,
    path = "/api/v1/workspaces/{id}/secrets",
    operation_id = "create_secret",
    tag = "secrets",
    request_body = CreateSecret,
    responses(
        (status = 201, description = "The secret (never its value)", body = Secret),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`, `INVALID_SECRET_VALUE`, \
            `INVALID_RULE`, `HOST_NOT_COVERED` (the egress proxy's CA does not cover the rule's host)", body = ErrorBody),
        (status = 409, description = "`NAME_TAKEN`, `TOO_MANY_SECRETS`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Id(workspace_id): Id<Uuid>,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<Secret>), ApiError> {
    principal.require(&state, workspace_id, Role::Admin, "workspace").await?;
    let body: CreateSecret = parse_json(&body)?;
    let name = validate::secret_name(&body.name).map_err(|m| ApiError::bad_request(ErrorCode::InvalidName, m))?;
    let value = validate::value(body.value).map_err(|m| ApiError::bad_request(ErrorCode::InvalidSecretValue, m))?;
    let preset_only = body.format.is_none() && body.port.is_none() && body.path_prefix.is_none();
    if body.username.is_some() && body.preset != Preset::GitToken {
        return Err(ApiError::bad_request(ErrorCode::InvalidRule, "username is given only with preset git_token"));
    }
    let rule = match (body.preset.rule(), body.host, body.header) {
        (None, Some(host), None) if body.preset == Preset::GitToken && preset_only => {
            presets::git_rule(&host, body.username.as_deref())
                .map_err(|m| ApiError::bad_request(ErrorCode::InvalidRule, m))?
        }
        (None, _, _) if body.preset == Preset::GitToken => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidRule,
                "a git_token secret needs host (the git server, like github.com) and optionally username; \
                 header, format, port and path_prefix are the preset's",
            ));
        }
        (None, Some(host), Some(header)) => {
            CustomRule { host, header, format: body.format, port: body.port, path_prefix: body.path_prefix }
                .validate()
                .map_err(|m| ApiError::bad_request(ErrorCode::InvalidRule, m))?
        }
        (None, _, _) => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidRule,
                "a custom secret needs host and header (and a format)",
            ));
        }
        (Some(rule), None, None) if preset_only => rule,
        (Some(_), _, _) => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidRule,
                "a preset fills in host, header, format, port and path_prefix; give them only with preset custom",
            ));
        }
    };
    ensure_covered(&state, &rule.host).await?;
    let id = Uuid::new_v4();
    let sealed =
        cipher::seal(&state.master_key, RowIdentity { workspace_id, secret_id: id }, value.expose().as_bytes())
            .map_err(|e| ApiError::Internal(e.into()))?;
    drop(value);
    let secret = NewSecret {
        id,
        workspace_id,
        name,
        preset: body.preset.as_str().to_owned(),
        rule,
        sealed,
        created_by: principal.user_id,
    };
    match store::secrets::insert(&state.pool, &secret).await {
        Ok(()) => {}
        Err(InsertError::NameTaken) => {
            return Err(ApiError::conflict(ErrorCode::NameTaken, format!("a secret named {:?} exists", secret.name)));
        }
        Err(InsertError::TooMany) => {
            return Err(ApiError::conflict(
                ErrorCode::TooManySecrets,
                format!("a workspace holds at most {} secrets", store::secrets::MAX_PER_WORKSPACE),
            ));
        }
        Err(InsertError::Db(error)) => return Err(error.into()),
    }
    let detail = json!({"name": secret.name, "preset": secret.preset, "host": secret.rule.host,
        "header": secret.rule.header, "key_id": secret.sealed.key_id});
    workspaces::audit(&state, &principal, workspace_id, "secret.created", "secret", id.to_string(), detail).await?;
    let row = store::secrets::get(&state.pool, workspace_id, id).await?.ok_or(ApiError::NotFound("secret"))?;
    Ok((StatusCode::CREATED, Json(secret_view(&row, &[]))))
}

/// The workspace's secrets with their rules and the agents using them; never a value
/// (workspace admins).
#[utoipa::path(
    get,
    path = "/api/v1/workspaces/{id}/secrets",
    operation_id = "list_secrets",
    tag = "secrets",
    responses((status = 200, description = "The secrets", body = SecretList)),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(workspace_id): Id<Uuid>,
) -> Result<Json<SecretList>, ApiError> {
    principal.require(&state, workspace_id, Role::Admin, "workspace").await?;
    let secrets = store::secrets::list(&state.pool, workspace_id).await?;
    let uses = store::secrets::uses(&state.pool, workspace_id).await?;
    let secrets = secrets.iter().map(|s| secret_view(s, &uses)).collect();
    Ok(Json(SecretList { secrets }))
}

/// Deletes a secret and detaches it from every agent (workspace admins).
#[utoipa::path(
    delete,
    path = "/api/v1/workspaces/{id}/secrets/{secret_id}",
    operation_id = "delete_secret",
    tag = "secrets",
    responses((status = 204, description = "Deleted and detached")),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    path: PathResult<SecretPath>,
) -> Result<StatusCode, ApiError> {
    let axum::extract::Path(path) = path.map_err(|_| ApiError::NotFound("secret"))?;
    principal.require(&state, path.id, Role::Admin, "workspace").await?;
    let secret =
        store::secrets::get(&state.pool, path.id, path.secret_id).await?.ok_or(ApiError::NotFound("secret"))?;
    let detached =
        store::secrets::delete(&state.pool, path.id, path.secret_id).await?.ok_or(ApiError::NotFound("secret"))?;
    for (agent_id, env_name) in &detached {
        environment_changed(&state, AgentId(*agent_id)).await;
        let detail = json!({"env_name": env_name, "secret_id": secret.id, "secret_name": secret.name,
            "reason": "secret deleted"});
        workspaces::audit(&state, &principal, path.id, "secret.detached", "agent", agent_id.to_string(), detail)
            .await?;
    }
    let detached: Vec<serde_json::Value> =
        detached.iter().map(|(a, e)| json!({"agent_id": a, "env_name": e})).collect();
    let detail = json!({"name": secret.name, "preset": secret.preset, "detached": detached});
    workspaces::audit(&state, &principal, path.id, "secret.deleted", "secret", secret.id.to_string(), detail).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// 400 `HOST_NOT_COVERED` when the egress proxy's CA does not cover `host`: the proxy could never
/// inject a secret there (docs/proxy.md, "Secrets for other hosts").
pub(super) async fn ensure_covered(state: &AppState, host: &str) -> Result<(), ApiError> {
    if crate::proxy_feed::coverage::covers(&state.config, host).await.map_err(ApiError::Internal)? {
        Ok(())
    } else {
        Err(ApiError::bad_request(ErrorCode::HostNotCovered, crate::proxy_feed::coverage::refusal(host)))
    }
}

/// Tells the agent's supervisor that its environment changed: its harness restarts with the new
/// placeholders once no turn runs (the proxy follows on its own, within seconds).
async fn environment_changed(state: &AppState, agent_id: AgentId) {
    state.dispatch.send(agent_id, Command::EnvironmentChanged).await;
}

/// Attaches a secret of the agent's workspace to the agent under an environment variable,
/// replacing what the variable held (agent admins). The sandbox gets a placeholder. A secret
/// whose host the egress proxy's CA no longer covers (the CA was replaced) is refused.
#[utoipa::path(
    put,
    path = "/api/v1/agents/{id}/secrets/{env_name}",
    operation_id = "attach_secret",
    tag = "secrets",
    request_body = AttachSecret,
    responses(
        (status = 200, description = "Attached", body = Attachment),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_ENV_NAME`, `HOST_NOT_COVERED` (the \
            egress proxy's CA does not cover the secret's host)", body = ErrorBody),
        (status = 409, description = "`ENV_NAME_TAKEN`, `TOO_MANY_SECRETS`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn attach(
    State(state): State<AppState>,
    principal: Principal,
    path: PathResult<EnvPath>,
    RawBody(body): RawBody,
) -> Result<Json<Attachment>, ApiError> {
    let axum::extract::Path(path) = path.map_err(|_| ApiError::NotFound("agent"))?;
    let agent = visible_agent(&state, &principal, path.id, Role::Admin).await?;
    let env_name =
        validate::secret_env_name(&path.env_name).map_err(|m| ApiError::bad_request(ErrorCode::InvalidEnvName, m))?;
    let body: AttachSecret = parse_json(&body)?;
    let secret = store::secrets::get(&state.pool, agent.workspace_id, body.secret_id)
        .await?
        .ok_or(ApiError::NotFound("secret"))?;
    ensure_covered(&state, &secret.rule.host).await?;
    if agent.env.iter().any(|(name, _)| *name == env_name) {
        return Err(ApiError::conflict(
            ErrorCode::EnvNameTaken,
            format!("the agent's plain env already sets {env_name}; a secret needs a variable of its own"),
        ));
    }
    let preset = Preset::parse(&secret.preset).unwrap_or(Preset::Custom);
    let outcome =
        store::secrets::attach(&state.pool, agent.id, &env_name, secret.id, &preset.placeholder(), principal.user_id)
            .await?;
    if outcome == Attached::TooMany {
        return Err(ApiError::conflict(
            ErrorCode::TooManySecrets,
            format!("an agent has at most {} secrets attached", store::secrets::MAX_PER_AGENT),
        ));
    }
    if let Attached::Changed { replaced } = outcome {
        environment_changed(&state, agent.id).await;
        let detail = json!({"env_name": env_name, "secret_id": secret.id, "secret_name": secret.name,
            "replaced_secret_id": replaced});
        workspaces::audit(
            &state,
            &principal,
            agent.workspace_id,
            "secret.attached",
            "agent",
            agent.id.to_string(),
            detail,
        )
        .await?;
    }
    Ok(Json(Attachment { env_name, secret_id: secret.id, secret_name: secret.name, preset: secret.preset }))
}

/// Detaches the secret an environment variable holds (agent admins). 404 if it holds none.
#[utoipa::path(
    delete,
    path = "/api/v1/agents/{id}/secrets/{env_name}",
    operation_id = "detach_secret",
    tag = "secrets",
    responses((status = 204, description = "Detached")),
    extensions(("x-agenthold-access" = json!(Access::Admin))),
)]
pub async fn detach(
    State(state): State<AppState>,
    principal: Principal,
    path: PathResult<EnvPath>,
) -> Result<StatusCode, ApiError> {
    let axum::extract::Path(path) = path.map_err(|_| ApiError::NotFound("agent"))?;
    let agent = visible_agent(&state, &principal, path.id, Role::Admin).await?;
    let secret_id =
        store::secrets::detach(&state.pool, agent.id, &path.env_name).await?.ok_or(ApiError::NotFound("attachment"))?;
    environment_changed(&state, agent.id).await;
    let secret_name = store::secrets::get(&state.pool, agent.workspace_id, secret_id).await?.map(|s| s.name);
    let detail = json!({"env_name": path.env_name, "secret_id": secret_id, "secret_name": secret_name});
    workspaces::audit(&state, &principal, agent.workspace_id, "secret.detached", "agent", agent.id.to_string(), detail)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
