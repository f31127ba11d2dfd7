//! What each tool does for the calling agent: only agents on its allow-list (links whose maker is
//! still an admin of both sides) are seen, prompted, waited for or read — and of those, only the
//! turns and sessions the caller prompted; a prompt is recorded with origin `agent` (the caller's
//! id and the chain depth, one more than the caller's running turn's) through
//! [`crate::prompting`], the path every prompt takes; every call is audited in the caller's
//! workspace with the caller as actor (the read-only tools in aggregate, [`crate::mcp::read_audit`]).
//!
//! A call is taken only from an agent with a turn in progress, so the depth of a chain is always
//! that of a prompt: a background process calling between turns cannot start a chain afresh.
//! Calls are rate-limited per agent ([`crate::mcp::rate`]) and the turns an agent starts in others
//! have an hourly budget; a loop is stopped at the depth limit and reported with its chain.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error_code::ErrorCode;
use crate::ids::{AgentId, SessionId, TurnId};
use crate::mcp::tools::{Call, ToolError};
use crate::mcp::{MAX_CHAIN_DEPTH, tools};
use crate::prompting::{self, Origin};
use crate::state::AppState;
use crate::store;
use crate::store::agent_prompts::TargetRow;
use crate::store::agents::AgentRow;
use crate::store::audit::AuditRecord;
use crate::store::sessions::TurnError;

/// How often `wait_turn` looks at the turn.
const WAIT_POLL: Duration = Duration::from_millis(200);
/// The most characters of a final message returned.
const MAX_MESSAGE_CHARS: i32 = 64 * 1024;
/// The most payload bytes of one `read_events` page.
const MAX_PAGE_BYTES: i64 = 256 * 1024;

/// Runs `call` for `caller`: the tool's answer or refusal (an `Err` is a server failure).
pub async fn run(state: &AppState, caller: &AgentRow, call: &Call) -> anyhow::Result<Result<Value, ToolError>> {
    let (outcome, target) = match admit(state, caller).await? {
        Err(refusal) => (Err(refusal), None),
        Ok(depth) => {
            let targets = store::agent_prompts::targets(&state.pool, caller.id).await?;
            match call {
                Call::ListAgents => (Ok(list(&targets)), None),
                Call::PromptAgent { agent, text, session_id } => match resolve(&targets, agent) {
                    Ok(target) => {
                        (prompt(state, caller, depth, target, text, *session_id).await?, Some(target.agent_id))
                    }
                    Err(error) => (Err(error), None),
                },
                Call::WaitTurn { turn_id, timeout_secs } => {
                    // Within the server's request timeout, whatever was asked.
                    let limit = state.config.request_timeout_secs.saturating_sub(5).max(1);
                    wait(state, caller, &targets, *turn_id, (*timeout_secs).min(limit)).await?
                }
                Call::ReadEvents { session_id, after, limit } => {
                    read(state, caller, &targets, *session_id, *after, *limit).await?
                }
            }
        }
    };
    let code = match &outcome {
        Ok(_) => "ok",
        Err(error) => error.code.as_str(),
    };
    if call.is_read_only() {
        crate::mcp::read_audit::count(caller.id, caller.workspace_id, &caller.name, call.name(), code);
    } else {
        let detail = json!({"name": caller.name, "tool": call.name(), "target_agent_id": target, "outcome": code});
        let record = AuditRecord {
            workspace_id: caller.workspace_id,
            actor_user_id: None,
            action: "agent.mcp_call",
            resource_type: "agent",
            resource_id: caller.id.to_string(),
            detail,
        };
        store::audit::append(&state.pool, record).await?;
    }
    metrics::counter!("agenthold_mcp_calls_total", "tool" => call.name(), "outcome" => code).increment(1);
    Ok(outcome)
}

/// Whether `caller` may call at all now: under its rate, and with a turn in progress (whose
/// depth is the chain's). The caller's running depth.
async fn admit(state: &AppState, caller: &AgentRow) -> anyhow::Result<Result<i32, ToolError>> {
    if let Err(wait) = crate::mcp::rate::take(caller.id, state.config.mcp_calls_per_minute, Instant::now()) {
        let message = format!(
            "this agent called agenthold's tools {} times this minute; try again in {} s",
            state.config.mcp_calls_per_minute,
            wait.as_secs().max(1)
        );
        return Ok(Err(ToolError::new(ErrorCode::RateLimited, message)));
    }
    match store::agent_prompts::running_depth(&state.pool, caller.id).await? {
        Some(depth) => Ok(Ok(depth)),
        None => Ok(Err(ToolError::new(
            ErrorCode::NoRunningTurn,
            "agenthold's tools answer an agent during one of its turns only (a chain's depth is its prompt's)",
        ))),
    }
}

