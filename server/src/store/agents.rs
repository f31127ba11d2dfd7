//! The `agents` table. An agent being deleted (`deleting_at` set, see [`mark_deleting`]) is
//! gone for every lookup but [`get_including_deleting`] and [`deleting`], which finish the
//! deletion.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::ids::AgentId;

/// One agent as stored.
#[derive(Debug, Clone)]
pub struct AgentRow {
    /// Its id.
    pub id: AgentId,
    /// The workspace it belongs to.
    pub workspace_id: uuid::Uuid,
    /// Who created it.
    pub created_by: Option<uuid::Uuid>,
    /// Its name (unique in its workspace).
    pub name: String,
    /// The harness adapter's name (`fake`, `command`, …).
    pub harness: String,
    /// argv for the `command` harness.
    pub command: Option<Vec<String>>,
    /// The model the harness uses (`None`: its own default).
    pub model: Option<String>,
    /// Its own permission posture (`None`: the server's default).
    pub posture: Option<String>,
    /// Its policy (guarded agents), as validated JSON.
    pub policy: Option<serde_json::Value>,
    /// Non-secret environment variables for the harness.
    pub env: Vec<(String, String)>,
    /// The sandbox image.
    pub image: String,
    /// The sandbox driver (`docker`, `local`).
    pub driver: String,
    /// The Docker engine its sandbox lives on (`local`: the server's own; docs/engines.md).
    pub engine: String,
    /// `auto-approve`.
    pub permission_policy: String,
    /// CPU limit (cores).
    pub cpus: f64,
    /// Memory limit.
    pub memory_mib: i32,
    /// Process limit.
    pub pids_limit: i32,
    /// Disk space of its home and of its writable layer, each (MiB; `None`, agents made before
    /// disk limits: the server's default).
    pub disk_mib: Option<i32>,
    /// Its own turn time limit in seconds of activity (`None`: the server's).
    pub turn_timeout_secs: Option<i32>,
    /// Whose provider logins it uses (`None`: nobody's).
    pub login_user_id: Option<uuid::Uuid>,
    /// When someone last signed in inside its sandbox (a login method run in its terminal).
    pub sandbox_login_at: Option<DateTime<Utc>>,
    /// Seconds idle before it is put to sleep (0: never; `None`: the server's setting).
    pub auto_sleep_secs: Option<i32>,
    /// The login method its harness is signed in with when it asks (`None`: none named).
    pub auth_method: Option<String>,
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
    /// The workspace it belongs to.
    pub workspace_id: uuid::Uuid,
    /// Who creates it.
    pub created_by: uuid::Uuid,
    /// Its name.
    pub name: String,
    /// The harness adapter's name.
    pub harness: String,
    /// argv for the `command` harness.
    pub command: Option<Vec<String>>,
    /// The model.
    pub model: Option<String>,
    /// Its own posture.
    pub posture: Option<String>,
    /// Its policy.
    pub policy: Option<serde_json::Value>,
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
    /// Disk space (MiB).
    pub disk_mib: i32,
    /// Turn time limit (seconds of activity; `None`: the server's).
    pub turn_timeout_secs: Option<i32>,
    /// Its own auto-sleep time.
    pub auto_sleep_secs: Option<i32>,
    /// The login method it names.
    pub auth_method: Option<String>,
    /// The Docker engine its sandbox lives on, for life (`local`: the server's own host), and
    /// how many agents that engine may hold (`None`: no limit).
    pub engine: (String, Option<i64>),
}

/// Inserting an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum InsertError {
    /// Another agent has the name.
    #[error("an agent with this name exists")]
    NameTaken,
    /// The server has as many agents as it may.
    #[error("this server has {0} agents, as many as it may (AGENTHOLD_MAX_AGENTS)")]
    Full(i64),
    /// The engine the agent was placed on filled up meanwhile (another creation took its room).
    #[error("the Docker engine {0} holds as many agents as it may (its capacity)")]
    EngineFull(String),
    /// The workspace, or the user creating it, holds as many agents as the server allows.
    #[error("{0}")]
    Quota(String),
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

/// The most agents a workspace, and a user, may hold (checked when one is created).
#[derive(Debug, Clone, Copy)]
pub struct AgentQuota {
    /// Per workspace.
    pub per_workspace: i64,
    /// Per user who creates them.
    pub per_user: i64,
}

