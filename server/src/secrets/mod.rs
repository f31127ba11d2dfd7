//! Secrets: values (API keys, tokens) an admin stores once per workspace and attaches to agents
//! under an environment variable. The value is encrypted at rest under the master key
//! ([`master_key`], [`cipher`]), never returned by the API, never logged, never put into a
//! sandbox: the sandbox's variable holds a random placeholder, and the egress proxy puts the
//! real value into the one header its preset's rule names ([`presets`]). This module owns the
//! two views the rest of the server needs: [`for_agent`] (values, for the proxy) and
//! [`sandbox_env`] (placeholders only, for the harness's environment). docs/secrets.md.

pub mod cipher;
pub mod git;
pub mod master_key;
pub mod presets;
pub mod rotate;
pub mod validate;

use sqlx::PgPool;

use crate::ids::AgentId;
use crate::secret::Secret;
use crate::store;
use cipher::{OpenError, RowIdentity};
use master_key::MasterKey;
use presets::InjectionRule;

/// A secret attached to an agent, with its value: what the proxy needs for one sandbox.
#[derive(Debug, Clone)]
pub struct AttachedSecret {
    /// The secret.
    pub secret_id: uuid::Uuid,
    /// The variable the sandbox has it under.
    pub env_name: String,
    /// What the variable holds (and the harness sends) instead of the value.
    pub placeholder: String,
    /// Where the proxy may put the value.
    pub rule: InjectionRule,
    /// The value (its `Debug` redacts).
    pub value: Secret,
}

/// Reading an agent's secrets failed. Callers fail closed: no value, no injection.
#[derive(Debug, thiserror::Error)]
pub enum ForAgentError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// A value did not open (another master key, or tampered with).
    #[error("secret {secret_id} does not open: {source}")]
    Open {
        /// Which secret.
        secret_id: uuid::Uuid,
        /// Why.
        source: OpenError,
    },
}

/// The secrets attached to an agent, with their values, by variable. Any value that does not
/// open fails the whole call.
pub async fn for_agent(
    pool: &PgPool,
    key: &MasterKey,
    agent_id: AgentId,
) -> Result<Vec<AttachedSecret>, ForAgentError> {
    open_attached(key, store::secrets::sealed_for_agent(pool, agent_id).await?)
}

/// An agent's attached secrets as read ([`store::secrets::sealed_for_agents`]), opened. A value
/// that does not open fails the whole call.
pub fn open_attached(
    key: &MasterKey,
    sealed: Vec<store::secrets::SealedAttachment>,
) -> Result<Vec<AttachedSecret>, ForAgentError> {
    sealed
        .into_iter()
        .map(|row| {
            let identity = RowIdentity { workspace_id: row.workspace_id, secret_id: row.secret_id };
            let value = cipher::open(key, identity, &row.sealed)
                .map_err(|source| ForAgentError::Open { secret_id: row.secret_id, source })?;
            Ok(AttachedSecret {
                secret_id: row.secret_id,
                env_name: row.env_name,
                placeholder: row.placeholder,
                rule: row.rule,
                value,
            })
        })
        .collect()
}

/// The environment a sandbox gets for its attached secrets: (variable, placeholder) pairs, by
/// variable. Placeholders only, never a value.
pub async fn sandbox_env(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<(String, String)>> {
    store::secrets::placeholders(pool, agent_id).await
}
