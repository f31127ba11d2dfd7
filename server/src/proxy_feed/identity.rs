//! Each agent's proxy identity: a random username and password, made on first use and kept
//! across restarts (`proxy_identities`, deleted with the agent). The password is a credential:
//! it is sealed with the master key exactly like a secret value ([`crate::secrets::cipher`]),
//! with associated data that names the agent under a namespace of its own, so a sealed password
//! and a sealed secret can never be swapped. A password that no longer opens (the master key was
//! rotated) is replaced by a new identity: the sandbox gets it when its harness next starts.
//! Also the environment a harness needs to send its traffic through the proxy.

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::secret::Secret;
use crate::secrets::cipher::{self, OpenError, RowIdentity};
use crate::secrets::master_key::MasterKey;
use crate::store::proxy_identities::{self as store, SealedIdentity};

/// The "workspace" half of a sealed password's associated data: no workspace has this id, so a
/// password never opens as a secret value, nor a value as a password.
pub const IDENTITY_NAMESPACE: Uuid = Uuid::from_u128(0x6167_656e_7468_6f6c_642d_7072_6f78_7969);

/// What `NO_PROXY` holds: the sandbox's own loopback.
pub const NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// An agent's proxy credentials. `Debug` redacts the password.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The proxy username.
    pub username: String,
    /// The proxy password.
    pub password: Secret,
}

/// The identity could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// The agent does not exist (any more).
    #[error("the agent does not exist")]
    NoAgent,
    /// The password could not be sealed.
    #[error("the proxy password could not be encrypted")]
    Seal,
}

fn row(agent_id: AgentId) -> RowIdentity {
    RowIdentity { workspace_id: IDENTITY_NAMESPACE, secret_id: agent_id.0 }
}

/// A fresh identity: `sbx-<16 hex>` and 256 random bits (hex: nothing to escape in a URL).
pub fn fresh() -> Identity {
    Identity {
        username: format!("sbx-{}", hex::encode(rand::random::<[u8; 8]>())),
        password: Secret::new(hex::encode(rand::random::<[u8; 32]>())),
    }
}

/// `identity` sealed for `agent_id` (as stored in `proxy_identities`, and for a pooled harness).
pub fn seal(key: &MasterKey, agent_id: AgentId, identity: &Identity) -> Result<SealedIdentity, IdentityError> {
    let sealed =
        cipher::seal(key, row(agent_id), identity.password.expose().as_bytes()).map_err(|_| IdentityError::Seal)?;
    Ok(SealedIdentity { username: identity.username.clone(), sealed })
}

/// Opens a stored identity.
pub fn open(key: &MasterKey, agent_id: AgentId, stored: &SealedIdentity) -> Result<Identity, OpenError> {
    let password = cipher::open(key, row(agent_id), &stored.sealed)?;
    Ok(Identity { username: stored.username.clone(), password })
}

/// The agent's identity, made (and stored) when it has none, replaced when its password does not
/// open under `key`. Concurrent callers agree on one identity.
pub async fn ensure(pool: &PgPool, key: &MasterKey, agent_id: AgentId) -> Result<Identity, IdentityError> {
    // Three rounds cover losing a race to insert and then to replace.
    for _ in 0..3 {
        match store::get(pool, agent_id).await? {
            Some(stored) => match open(key, agent_id, &stored) {
                Ok(identity) => return Ok(identity),
                Err(error) => {
                    tracing::warn!(agent.id = %agent_id, %error, "a proxy password does not open; making a new identity");
                    let identity = fresh();
                    if store::replace(pool, agent_id, &stored.username, &seal(key, agent_id, &identity)?).await? {
                        return Ok(identity);
                    }
                }
            },
            None => {
                let identity = fresh();
                if store::insert_if_absent(pool, agent_id, &seal(key, agent_id, &identity)?).await? {
                    return Ok(identity);
                }
                if store::get(pool, agent_id).await?.is_none() {
                    return Err(IdentityError::NoAgent);
                }
            }
        }
    }
    Err(IdentityError::Db(sqlx::Error::Protocol("the proxy identity kept changing".into())))
}

/// Makes `identity` the agent's (a pooled harness's, bound at its claim), in `tx`. False when
/// the agent is gone.
pub async fn bind(
    tx: &mut sqlx::PgConnection,
    key: &MasterKey,
    agent_id: AgentId,
    identity: &Identity,
) -> Result<bool, IdentityError> {
    Ok(store::put(tx, agent_id, &seal(key, agent_id, identity)?).await?)
}

/// The environment a harness needs to reach the outside through the proxy at
/// `proxy_host_port` (`host:port` as seen from the sandbox): `HTTPS_PROXY`/`HTTP_PROXY` and
/// their lowercase forms (`http://user:password@host:port`), `NO_PROXY`/`no_proxy` (the
/// sandbox's loopback) and `NODE_USE_ENV_PROXY=1` (Node's fetch ignores the proxy variables
/// without it). Makes the agent's identity on first use. The values hold the proxy password:
/// never log them.
pub async fn sandbox_proxy_env(
    pool: &PgPool,
    key: &MasterKey,
    agent_id: AgentId,
    proxy_host_port: &str,
) -> Result<Vec<(String, String)>, IdentityError> {
    let identity = ensure(pool, key, agent_id).await?;
    Ok(proxy_env(&identity, proxy_host_port))
}

/// [`sandbox_proxy_env`] for a known identity.
pub fn proxy_env(identity: &Identity, proxy_host_port: &str) -> Vec<(String, String)> {
    let url = format!("http://{}:{}@{proxy_host_port}", identity.username, identity.password.expose());
    let mut env: Vec<(String, String)> = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
        .into_iter()
        .map(|name| (name.to_owned(), url.clone()))
        .collect();
    env.extend(["NO_PROXY", "no_proxy"].into_iter().map(|name| (name.to_owned(), NO_PROXY.to_owned())));
    env.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_points_every_client_at_the_proxy() {
        let identity = Identity { username: "sbx-0011".into(), password: Secret::new("pw-abc") };
        let env = proxy_env(&identity, "proxy.internal:3128");
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
            assert_eq!(get(name), Some("http://sbx-0011:pw-abc@proxy.internal:3128"), "{name}");
        }
        assert_eq!(get("NO_PROXY"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("no_proxy"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(get("NODE_USE_ENV_PROXY"), Some("1"));
        assert_eq!(env.len(), 7);
    }

    #[test]
    fn a_sealed_password_opens_for_its_agent_only_and_never_as_a_secret() {
        let key = MasterKey::generate();
        let agent = AgentId::new();
        let identity = fresh();
        assert!(identity.username.starts_with("sbx-") && identity.password.expose().len() == 64);
        assert!(!format!("{identity:?}").contains(identity.password.expose()));
        let stored = seal(&key, agent, &identity).expect("seals");
        assert_eq!(open(&key, agent, &stored).expect("opens").password, identity.password);
        assert!(open(&key, AgentId::new(), &stored).is_err(), "another agent");
        assert!(open(&MasterKey::generate(), agent, &stored).is_err(), "another key");
        let as_secret = RowIdentity { workspace_id: Uuid::new_v4(), secret_id: agent.0 };
        assert!(cipher::open(&key, as_secret, &stored.sealed).is_err(), "as a secret of a workspace");
    }
}