/// Stores a new agent and its sandbox row (with the hash of its first sandbox token); refused
/// when the server already has `max_agents`, or its engine as many agents as its capacity
/// (`agent.engine`, docs/engines.md) (each counted under a transaction-scoped advisory lock —
/// class 3; 1 and 2 are the login throttle's — so concurrent creations, on any replica, cannot
/// overshoot), or when its workspace or maker holds `quota` agents (classes 4 and 5).
pub async fn insert(
    pool: &PgPool,
    agent: &NewAgent,
    token_hash: &[u8],
    max_agents: Option<i64>,
    quota: AgentQuota,
) -> Result<(), InsertError> {
    let mut tx = pool.begin().await?;
    // The quotas, counted under locks on the workspace, then the user (always in that order), so
    // concurrent creations cannot both pass.
    sqlx::query_scalar!(
        r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(4, hashtext($1::uuid::text))"#,
        agent.workspace_id
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query_scalar!(
        r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(5, hashtext($1::uuid::text))"#,
        agent.created_by
    )
    .fetch_one(&mut *tx)
    .await?;
    let counts = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE workspace_id = $1) AS "workspace!", count(*) FILTER (WHERE created_by = $2) AS "user!"
           FROM agents WHERE (workspace_id = $1 OR created_by = $2) AND deleting_at IS NULL"#,
        agent.workspace_id,
        agent.created_by
    )
    .fetch_one(&mut *tx)
    .await?;
    if counts.workspace >= quota.per_workspace {
        return Err(InsertError::Quota(format!(
            "the workspace holds {} agents, as many as this server allows (AGENTHOLD_MAX_AGENTS_PER_WORKSPACE)",
            counts.workspace
        )));
    }
    if counts.user >= quota.per_user {
        return Err(InsertError::Quota(format!(
            "you created {} agents, as many as this server allows one person (AGENTHOLD_MAX_AGENTS_PER_USER)",
            counts.user
        )));
    }
    let (engine, capacity) = (&agent.engine.0, agent.engine.1);
    if max_agents.is_some() || capacity.is_some() {
        sqlx::query_scalar!(r#"SELECT 1 AS "locked!" FROM pg_advisory_xact_lock(3, hashtext('agents.insert'))"#)
            .fetch_one(&mut *tx)
            .await?;
    }
    if let Some(max) = max_agents {
        let count = sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM agents"#).fetch_one(&mut *tx).await?;
        if count >= max {
            return Err(InsertError::Full(count));
        }
    }
    if let Some(capacity) = capacity {
        let count =
            sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM agents WHERE engine = $1"#, engine.as_str())
                .fetch_one(&mut *tx)
                .await?;
        if count >= capacity {
            return Err(InsertError::EngineFull(engine.clone()));
        }
    }
    let command = agent.command.as_ref().map(|c| serde_json::json!(c));
    let inserted = sqlx::query!(
        r#"INSERT INTO agents (id, name, harness, command, env, image, driver, cpus, memory_mib, pids_limit,
                              workspace_id, created_by, model, posture, policy, turn_timeout_secs, login_user_id,
                              auto_sleep_secs, engine, disk_mib, auth_method)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $12, $17, $18, $19, $20)
           ON CONFLICT (workspace_id, name) DO NOTHING"#,
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
        agent.workspace_id,
        agent.created_by,
        agent.model,
        agent.posture,
        agent.policy,
        agent.turn_timeout_secs,
        agent.auto_sleep_secs,
        engine.as_str(),
        agent.disk_mib,
        agent.auth_method,
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
    workspace_id: uuid::Uuid,
    created_by: Option<uuid::Uuid>,
    name: String,
    harness: String,
    command: Option<serde_json::Value>,
    model: Option<String>,
    posture: Option<String>,
    policy: Option<serde_json::Value>,
    env: serde_json::Value,
    image: String,
    driver: String,
    engine: String,
    permission_policy: String,
    cpus: f64,
    memory_mib: i32,
    pids_limit: i32,
    disk_mib: Option<i32>,
    turn_timeout_secs: Option<i32>,
    login_user_id: Option<uuid::Uuid>,
    sandbox_login_at: Option<DateTime<Utc>>,
    auto_sleep_secs: Option<i32>,
    auth_method: Option<String>,
    desired_state: String,
    created_at: DateTime<Utc>,
}

