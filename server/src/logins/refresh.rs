//! The server's refresh of ChatGPT logins (seed 003): every [`Refresher::every`] it renews each
//! login whose access token expires within [`Refresher::before`], one at a time, each under a row
//! lock taken with `SKIP LOCKED` and held until the new tokens are stored — refresh tokens are
//! single-use, so two replicas must never both refresh one. A refusal the provider calls permanent
//! marks the login "connect again" (audited in its owner's personal workspace); anything else is
//! tried again next round. The proxy's file follows the stored tokens (a trigger notifies the feed).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::chatgpt::{self, RefreshError, Tokens};
use super::probe::Probe;
use crate::secrets::cipher::{self, RowIdentity};
use crate::secrets::master_key::MasterKey;
use crate::store;

/// The refresh loop's settings and what it needs.
#[derive(Clone)]
pub struct Refresher {
    /// The database.
    pub pool: PgPool,
    /// Opens and seals the tokens.
    pub key: Arc<MasterKey>,
    /// Talks to the token endpoint.
    pub probe: Probe,
    /// How often to look (5 minutes).
    pub every: Duration,
    /// How long before expiry to renew (an hour).
    pub before: Duration,
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// Renewed.
    pub refreshed: usize,
    /// Marked "connect again".
    pub rejected: usize,
    /// To try again next round.
    pub failed: usize,
}

impl Refresher {
    /// Runs rounds until the task is dropped.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(self.every).await;
                match self.round().await {
                    Ok(round) if round != Round::default() => tracing::info!(?round, "provider logins refreshed"),
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "refreshing provider logins"),
                }
            }
        })
    }

    /// Refreshes every login due now.
    pub async fn round(&self) -> sqlx::Result<Round> {
        let mut round = Round::default();
        let mut seen: Vec<Uuid> = Vec::new();
        loop {
            let before = chrono::Utc::now() + chrono::Duration::from_std(self.before).unwrap_or_default();
            let mut tx = self.pool.begin().await?;
            let Some((id, user_id, sealed)) =
                store::provider_logins::lock_due_for_refresh(&mut tx, before, &seen).await?
            else {
                return Ok(round);
            };
            seen.push(id);
            match self.renew(tx, id, user_id, sealed).await? {
                Renewed::Refreshed => round.refreshed += 1,
                Renewed::Rejected => round.rejected += 1,
                Renewed::Failed => round.failed += 1,
            }
        }
    }

    /// Refreshes one login now (a sandbox asked to: its harness's token was refused or is about
    /// to be), unless it is not usable or another replica is refreshing it. `None`: not refreshed.
    pub async fn refresh_now(&self, id: Uuid) -> sqlx::Result<Option<Renewed>> {
        let mut tx = self.pool.begin().await?;
        let Some((user_id, sealed)) = store::provider_logins::lock_for_refresh(&mut tx, id).await? else {
            return Ok(None);
        };
        self.renew(tx, id, user_id, sealed).await.map(Some)
    }

    /// Refreshes a login locked in `tx`, and stores what came of it.
    async fn renew(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
        id: Uuid,
        user_id: Uuid,
        sealed: crate::store::sealed::Sealed,
    ) -> sqlx::Result<Renewed> {
        let identity = RowIdentity::provider_login(user_id, id);
        let tokens: Option<Tokens> =
            cipher::open(&self.key, identity, &sealed).ok().and_then(|value| serde_json::from_str(value.expose()).ok());
        let Some(tokens) = tokens else {
            tracing::warn!(login.id = %id, "a ChatGPT login does not open: not refreshed");
            return Ok(Renewed::Failed);
        };
        match self.probe.refresh(&tokens).await {
            Ok(new) => {
                let json = serde_json::to_string(&new).unwrap_or_default();
                let Ok(sealed) = cipher::seal(&self.key, identity, json.as_bytes()) else {
                    return Ok(Renewed::Failed);
                };
                let expires = chatgpt::expires_at(&new.access_token);
                store::provider_logins::store_refreshed(&mut tx, id, &sealed, expires, &chatgpt::public_part(&new))
                    .await?;
                tx.commit().await?;
                Ok(Renewed::Refreshed)
            }
            Err(RefreshError::Permanent(reason)) => {
                store::provider_logins::mark_connect_again(&mut tx, id, &reason).await?;
                tx.commit().await?;
                tracing::warn!(login.id = %id, %reason, "a ChatGPT login must be connected again");
                audit_failure(&self.pool, user_id, id, &reason).await?;
                Ok(Renewed::Rejected)
            }
            Err(RefreshError::Transient(reason)) => {
                tracing::warn!(login.id = %id, %reason, "refreshing a ChatGPT login failed; trying again later");
                Ok(Renewed::Failed)
            }
        }
    }
}

/// What one refresh came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// New tokens stored.
    Refreshed,
    /// The provider refused for good: marked "connect again".
    Rejected,
    /// Not this time (tried again later).
    Failed,
}

async fn audit_failure(pool: &PgPool, user_id: Uuid, login_id: Uuid, reason: &str) -> sqlx::Result<()> {
    let Some(workspace_id) = store::users::personal_workspace(pool, user_id).await? else { return Ok(()) };
    let record = store::audit::AuditRecord {
        workspace_id,
        actor_user_id: None,
        action: "provider_login.refresh_failed",
        resource_type: "provider_login",
        resource_id: login_id.to_string(),
        detail: serde_json::json!({"reason": reason}),
    };
    store::audit::append(pool, record).await
}
