//! State changes stored in the same transaction as a request's events: how far the harness's
//! stdout is stored, turns ended, prompts marked sent, the stdin journal, permission answers and
//! grants. The supervisor's core says what changes; the server's appender applies them.

use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::ids::{AgentId, SessionId, TurnId};

/// The grant an answer opens (the supervisor core's grants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantScope {
    /// None.
    None,
    /// A one-shot grant: the parked turn's retried call is allowed once more.
    Once,
    /// A session grant: agenthold answers the same call in the session itself until revoked.
    Session {
        /// Who granted it.
        granted_by: Option<uuid::Uuid>,
    },
}

/// State changes stored in the same transaction as a request's events.
#[derive(Debug, Clone)]
pub enum SideEffect {
    /// The harness's stdout is stored from `from` to `to`: applied only if the stored offset is
    /// `from` (a compare-and-set), so a line after a failed one never moves the offset past it.
    StdoutStored {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation the offsets belong to.
        generation: i64,
        /// The stored offset this line follows.
        from: u64,
        /// The offset just past the line.
        to: u64,
    },
    /// A turn ended (idempotent: a turn already ended drops the request's `turn_end` and the
    /// `error` events naming it).
    EndTurn {
        /// The turn.
        turn_id: TurnId,
        /// Its stop reason (`end_turn`, `cancelled`, `error`, …).
        stop_reason: String,
        /// Its tokens, when the harness said.
        tokens: Option<super::usage::Tokens>,
        /// The session's cost so far as the harness last reported it, if it did.
        session_cost: Option<super::usage::Cost>,
    },
    /// A turn's `session/prompt` is about to be sent.
    MarkSent {
        /// The turn.
        turn_id: TurnId,
        /// The JSON-RPC id.
        request_id: String,
        /// The harness generation.
        generation: i64,
        /// The stdin offset just past the request.
        stdin_end: i64,
        /// When the turn must have ended.
        deadline_at: DateTime<Utc>,
    },
    /// The harness knows a session under this ACP id.
    SessionOpened {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation.
        generation: i64,
        /// The session.
        session_id: SessionId,
        /// The harness's id for it.
        acp_session_id: String,
    },
    /// The harness sent an update for its spare session (the warm pool's, no session has taken
    /// it yet): kept with the sandbox until one does.
    SpareUpdate {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation.
        generation: i64,
        /// The spare session's ACP id.
        acp_session_id: String,
        /// The update (`params.update`).
        update: serde_json::Value,
    },
    /// The harness's `initialize` answer.
    HarnessInit {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation.
        generation: i64,
        /// The answer.
        init: serde_json::Value,
    },
    /// The harness of this generation is gone.
    ClearHarness {
        /// The agent.
        agent_id: AgentId,
        /// Its generation.
        generation: i64,
    },
    /// Channels up to `above` are taken (sandboxd still holds them).
    BumpChannel {
        /// The agent.
        agent_id: AgentId,
        /// The highest channel in use.
        above: u32,
    },
    /// A permission request the engine answered (the question and its outcome, recorded with
    /// the line that asked, before the answer is sent).
    PermissionAnswered(Box<AnsweredPermission>),
    /// A turn's time limit moved: stopped while a question waits (`None`), running again after.
    TurnDeadline {
        /// The turn.
        turn_id: TurnId,
        /// Its new deadline.
        deadline_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// A pending permission question answered (by a person, or cancelled with its turn).
    PermissionResolved {
        /// The question.
        permission_id: uuid::Uuid,
        /// The outcome sent to the harness.
        outcome: serde_json::Value,
        /// The grant the answer opens, if any.
        grant: GrantScope,
    },
    /// A session grant revoked: agenthold no longer answers with it.
    GrantRevoked {
        /// The question whose answer made it.
        permission_id: uuid::Uuid,
        /// Who revoked it.
        revoked_by: Option<uuid::Uuid>,
    },
    /// A one-shot grant allowed its call: closed.
    GrantUsed {
        /// The question whose approval it was.
        permission_id: uuid::Uuid,
    },
    /// A turn parked: its sandbox was lost while a question waited for a person.
    ParkTurn {
        /// The turn.
        turn_id: TurnId,
    },
    /// A parked turn resumes with this prompt.
    UnparkTurn {
        /// The turn.
        turn_id: TurnId,
        /// The prompt that continues it.
        prompt: serde_json::Value,
    },
    /// A stdin frame about to be sent (the journal a takeover resends from); frames below
    /// `written` are forgotten.
    PendingStdin {
        /// The agent.
        agent_id: AgentId,
        /// The harness generation.
        generation: i64,
        /// Its offset.
        offset: u64,
        /// Its bytes.
        bytes: Bytes,
        /// stdin confirmed written so far.
        written: u64,
    },
}

/// A permission question and the outcome it was answered with (`None`: it waits for a person).
#[derive(Debug, Clone)]
pub struct AnsweredPermission {
    /// Its id (`permissions::question_id`).
    pub permission_id: uuid::Uuid,
    /// Its session.
    pub session_id: SessionId,
    /// The session's open turn.
    pub turn_id: Option<TurnId>,
    /// The harness's JSON-RPC id, as it sent it.
    pub request_id: serde_json::Value,
    /// The harness generation that asked.
    pub generation: i64,
    /// The tool call it is about.
    pub tool_call: serde_json::Value,
    /// The options offered.
    pub options: serde_json::Value,
    /// The outcome answered, unless it waits for a person.
    pub outcome: Option<serde_json::Value>,
    /// The harness's own question (`elicitation/create`), not a permission request.
    pub elicitation: bool,
}
