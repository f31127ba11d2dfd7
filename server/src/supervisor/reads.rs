//! What a supervisor reads from Postgres to know where it stands: the agent's open work (turns,
//! questions, grants) and, when it takes a running sandbox over, the snapshot of its harness.

use bytes::Bytes;

use super::core::{OpenWork, Question, Snapshot, SnapshotHarness};
use crate::ids::AgentId;
use crate::store;

/// The agent's unfinished turns, their questions waiting for a person and its open one-shot
/// grants.
pub(super) async fn open_work(pool: &sqlx::PgPool, agent_id: AgentId) -> sqlx::Result<OpenWork> {
    Ok(OpenWork {
        turns: store::sessions::open_turns(pool, agent_id).await?,
        questions: store::permissions::of_open_turns(pool, agent_id).await?,
        grants: store::permissions::open_grants(pool, agent_id).await?,
    })
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
                .map(|w| Question {
                    permission_id: w.permission_id,
                    session_id: w.session_id,
                    request_id: w.request_id,
                    options: w.options,
                    tool_call: w.tool_call,
                    kind: super::core::QuestionKind::parse(&w.kind),
                })
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
            })
        }
        None => None,
    };
    Ok(Snapshot { generation: row.harness_generation, harness, turns })
}
