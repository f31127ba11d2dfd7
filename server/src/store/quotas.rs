//! Quotas on what users create (issue 29): sessions per agent, schedules and webhooks per
//! workspace, API tokens per user, stored event bytes per agent. Each count is taken inside the
//! creating transaction under a transaction-scoped advisory lock on its owner, so concurrent
//! creations — on any replica — cannot both pass (lock classes: 1 and 2 the login throttle's, 3–5
//! the agents', 6 sessions per agent, 7 schedules per workspace, 8 webhooks per workspace, 9
//! tokens per user). Stored bytes are kept per session by the statements that append events
//! ([`super::events`]); an agent's total is the sum over its sessions.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::ids::AgentId;

/// A creation went over a quota, or the database failed.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// Over the quota: what holds how many, and the setting.
    #[error("{0}")]
    Exceeded(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// `Err(Exceeded)` when `count` already reached `max`.
fn within(count: i64, max: i64, holder: &str, what: &str, setting: &str) -> Result<(), QuotaError> {
    if count >= max {
        return Err(QuotaError::Exceeded(format!(
            "{holder} {count} {what}, as many as this server allows ({setting}={max}); delete some first"
        )));
    }
    Ok(())
}

/// Takes the lock on the agent's sessions and checks their count against `max`.
pub async fn sessions_of_agent(tx: &mut PgConnection, agent_id: AgentId, max: i64) -> Result<(), QuotaError> {
    sqlx::query_scalar!(r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(6, hashtext($1::uuid::text))"#, agent_id.0)
        .fetch_one(&mut *tx)
        .await?;
    let count = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM sessions WHERE agent_id = $1"#, agent_id.0)
        .fetch_one(&mut *tx)
        .await?;
    within(count, max, "the agent has", "sessions", "AGENTHOLD_MAX_SESSIONS_PER_AGENT")
}

/// Takes the lock on the schedules of the agent's workspace and checks their count.
pub async fn schedules_of_workspace(tx: &mut PgConnection, agent_id: AgentId, max: i64) -> Result<(), QuotaError> {
    let count = sqlx::query_scalar!(
        r#"WITH locked AS (SELECT pg_advisory_xact_lock(7, hashtext(workspace_id::text)) FROM agents WHERE id = $1)
           SELECT count(*) AS "n!" FROM locked"#,
        agent_id.0
    )
    .fetch_one(&mut *tx)
    .await?;
    if count == 0 {
        return Ok(()); // no such agent: the insert's own check answers
    }
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM schedules s JOIN agents a ON a.id = s.agent_id
           WHERE a.workspace_id = (SELECT workspace_id FROM agents WHERE id = $1)"#,
        agent_id.0
    )
    .fetch_one(&mut *tx)
    .await?;
    within(count, max, "the workspace has", "schedules", "AGENTHOLD_MAX_SCHEDULES_PER_WORKSPACE")
}

/// Takes the lock on the webhooks of the agent's workspace and checks their count.
pub async fn webhooks_of_workspace(tx: &mut PgConnection, agent_id: AgentId, max: i64) -> Result<(), QuotaError> {
    let count = sqlx::query_scalar!(
        r#"WITH locked AS (SELECT pg_advisory_xact_lock(8, hashtext(workspace_id::text)) FROM agents WHERE id = $1)
           SELECT count(*) AS "n!" FROM locked"#,
        agent_id.0
    )
    .fetch_one(&mut *tx)
    .await?;
    if count == 0 {
        return Ok(());
    }
    let count = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM webhooks w JOIN agents a ON a.id = w.agent_id
           WHERE a.workspace_id = (SELECT workspace_id FROM agents WHERE id = $1)"#,
        agent_id.0
    )
    .fetch_one(&mut *tx)
    .await?;
    within(count, max, "the workspace has", "webhooks", "AGENTHOLD_MAX_WEBHOOKS_PER_WORKSPACE")
}

/// Takes the lock on the user's API tokens and checks their count.
pub async fn tokens_of_user(tx: &mut PgConnection, user_id: Uuid, max: i64) -> Result<(), QuotaError> {
    sqlx::query_scalar!(r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(9, hashtext($1::uuid::text))"#, user_id)
        .fetch_one(&mut *tx)
        .await?;
    let count = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM api_tokens WHERE user_id = $1"#, user_id)
        .fetch_one(&mut *tx)
        .await?;
    within(count, max, "you have", "API tokens", "AGENTHOLD_MAX_TOKENS_PER_USER")
}

/// The bytes of events the agent's sessions store.
pub async fn event_bytes_of_agent(conn: &mut PgConnection, agent_id: AgentId) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(sum(stored_bytes), 0)::bigint AS "bytes!" FROM sessions WHERE agent_id = $1"#,
        agent_id.0
    )
    .fetch_one(conn)
    .await
}

/// `Err(Exceeded)` when the agent's sessions store `max` bytes of events or more: no new turn
/// starts until sessions are deleted (a turn already running finishes).
pub async fn event_bytes_within(conn: &mut PgConnection, agent_id: AgentId, max: i64) -> Result<(), QuotaError> {
    let bytes = event_bytes_of_agent(conn, agent_id).await?;
    if bytes >= max {
        return Err(QuotaError::Exceeded(format!(
            "the agent's sessions store {bytes} bytes of events, as many as this server allows \
             (AGENTHOLD_MAX_EVENT_BYTES_PER_AGENT={max}); delete sessions it no longer needs \
             (DELETE /api/v1/sessions/{{id}}) to start new turns"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_is_reached_at_its_value_and_the_message_names_the_setting() {
        assert!(within(9, 10, "x has", "things", "S").is_ok());
        let Err(QuotaError::Exceeded(message)) = within(10, 10, "the workspace has", "webhooks", "S_MAX") else {
            panic!("over")
        };
        assert_eq!(
            message,
            "the workspace has 10 webhooks, as many as this server allows (S_MAX=10); delete some first"
        );
    }
}
