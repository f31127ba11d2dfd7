//! What the database holds of an agent's open work, as the core takes it: its unfinished turns
//! ([`OpenTurn`]), their questions waiting for a person ([`WaitingQuestion`]) and its open grants
//! ([`StoredGrant`]). The core's own types, not the store's rows: the shell reads the rows and
//! maps them into these (`supervisor::reads`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::harness::Question;
use crate::ids::{SessionId, TurnId};

/// What the database holds of an agent's open work.
#[derive(Debug, Clone, Default)]
pub struct OpenWork {
    /// Its unfinished turns (parked ones included).
    pub turns: Vec<OpenTurn>,
    /// The questions of its open turns (running or parked) still waiting for a person.
    pub questions: Vec<WaitingQuestion>,
    /// Its open grants (one-shot, and session grants not revoked).
    pub grants: Vec<StoredGrant>,
}

impl From<Vec<OpenTurn>> for OpenWork {
    fn from(turns: Vec<OpenTurn>) -> Self {
        Self { turns, ..Self::default() }
    }
}

/// How far a stored turn got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredTurnState {
    /// Its prompt is not recorded as sent.
    Pending,
    /// Its `session/prompt` was recorded as sent to this harness generation.
    Sent {
        /// The JSON-RPC id.
        request_id: String,
        /// The harness generation.
        generation: i64,
    },
    /// Parked: its harness was lost while a question of its waited for a person.
    Parked,
}

/// An unfinished turn as stored.
#[derive(Debug, Clone)]
pub struct OpenTurn {
    /// Its id.
    pub id: TurnId,
    /// Its session.
    pub session_id: SessionId,
    /// The prompt's content blocks.
    pub prompt: Value,
    /// How far it got.
    pub state: StoredTurnState,
    /// When the prompt arrived.
    pub created_at: DateTime<Utc>,
    /// When it must have ended (set when its prompt is recorded).
    pub deadline_at: Option<DateTime<Utc>>,
    /// The harness's id for its session.
    pub acp_session_id: Option<String>,
    /// The agent's own turn time limit (`None`: the server's).
    pub time_limit: Option<Duration>,
}

/// A question of an open turn still waiting for a person.
#[derive(Debug, Clone)]
pub struct WaitingQuestion {
    /// The turn it holds.
    pub turn_id: TurnId,
    /// The question.
    pub question: Question,
}

/// A grant as stored: an approval agenthold may answer the same call with again.
#[derive(Debug, Clone)]
pub struct StoredGrant {
    /// The question whose approval it is.
    pub permission_id: uuid::Uuid,
    /// Its session.
    pub session_id: SessionId,
    /// The call, as the harness described it then.
    pub tool_call: Value,
    /// A session grant (kept after a use), else a one-shot one.
    pub standing: bool,
}
