//! An agent's usage over time, from what its ended turns keep (migration 0035): tokens summed and
//! the turns' own costs summed per currency, by UTC day and by session. One grouped query, its
//! rows bounded, folded here.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;

/// The most grouped rows read (sessions × days × currencies); past it the oldest are left out.
pub const MAX_ROWS: i64 = 20_000;

/// One group: a session's turns ended on one UTC day that reported a cost in one currency (or
/// none).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// The session.
    pub session_id: Uuid,
    /// The UTC day they ended.
    pub day: NaiveDate,
    /// The currency of their cost (`None`: no cost reported).
    pub currency: Option<String>,
    /// How many.
    pub turns: i64,
    /// Their input tokens.
    pub input_tokens: i64,
    /// Their output tokens.
    pub output_tokens: i64,
    /// Their input tokens read from the provider's cache.
    pub cached_read_tokens: i64,
    /// Their input tokens written to the provider's cache.
    pub cached_write_tokens: i64,
    /// Their reasoning tokens.
    pub thought_tokens: i64,
    /// What they cost, in `currency`.
    pub cost: f64,
    /// When the last of them ended.
    pub last_ended_at: DateTime<Utc>,
}

/// The agent's turns that ended since `since`, grouped (newest first).
pub async fn grouped(pool: &PgPool, agent_id: AgentId, since: DateTime<Utc>) -> sqlx::Result<Vec<UsageRow>> {
    sqlx::query_as!(
        UsageRow,
        r#"SELECT session_id, (ended_at AT TIME ZONE 'UTC')::date AS "day!", cost_currency AS currency,
                  count(*) AS "turns!",
                  COALESCE(sum(input_tokens), 0)::bigint AS "input_tokens!",
                  COALESCE(sum(output_tokens), 0)::bigint AS "output_tokens!",
                  COALESCE(sum(cached_read_tokens), 0)::bigint AS "cached_read_tokens!",
                  COALESCE(sum(cached_write_tokens), 0)::bigint AS "cached_write_tokens!",
                  COALESCE(sum(thought_tokens), 0)::bigint AS "thought_tokens!",
                  COALESCE(sum(turn_cost), 0)::float8 AS "cost!",
                  max(ended_at) AS "last_ended_at!"
           FROM turns
           WHERE agent_id = $1 AND state = 'ended' AND ended_at >= $2
           GROUP BY session_id, 2, cost_currency
           ORDER BY max(ended_at) DESC
           LIMIT $3"#,
        agent_id.0,
        since,
        MAX_ROWS
    )
    .fetch_all(pool)
    .await
}
