//! `/api/v1/agents/{id}/schedules` and `/api/v1/schedules/{id}…`: an agent's schedules — a cron
//! expression in a time zone and a prompt, run in a new session each time or in a named one;
//! paused and resumed; their next and last run, and their recent runs. The agent's operators
//! set them up (audited with who did it); its viewers see them. Running them is
//! [`crate::triggers::scheduler`]'s.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::{Id, RawBody, parse_json};
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::{AgentId, AgentName, SessionId, TurnId};
use crate::state::AppState;
use crate::store;
use crate::store::agents::AgentRow;
use crate::store::audit::AuditRecord;
use crate::store::schedules::{Change, InsertError, NewSchedule, RunRow, ScheduleRow};
use crate::store::users::Role;
use crate::triggers::cron::{Spec, SpecError};

/// Longest prompt a schedule holds, in bytes.
const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Runs one `GET …/runs` shows.
const RUNS_SHOWN: i64 = 50;

/// `POST /api/v1/agents/{id}/schedules`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSchedule {
    /// 1-64 characters of a-z, 0-9, `-`, `_`, `.`; unique among the agent's schedules.
    name: String,
    /// Five fields (minute hour day-of-month month day-of-week) or six (seconds first).
    cron: String,
    /// An IANA time zone (`Europe/Berlin`); default `UTC`.
    time_zone: Option<String>,
    /// The prompt's text.
    prompt: String,
    /// A session of the agent's every run appends to; absent: a new session per run.
    session_id: Option<SessionId>,
    /// Created paused; default `false`.
    #[serde(default)]
    paused: bool,
}

/// `PATCH /api/v1/schedules/{id}`: each field absent is kept.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSchedule {
    /// A new expression.
    cron: Option<String>,
    /// A new time zone.
    time_zone: Option<String>,
    /// A new prompt.
    prompt: Option<String>,
    /// `true` pauses, `false` resumes (from the next slot after now: what fell due while paused
    /// does not run).
    paused: Option<bool>,
}

/// A schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct Schedule {
    /// Its id.
    id: Uuid,
    /// Its agent.
    agent_id: AgentId,
    /// Its name.
    name: String,
    /// The cron expression.
    cron: String,
    /// The IANA time zone its expression is read in.
    time_zone: String,
    /// The prompt's text.
    prompt: String,
    /// The session each run appends to (`null`: a new session per run).
    #[schema(required = true)]
    session_id: Option<SessionId>,
    /// Paused: not run.
    paused: bool,
    /// Why, when not by a person: `creator_left` (its maker left the workspace or lost the
    /// operator role; an admin resumes it).
    #[schema(required = true)]
    paused_reason: Option<String>,
    /// When it runs next (`null` while paused).
    #[schema(required = true)]
    next_run_at: Option<DateTime<Utc>>,
    /// When it last ran or was skipped.
    #[schema(required = true)]
    last_run_at: Option<DateTime<Utc>>,
    /// Who set it up.
    #[schema(required = true)]
    created_by: Option<Uuid>,
    /// When.
    created_at: DateTime<Utc>,
}

impl From<&ScheduleRow> for Schedule {
    fn from(row: &ScheduleRow) -> Self {
        Self {
            id: row.id,
            agent_id: row.agent_id,
            name: row.name.clone(),
            cron: row.cron.clone(),
            time_zone: row.time_zone.clone(),
            prompt: row.prompt.clone(),
            session_id: row.session_id,
            paused: row.paused,
            paused_reason: row.paused_reason.clone(),
            next_run_at: (!row.paused).then_some(row.next_run_at),
            last_run_at: row.last_run_at,
            created_by: row.created_by,
            created_at: row.created_at,
        }
    }
}

/// An agent's schedules.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    /// By name.
    schedules: Vec<Schedule>,
}

/// One run of a schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleRun {
    /// Its id (the `run_id` of its prompt's origin).
    id: Uuid,
    /// The slot it ran for.
    due_at: DateTime<Utc>,
    /// When it ran.
    ran_at: DateTime<Utc>,
    /// `started` (a turn started) or `skipped` (the previous run, or another turn of the
    /// session, was still going: a `notice` in that session says so).
    outcome: String,
    /// Why it was skipped.
    #[schema(required = true)]
    reason: Option<String>,
    /// The session it prompted, or whose turn was still going.
    #[schema(required = true)]
    session_id: Option<SessionId>,
    /// The turn it started.
    #[schema(required = true)]
    turn_id: Option<TurnId>,
}

