//! The harness process as the core sees it: its phase, the requests we wait on, the sessions it
//! knows, its stdout and stdin, and the end of its stderr.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::auth::Auth;
use super::outbox::Outbox;
use super::sandboxd::ExitStatus;
use super::stdout::Stdout;
use crate::acp::messages::Capabilities;
use crate::ids::{SessionId, TurnId};
use crate::permissions::Gate;

/// stderr kept for error events.
pub const STDERR_TAIL_BYTES: usize = 2048;
/// The most updates kept for a spare session before a session takes it ([`SpareUpdates`]).
pub const MAX_SPARE_UPDATES: usize = 32;
/// The most bytes (as JSON) of updates kept for a spare session.
pub const MAX_SPARE_UPDATE_BYTES: usize = 64 * 1024;

/// An error's message with the end of the harness's stderr after it (`message` alone when the
/// harness printed nothing there).
pub fn with_stderr(message: &str, stderr: &str) -> String {
    if stderr.is_empty() { message.to_owned() } else { format!("{message}\nstderr: {stderr}") }
}

/// Where the harness process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `Start` sent; waiting for `Started`.
    Starting,
    /// `initialize` sent.
    Initializing,
    /// Initialized with these capabilities.
    Ready(Capabilities),
}

/// What a request we sent was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// `initialize`.
    Initialize,
    /// `session/new`; `reset` when it replaces a session the harness could not restore.
    NewSession {
        /// The session.
        session_id: SessionId,
        /// Whether the context was lost.
        reset: bool,
        /// Sent again after signing in (a second `auth_required` is not signed in for).
        retry: bool,
    },
    /// `session/load` (`load`) or `session/resume` of the harness session `acp_id`.
    Restore {
        /// The session.
        session_id: SessionId,
        /// The harness's id for it.
        acp_id: String,
        /// `session/load` (else `session/resume`).
        load: bool,
        /// Sent again after signing in.
        retry: bool,
    },
    /// `authenticate` with `method`, asked for by a session call, which goes again once it
    /// answers.
    Authenticate {
        /// The session that asked for it.
        session_id: SessionId,
        /// The method.
        method: String,
        /// The call to send again.
        then: AfterAuth,
    },
    /// `session/set_mode` of a session just opened as `acp_id`.
    SetMode {
        /// The session.
        session_id: SessionId,
        /// The harness's id for it.
        acp_id: String,
    },
    /// `session/prompt` of a turn (its deadline is the turn's).
    Prompt {
        /// The turn.
        turn_id: TurnId,
    },
}

/// The session call sent again once `authenticate` succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterAuth {
    /// `session/new`.
    New {
        /// Whether it replaces a session the harness could not restore.
        reset: bool,
    },
    /// `session/load` (`load`) or `session/resume` of `acp_id`.
    Restore {
        /// The harness's id for the session.
        acp_id: String,
        /// `session/load` (else `session/resume`).
        load: bool,
    },
}

/// A request we wait for.
#[derive(Debug, Clone)]
pub struct Request {
    /// What it was for.
    pub what: Pending,
    /// When it must be answered (`None`: the turn's own deadline applies).
    pub deadline: Option<Instant>,
}

/// A permission request of the harness's waiting for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Its id (`permissions::question_id`).
    pub permission_id: uuid::Uuid,
    /// The session it belongs to.
    pub session_id: SessionId,
    /// The harness's JSON-RPC id for it.
    pub request_id: serde_json::Value,
    /// The options the harness offered.
    pub options: serde_json::Value,
    /// The tool call, as the harness described it (for a parked turn: what to grant); for an
    /// elicitation, the request's params (message, requested schema).
    pub tool_call: serde_json::Value,
    /// A permission request, or the harness's own question.
    pub kind: QuestionKind,
}

/// What a question for a person is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionKind {
    /// `session/request_permission`: allow, deny or an option.
    Permission,
    /// `elicitation/create` (form): content, decline or cancel.
    Elicitation,
}

impl QuestionKind {
    /// As stored (`permission_requests.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Permission => "permission",
            Self::Elicitation => "elicitation",
        }
    }

    /// From its stored name (anything unknown is a permission request).
    pub fn parse(kind: &str) -> Self {
        if kind == "elicitation" { Self::Elicitation } else { Self::Permission }
    }
}

/// A session as the current harness knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionPhase {
    /// Being created, loaded or resumed (history replayed meanwhile is not stored).
    Opening,
    /// Known under this ACP id.
    Ready(String),
}

/// Where a harness's stdout and stdin stand when the core takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessStreams {
    /// stdout is read from here (sandboxd resends from it).
    pub stdout_from: u64,
    /// stdout is stored up to here.
    pub stdout_stored: u64,
    /// stdin goes on at this offset.
    pub stdin_next: u64,
    /// stdin written so far, as sandboxd confirmed.
    pub stdin_written: u64,
}

impl HarnessStreams {
    /// A process just started: nothing read or written.
    pub const FRESH: Self = Self { stdout_from: 0, stdout_stored: 0, stdin_next: 0, stdin_written: 0 };
}

