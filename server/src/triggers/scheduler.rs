//! The scheduler: every `AGENTHOLD_SCHEDULER_TICK_MS` it runs the schedules that are due, one
//! transaction each. A run claims its schedule's row (`FOR UPDATE SKIP LOCKED`, so replicas never
//! run the same slot), records the run and advances `next_run_at` in that same transaction, and
//! only then hands its turn over. A run that finds the schedule's previous turn unfinished (or
//! its session busy) is skipped with a `notice` in that session, never stacked. Slots missed
//! while no server ran make one run ([`super::cron::due`]). A schedule acts on behalf of the member
//! who made it: one whose maker is no longer an operator of the agent's workspace is paused
//! (`creator_left`) instead of run, until an admin resumes it.

use std::time::Duration;

use chrono::Utc;
use uuid::Uuid;

use super::cron::{self, Spec};
use crate::events::{NewEvent, NoticeCode};
use crate::ids::SessionId;
use crate::prompting::{self, Origin, Recorded};
use crate::state::AppState;
use crate::store;
use crate::store::schedules::{RunRow, ScheduleRow};
use crate::store::sessions::TurnError;

/// Runs the scheduler until `stop` turns `true`.
pub fn spawn(
    state: AppState,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            match tick(&state).await {
                Ok(_) => failing = false,
                // Logged once per outage, not every tick.
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(error = format!("{error:#}"), "the scheduler could not run due schedules");
                }
                Err(_) => {}
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    })
}

/// Runs every schedule due now; how many runs it made (started or skipped).
pub async fn tick(state: &AppState) -> anyhow::Result<usize> {
    let mut runs = 0;
    while run_one(state).await? {
        runs += 1;
    }
    Ok(runs)
}

/// What one run did, to hand over once committed.
enum Done {
    Started(Recorded),
    Skipped(store::events::Appended),
}

/// Claims and runs one due schedule; `false` when none is due.
async fn run_one(state: &AppState) -> anyhow::Result<bool> {
    let mut tx = state.pool.begin().await?;
    let now = Utc::now();
    let Some((schedule, maker_stands)) = store::schedules::claim_due(&mut tx, now).await? else {
        return Ok(false);
    };
    if !maker_stands {
        store::schedules::pause_for_maker(&mut tx, schedule.id).await?;
        tx.commit().await?;
        metrics::counter!("agenthold_schedule_runs_total", "outcome" => "paused").increment(1);
        tracing::info!(schedule.id = %schedule.id, "a schedule's maker left its workspace (or lost the operator role): paused");
        return Ok(true);
    }
    let next = match Spec::parse(&schedule.cron, &schedule.time_zone) {
        Ok(spec) => cron::due(&spec, schedule.next_run_at, now).and_then(|due| due.next),
        // Checked when stored; should a zone vanish from a later build's database, this run
        // goes ahead and the schedule is paused (no next run).
        Err(error) => {
            tracing::warn!(schedule.id = %schedule.id, error = %error, "a schedule no longer parses: it runs once more, then is paused");
            None
        }
    };
    let run_id = Uuid::new_v4();
    let mut run = RunRow {
        id: run_id,
        due_at: schedule.next_run_at,
        ran_at: now,
        outcome: "skipped".to_owned(),
        reason: None,
        session_id: None,
        turn_id: None,
    };
    let done = run_schedule(&mut tx, &schedule, &mut run, Quotas::of(state)).await?;
    store::schedules::record_run(&mut tx, schedule.id, &run, next).await?;
    match done {
        Done::Started(recorded) => {
            let turn_id = recorded.turn_id;
            prompting::hand_over(state, tx, recorded).await?;
            metrics::counter!("agenthold_schedule_runs_total", "outcome" => "started").increment(1);
            tracing::info!(schedule.id = %schedule.id, turn.id = %turn_id, "a schedule started a turn");
        }
        Done::Skipped(stored) => {
            stored.commit(tx, |stored| prompting::publish(state, &stored)).await?;
            metrics::counter!("agenthold_schedule_runs_total", "outcome" => "skipped").increment(1);
            tracing::info!(schedule.id = %schedule.id, reason = run.reason.as_deref().unwrap_or(""), "a schedule's run was skipped");
        }
    }
    Ok(true)
}

/// The quotas a run is held to.
#[derive(Clone, Copy)]
struct Quotas {
    sessions: i64,
    event_bytes: i64,
}

impl Quotas {
    fn of(state: &AppState) -> Self {
        Self { sessions: state.config.max_sessions_per_agent, event_bytes: state.config.max_event_bytes_per_agent }
    }
}

/// Starts the run's turn inside `tx`, or skips it with a notice; fills in `run`.
async fn run_schedule(
    tx: &mut sqlx::PgConnection,
    schedule: &ScheduleRow,
    run: &mut RunRow,
    quotas: Quotas,
) -> anyhow::Result<Done> {
    // The previous run's turn still going: skipped, told in its session.
    if let Some(last) = schedule.last_turn_id
        && let Some(session_id) = store::schedules::turn_is_open(tx, last).await?
    {
        let reason = format!(
            "schedule {:?}: the run due at {} was skipped: the previous run is still going",
            schedule.name,
            run.due_at.to_rfc3339()
        );
        return skip(tx, run, session_id, reason).await;
    }
    let session_id = match schedule.session_id {
        Some(session_id) => session_id,
        None => {
            let session_id = SessionId::new();
            match store::sessions::create_in(tx, session_id, schedule.agent_id, quotas.sessions).await {
                Ok(()) => session_id,
                Err(store::quotas::QuotaError::Exceeded(message)) => {
                    // No session to tell: the run's record says why.
                    run.outcome = "skipped".to_owned();
                    run.reason = Some(format!(
                        "schedule {:?}: the run due at {} was skipped: {message}",
                        schedule.name,
                        run.due_at.to_rfc3339()
                    ));
                    return Ok(Done::Skipped(store::events::Appended::none()));
                }
                Err(store::quotas::QuotaError::Db(error)) => return Err(error.into()),
            }
        }
    };
    let origin = Origin::schedule(schedule.id, run.id);
    let blocks = prompting::text_blocks(&schedule.prompt);
    let turn_id = crate::ids::TurnId::new();
    match prompting::record(tx, turn_id, session_id, schedule.agent_id, &blocks, &origin, quotas.event_bytes).await {
        Ok(recorded) => {
            run.outcome = "started".to_owned();
            run.session_id = Some(session_id);
            run.turn_id = Some(recorded.turn_id);
            Ok(Done::Started(recorded))
        }
        Err(TurnError::InProgress) => {
            let reason = format!(
                "schedule {:?}: the run due at {} was skipped: the session has a turn in progress",
                schedule.name,
                run.due_at.to_rfc3339()
            );
            skip(tx, run, session_id, reason).await
        }
        Err(TurnError::Quota(message)) => {
            let reason = format!(
                "schedule {:?}: the run due at {} was skipped: {message}",
                schedule.name,
                run.due_at.to_rfc3339()
            );
            skip(tx, run, session_id, reason).await
        }
        Err(TurnError::Db(error)) => Err(error.into()),
    }
}

async fn skip(
    tx: &mut sqlx::PgConnection,
    run: &mut RunRow,
    session_id: SessionId,
    reason: String,
) -> anyhow::Result<Done> {
    let notice = NewEvent::notice(session_id, NoticeCode::ScheduleSkipped, reason.clone());
    let stored = store::events::append(tx, vec![notice]).await?;
    run.session_id = Some(session_id);
    run.reason = Some(reason);
    Ok(Done::Skipped(stored))
}