impl From<RunRow> for ScheduleRun {
    fn from(run: RunRow) -> Self {
        Self {
            id: run.id,
            due_at: run.due_at,
            ran_at: run.ran_at,
            outcome: run.outcome,
            reason: run.reason,
            session_id: run.session_id,
            turn_id: run.turn_id,
        }
    }
}

/// A schedule's recent runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleRuns {
    /// Newest first (at most 50).
    runs: Vec<ScheduleRun>,
}

/// Runs looked at for the shortest gap between two (a year of a daily schedule's, two days of
/// an hourly one's: enough to see an uneven expression's tightest pair).
const GAP_RUNS: usize = 400;

/// The expression and zone checked: the spec, or a 400 naming the bad one; one that would run
/// twice within the server's minimum interval is `400 INTERVAL_TOO_SHORT`.
fn check_spec(state: &AppState, cron: &str, zone: &str) -> Result<Spec, ApiError> {
    let spec = Spec::parse(cron, zone).map_err(|error| match error {
        SpecError::Cron { .. } => ApiError::bad_request(ErrorCode::InvalidCron, error.to_string()),
        SpecError::TimeZone(_) => ApiError::bad_request(ErrorCode::InvalidTimeZone, error.to_string()),
    })?;
    let minimum = state.config.schedule_min_interval_secs;
    if let Some(gap) = spec.shortest_gap(Utc::now(), GAP_RUNS)
        && gap.num_seconds() < minimum
    {
        return Err(ApiError::bad_request(
            ErrorCode::IntervalTooShort,
            format!(
                "{cron:?} runs {} s apart; this server allows runs at least {minimum} s apart (AGENTHOLD_SCHEDULE_MIN_INTERVAL_SECS)",
                gap.num_seconds()
            ),
        ));
    }
    Ok(spec)
}

