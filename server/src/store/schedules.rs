//! The `schedules` and `schedule_runs` tables. The scheduler claims a due schedule with
//! `FOR UPDATE SKIP LOCKED` and records its run and advances `next_run_at` in the same
//! transaction, so with any number of replicas each slot runs once.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::{AgentId, SessionId, TurnId};

/// A schedule as stored.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    /// Its id.
    pub id: Uuid,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its name (unique per agent).
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The IANA time zone.
    pub time_zone: String,
    /// The prompt's text.
    pub prompt: String,
    /// The session each run appends to (`None`: a new session per run).
    pub session_id: Option<SessionId>,
    /// Paused: not run.
    pub paused: bool,
    /// Why, when not by a person: `creator_left` (its maker left the workspace or lost the
    /// operator role).
    pub paused_reason: Option<String>,
    /// When it is due next.
    pub next_run_at: DateTime<Utc>,
    /// When it last ran (or was skipped).
    pub last_run_at: Option<DateTime<Utc>>,
    /// The turn its last started run made.
    pub last_turn_id: Option<TurnId>,
    /// Who set it up.
    pub created_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// A new schedule.
#[derive(Debug)]
pub struct NewSchedule<'a> {
    /// Its id.
    pub id: Uuid,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its name.
    pub name: &'a str,
    /// The cron expression (checked).
    pub cron: &'a str,
    /// The time zone (checked).
    pub time_zone: &'a str,
    /// The prompt's text.
    pub prompt: &'a str,
    /// A session of the agent's, or `None`.
    pub session_id: Option<SessionId>,
    /// Paused from the start.
    pub paused: bool,
    /// When it is first due.
    pub next_run_at: DateTime<Utc>,
    /// Who sets it up.
    pub created_by: Uuid,
}

/// The name is taken on this agent.
#[derive(Debug, thiserror::Error)]
pub enum InsertError {
    /// Another schedule of the agent has the name.
    #[error("the name is taken")]
    NameTaken,
    /// The workspace holds as many schedules as the server allows.
    #[error("{0}")]
    Quota(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn map_insert(error: sqlx::Error) -> InsertError {
    match &error {
        sqlx::Error::Database(e) if e.is_unique_violation() => InsertError::NameTaken,
        _ => InsertError::Db(error),
    }
}

/// Inserts a schedule, unless the agent's workspace holds `max` already.
pub async fn insert(pool: &PgPool, s: &NewSchedule<'_>, max: i64) -> Result<(), InsertError> {
    let mut tx = pool.begin().await?;
    match super::quotas::schedules_of_workspace(&mut tx, s.agent_id, max).await {
        Ok(()) => {}
        Err(super::quotas::QuotaError::Exceeded(message)) => return Err(InsertError::Quota(message)),
        Err(super::quotas::QuotaError::Db(error)) => return Err(error.into()),
    }
    sqlx::query!(
        r#"INSERT INTO schedules (id, agent_id, name, cron, time_zone, prompt, session_id, paused, next_run_at, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"#,
        s.id,
        s.agent_id.0,
        s.name,
        s.cron,
        s.time_zone,
        s.prompt,
        s.session_id.map(|id| id.0),
        s.paused,
        s.next_run_at,
        s.created_by
    )
    .execute(&mut *tx)
    .await
    .map_err(map_insert)?;
    tx.commit().await?;
    Ok(())
}

macro_rules! row {
    ($r:expr) => {
        ScheduleRow {
            id: $r.id,
            agent_id: AgentId($r.agent_id),
            name: $r.name,
            cron: $r.cron,
            time_zone: $r.time_zone,
            prompt: $r.prompt,
            session_id: $r.session_id.map(SessionId),
            paused: $r.paused,
            paused_reason: $r.paused_reason,
            next_run_at: $r.next_run_at,
            last_run_at: $r.last_run_at,
            last_turn_id: $r.last_turn_id.map(TurnId),
            created_by: $r.created_by,
            created_at: $r.created_at,
        }
    };
}

/// One schedule (of an agent not being deleted).
pub async fn get(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<ScheduleRow>> {
    let row = sqlx::query!(
        r#"SELECT s.id, s.agent_id, s.name, s.cron, s.time_zone, s.prompt, s.session_id, s.paused, s.paused_reason, s.next_run_at,
                  s.last_run_at, s.last_turn_id, s.created_by, s.created_at
           FROM schedules s JOIN agents a ON a.id = s.agent_id
           WHERE s.id = $1 AND a.deleting_at IS NULL"#,
        id
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| row!(r)))
}

/// An agent's schedules, by name.
pub async fn list(pool: &PgPool, agent_id: AgentId) -> sqlx::Result<Vec<ScheduleRow>> {
    let rows = sqlx::query!(
        r#"SELECT id, agent_id, name, cron, time_zone, prompt, session_id, paused, paused_reason, next_run_at,
                  last_run_at, last_turn_id, created_by, created_at
           FROM schedules WHERE agent_id = $1 ORDER BY name"#,
        agent_id.0
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| row!(r)).collect())
}

/// What a change sets (each `None` is kept).
#[derive(Debug, Default)]
pub struct Change<'a> {
    /// A new expression (checked).
    pub cron: Option<&'a str>,
    /// A new zone (checked).
    pub time_zone: Option<&'a str>,
    /// A new prompt.
    pub prompt: Option<&'a str>,
    /// Paused or resumed.
    pub paused: Option<bool>,
    /// When it is due next (computed again whenever expression, zone or pause change).
    pub next_run_at: Option<DateTime<Utc>>,
    /// Resumed by this user, who stands behind it from now on.
    pub resumed_by: Option<Uuid>,
}

