//! `agent_repos`: an agent's repository and how its clone went (pending, cloning, cloned,
//! failed with the reason). One row per agent that has one.

use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;

/// An agent's repository as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoRow {
    /// The agent.
    pub agent_id: Uuid,
    /// `https://…`.
    pub url: String,
    /// The branch (`None`: the remote's default).
    pub branch: Option<String>,
    /// The folder of the home it is cloned into.
    pub dir: String,
    /// `pending`, `cloning`, `cloned` or `failed`.
    pub state: String,
    /// Why it failed (`failed` only).
    pub error: Option<String>,
    /// When the state last changed.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// Stores a new agent's repository (`pending`).
pub async fn insert(pool: &PgPool, agent_id: AgentId, url: &str, branch: Option<&str>, dir: &str) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO agent_repos (agent_id, url, branch, dir) VALUES ($1, $2, $3, $4)"#,
        agent_id.0,
        url,
        branch,
        dir
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The agent's repository, if it has one.
pub async fn get(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Option<RepoRow>> {
    sqlx::query_as!(
        RepoRow,
        r#"SELECT agent_id, url, branch, dir, state, error, updated_at FROM agent_repos WHERE agent_id = $1"#,
        agent_id.0
    )
    .fetch_optional(pool)
    .await
}

/// The repositories of these agents (those that have one).
pub async fn for_agents(db: impl sqlx::PgExecutor<'_>, agent_ids: &[Uuid]) -> sqlx::Result<Vec<RepoRow>> {
    sqlx::query_as!(
        RepoRow,
        r#"SELECT agent_id, url, branch, dir, state, error, updated_at FROM agent_repos
           WHERE agent_id = ANY($1)"#,
        agent_ids
    )
    .fetch_all(db)
    .await
}

/// Records how the clone stands (`error` for `failed` only).
pub async fn set_state(pool: &PgPool, agent_id: AgentId, state: &str, error: Option<&str>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"UPDATE agent_repos SET state = $2, error = $3, updated_at = now() WHERE agent_id = $1"#,
        agent_id.0,
        state,
        error
    )
    .execute(pool)
    .await?;
    Ok(())
}