fn check_prompt(prompt: &str) -> Result<(), ApiError> {
    if prompt.trim().is_empty() {
        return Err(ApiError::bad_request(ErrorCode::InvalidPrompt, "the prompt is empty"));
    }
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidPrompt,
            format!("the prompt is over {MAX_PROMPT_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// A session a trigger appends to: one of the agent's own.
pub(super) async fn check_session(state: &AppState, agent: &AgentRow, id: Option<SessionId>) -> Result<(), ApiError> {
    let Some(id) = id else { return Ok(()) };
    match store::sessions::get(&state.pool, id).await? {
        Some(session) if session.agent_id == agent.id => Ok(()),
        _ => Err(ApiError::bad_request(ErrorCode::InvalidSession, format!("session {id} is not one of the agent's"))),
    }
}

/// The next slot after now, or a 400 when there is none.
fn next_after_now(spec: &Spec, cron: &str) -> Result<DateTime<Utc>, ApiError> {
    spec.next_after(Utc::now()).ok_or_else(|| {
        ApiError::bad_request(ErrorCode::InvalidCron, format!("cron expression {cron:?}: it is never due"))
    })
}

/// A schedule the caller has at least `needed` on (through its agent), with its agent.
async fn visible_schedule(
    state: &AppState,
    principal: &Principal,
    id: Uuid,
    needed: Role,
) -> Result<(ScheduleRow, AgentRow), ApiError> {
    let schedule = store::schedules::get(&state.pool, id).await?.ok_or(ApiError::NotFound("schedule"))?;
    match visible_agent(state, principal, schedule.agent_id, needed).await {
        Ok(agent) => Ok((schedule, agent)),
        Err(ApiError::NotFound(_)) => Err(ApiError::NotFound("schedule")),
        Err(other) => Err(other),
    }
}

async fn audit(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRow,
    schedule: &ScheduleRow,
    action: &'static str,
    detail: serde_json::Value,
) -> Result<(), ApiError> {
    let mut detail = detail;
    detail["name"] = json!(schedule.name);
    detail["agent_id"] = json!(agent.id);
    let record = AuditRecord {
        workspace_id: agent.workspace_id,
        actor_user_id: Some(principal.user_id),
        action,
        resource_type: "schedule",
        resource_id: schedule.id.to_string(),
        detail,
    };
    store::audit::append(&state.pool, record).await?;
    Ok(())
}

/// Creates a schedule (the agent's operators; the role is checked before the body is read).
/// Audited as `schedule.created`.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{id}/schedules",
    operation_id = "create_schedule",
    tag = "triggers",
    request_body = CreateSchedule,
    responses(
        (status = 201, description = "The schedule", body = Schedule),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_NAME`, `INVALID_CRON`, \
            `INVALID_TIME_ZONE`, `INVALID_PROMPT`, `INVALID_SESSION`", body = ErrorBody),
        (status = 409, description = "`NAME_TAKEN`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    let agent = visible_agent(&state, &principal, agent_id, Role::Operator).await?;
    let body: CreateSchedule = parse_json(&body)?;
    let name = AgentName::parse(&body.name).map_err(|m| ApiError::bad_request(ErrorCode::InvalidName, m))?;
    let time_zone = body.time_zone.unwrap_or_else(|| "UTC".to_owned());
    let spec = check_spec(&state, &body.cron, &time_zone)?;
    check_prompt(&body.prompt)?;
    check_session(&state, &agent, body.session_id).await?;
    let new = NewSchedule {
        id: Uuid::new_v4(),
        agent_id,
        name: name.as_str(),
        cron: body.cron.trim(),
        time_zone: &time_zone,
        prompt: &body.prompt,
        session_id: body.session_id,
        paused: body.paused,
        next_run_at: next_after_now(&spec, &body.cron)?,
        created_by: principal.user_id,
    };
    match store::schedules::insert(&state.pool, &new, state.config.max_schedules_per_workspace).await {
        Ok(()) => {}
        Err(InsertError::Quota(message)) => return Err(ApiError::conflict(ErrorCode::QuotaExceeded, message)),
        Err(InsertError::NameTaken) => {
            return Err(ApiError::conflict(
                ErrorCode::NameTaken,
                format!("the agent has a schedule named {:?}", new.name),
            ));
        }
        Err(InsertError::Db(error)) => return Err(error.into()),
    }
    let row = store::schedules::get(&state.pool, new.id).await?.ok_or(ApiError::NotFound("schedule"))?;
    let detail =
        json!({"cron": row.cron, "time_zone": row.time_zone, "session_id": row.session_id, "paused": row.paused});
    audit(&state, &principal, &agent, &row, "schedule.created", detail).await?;
    Ok((StatusCode::CREATED, Json(Schedule::from(&row))))
}

/// Lists an agent's schedules.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/schedules",
    operation_id = "list_schedules",
    tag = "triggers",
    responses((status = 200, description = "The schedules", body = ScheduleList)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    Id(agent_id): Id<AgentId>,
) -> Result<Json<ScheduleList>, ApiError> {
    visible_agent(&state, &principal, agent_id, Role::Viewer).await?;
    let rows = store::schedules::list(&state.pool, agent_id).await?;
    Ok(Json(ScheduleList { schedules: rows.iter().map(Schedule::from).collect() }))
}

/// Shows a schedule with its next and last run.
#[utoipa::path(
    get,
    path = "/api/v1/schedules/{id}",
    operation_id = "show_schedule",
    tag = "triggers",
    responses((status = 200, description = "The schedule", body = Schedule)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<Schedule>, ApiError> {
    let (schedule, _) = visible_schedule(&state, &principal, id, Role::Viewer).await?;
    Ok(Json(Schedule::from(&schedule)))
}

/// A schedule's recent runs, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/schedules/{id}/runs",
    operation_id = "list_schedule_runs",
    tag = "triggers",
    responses((status = 200, description = "Its runs", body = ScheduleRuns)),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn runs(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<Json<ScheduleRuns>, ApiError> {
    visible_schedule(&state, &principal, id, Role::Viewer).await?;
    let runs = store::schedules::runs(&state.pool, id, RUNS_SHOWN).await?;
    Ok(Json(ScheduleRuns { runs: runs.into_iter().map(ScheduleRun::from).collect() }))
}

/// Changes a schedule: its expression, zone or prompt; `paused` pauses or resumes it (the
/// agent's operators; the role is checked before the body is read; a schedule paused because its
/// maker left is resumed by an admin, who then stands behind it). A new expression or zone, or
/// a resume, runs next at the first slot after now. Audited as `schedule.changed` (or
/// `schedule.paused`, `schedule.resumed`).
#[utoipa::path(
    patch,
    path = "/api/v1/schedules/{id}",
    operation_id = "update_schedule",
    tag = "triggers",
    request_body = UpdateSchedule,
    responses(
        (status = 200, description = "The schedule as changed", body = Schedule),
        (status = 400, description = "`INVALID_BODY`, `NUL_CHARACTER`, `INVALID_CRON`, `INVALID_TIME_ZONE`, \
            `INVALID_PROMPT`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn update(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
    RawBody(body): RawBody,
) -> Result<Json<Schedule>, ApiError> {
    let (schedule, agent) = visible_schedule(&state, &principal, id, Role::Operator).await?;
    let body: UpdateSchedule = parse_json(&body)?;
    let cron = body.cron.as_deref().map(str::trim).unwrap_or(&schedule.cron);
    let time_zone = body.time_zone.as_deref().unwrap_or(&schedule.time_zone);
    let spec = check_spec(&state, cron, time_zone)?;
    if let Some(prompt) = &body.prompt {
        check_prompt(prompt)?;
    }
    let resumed = body.paused == Some(false) && schedule.paused;
    // One paused because its maker left acts on behalf of whoever resumes it: an admin.
    let maker_left = schedule.paused_reason.as_deref() == Some("creator_left");
    if resumed && maker_left {
        principal.require(&state, agent.workspace_id, Role::Admin, "schedule").await?;
    }
    let respec = body.cron.is_some() || body.time_zone.is_some();
    let next_run_at = if resumed || respec { Some(next_after_now(&spec, cron)?) } else { None };
    let change = Change {
        cron: body.cron.as_deref().map(str::trim),
        time_zone: body.time_zone.as_deref(),
        prompt: body.prompt.as_deref(),
        paused: body.paused,
        next_run_at,
        resumed_by: (resumed && maker_left).then_some(principal.user_id),
    };
    if !store::schedules::update(&state.pool, id, &change).await? {
        return Err(ApiError::NotFound("schedule"));
    }
    let row = store::schedules::get(&state.pool, id).await?.ok_or(ApiError::NotFound("schedule"))?;
    let mut fields: Vec<&str> = Vec::new();
    for (field, given) in
        [("cron", body.cron.is_some()), ("time_zone", body.time_zone.is_some()), ("prompt", body.prompt.is_some())]
    {
        if given {
            fields.push(field);
        }
    }
    let action = match (body.paused, schedule.paused) {
        (Some(true), false) if fields.is_empty() => Some("schedule.paused"),
        (Some(false), true) if fields.is_empty() => Some("schedule.resumed"),
        _ if fields.is_empty() && body.paused.is_none_or(|p| p == schedule.paused) => None,
        _ => Some("schedule.changed"),
    };
    if let Some(action) = action {
        let detail = json!({"changed": fields, "cron": row.cron, "time_zone": row.time_zone, "paused": row.paused});
        audit(&state, &principal, &agent, &row, action, detail).await?;
    }
    Ok(Json(Schedule::from(&row)))
}

/// Deletes a schedule and its runs (the agent's operators). Audited as `schedule.deleted`.
#[utoipa::path(
    delete,
    path = "/api/v1/schedules/{id}",
    operation_id = "delete_schedule",
    tag = "triggers",
    responses((status = 204, description = "Deleted")),
    extensions(("x-agenthold-access" = json!(Access::Operator))),
)]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<Uuid>,
) -> Result<StatusCode, ApiError> {
    let (schedule, agent) = visible_schedule(&state, &principal, id, Role::Operator).await?;
    if !store::schedules::delete(&state.pool, id).await? {
        return Err(ApiError::NotFound("schedule"));
    }
    audit(&state, &principal, &agent, &schedule, "schedule.deleted", json!({})).await?;
    Ok(StatusCode::NO_CONTENT)
}
