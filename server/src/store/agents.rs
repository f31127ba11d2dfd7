//! The `agents` table.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::ids::AgentId;

/// One agent as stored.
#[derive(Debug, Clone)]
pub struct AgentRow {
    /// Its id.
    pub id: AgentId,
    /// Its unique name.
    pub name: String,
    /// The harness adapter's name (`fake`, `command`, …).
    pub harness: String,
    /// argv for the `command` harness.
    pub command: Option<Vec<String>>,
    /// Non-secret environment variables for the harness.
    pub env: Vec<(String, String)>,
    /// The sandbox image.
    pub image: String,
    /// The sandbox driver (`docker`, `local`).
    pub driver: String,
    /// `auto-approve`.
    pub permission_policy: String,
    /// CPU limit (cores).
    pub cpus: f64,
    /// Memory limit.
    pub memory_mib: i32,
    /// Process limit.
    pub pids_limit: i32,
    /// `awake` or `asleep`, as the user asked.
    pub desired_state: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// What creating an agent stores.
#[derive(Debug, Clone)]
pub struct NewAgent {
    /// Its id.
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// The harness adapter's name.
    pub harness: String,
    /// argv for the `command` harness.
    pub command: Option<Vec<String>>,
    /// Non-secret environment.
    pub env: Vec<(String, String)>,
    /// The image.
    pub image: String,
    /// The driver.
    pub driver: String,
    /// CPU limit.
    pub cpus: f64,
    /// Memory limit.
    pub memory_mib: i32,
    /// Process limit.
    pub pids_limit: i32,
}

/// Inserting an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum InsertError {
    /// Another agent has the name.
    #[error("an agent with this name exists")]
    NameTaken,
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn env_to_json(env: &[(String, String)]) -> serde_json::Value {
    serde_json::Value::Object(env.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect())
}

fn env_from_json(value: serde_json::Value) -> Vec<(String, String)> {
    match value {
        serde_json::Value::Object(map) => {
            map.into_iter().filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_owned()))).collect()
        }
        _ => Vec::new(),
    }
}

fn command_from_json(value: Option<serde_json::Value>) -> Option<Vec<String>> {
    value.and_then(|v| serde_json::from_value(v).ok())
}

/// Stores a new agent and its sandbox row (with the hash of its first sandbox token).
pub async fn insert(pool: &PgPool, agent: &NewAgent, token_hash: &[u8]) -> Result<(), InsertError> {
    let mut tx = pool.begin().await?;
    let command = agent.command.as_ref().map(|c| serde_json::json!(c));
    let inserted = sqlx::query!(
        r#"INSERT INTO agents (id, name, harness, command, env, image, driver, cpus, memory_mib, pids_limit)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
           ON CONFLICT (name) DO NOTHING"#,
        agent.id.0,
        agent.name,
        agent.harness,
        command,
        env_to_json(&agent.env),
        agent.image,
        agent.driver,
        agent.cpus,
        agent.memory_mib,
        agent.pids_limit,
    )
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(InsertError::NameTaken);
    }
    sqlx::query!(r#"INSERT INTO sandboxes (agent_id, token_hash) VALUES ($1, $2)"#, agent.id.0, token_hash)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The columns as Postgres returns them.
struct AgentRecord {
    id: uuid::Uuid,
    name: String,
    harness: String,
    command: Option<serde_json::Value>,
    env: serde_json::Value,
    image: String,
    driver: String,
    permission_policy: String,
    cpus: f64,
    memory_mib: i32,
    pids_limit: i32,
    desired_state: String,
    created_at: DateTime<Utc>,
}

impl From<AgentRecord> for AgentRow {
    fn from(r: AgentRecord) -> Self {
        Self {
            id: AgentId(r.id),
            name: r.name,
            harness: r.harness,
            command: command_from_json(r.command),
            env: env_from_json(r.env),
            image: r.image,
            driver: r.driver,
            permission_policy: r.permission_policy,
            cpus: r.cpus,
            memory_mib: r.memory_mib,
            pids_limit: r.pids_limit,
            desired_state: r.desired_state,
            created_at: r.created_at,
        }
    }
}

/// One agent.
pub async fn get(pool: &PgPool, id: AgentId) -> sqlx::Result<Option<AgentRow>> {
    let row = sqlx::query_as!(
        AgentRecord,
        r#"SELECT id, name, harness, command, env, image, driver, permission_policy, cpus,
                  memory_mib, pids_limit, desired_state, created_at
           FROM agents WHERE id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(AgentRow::from))
}

/// All agents, oldest first.
pub async fn list(pool: &PgPool) -> sqlx::Result<Vec<AgentRow>> {
    let rows = sqlx::query_as!(
        AgentRecord,
        r#"SELECT id, name, harness, command, env, image, driver, permission_policy, cpus,
                  memory_mib, pids_limit, desired_state, created_at
           FROM agents ORDER BY created_at, id"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(AgentRow::from).collect())
}

/// Deletes an agent with its sandbox row, sessions and their events. False if it did not exist.
pub async fn delete(pool: &PgPool, id: AgentId) -> sqlx::Result<bool> {
    let done = sqlx::query!(r#"DELETE FROM agents WHERE id = $1"#, id.0).execute(pool).await?;
    Ok(done.rows_affected() > 0)
}

/// Records whether the user wants the agent awake or asleep.
pub async fn set_desired_state(pool: &PgPool, id: AgentId, state: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(r#"UPDATE agents SET desired_state = $2 WHERE id = $1"#, id.0, state).execute(pool).await?;
    Ok(done.rows_affected() > 0)
}