/// The chain of agents above `caller`'s turn at depth `depth` (nearest first): each step the
/// agent that prompted the turn one level up. What a loop is reported with.
async fn chain_above(state: &AppState, caller: AgentId, depth: i32) -> anyhow::Result<Vec<uuid::Uuid>> {
    let mut chain = Vec::new();
    let (mut current, mut depth) = (caller, depth.clamp(0, MAX_CHAIN_DEPTH + 1));
    while depth > 0 {
        let Some(up) = store::agent_prompts::prompted_by(&state.pool, current, depth).await? else { break };
        chain.push(up);
        (current, depth) = (AgentId(up), depth - 1);
    }
    Ok(chain)
}

fn list(targets: &[TargetRow]) -> Value {
    let agents: Vec<Value> =
        targets.iter().map(|t| json!({"id": t.agent_id, "name": t.name, "harness": t.harness})).collect();
    tools::answer(json!({"agents": agents}))
}

fn not_allowed(what: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NotAllowed,
        format!("{what} is not on the list of agents this agent may prompt (list_agents)"),
    )
}

/// The target named `agent` (an id, or a name unique on the list).
fn resolve<'a>(targets: &'a [TargetRow], agent: &str) -> Result<&'a TargetRow, ToolError> {
    if let Ok(id) = agent.parse::<uuid::Uuid>() {
        return targets.iter().find(|t| t.agent_id.0 == id).ok_or_else(|| not_allowed(&format!("agent {id}")));
    }
    let mut named = targets.iter().filter(|t| t.name == agent);
    match (named.next(), named.next()) {
        (Some(target), None) => Ok(target),
        (Some(_), Some(_)) => {
            Err(ToolError::new(ErrorCode::AmbiguousAgent, "two agents on the list have that name; use its id"))
        }
        (None, _) => Err(not_allowed(&format!("an agent named {agent:?}"))),
    }
}

async fn prompt(
    state: &AppState,
    caller: &AgentRow,
    running_depth: i32,
    target: &TargetRow,
    text: &str,
    session_id: Option<SessionId>,
) -> anyhow::Result<Result<Value, ToolError>> {
    let depth = running_depth + 1;
    if depth > MAX_CHAIN_DEPTH {
        let chain = chain_above(state, caller.id, running_depth).await?;
        let path: Vec<String> = chain
            .iter()
            .rev()
            .map(ToString::to_string)
            .chain([caller.id.to_string(), target.agent_id.to_string()])
            .collect();
        tracing::warn!(agent.id = %caller.id, chain = ?path, "a chain of agents prompting agents reached the depth limit");
        let mut refusal = ToolError::new(
            ErrorCode::ChainTooDeep,
            format!(
                "this turn is already {} deep in a chain of agents prompting agents; the limit is {MAX_CHAIN_DEPTH} (chain: {})",
                depth - 1,
                path.join(" → ")
            ),
        );
        refusal.chain = Some(path);
        return Ok(Err(refusal));
    }
    let budget = state.config.agent_prompts_per_hour;
    if store::agent_prompts::prompted_last_hour(&state.pool, caller.id).await? >= budget {
        return Ok(Err(ToolError::new(
            ErrorCode::BudgetExhausted,
            format!("this agent started {budget} turns in other agents in the last hour, its budget"),
        )));
    }
    if let Some(id) = session_id {
        match store::sessions::get(&state.pool, id).await? {
            Some(session) if session.agent_id == target.agent_id => {}
            _ => {
                return Ok(Err(ToolError::new(
                    ErrorCode::InvalidSession,
                    format!("session {id} is not one of {}'s", target.name),
                )));
            }
        }
    }
    let mut tx = state.pool.begin().await?;
    let session_id = match session_id {
        Some(id) => id,
        None => {
            let id = SessionId::new();
            match store::sessions::create_in(&mut tx, id, target.agent_id, state.config.max_sessions_per_agent).await {
                Ok(()) => id,
                Err(store::quotas::QuotaError::Exceeded(message)) => {
                    return Ok(Err(ToolError::new(ErrorCode::QuotaExceeded, message)));
                }
                Err(store::quotas::QuotaError::Db(error)) => return Err(error.into()),
            }
        }
    };
    let origin = Origin::agent(caller.id, depth);
    let blocks = prompting::text_blocks(text);
    let max_bytes = state.config.max_event_bytes_per_agent;
    let recorded =
        match prompting::record(&mut tx, TurnId::new(), session_id, target.agent_id, &blocks, &origin, max_bytes).await
        {
            Ok(recorded) => recorded,
            Err(TurnError::Quota(message)) => return Ok(Err(ToolError::new(ErrorCode::QuotaExceeded, message))),
            Err(TurnError::InProgress) => {
                return Ok(Err(ToolError::new(
                    ErrorCode::TurnInProgress,
                    "the session has a turn in progress; wait for it",
                )));
            }
            Err(TurnError::Db(error)) => return Err(error.into()),
        };
    tracing::info!(agent.id = %caller.id, target.id = %target.agent_id, turn.id = %recorded.turn_id, depth, "an agent prompted an agent");
    let turn_id = recorded.turn_id;
    prompting::hand_over(state, tx, recorded).await?;
    Ok(Ok(tools::answer(json!({
        "agent_id": target.agent_id,
        "session_id": session_id,
        "turn_id": turn_id,
        "depth": depth,
    }))))
}

