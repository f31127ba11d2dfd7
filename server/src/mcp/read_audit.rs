//! The read-only tools' audit, in aggregate: `list_agents`, `wait_turn` and `read_events` change
//! nothing, and an agent polling them would write an audit row per call. Their calls are counted
//! per agent, tool and outcome in memory and written as one `agent.mcp_reads` row per agent per
//! period (`AGENTHOLD_MCP_READ_AUDIT_SECS`, default 60) — and at shutdown — with the period and
//! the counts. `prompt_agent` is still audited per call ([`super::calls`]).
//!
//! Bounded: the tally holds one entry per calling agent with at most one count per tool and
//! outcome code (both from fixed lists); a replica that dies loses at most one period's counts.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::AgentId;
use crate::store;
use crate::store::audit::AuditRecord;

/// One agent's calls since its tally began.
#[derive(Debug)]
struct Tally {
    workspace_id: Uuid,
    name: String,
    since: DateTime<Utc>,
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

static TALLIES: LazyLock<Mutex<HashMap<AgentId, Tally>>> = LazyLock::new(Mutex::default);

/// Counts one read-only call of `agent`.
pub fn count(agent: AgentId, workspace_id: Uuid, name: &str, tool: &'static str, outcome: &'static str) {
    let mut tallies = TALLIES.lock();
    let tally = tallies.entry(agent).or_insert_with(|| Tally {
        workspace_id,
        name: name.to_owned(),
        since: Utc::now(),
        counts: BTreeMap::new(),
    });
    *tally.counts.entry((tool, outcome)).or_insert(0) += 1;
}

/// The audit row of one agent's tally.
fn record(agent: AgentId, tally: Tally, until: DateTime<Utc>) -> AuditRecord<'static> {
    let calls: Vec<serde_json::Value> = tally
        .counts
        .iter()
        .map(|((tool, outcome), count)| json!({"tool": tool, "outcome": outcome, "count": count}))
        .collect();
    AuditRecord {
        workspace_id: tally.workspace_id,
        actor_user_id: None,
        action: "agent.mcp_reads",
        resource_type: "agent",
        resource_id: agent.to_string(),
        detail: json!({
            "name": tally.name,
            "from": tally.since,
            "to": until,
            "calls": calls,
            "total": tally.counts.values().sum::<u64>(),
        }),
    }
}

/// Writes every tally as its agent's row and starts afresh; the rows written.
pub async fn flush(pool: &PgPool) -> usize {
    let taken: Vec<(AgentId, Tally)> = {
        let mut tallies = TALLIES.lock();
        tallies.drain().collect()
    };
    let until = Utc::now();
    let mut written = 0;
    for (agent, tally) in taken {
        match store::audit::append(pool, record(agent, tally, until)).await {
            Ok(()) => written += 1,
            Err(error) => tracing::warn!(%error, agent.id = %agent, "writing the MCP reads' audit row"),
        }
    }
    written
}

/// Flushes every `period` until aborted (the caller flushes once more at shutdown).
pub fn spawn(pool: PgPool, period: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(period);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            flush(&pool).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_becomes_one_row_with_its_counts() {
        let agent = AgentId::new();
        let mut tally =
            Tally { workspace_id: Uuid::nil(), name: "poller".to_owned(), since: Utc::now(), counts: BTreeMap::new() };
        tally.counts.insert(("read_events", "ok"), 40);
        tally.counts.insert(("read_events", "NOT_FOUND"), 2);
        tally.counts.insert(("wait_turn", "ok"), 3);
        let row = record(agent, tally, Utc::now());
        assert_eq!(row.action, "agent.mcp_reads");
        assert_eq!(row.detail["total"], 45);
        assert_eq!(row.detail["calls"][0], json!({"tool": "read_events", "outcome": "NOT_FOUND", "count": 2}));
        assert_eq!(row.detail["calls"].as_array().map(Vec::len), Some(3));
    }
}
