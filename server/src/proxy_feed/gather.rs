//! The feed's read: every agent's part of the proxy's file — identity, allow-list, provider
//! hosts, attached secrets and login user's logins with their values, repository host — in a
//! fixed number of statements (the agents, their attachments, their login users' logins, their
//! repositories, the pooled harnesses' sandboxes), all from one read-only snapshot. The feed rebuilds on every agent created or
//! deleted, so reading agent by agent made a burst of _n_ creations cost O(_n_²) statements.
//! What is read is mapped by the same functions the single-agent paths use
//! ([`crate::secrets::open_attached`], [`crate::logins::plan_from`],
//! [`crate::logins::for_proxy_from`]).

use std::collections::HashMap;

use sqlx::PgPool;
use uuid::Uuid;

use super::build::{AgentInput, SecretsInput};
use super::file::{AnswerEntry, ServerRouteEntry};
use super::identity::{self, IdentityError};
use crate::ids::AgentId;
use crate::secrets::AttachedSecret;
use crate::secrets::master_key::MasterKey;
use crate::store;
use crate::store::provider_logins::SealedLogin;
use crate::store::proxy_identities::FeedAgent;
use crate::store::repos::RepoRow;
use crate::store::secrets::SealedAttachment;
use crate::store::warm_pool::FeedPooled;

/// What the statements returned, before any value is opened.
struct Read {
    agents: Vec<FeedAgent>,
    pooled: Vec<FeedPooled>,
    attached: HashMap<AgentId, Vec<SealedAttachment>>,
    logins: HashMap<Uuid, Vec<SealedLogin>>,
    repos: HashMap<Uuid, RepoRow>,
}

/// Every agent not being deleted, as the proxy's file needs it, then the pooled harnesses'
/// sandboxes no agent has claimed yet ([`super::build::pooled`]). An agent without an identity
/// (or whose identity does not open) gets a new one; one deleted meanwhile is left out; a pooled
/// sandbox whose identity does not open (the master key changed) is left out.
pub async fn agents(
    pool: &PgPool,
    key: &MasterKey,
    server_route: Option<&ServerRouteEntry>,
) -> Result<Vec<AgentInput>, IdentityError> {
    let mut read = read(pool).await?;
    let mut agents = Vec::with_capacity(read.agents.len());
    for row in std::mem::take(&mut read.agents) {
        let identity = match row.identity.as_ref().map(|stored| identity::open(key, row.agent_id, stored)) {
            Some(Ok(identity)) => identity,
            // None made yet, or it does not open: make (or replace) it.
            _ => match identity::ensure(pool, key, row.agent_id).await {
                Ok(identity) => identity,
                Err(IdentityError::NoAgent) => continue,
                Err(error) => return Err(error),
            },
        };
        let (secrets, answers) = secrets_of(key, &row, &mut read);
        // The hosts its harness talks to (its providers' APIs, as its adapter names them) and
        // its repository's host (the clone, fetch and push go there).
        let mut provider_hosts: Vec<String> = crate::harness::adapter(&row.harness)
            .map(|a| a.profile().provider_hosts.iter().map(|h| (*h).to_owned()).collect())
            .unwrap_or_default();
        if let Some(repo) = read.repos.remove(&row.agent_id.0)
            && let Ok(repo) = agenthold_core::repo::Repo::parse(&repo.url, repo.branch.as_deref())
        {
            provider_hosts.push(repo.allow_entry());
        }
        agents.push(AgentInput {
            agent_id: row.agent_id,
            identity,
            // As read; the feed's `admit_sources` decides what is written.
            source_addrs: row.source_addr.into_iter().collect(),
            any_source: false,
            egress: row.egress,
            provider_hosts,
            secrets,
            answers,
            mcp_credential: server_route.map(|_| crate::mcp::credential::token(key, row.agent_id)),
            pooled: false,
        });
    }
    // Read in the same snapshot as the agents, without those an agent has (`feed_pooled`).
    for row in read.pooled {
        match identity::open(key, row.agent_id, &row.identity) {
            Ok(identity) => agents.push(super::build::pooled(
                row.agent_id,
                identity,
                row.source_addr,
                server_route.map(|_| crate::mcp::credential::token(key, row.agent_id)),
            )),
            Err(error) => {
                tracing::warn!(agent.id = %row.agent_id, %error, "a pooled harness's proxy password does not open; the proxy is not told of it")
            }
        }
    }
    Ok(agents)
}

/// The five statements, in one `REPEATABLE READ` read-only transaction: an agent's secrets and
/// logins are those of the same moment as the agent list, and so are the pooled sandboxes.
async fn read(pool: &PgPool) -> sqlx::Result<Read> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").execute(&mut *tx).await?;
    let agents = store::proxy_identities::feed_agents(&mut *tx).await?;
    let ids: Vec<Uuid> = agents.iter().map(|a| a.agent_id.0).collect();
    let mut attached: HashMap<AgentId, Vec<SealedAttachment>> = HashMap::new();
    for (agent_id, sealed) in store::secrets::sealed_for_agents(&mut *tx, &ids).await? {
        attached.entry(agent_id).or_default().push(sealed);
    }
    let mut users: Vec<Uuid> = agents
        .iter()
        .filter(|a| a.login_user_member && !crate::harness::account_logins(&a.harness).is_empty())
        .filter_map(|a| a.login_user_id)
        .collect();
    users.sort_unstable();
    users.dedup();
    let mut logins: HashMap<Uuid, Vec<SealedLogin>> = HashMap::new();
    if !users.is_empty() {
        for login in store::provider_logins::sealed_for_users(&mut *tx, &users).await? {
            logins.entry(login.row.user_id).or_default().push(login);
        }
    }
    let repos = store::repos::for_agents(&mut *tx, &ids).await?.into_iter().map(|r| (r.agent_id, r)).collect();
    let pooled = store::warm_pool::feed_pooled(&mut *tx).await?;
    tx.commit().await?;
    Ok(Read { agents, pooled, attached, logins, repos })
}

/// The agent's attached secrets and its login user's logins, opened, and the requests the proxy
/// answers for it. A value that does not open leaves the agent with nothing injected.
fn secrets_of(key: &MasterKey, row: &FeedAgent, read: &mut Read) -> (SecretsInput, Vec<AnswerEntry>) {
    let sealed = read.attached.remove(&row.agent_id).unwrap_or_default();
    let attached_env: Vec<String> = sealed.iter().map(|s| s.env_name.clone()).collect();
    let recipient = crate::logins::Recipient {
        id: row.agent_id,
        workspace_id: row.workspace_id,
        accepts: crate::harness::account_logins(&row.harness),
        login_user_id: row.login_user_id,
    };
    let user_logins = row.login_user_id.and_then(|user| read.logins.get(&user)).cloned().unwrap_or_default();
    let planned = crate::logins::plan_from(recipient, row.login_user_member, user_logins, &attached_env);
    let opened = crate::secrets::open_attached(key, sealed).and_then(|mut attached: Vec<AttachedSecret>| {
        let logins = crate::logins::for_proxy_from(key, row.agent_id, planned)?;
        attached.extend(logins.secrets);
        Ok((attached, logins.answers))
    });
    match opened {
        Ok((attached, answers)) => (
            SecretsInput::Attached(attached),
            answers.into_iter().map(|(host, path, body)| AnswerEntry { host, path, body }).collect(),
        ),
        // Only a value that does not open fails here (nothing is read).
        Err(error) => {
            tracing::warn!(agent.id = %row.agent_id, %error, "an attached secret does not open: nothing is injected for this agent");
            (SecretsInput::Unreadable, Vec::new())
        }
    }
}