/// The current harness process.
#[derive(Debug)]
pub struct Harness {
    /// Bumped on every start; offsets belong to one generation.
    pub generation: i64,
    /// Its tunnel channel.
    pub channel: u32,
    /// Where it is.
    pub phase: Phase,
    /// Its stdout.
    pub stdout: Stdout,
    /// Its stdin.
    pub outbox: Outbox,
    /// Our requests awaiting an answer.
    pub pending: HashMap<String, Request>,
    /// Sessions it knows or is opening.
    pub sessions: HashMap<SessionId, SessionPhase>,
    /// When it should have answered `Start`.
    pub start_deadline: Option<Instant>,
    /// Its exit, once sandboxd reported it: status and total stdout.
    pub exited: Option<(ExitStatus, u64)>,
    /// Killed by SIGKILL: the engine is being asked whether memory ran out (by this job).
    pub explaining: Option<super::JobId>,
    /// The mode sessions are put in once opened (the adapter's choice).
    pub session_mode: Option<String>,
    /// What answers its permission requests.
    pub gate: Gate,
    /// Its permission requests waiting for a person, by question id.
    pub questions: HashMap<uuid::Uuid, Question>,
    /// How the server signs it in when it asks.
    pub auth: Auth,
    /// Sessions loaded or resumed (or being), by their ACP ids, whose next prompt has not been
    /// sent yet: the history the harness replays meanwhile (before or after its answer) is not
    /// stored again.
    pub replaying: HashMap<SessionId, String>,
    /// The MCP servers its sessions are offered (when it speaks MCP over HTTP).
    pub mcp_servers: crate::mcp::Offered,
    /// Its error answer to a turn's prompt and every line after it, held while the shell reads
    /// the egress proxy's report ([`super::provider`]).
    pub held: Option<super::provider::HeldLines>,
    /// The proxy's report as read for a turn whose error answer is being handled again.
    pub provider_checked: Option<(crate::ids::TurnId, Option<String>)>,
    /// The folder its sessions start in (`session/new`, `load`, `resume`): the agent's
    /// repository once cloned ([`crate::repo`]); `None`, the agent's home.
    pub session_cwd: Option<String>,
    /// A session it opened (in that folder, with those MCP servers) before any of the agent's
    /// sessions took it — the warm pool's: the next session to open takes it.
    pub spare_session: Option<String>,
    /// What it sent about its spare session meanwhile (OpenCode announces its commands right
    /// after `session/new`): the taking session's first events.
    pub spare_updates: SpareUpdates,
    stderr_tail: VecDeque<u8>,
}

/// The updates a harness sent for its spare session before a session took it, in order,
/// bounded by [`MAX_SPARE_UPDATES`] and [`MAX_SPARE_UPDATE_BYTES`] (the rest are not kept).
#[derive(Debug, Clone, Default)]
pub struct SpareUpdates {
    updates: Vec<serde_json::Value>,
    bytes: usize,
}

impl SpareUpdates {
    /// Those read back from the database (a takeover), bounds kept.
    pub fn from_stored(updates: Vec<serde_json::Value>) -> Self {
        let mut kept = Self::default();
        for update in updates {
            kept.push(update);
        }
        kept
    }

    /// Keeps `update` if it fits; says whether it did.
    pub fn push(&mut self, update: serde_json::Value) -> bool {
        let size = serde_json::to_string(&update).map_or(usize::MAX, |text| text.len());
        if self.updates.len() >= MAX_SPARE_UPDATES || size > MAX_SPARE_UPDATE_BYTES - self.bytes {
            return false;
        }
        self.bytes += size;
        self.updates.push(update);
        true
    }

    /// Takes them all, in order.
    pub fn take(&mut self) -> Vec<serde_json::Value> {
        self.bytes = 0;
        std::mem::take(&mut self.updates)
    }
}

impl Harness {
    /// A harness on `channel` whose streams stand at `streams`, answered by `gate` (there is no
    /// default: a harness is never built without the gate its agent's posture makes).
    pub fn new(generation: i64, channel: u32, phase: Phase, streams: HarnessStreams, gate: Gate) -> Self {
        Self {
            generation,
            channel,
            phase,
            stdout: Stdout::new(streams.stdout_from, streams.stdout_stored),
            outbox: Outbox::new(streams.stdin_next, streams.stdin_written),
            pending: HashMap::new(),
            sessions: HashMap::new(),
            start_deadline: None,
            exited: None,
            explaining: None,
            session_mode: None,
            gate,
            questions: HashMap::new(),
            auth: Auth::default(),
            replaying: HashMap::new(),
            mcp_servers: crate::mcp::Offered::default(),
            held: None,
            provider_checked: None,
            session_cwd: None,
            spare_session: None,
            spare_updates: SpareUpdates::default(),
            stderr_tail: VecDeque::new(),
        }
    }

    /// The MCP servers to offer a session: none unless the harness speaks MCP over HTTP.
    pub fn offered_mcp(&self) -> &[agent_client_protocol::v1::schema::McpServer] {
        match self.phase {
            Phase::Ready(capabilities) if capabilities.mcp_http => &self.mcp_servers.0,
            _ => &[],
        }
    }

    /// The session with this ACP id, if ready.
    pub fn session_by_acp(&self, acp_id: &str) -> Option<SessionId> {
        self.sessions.iter().find_map(|(id, phase)| match phase {
            SessionPhase::Ready(known) if known == acp_id => Some(*id),
            _ => None,
        })
    }

    /// The session being loaded or resumed as `acp_id`, or loaded and not prompted since.
    pub fn replaying_as(&self, acp_id: &str) -> Option<SessionId> {
        self.replaying.iter().find_map(|(id, known)| (known == acp_id).then_some(*id))
    }

    /// Keeps the end of stderr.
    pub fn keep_stderr(&mut self, bytes: &[u8]) {
        let keep = bytes.len().min(STDERR_TAIL_BYTES);
        self.stderr_tail.extend(bytes[bytes.len() - keep..].iter().copied());
        while self.stderr_tail.len() > STDERR_TAIL_BYTES {
            self.stderr_tail.pop_front();
        }
    }

    /// The end of stderr as text.
    pub fn stderr_text(&self) -> String {
        let bytes: Vec<u8> = self.stderr_tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}
