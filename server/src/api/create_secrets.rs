//! Secrets attached to an agent as it is created (`secrets` on `POST /api/v1/agents`): checked
//! whole before the agent exists (each variable's name, the secret in the agent's workspace, its
//! host covered by the proxy's CA, at most [`store::secrets::MAX_PER_AGENT`], no clash with the
//! plain `env`) — a bad one stores nothing — then attached as `PUT
//! /api/v1/agents/{id}/secrets/{env_name}` would, each audited. A harness the warm pool started
//! for these variables lends its placeholders (docs/design.md, "Pooled harnesses").

use std::collections::BTreeMap;

use serde_json::json;

use super::error::ApiError;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::secrets::presets::Preset;
use crate::state::AppState;
use crate::store;
use crate::store::secrets::SecretRow;

/// A secret to attach under a variable, checked.
pub struct Named {
    env_name: String,
    secret: SecretRow,
}

impl Named {
    /// The variable.
    pub fn env_name(&self) -> &str {
        &self.env_name
    }
}

/// Checks what `secrets` names for an agent of `workspace_id` with the plain `env`.
pub async fn check(
    state: &AppState,
    workspace_id: uuid::Uuid,
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, uuid::Uuid>,
) -> Result<Vec<Named>, ApiError> {
    if i64::try_from(secrets.len()).unwrap_or(i64::MAX) > store::secrets::MAX_PER_AGENT {
        return Err(ApiError::conflict(
            ErrorCode::TooManySecrets,
            format!("an agent has at most {} secrets attached", store::secrets::MAX_PER_AGENT),
        ));
    }
    let mut named = Vec::with_capacity(secrets.len());
    for (raw, secret_id) in secrets {
        let env_name = crate::secrets::validate::secret_env_name(raw)
            .map_err(|m| ApiError::bad_request(ErrorCode::InvalidEnvName, format!("secrets: {m}")))?;
        if env.contains_key(&env_name) {
            return Err(ApiError::conflict(
                ErrorCode::EnvNameTaken,
                format!("env and secrets both set {env_name}; a secret needs a variable of its own"),
            ));
        }
        let secret =
            store::secrets::get(&state.pool, workspace_id, *secret_id).await?.ok_or(ApiError::NotFound("secret"))?;
        super::secrets::ensure_covered(state, &secret.rule.host).await?;
        named.push(Named { env_name, secret });
    }
    Ok(named)
}

/// Attaches `named` to the agent just created: under `placeholder(variable)` where that gives
/// one (a pooled harness's), else a fresh one of the secret's preset.
pub async fn attach(
    state: &AppState,
    principal: &Principal,
    agent_id: AgentId,
    workspace_id: uuid::Uuid,
    named: Vec<Named>,
    placeholder: impl Fn(&str) -> Option<String>,
) -> Result<(), ApiError> {
    for Named { env_name, secret } in named {
        let preset = Preset::parse(&secret.preset).unwrap_or(Preset::Custom);
        let placeholder = placeholder(&env_name).unwrap_or_else(|| preset.placeholder());
        let outcome =
            store::secrets::attach(&state.pool, agent_id, &env_name, secret.id, &placeholder, principal.user_id)
                .await?;
        if outcome == store::secrets::Attached::TooMany {
            return Err(ApiError::conflict(
                ErrorCode::TooManySecrets,
                format!("an agent has at most {} secrets attached", store::secrets::MAX_PER_AGENT),
            ));
        }
        let detail = json!({"env_name": env_name, "secret_id": secret.id, "secret_name": secret.name,
            "replaced_secret_id": null});
        super::workspaces::audit(
            state,
            principal,
            workspace_id,
            "secret.attached",
            "agent",
            agent_id.to_string(),
            detail,
        )
        .await?;
    }
    Ok(())
}