type Outcome = (Result<Value, ToolError>, Option<AgentId>);

async fn wait(
    state: &AppState,
    caller: &AgentRow,
    targets: &[TargetRow],
    turn_id: TurnId,
    timeout_secs: u64,
) -> anyhow::Result<Outcome> {
    let deadline = Instant::now() + Duration::from_secs(timeout_secs);
    loop {
        let turn = store::agent_prompts::turn(&state.pool, turn_id).await?;
        // A turn the caller prompted, of an agent it may still prompt.
        let turn = turn.filter(|t| t.origin_agent_id == Some(caller.id.0));
        let Some(turn) = turn.filter(|t| targets.iter().any(|a| a.agent_id == t.agent_id)) else {
            return Ok((Err(not_allowed(&format!("the agent of turn {turn_id}"))), None));
        };
        let ended = turn.state == "ended";
        if ended || Instant::now() >= deadline {
            let message = if ended {
                store::agent_prompts::final_message(&state.pool, turn.session_id, turn_id, MAX_MESSAGE_CHARS).await?
            } else {
                String::new()
            };
            let answer = tools::answer(json!({
                "turn_id": turn_id,
                "session_id": turn.session_id,
                "state": turn.state,
                "ended": ended,
                "stop_reason": turn.stop_reason,
                "message": message,
            }));
            return Ok((Ok(answer), Some(turn.agent_id)));
        }
        if *state.stopping.borrow() {
            anyhow::bail!("the server is stopping");
        }
        tokio::time::sleep(WAIT_POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

async fn read(
    state: &AppState,
    caller: &AgentRow,
    targets: &[TargetRow],
    session_id: SessionId,
    after: i64,
    limit: i64,
) -> anyhow::Result<Outcome> {
    let session = store::sessions::get(&state.pool, session_id).await?;
    let Some(session) = session.filter(|s| targets.iter().any(|a| a.agent_id == s.agent_id)) else {
        return Ok((Err(not_allowed(&format!("the agent of session {session_id}"))), None));
    };
    // Only sessions the caller prompted in: the prompted agent's other sessions are its own.
    if !store::agent_prompts::prompted_in(&state.pool, caller.id, session_id).await? {
        return Ok((
            Err(ToolError::new(ErrorCode::NotAllowed, format!("this agent did not prompt in session {session_id}"))),
            Some(session.agent_id),
        ));
    }
    let page = store::events::page_encoded(&state.log_reads, session_id, after, limit, MAX_PAGE_BYTES).await?;
    let next_after = page.events.last().map_or(after, |e| e.seq);
    let events: Vec<Value> = page.events.iter().filter_map(|e| serde_json::from_str(&e.json).ok()).collect();
    let answer = tools::answer(json!({"events": events, "next_after": next_after, "more": page.more}));
    Ok((Ok(answer), Some(session.agent_id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> TargetRow {
        TargetRow {
            agent_id: AgentId::new(),
            name: name.to_owned(),
            harness: "fake".to_owned(),
            created_by: None,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn targets_resolve_by_id_or_unique_name_only() {
        let (a, b, b2) = (target("a"), target("b"), target("b"));
        let list = vec![a.clone(), b.clone(), b2];
        assert_eq!(resolve(&list, "a").map(|t| t.agent_id), Ok(a.agent_id));
        assert_eq!(resolve(&list, &b.agent_id.to_string()).map(|t| t.agent_id), Ok(b.agent_id));
        assert_eq!(resolve(&list, "b").map(|t| t.agent_id).map_err(|e| e.code), Err(ErrorCode::AmbiguousAgent));
        assert_eq!(resolve(&list, "c").map(|t| t.agent_id).map_err(|e| e.code), Err(ErrorCode::NotAllowed));
        let stranger = AgentId::new().to_string();
        assert_eq!(resolve(&list, &stranger).map(|t| t.agent_id).map_err(|e| e.code), Err(ErrorCode::NotAllowed));
    }
}
