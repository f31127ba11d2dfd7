//! `GET /api/v1/agents/{id}/usage?days=`: what an agent's turns used over the last days, the same
//! for every harness — tokens (input, output, cached reads and writes, reasoning) and cost per
//! currency, in total, by UTC day (every day of the window, for a chart) and by session (newest
//! first). A turn's cost is its share of its session's cost as the harness reported it
//! (`store::sessions::end_turn`); harnesses that report none (Claude Code and Codex report tokens
//! only) count tokens alone.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};
use chrono::{Duration, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::agents::visible_agent;
use super::error::{ApiError, ErrorBody};
use super::extract::Id;
use super::openapi::Access;
use crate::auth::Principal;
use crate::error_code::ErrorCode;
use crate::ids::AgentId;
use crate::state::AppState;
use crate::store;
use crate::store::usage::UsageRow;
use crate::store::users::Role;

/// The longest window, in days.
pub const MAX_DAYS: u32 = 366;
/// Sessions listed (the most recently active).
pub const MAX_SESSIONS: usize = 100;

/// `?days=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// The window: the last this many UTC days, today included (default 30, 1–366).
    days: Option<u32>,
}

/// Usage summed over some turns.
#[derive(Debug, Default, Clone, PartialEq, Serialize, ToSchema)]
pub struct Totals {
    /// Turns ended.
    pub turns: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Input tokens read from the provider's cache.
    pub cached_read_tokens: i64,
    /// Input tokens written to the provider's cache.
    pub cached_write_tokens: i64,
    /// Reasoning tokens.
    pub thought_tokens: i64,
    /// Cost by currency (`{"USD": 0.0123}`); empty when no harness reported one.
    pub cost: BTreeMap<String, f64>,
}

impl Totals {
    fn add(&mut self, row: &UsageRow) {
        self.turns += row.turns;
        self.input_tokens += row.input_tokens;
        self.output_tokens += row.output_tokens;
        self.cached_read_tokens += row.cached_read_tokens;
        self.cached_write_tokens += row.cached_write_tokens;
        self.thought_tokens += row.thought_tokens;
        if let Some(currency) = &row.currency {
            *self.cost.entry(currency.clone()).or_default() += row.cost;
        }
    }
}

/// One UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DayUsage {
    /// The day (`2026-12-06`).
    #[schema(value_type = String, format = Date)]
    pub day: NaiveDate,
    /// What its turns used.
    #[serde(flatten)]
    pub totals: Totals,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SessionUsage {
    /// The session.
    pub session_id: Uuid,
    /// What its turns in the window used.
    #[serde(flatten)]
    pub totals: Totals,
}

/// An agent's usage over a window.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AgentUsage {
    /// The window's first day (UTC).
    #[schema(value_type = String, format = Date)]
    pub since: NaiveDate,
    /// Everything in the window.
    pub totals: Totals,
    /// Each day of the window, oldest first (days without turns included, as zeros).
    pub by_day: Vec<DayUsage>,
    /// The sessions with turns in the window, the most recently active first (at most 100).
    pub by_session: Vec<SessionUsage>,
}

/// What an agent's turns used over the last days: tokens and cost, in total, by day and by session.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{id}/usage",
    operation_id = "agent_usage",
    tag = "agents",
    params(UsageQuery),
    responses(
        (status = 200, description = "The agent's usage", body = AgentUsage),
        (status = 400, description = "`INVALID_QUERY`", body = ErrorBody),
    ),
    extensions(("x-agenthold-access" = json!(Access::Viewer))),
)]
pub async fn show(
    State(state): State<AppState>,
    principal: Principal,
    Id(id): Id<AgentId>,
    query: Result<Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AgentUsage>, ApiError> {
    visible_agent(&state, &principal, id, Role::Viewer).await?;
    let Query(query) = query.map_err(|e| ApiError::bad_request(ErrorCode::InvalidQuery, e.body_text()))?;
    let days = query.days.unwrap_or(30);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(ApiError::bad_request(ErrorCode::InvalidQuery, format!("days must be 1-{MAX_DAYS}")));
    }
    let today = Utc::now().date_naive();
    let since = today - Duration::days(i64::from(days) - 1);
    let from = since.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    let rows = store::usage::grouped(&state.pool, id, from).await?;
    Ok(Json(fold(&rows, since, today)))
}

/// The rows (newest first) as totals, days and sessions.
fn fold(rows: &[UsageRow], since: NaiveDate, today: NaiveDate) -> AgentUsage {
    let mut totals = Totals::default();
    let mut by_day: BTreeMap<NaiveDate, Totals> =
        since.iter_days().take_while(|d| *d <= today).map(|d| (d, Totals::default())).collect();
    let mut sessions: Vec<SessionUsage> = Vec::new();
    for row in rows {
        totals.add(row);
        if let Some(day) = by_day.get_mut(&row.day) {
            day.add(row);
        }
        if let Some(session) = sessions.iter_mut().find(|s| s.session_id == row.session_id) {
            session.totals.add(row);
        } else if sessions.len() < MAX_SESSIONS {
            let mut session = SessionUsage { session_id: row.session_id, totals: Totals::default() };
            session.totals.add(row);
            sessions.push(session);
        }
    }
    let by_day = by_day.into_iter().map(|(day, totals)| DayUsage { day, totals }).collect();
    AgentUsage { since, totals, by_day, by_session: sessions }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(session: Uuid, day: NaiveDate, currency: Option<&str>, turns: i64, input: i64, cost: f64) -> UsageRow {
        UsageRow {
            session_id: session,
            day,
            currency: currency.map(str::to_owned),
            turns,
            input_tokens: input,
            output_tokens: 1,
            cached_read_tokens: 2,
            cached_write_tokens: 0,
            thought_tokens: 0,
            cost,
            last_ended_at: Utc::now(),
        }
    }

    #[test]
    fn rows_fold_into_totals_every_day_and_sessions_newest_first() {
        let today = NaiveDate::from_ymd_opt(2026, 12, 6).expect("day");
        let since = today - Duration::days(2);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let rows = [
            row(a, today, Some("USD"), 2, 100, 0.5),
            row(b, today, None, 1, 10, 0.0),
            row(a, since, Some("USD"), 1, 1000, 0.25),
            row(a, since, Some("EUR"), 1, 0, 1.0),
        ];
        let usage = fold(&rows, since, today);
        assert_eq!(usage.totals.turns, 5);
        assert_eq!(usage.totals.input_tokens, 1110);
        assert_eq!(usage.totals.cost, BTreeMap::from([("EUR".into(), 1.0), ("USD".into(), 0.75)]));
        let days: Vec<(NaiveDate, i64)> = usage.by_day.iter().map(|d| (d.day, d.totals.turns)).collect();
        assert_eq!(days, [(since, 2), (since.succ_opt().expect("day"), 0), (today, 3)], "every day, zeros too");
        let sessions: Vec<(Uuid, i64)> = usage.by_session.iter().map(|s| (s.session_id, s.totals.turns)).collect();
        assert_eq!(sessions, [(a, 4), (b, 1)]);
        let json = serde_json::to_value(&usage.by_day[2]).expect("json");
        assert_eq!(json["day"], "2026-12-06");
        assert_eq!(json["cost"]["USD"], 0.5, "{json}");
    }
}
