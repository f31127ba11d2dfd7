//! What a supervisor reads from Postgres to know where it stands: the agent's open work (turns,
//! questions, grants) and, when it takes a running sandbox over, the snapshot of its harness.
//! The store's rows are mapped here into the core's own types ([`OpenTurn`], [`Question`],
//! [`StoredGrant`]).

use std::time::Duration;

use bytes::Bytes;

use super::core::{
    OpenTurn, OpenWork, Question, QuestionKind, Snapshot, SnapshotHarness, StoredGrant, StoredTurnState,
    WaitingQuestion,
};
use crate::ids::AgentId;
use crate::store;
use crate::store::permissions::{Grant, Parked, Waiting};
use crate::store::sessions::TurnRow;

/// The agent's unfinished turns, their questions waiting for a person and its open grants.
pub(super) async fn open_work(pool: &sqlx::PgPool, agent_id: AgentId) -> sqlx::Result<OpenWork> {
    Ok(OpenWork {
        turns: store::sessions::open_turns(pool, agent_id).await?.into_iter().map(open_turn).collect(),
        questions: store::permissions::of_open_turns(pool, agent_id).await?.into_iter().map(waiting_question).collect(),
        grants: store::permissions::open_grants(pool, agent_id).await?.into_iter().map(stored_grant).collect(),
    })
}

/// A turn row as the core takes it.
fn open_turn(row: TurnRow) -> OpenTurn {
    let state = match (row.state.as_str(), row.request_id, row.harness_generation) {
        ("running", Some(request_id), Some(generation)) => StoredTurnState::Sent { request_id, generation },
        ("parked", _, _) => StoredTurnState::Parked,
        _ => StoredTurnState::Pending,
    };
    OpenTurn {
        id: row.id,
        session_id: row.session_id,
        prompt: row.prompt,
        state,
        created_at: row.created_at,
        deadline_at: row.deadline_at,
        acp_session_id: row.acp_session_id,
        time_limit: time_limit(row.time_limit_secs),
    }
}

/// A stored per-agent limit in seconds as a duration (`None` or nonsense: the server's).
fn time_limit(seconds: Option<i32>) -> Option<Duration> {
    seconds.and_then(|s| u64::try_from(s).ok()).filter(|s| *s > 0).map(Duration::from_secs)
}

fn waiting_question(parked: Parked) -> WaitingQuestion {
    WaitingQuestion { turn_id: parked.turn_id, question: question(parked.waiting) }
}

fn question(waiting: Waiting) -> Question {
    Question {
        permission_id: waiting.permission_id,
        session_id: waiting.session_id,
        request_id: waiting.request_id,
        options: waiting.options,
        tool_call: waiting.tool_call,
        kind: QuestionKind::parse(&waiting.kind),
    }
}

fn stored_grant(grant: Grant) -> StoredGrant {
    StoredGrant {
        permission_id: grant.permission_id,
        session_id: grant.session_id,
        tool_call: grant.tool_call,
        standing: grant.session_grant,
    }
}

/// What a takeover needs from the database.
pub(super) async fn load_snapshot(
    pool: &sqlx::PgPool,
    agent_id: AgentId,
    postures: &super::Postures,
    home_dir: &str,
    mcp: Option<&crate::mcp::servers::Endpoint>,
) -> sqlx::Result<Snapshot> {
    let turns = open_work(pool, agent_id).await?;
    let Some(row) = store::sandboxes::get(pool, agent_id).await? else {
        return Ok(Snapshot { generation: 0, harness: None, turns });
    };
    let harness = match row.harness_channel.and_then(|c| u32::try_from(c).ok()) {
        Some(channel) => {
            let mut sessions = Vec::new();
            for session_id in &row.harness_sessions {
                if let Some(acp_id) = store::sessions::get(pool, *session_id).await?.and_then(|s| s.acp_session_id) {
                    sessions.push((*session_id, acp_id));
                }
            }
            let journal = store::sandboxes::stdin_journal(pool, agent_id, row.harness_generation)
                .await?
                .into_iter()
                .map(|(offset, bytes)| (offset, Bytes::from(bytes)))
                .collect();
            let agent = store::agents::get(pool, agent_id).await?;
            // A harness already running answers by the agent's gate as it is now; one that cannot
            // be made (forbidden posture, missing policy) asks a person (never approves alone).
            let gate = agent.as_ref().and_then(|a| postures.gate(a, home_dir).ok()).unwrap_or_else(|| {
                crate::permissions::Gate {
                    posture: crate::permissions::Posture::Approval,
                    ..crate::permissions::Gate::autonomous(home_dir)
                }
            });
            let questions = store::permissions::waiting(pool, agent_id, row.harness_generation)
                .await?
                .into_iter()
                .map(question)
                .collect();
            Some(SnapshotHarness {
                generation: row.harness_generation,
                channel,
                stdout_stored: u64::try_from(row.harness_stdout_offset).unwrap_or(0),
                init: row.harness_init,
                sessions,
                journal,
                session_mode: agent.as_ref().and_then(|a| super::shell::session_mode(&a.harness)),
                gate,
                questions,
                mcp_servers: super::shell::offered_mcp(mcp, agent_id),
                session_cwd: cloned_repo(pool, agent_id, home_dir).await?,
                auth_method: agent.as_ref().and_then(|a| a.auth_method.clone()),
                automatic: agent
                    .as_ref()
                    .map(|a| crate::harness::automatic_methods(&a.harness, &row.harness_env_names))
                    .unwrap_or_default(),
                delivered: row.harness_env_names.clone(),
                spare_session: row.harness_spare_session.clone(),
                spare_updates: row.harness_spare_updates.clone(),
            })
        }
        None => None,
    };
    Ok(Snapshot { generation: row.harness_generation, harness, turns })
}

/// The folder of the agent's repository when it is cloned (where a taken-over harness's
/// sessions start), else `None` (the home).
async fn cloned_repo(pool: &sqlx::PgPool, agent_id: AgentId, home_dir: &str) -> sqlx::Result<Option<String>> {
    Ok(store::repos::get(pool, agent_id)
        .await?
        .filter(|row| row.state == "cloned")
        .map(|row| format!("{}/{}", home_dir.trim_end_matches('/'), row.dir)))
}