impl From<AgentRecord> for AgentRow {
    fn from(r: AgentRecord) -> Self {
        Self {
            id: AgentId(r.id),
            workspace_id: r.workspace_id,
            created_by: r.created_by,
            name: r.name,
            harness: r.harness,
            command: command_from_json(r.command),
            model: r.model,
            posture: r.posture,
            policy: r.policy,
            env: env_from_json(r.env),
            image: r.image,
            driver: r.driver,
            engine: r.engine,
            permission_policy: r.permission_policy,
            cpus: r.cpus,
            memory_mib: r.memory_mib,
            pids_limit: r.pids_limit,
            disk_mib: r.disk_mib,
            turn_timeout_secs: r.turn_timeout_secs,
            login_user_id: r.login_user_id,
            sandbox_login_at: r.sandbox_login_at,
            auto_sleep_secs: r.auto_sleep_secs,
            auth_method: r.auth_method,
            desired_state: r.desired_state,
            created_at: r.created_at,
        }
    }
}

/// One agent, unless it is being deleted.
pub async fn get(pool: &PgPool, id: AgentId) -> sqlx::Result<Option<AgentRow>> {
    fetch(pool, id, false).await
}

/// One agent, also while it is being deleted (to finish a deletion).
pub async fn get_including_deleting(pool: &PgPool, id: AgentId) -> sqlx::Result<Option<AgentRow>> {
    fetch(pool, id, true).await
}

async fn fetch(pool: &PgPool, id: AgentId, including_deleting: bool) -> sqlx::Result<Option<AgentRow>> {
    let row = sqlx::query_as!(
        AgentRecord,
        r#"SELECT id, workspace_id AS "workspace_id!", created_by, name, harness, command, model, posture, policy, env, image,
                  driver, engine,
                  permission_policy, cpus, memory_mib, pids_limit, disk_mib, turn_timeout_secs, login_user_id,
                  sandbox_login_at, auto_sleep_secs, auth_method, desired_state, created_at
           FROM agents WHERE id = $1 AND ($2 OR deleting_at IS NULL)"#,
        id.0,
        including_deleting
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(AgentRow::from))
}

/// The agents in the workspaces a user belongs to, oldest first.
pub async fn list_for_user(pool: &PgPool, user_id: uuid::Uuid) -> sqlx::Result<Vec<AgentRow>> {
    let rows = sqlx::query_as!(
        AgentRecord,
        r#"SELECT a.id, a.workspace_id AS "workspace_id!", a.created_by, a.name, a.harness, a.command, a.model, a.posture, a.policy,
                  a.env,
                  a.image, a.driver, a.engine, a.permission_policy, a.cpus, a.memory_mib, a.pids_limit, a.disk_mib,
                  a.turn_timeout_secs, a.login_user_id, a.sandbox_login_at, a.auto_sleep_secs, a.auth_method,
                  a.desired_state, a.created_at
           FROM agents a JOIN memberships m ON m.workspace_id = a.workspace_id AND m.user_id = $1
           WHERE a.deleting_at IS NULL
           ORDER BY a.created_at, a.id"#,
        user_id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(AgentRow::from).collect())
}

