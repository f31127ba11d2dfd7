//! Turns as the supervisor tracks them, and what ends them: the answer to `session/prompt`,
//! a cancel before the prompt was sent, or a failure (which ends every open turn with an
//! `error` event and a `turn_end` whose stop reason is `error`).

use serde_json::{Value, json};

use super::actor::Actor;
use crate::events::appender::SideEffect;
use crate::events::{EventKind, NewEvent};
use crate::ids::{SessionId, TurnId};
use crate::store;

/// Where a turn is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnState {
    /// Stored, not yet sent to the harness.
    Waiting,
    /// `session/prompt` was sent with this request id to this harness generation.
    Sent {
        /// The JSON-RPC id.
        request_id: String,
        /// The harness generation.
        generation: i64,
        /// stdin offset just past the request.
        stdin_end: u64,
        /// sandboxd confirmed writing it.
        delivered: bool,
    },
}

/// An unfinished turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Its id.
    pub id: TurnId,
    /// Its session.
    pub session_id: SessionId,
    /// The prompt's content blocks.
    pub prompt: Value,
    /// Where it is.
    pub state: TurnState,
    /// When it started (for `duration_ms`).
    pub started: chrono::DateTime<chrono::Utc>,
}

impl Turn {
    /// Builds the in-memory turn from its row.
    pub fn from_row(row: store::sessions::TurnRow) -> Self {
        let state = match (row.state.as_str(), row.request_id, row.harness_generation) {
            ("running", Some(request_id), Some(generation)) => TurnState::Sent {
                request_id,
                generation,
                stdin_end: u64::try_from(row.request_stdin_end.unwrap_or(0)).unwrap_or(0),
                delivered: row.request_delivered,
            },
            _ => TurnState::Waiting,
        };
        Self { id: row.id, session_id: row.session_id, prompt: row.prompt, state, started: row.created_at }
    }

    fn duration_ms(&self) -> i64 {
        (chrono::Utc::now() - self.started).num_milliseconds().max(0)
    }
}

/// The events and effect that end a turn.
pub fn ending(turn: &Turn, stop_reason: &str, usage: Option<Value>) -> (NewEvent, SideEffect) {
    let mut payload = json!({
        "turn_id": turn.id,
        "stop_reason": stop_reason,
        "duration_ms": turn.duration_ms(),
    });
    if let (Some(usage), Some(map)) = (usage, payload.as_object_mut()) {
        map.insert("usage".to_owned(), usage);
    }
    let event = NewEvent::new(turn.session_id, EventKind::TurnEnd, payload);
    (event, SideEffect::EndTurn { turn_id: turn.id, stop_reason: stop_reason.to_owned() })
}

impl Actor {
    /// Reloads the unfinished turns from the database, keeping what memory knows of sent ones.
    pub(super) async fn reload_turns(&mut self) -> sqlx::Result<()> {
        let rows = store::sessions::open_turns(&self.deps.pool, self.agent_id).await?;
        let mut turns = Vec::with_capacity(rows.len());
        for row in rows {
            let fresh = Turn::from_row(row);
            match self.turns.iter().find(|t| t.id == fresh.id) {
                Some(known) => turns.push(known.clone()),
                None => turns.push(fresh),
            }
        }
        self.turns = turns;
        Ok(())
    }

    /// Ends the turns matching `which` with an `error` event (code, message) and a `turn_end`.
    pub(super) async fn fail_turns(&mut self, which: impl Fn(&Turn) -> bool, code: &str, message: &str) {
        let (failed, kept): (Vec<Turn>, Vec<Turn>) =
            std::mem::take(&mut self.turns).into_iter().partition(|t| which(t));
        self.turns = kept;
        if failed.is_empty() {
            return;
        }
        tracing::warn!(agent.id = %self.agent_id, code, message, turns = failed.len(), "turns failed");
        let mut events = Vec::new();
        let mut effects = Vec::new();
        for turn in &failed {
            events.push(NewEvent::error(turn.session_id, code, message));
            let (event, effect) = ending(turn, "error", None);
            events.push(event);
            effects.push(effect);
        }
        if let Err(error) = self.deps.appender.append(events, effects).await {
            tracing::error!(%error, agent.id = %self.agent_id, "recording failed turns");
        }
    }

    /// Cancels the session's turn: one not yet sent ends at once; a sent one is cancelled in
    /// the harness, which answers the prompt with `cancelled`.
    pub(super) async fn cancel(&mut self, session_id: SessionId) -> bool {
        let Some(index) = self.turns.iter().position(|t| t.session_id == session_id) else {
            return false;
        };
        match self.turns[index].state.clone() {
            TurnState::Waiting => {
                let turn = self.turns.remove(index);
                let (event, effect) = ending(&turn, "cancelled", None);
                if let Err(error) = self.deps.appender.append(vec![event], vec![effect]).await {
                    tracing::error!(%error, "recording a cancelled turn");
                }
            }
            TurnState::Sent { .. } => self.send_cancel(session_id),
        }
        true
    }
}
