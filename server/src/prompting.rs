//! Accepting a prompt: the one path every prompt takes into a turn — from the API, a schedule, a
//! webhook or another agent (through agenthold's MCP server, [`crate::mcp`]). [`record`] stores
//! the turn and its `prompt` event (with its [`Origin`]) inside the caller's transaction; once
//! that commits, [`hand_over`] publishes the event and hands the turn
//! to the agent's supervisor, which wakes the sandbox, starts the harness and applies the agent's
//! permission posture and logins, whoever prompted.

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Credential, Principal};
use crate::events::{EventKind, NewEvent, SharedEvent, StoredEvent};
use crate::ids::{AgentId, Seq, SessionId, TurnId};
use crate::state::AppState;
use crate::store;
use crate::store::sessions::TurnError;
use crate::supervisor::Command;

/// Who or what a prompt came from: stored in its `prompt` event as `origin`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Origin {
    /// `user` (a browser session), `token` (an API token), `schedule`, `webhook` or `agent`.
    pub kind: OriginKind,
    /// The user's, token's, schedule's, webhook's or prompting agent's id.
    pub id: Uuid,
    /// The user behind a token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<Uuid>,
    /// The schedule's run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    /// The webhook's delivery (as listed under the webhook's deliveries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<Uuid>,
    /// An agent's prompt: how deep in a chain of agents prompting agents this turn is (1: an
    /// agent prompted by a person's, a script's or a trigger's turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<i32>,
}

/// The kinds of [`Origin`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OriginKind {
    /// A person in a browser session.
    User,
    /// A script with an API token.
    Token,
    /// A schedule's run.
    Schedule,
    /// A webhook's delivery.
    Webhook,
    /// Another agent, through agenthold's MCP server.
    Agent,
}

impl Origin {
    /// The caller of an API request.
    pub fn of(principal: &Principal) -> Self {
        let base = |kind, id, user_id| Self { kind, id, user_id, run_id: None, delivery_id: None, depth: None };
        match principal.credential {
            Credential::Token(token_id) => base(OriginKind::Token, token_id, Some(principal.user_id)),
            Credential::Session(_) => base(OriginKind::User, principal.user_id, None),
        }
    }

    /// A schedule's run.
    pub fn schedule(schedule_id: Uuid, run_id: Uuid) -> Self {
        Self {
            kind: OriginKind::Schedule,
            id: schedule_id,
            user_id: None,
            run_id: Some(run_id),
            delivery_id: None,
            depth: None,
        }
    }

    /// Another agent's prompt, `depth` deep in a chain of agents prompting agents.
    pub fn agent(agent_id: AgentId, depth: i32) -> Self {
        Self {
            kind: OriginKind::Agent,
            id: agent_id.0,
            user_id: None,
            run_id: None,
            delivery_id: None,
            depth: Some(depth),
        }
    }

    /// A webhook's delivery.
    pub fn webhook(webhook_id: Uuid, delivery_id: Uuid) -> Self {
        Self {
            kind: OriginKind::Webhook,
            id: webhook_id,
            user_id: None,
            run_id: None,
            delivery_id: Some(delivery_id),
            depth: None,
        }
    }
}

/// Plain text as ACP content blocks.
pub fn text_blocks(text: &str) -> Value {
    json!([{"type": "text", "text": text}])
}

/// A turn stored, not yet handed over.
#[derive(Debug)]
pub struct Recorded {
    /// The turn.
    pub turn_id: TurnId,
    /// Its agent.
    pub agent_id: AgentId,
    /// Its `prompt` event, as stored (published by [`hand_over`]'s commit).
    pub stored: store::events::Appended,
}

/// Stores a pending turn and its `prompt` event inside `tx`: [`TurnError::InProgress`] when the
/// session has an unfinished turn, [`TurnError::Quota`] when the agent's sessions store
/// `max_event_bytes` of events already (nothing is written then).
pub async fn record(
    tx: &mut sqlx::PgConnection,
    turn_id: TurnId,
    session_id: SessionId,
    agent_id: AgentId,
    blocks: &Value,
    origin: &Origin,
    max_event_bytes: i64,
) -> Result<Recorded, TurnError> {
    match store::quotas::event_bytes_within(tx, agent_id, max_event_bytes).await {
        Ok(()) => {}
        Err(store::quotas::QuotaError::Exceeded(message)) => return Err(TurnError::Quota(message)),
        Err(store::quotas::QuotaError::Db(error)) => return Err(error.into()),
    }
    store::sessions::insert_turn(tx, turn_id, session_id, agent_id, blocks).await?;
    let payload = json!({"turn_id": turn_id, "prompt": blocks, "origin": origin});
    let event = NewEvent::new(session_id, EventKind::Prompt, payload);
    let stored = store::events::append(tx, vec![event]).await?;
    if origin.kind == OriginKind::Agent {
        store::agent_prompts::set_origin(tx, turn_id, origin.depth.unwrap_or(1), origin.id).await?;
    }
    Ok(Recorded { turn_id, agent_id, stored })
}

/// Commits the transaction that recorded the turn, then publishes its events to watchers and
/// hands the turn to the agent's supervisor. The seq of the `prompt` event.
pub async fn hand_over(
    state: &AppState,
    tx: sqlx::Transaction<'_, sqlx::Postgres>,
    recorded: Recorded,
) -> sqlx::Result<Option<Seq>> {
    let shared = recorded.stored.commit(tx, |stored| publish(state, &stored)).await?;
    store::agents::set_desired_state(&state.pool, recorded.agent_id, "awake").await?;
    state.dispatch.send(recorded.agent_id, Command::Prompt).await;
    state.supervisors.host().touch(recorded.agent_id, std::time::Instant::now());
    Ok(shared.first().map(|e| e.seq))
}

/// Publishes committed events to the session's watchers (the argument of an
/// [`store::events::Appended::commit`]).
pub fn publish(state: &AppState, stored: &[(StoredEvent, String)]) -> Vec<std::sync::Arc<SharedEvent>> {
    let shared: Vec<_> = stored.iter().map(|(event, json)| SharedEvent::from_stored(event, json)).collect();
    state.hub.publish(&shared);
    shared
}
