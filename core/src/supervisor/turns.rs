//! Turns as the core tracks them, and the events and state change that end one: the answer to
//! `session/prompt`, a cancel before the prompt went out, or a failure (an `error` event naming
//! the turn, then a `turn_end` whose stop reason is `error`).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{FailureCode, OpenTurn, PersistId, StoredTurnState, TurnEnded};
use crate::events::side_effects::SideEffect;
use crate::events::usage::{self, Cost};
use crate::events::{EventKind, NewEvent};
use crate::ids::{SessionId, TurnId};

/// Where a turn is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnState {
    /// Stored, not yet sent to the harness.
    Waiting,
    /// Its `session/prompt` is being recorded; the frame goes out once `persist` commits.
    Recording {
        /// The JSON-RPC id.
        request_id: String,
        /// The persist recording it.
        persist: PersistId,
    },
    /// `session/prompt` went (or goes) to this harness generation.
    Sent {
        /// The JSON-RPC id.
        request_id: String,
        /// The harness generation.
        generation: i64,
    },
}

/// An unfinished turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Its id.
    pub id: TurnId,
    /// Its session.
    pub session_id: SessionId,
    /// The harness's id for its session, as last stored.
    pub acp_session_id: Option<String>,
    /// The prompt's content blocks.
    pub prompt: Value,
    /// Where it is.
    pub state: TurnState,
    /// When it started (for `duration_ms`).
    pub started: DateTime<Utc>,
    /// When it must have ended (wall clock, stored with the prompt; survives takeovers).
    pub deadline_at: Option<DateTime<Utc>>,
    /// The same deadline on the monotonic clock.
    pub deadline: Option<Instant>,
    /// Set once the time limit fired: the harness was asked to cancel; kill it at this instant.
    pub kill_at: Option<Instant>,
    /// While a question of its session waits for a person, the time that was left (the clock
    /// is stopped: waiting does not count against the turn's limit).
    pub paused: Option<std::time::Duration>,
    /// The agent's own time limit (`None`: the server's), as of the last load.
    pub limit: Option<std::time::Duration>,
}

impl Turn {
    /// The in-memory turn from what is stored (`now` maps its stored deadline to the monotonic
    /// clock).
    pub fn from_stored(stored: OpenTurn, now: super::Now) -> Self {
        let state = match stored.state {
            StoredTurnState::Sent { request_id, generation } => TurnState::Sent { request_id, generation },
            StoredTurnState::Pending | StoredTurnState::Parked => TurnState::Waiting,
        };
        let deadline = stored.deadline_at.map(|at| now.mono_at(at));
        Self {
            id: stored.id,
            session_id: stored.session_id,
            acp_session_id: stored.acp_session_id,
            prompt: stored.prompt,
            state,
            started: stored.created_at,
            deadline_at: stored.deadline_at,
            deadline,
            kill_at: None,
            paused: None,
            limit: stored.time_limit,
        }
    }

    /// Its request id once recorded or sent.
    pub fn request_id(&self) -> Option<&str> {
        match &self.state {
            TurnState::Waiting => None,
            TurnState::Recording { request_id, .. } | TurnState::Sent { request_id, .. } => Some(request_id),
        }
    }
}

/// What ends a turn: its `turn_end` event, the state change that closes it, and the end as the
/// server's metrics count it.
#[derive(Debug, Clone)]
pub struct Ending {
    /// The `turn_end` event.
    pub event: NewEvent,
    /// The state change.
    pub effect: SideEffect,
    /// The end, for the metrics.
    pub ended: TurnEnded,
}

/// What ends a turn at `now`: `usage` is the harness's own (its `session/prompt` answer's), kept
/// as it is beside the same `tokens` for every harness; `session_cost` what the session has cost
/// so far, as the harness last reported it.
pub fn ending(
    turn: &Turn,
    stop_reason: &str,
    usage: Option<Value>,
    session_cost: Option<Cost>,
    now: DateTime<Utc>,
) -> Ending {
    let duration_ms = (now - turn.started).num_milliseconds().max(0);
    let mut payload = json!({
        "turn_id": turn.id,
        "stop_reason": stop_reason,
        "duration_ms": duration_ms,
    });
    let tokens = usage.as_ref().and_then(usage::tokens);
    if let Some(map) = payload.as_object_mut() {
        if let Some(usage) = usage {
            map.insert("usage".to_owned(), usage);
        }
        if let Some(tokens) = &tokens {
            map.insert("tokens".to_owned(), json!(tokens));
        }
        if let Some(cost) = &session_cost {
            map.insert("session_cost".to_owned(), json!(cost));
        }
    }
    let event = NewEvent::new(turn.session_id, EventKind::TurnEnd, payload);
    let effect = SideEffect::EndTurn { turn_id: turn.id, stop_reason: stop_reason.to_owned(), tokens, session_cost };
    let duration = Duration::from_millis(u64::try_from(duration_ms).unwrap_or(0));
    let ended = TurnEnded { turn_id: turn.id, stop_reason: stop_reason.to_owned(), duration };
    Ending { event, effect, ended }
}

/// The `error` event of a failed turn (it names the turn, so a duplicate end can be dropped
/// with it).
pub fn failure(turn: &Turn, code: FailureCode, message: &str) -> NewEvent {
    let payload = json!({ "code": code.as_str(), "message": message, "turn_id": turn.id });
    NewEvent::new(turn.session_id, EventKind::Error, payload)
}