/// Puts agents made before workspaces existed into `workspace_id`.
pub async fn adopt_orphans(pool: &PgPool, workspace_id: uuid::Uuid) -> sqlx::Result<u64> {
    let done = sqlx::query!(r#"UPDATE agents SET workspace_id = $1 WHERE workspace_id IS NULL"#, workspace_id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Marks an agent as being deleted, in its own committed statement, before anything is torn
/// down: from then on it is gone for the API and the supervisor (which creates no sandbox for
/// it). Marking twice keeps the first time. False if it does not exist.
pub async fn mark_deleting(pool: &PgPool, id: AgentId) -> sqlx::Result<bool> {
    let done = sqlx::query!(r#"UPDATE agents SET deleting_at = coalesce(deleting_at, now()) WHERE id = $1"#, id.0)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Whether the agent's deletion was started (and not finished).
pub async fn is_deleting(pool: &PgPool, id: AgentId) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1 AND deleting_at IS NOT NULL) AS "deleting!""#,
        id.0
    )
    .fetch_one(pool)
    .await
}

/// The agents whose deletion was started and not finished, oldest first.
pub async fn deleting(pool: &PgPool) -> sqlx::Result<Vec<AgentId>> {
    let rows = sqlx::query_scalar!(r#"SELECT id FROM agents WHERE deleting_at IS NOT NULL ORDER BY deleting_at, id"#)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(AgentId).collect())
}

/// Deletes an agent with its sandbox row, sessions and their events. False if it did not exist.
pub async fn delete(pool: &PgPool, id: AgentId) -> sqlx::Result<bool> {
    let done = sqlx::query!(r#"DELETE FROM agents WHERE id = $1"#, id.0).execute(pool).await?;
    Ok(done.rows_affected() > 0)
}

/// The Docker engine the agent's sandbox lives on (`None`: no such agent).
pub async fn engine_of(pool: &PgPool, id: AgentId) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(r#"SELECT engine FROM agents WHERE id = $1"#, id.0).fetch_optional(pool).await
}

/// How many agents each Docker engine holds (engines without any are absent).
pub async fn engine_counts(pool: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows =
        sqlx::query!(r#"SELECT engine, count(*) AS "count!" FROM agents GROUP BY engine"#).fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| (r.engine, r.count)).collect())
}

/// Records that someone ran a login method in the agent's terminal.
pub async fn mark_sandbox_login(pool: &PgPool, id: AgentId) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE agents SET sandbox_login_at = now() WHERE id = $1"#, id.0).execute(pool).await?;
    Ok(())
}

/// The auto-sleep times of the agents among `ids` that exist and are not being deleted (their own,
/// or `None` for the server's).
pub async fn auto_sleep_of(pool: &PgPool, ids: &[uuid::Uuid]) -> sqlx::Result<Vec<(AgentId, Option<i32>)>> {
    let rows =
        sqlx::query!(r#"SELECT id, auto_sleep_secs FROM agents WHERE id = ANY($1) AND deleting_at IS NULL"#, ids)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|r| (AgentId(r.id), r.auto_sleep_secs)).collect())
}

/// Which of `ids` are agents (also those being deleted: their objects are the deletion's to remove).
pub async fn existing(pool: &PgPool, ids: &[uuid::Uuid]) -> sqlx::Result<Vec<AgentId>> {
    let rows = sqlx::query_scalar!(r#"SELECT id FROM agents WHERE id = ANY($1)"#, ids).fetch_all(pool).await?;
    Ok(rows.into_iter().map(AgentId).collect())
}

/// Records whether the user wants the agent awake or asleep (not for an agent being deleted).
pub async fn set_desired_state(pool: &PgPool, id: AgentId, state: &str) -> sqlx::Result<bool> {
    let done =
        sqlx::query!(r#"UPDATE agents SET desired_state = $2 WHERE id = $1 AND deleting_at IS NULL"#, id.0, state)
            .execute(pool)
            .await?;
    Ok(done.rows_affected() > 0)
}

/// What `PATCH /api/v1/agents/{id}` changes (validated by the caller).
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// The harness adapter's name.
    pub harness: String,
    /// argv for the `command` harness.
    pub command: Option<Vec<String>>,
    /// The model.
    pub model: Option<String>,
    /// Its own posture.
    pub posture: Option<String>,
    /// Its policy.
    pub policy: Option<serde_json::Value>,
    /// Non-secret environment.
    pub env: Vec<(String, String)>,
    /// The image.
    pub image: String,
    /// CPU limit.
    pub cpus: f64,
    /// Memory limit.
    pub memory_mib: i32,
    /// Process limit.
    pub pids_limit: i32,
    /// Disk space (MiB; `None`: the server's default).
    pub disk_mib: Option<i32>,
    /// Turn time limit (seconds of activity; `None`: the server's).
    pub turn_timeout_secs: Option<i32>,
    /// Its own auto-sleep time.
    pub auto_sleep_secs: Option<i32>,
    /// The login method it names.
    pub auth_method: Option<String>,
}

/// Replaces an agent's settings (not for an agent being deleted). False if there is no such agent.
pub async fn update(pool: &PgPool, id: AgentId, settings: &AgentSettings) -> sqlx::Result<bool> {
    let command = settings.command.as_ref().map(|c| serde_json::json!(c));
    let done = sqlx::query!(
        r#"UPDATE agents SET harness = $2, command = $3, model = $4, env = $5, image = $6, cpus = $7,
                             memory_mib = $8, pids_limit = $9, posture = $10, policy = $11,
                             turn_timeout_secs = $12, auto_sleep_secs = $13, disk_mib = $14, auth_method = $15
           WHERE id = $1 AND deleting_at IS NULL"#,
        id.0,
        settings.harness,
        command,
        settings.model,
        env_to_json(&settings.env),
        settings.image,
        settings.cpus,
        settings.memory_mib,
        settings.pids_limit,
        settings.posture,
        settings.policy,
        settings.turn_timeout_secs,
        settings.auto_sleep_secs,
        settings.disk_mib,
        settings.auth_method,
    )
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}