/// Changes a schedule; `false` when it is gone.
pub async fn update(pool: &PgPool, id: Uuid, change: &Change<'_>) -> sqlx::Result<bool> {
    let updated = sqlx::query!(
        r#"UPDATE schedules SET cron = COALESCE($2, cron), time_zone = COALESCE($3, time_zone),
                  prompt = COALESCE($4, prompt), paused = COALESCE($5, paused),
                  paused_reason = CASE WHEN $5 IS NULL THEN paused_reason ELSE NULL END,
                  next_run_at = COALESCE($6, next_run_at), created_by = COALESCE($7, created_by)
           WHERE id = $1"#,
        id,
        change.cron,
        change.time_zone,
        change.prompt,
        change.paused,
        change.next_run_at,
        change.resumed_by
    )
    .execute(pool)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// Deletes a schedule; `false` when it was gone.
pub async fn delete(pool: &PgPool, id: Uuid) -> sqlx::Result<bool> {
    let deleted = sqlx::query!(r#"DELETE FROM schedules WHERE id = $1"#, id).execute(pool).await?;
    Ok(deleted.rows_affected() == 1)
}

/// Claims the schedule due longest ago (not paused, its agent not being deleted), locking its
/// row until `tx` ends; rows another replica holds are skipped. With it, whether its maker is
/// still an operator (or admin) of the agent's workspace.
pub async fn claim_due(tx: &mut sqlx::PgConnection, now: DateTime<Utc>) -> sqlx::Result<Option<(ScheduleRow, bool)>> {
    let row = sqlx::query!(
        r#"SELECT s.id, s.agent_id, s.name, s.cron, s.time_zone, s.prompt, s.session_id, s.paused, s.paused_reason,
                  s.next_run_at, s.last_run_at, s.last_turn_id, s.created_by, s.created_at,
                  EXISTS (SELECT 1 FROM memberships m JOIN agents a ON a.workspace_id = m.workspace_id
                          WHERE a.id = s.agent_id AND m.user_id = s.created_by
                            AND m.role IN ('operator', 'admin')) AS "maker_stands!"
           FROM schedules s
           WHERE NOT s.paused AND s.next_run_at <= $1
             AND EXISTS (SELECT 1 FROM agents a WHERE a.id = s.agent_id AND a.deleting_at IS NULL)
           ORDER BY s.next_run_at
           LIMIT 1
           FOR UPDATE OF s SKIP LOCKED"#,
        now
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.map(|r| {
        let stands = r.maker_stands;
        (row!(r), stands)
    }))
}

/// Pauses a schedule whose maker no longer stands behind it (`creator_left`).
pub async fn pause_for_maker(tx: &mut sqlx::PgConnection, id: Uuid) -> sqlx::Result<()> {
    sqlx::query!(r#"UPDATE schedules SET paused = true, paused_reason = 'creator_left' WHERE id = $1"#, id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Whether a turn is unfinished.
pub async fn turn_is_open(tx: &mut sqlx::PgConnection, turn_id: TurnId) -> sqlx::Result<Option<SessionId>> {
    let session = sqlx::query_scalar!(r#"SELECT session_id FROM turns WHERE id = $1 AND state <> 'ended'"#, turn_id.0)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(session.map(SessionId))
}

/// A run as recorded.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// Its id.
    pub id: Uuid,
    /// The slot it ran for.
    pub due_at: DateTime<Utc>,
    /// When it ran.
    pub ran_at: DateTime<Utc>,
    /// `started` or `skipped`.
    pub outcome: String,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// The session it prompted (or whose turn was still going).
    pub session_id: Option<SessionId>,
    /// The turn it started.
    pub turn_id: Option<TurnId>,
}

/// Records a run and moves the schedule on, inside the claiming transaction.
pub async fn record_run(
    tx: &mut sqlx::PgConnection,
    schedule_id: Uuid,
    run: &RunRow,
    next_run_at: Option<DateTime<Utc>>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"INSERT INTO schedule_runs (id, schedule_id, due_at, ran_at, outcome, reason, session_id, turn_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"#,
        run.id,
        schedule_id,
        run.due_at,
        run.ran_at,
        run.outcome,
        run.reason,
        run.session_id.map(|id| id.0),
        run.turn_id.map(|id| id.0)
    )
    .execute(&mut *tx)
    .await?;
    // A schedule never due again is paused where it stands.
    sqlx::query!(
        r#"UPDATE schedules SET last_run_at = $2, last_turn_id = COALESCE($3, last_turn_id),
                  next_run_at = COALESCE($4, next_run_at), paused = paused OR $4::timestamptz IS NULL
           WHERE id = $1"#,
        schedule_id,
        run.ran_at,
        run.turn_id.map(|id| id.0),
        next_run_at
    )
    .execute(&mut *tx)
    .await?;
    // Keep the newest runs only.
    sqlx::query!(
        r#"DELETE FROM schedule_runs WHERE schedule_id = $1 AND id NOT IN
             (SELECT id FROM schedule_runs WHERE schedule_id = $1 ORDER BY ran_at DESC LIMIT $2)"#,
        schedule_id,
        KEPT_RUNS
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Runs kept per schedule.
pub const KEPT_RUNS: i64 = 100;

/// A schedule's newest runs, newest first.
pub async fn runs(pool: &PgPool, schedule_id: Uuid, limit: i64) -> sqlx::Result<Vec<RunRow>> {
    let rows = sqlx::query!(
        r#"SELECT id, due_at, ran_at, outcome, reason, session_id, turn_id FROM schedule_runs
           WHERE schedule_id = $1 ORDER BY ran_at DESC, id LIMIT $2"#,
        schedule_id,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RunRow {
            id: r.id,
            due_at: r.due_at,
            ran_at: r.ran_at,
            outcome: r.outcome,
            reason: r.reason,
            session_id: r.session_id.map(SessionId),
            turn_id: r.turn_id.map(TurnId),
        })
        .collect())
}
