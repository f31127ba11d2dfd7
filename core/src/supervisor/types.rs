//! The core's interface: the inputs it takes, the effects it asks for, and the values they
//! carry (time, links, persists, jobs, replies).

use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::sandboxd::{FromSandboxd, ProcessStart, ProcessState, ToSandboxd};
use super::{Snapshot, WakeError};
use crate::events::NewEvent;
use crate::events::side_effects::SideEffect;
use crate::ids::{SessionId, TurnId};

/// How long to wait for a harness, a sandbox, a turn.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `initialize`, `session/new|load|resume`, and a process start.
    pub harness_request: Duration,
    /// A whole turn.
    pub turn: Duration,
    /// How long a turn past its limit has to stop after `session/cancel` before its harness is
    /// killed.
    pub cancel_grace: Duration,
    /// How long a running turn waits for its sandbox to (re)connect before it fails.
    pub reconnect_grace: Duration,
    /// How long a small stdout acknowledgement waits to go out with the next ones (the server's
    /// `supervisor::ACK_DELAY`).
    pub ack_delay: Duration,
}

/// A lifecycle request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LifecycleError {
    /// The agent has a turn in progress.
    #[error("the agent has a turn in progress")]
    Busy,
    /// The sandbox could not be reached or started.
    #[error("{0}")]
    Failed(String),
}

/// Identifies one persist of this core.
pub type PersistId = u64;
/// Identifies one sandboxd connection.
pub type LinkId = u64;
/// Identifies a reply the shell holds for a caller.
pub type ReplyId = u64;
/// Identifies one job of this core: its result names it, so a result the core no longer waits
/// for is recognised as stale.
pub type JobId = u64;

/// The time of an input: monotonic for deadlines, wall clock for what is stored.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Monotonic.
    pub mono: Instant,
    /// Wall clock.
    pub wall: DateTime<Utc>,
}

impl Now {
    /// The monotonic instant of a wall-clock time (now if it is past).
    pub fn mono_at(&self, at: DateTime<Utc>) -> Instant {
        let ahead = (at - self.wall).to_std().unwrap_or(Duration::ZERO);
        self.mono + ahead
    }

    /// `d` from now, on both clocks.
    pub fn plus(&self, d: Duration) -> (Instant, DateTime<Utc>) {
        (self.mono + d, self.wall + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero()))
    }
}

/// Why a persist failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFailure {
    /// The database was unreachable or the stored offset moved: try again after a takeover.
    Transient,
    /// The database refuses this content (SQLSTATE class 22): retrying cannot help.
    Rejected,
}

/// What the harness start job produced.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The new harness generation.
    pub generation: i64,
    /// Its channel.
    pub channel: u32,
    /// The process to start.
    pub start: ProcessStart,
    /// The mode every session is put in once opened (`session/set_mode`), if the adapter names one.
    pub session_mode: Option<String>,
    /// What answers the harness's permission requests.
    pub gate: crate::permissions::Gate,
    /// How the server signs the harness in when it asks (the agent's named method, the
    /// adapter's, the variables its environment holds).
    pub auth: super::Auth,
    /// agenthold's MCP server for this agent, offered in `session/new` and `session/load` when
    /// the harness advertises `mcpCapabilities.http`.
    pub mcp_servers: crate::mcp::Offered,
    /// The folder its sessions start in (`None`: the home): the agent's cloned repository.
    pub session_cwd: Option<String>,
}

/// Inputs.
#[derive(Debug)]
pub enum Input {
    /// The agent's open work as stored (at start, and on every new prompt).
    OpenTurns(super::OpenWork),
    /// Cancel the session's turn; the reply says whether there was one.
    Cancel {
        /// The session.
        session_id: SessionId,
        /// Who waits.
        reply: ReplyId,
    },
    /// Stop the sandbox.
    Sleep {
        /// Who waits.
        reply: ReplyId,
    },
    /// Start the sandbox.
    Wake {
        /// Who waits.
        reply: ReplyId,
    },
    /// Hand out a terminal once the sandbox is connected.
    Terminal {
        /// Who waits.
        reply: ReplyId,
    },
    /// Remove the sandbox and its home.
    Destroy {
        /// Who waits.
        reply: ReplyId,
    },
    /// The agent's environment changed: restart the harness once no turn runs.
    EnvironmentChanged,
    /// The agent names another login method (`auth_method`; `None`: none): the running
    /// harness signs in with it the next time it asks (no restart).
    AuthMethodChanged(Option<String>),
    /// Postgres stopped (`false`) or started (`true`) answering: while it does not, a sandbox
    /// cannot reconnect (the tunnel checks its token there), so the reconnect grace waits.
    Database {
        /// Whether it answers.
        up: bool,
    },
    /// The sandbox's container stopped on its own.
    SandboxExited {
        /// When (the engine's clock).
        at: chrono::DateTime<chrono::Utc>,
        /// `Some`: it ran out of memory (the message says so).
        oom: Option<String>,
    },
    /// A person answered a pending permission question.
    AnswerPermission {
        /// The question.
        permission_id: uuid::Uuid,
        /// The answer.
        choice: crate::permissions::Choice,
        /// Who answered (recorded in `permission_resolved`).
        by: serde_json::Value,
        /// Who waits.
        reply: ReplyId,
    },
    /// The agent's posture or policy changed: this gate decides from now on, waiting questions
    /// included.
    GateChanged(Box<crate::permissions::Gate>),
    /// Revoke a session grant.
    RevokeGrant {
        /// The question whose answer made it.
        permission_id: uuid::Uuid,
        /// Its session.
        session_id: SessionId,
        /// Who revokes it.
        by: serde_json::Value,
        /// Who waits.
        reply: ReplyId,
    },
    /// sandboxd connected and said hello.
    Attached {
        /// The connection.
        link: LinkId,
        /// The processes it holds.
        processes: Vec<ProcessState>,
    },
    /// stdout bytes of a process.
    Stdout {
        /// The connection.
        link: LinkId,
        /// The channel.
        channel: u32,
        /// The offset of the first byte.
        offset: u64,
        /// The bytes.
        bytes: Bytes,
    },
    /// stderr bytes of a process.
    Stderr {
        /// The connection.
        link: LinkId,
        /// The channel.
        channel: u32,
        /// The bytes.
        bytes: Bytes,
    },
    /// What sandboxd reports about a process.
    Control {
        /// The connection.
        link: LinkId,
        /// The message.
        msg: FromSandboxd,
    },
    /// The connection closed.
    LinkClosed {
        /// The connection.
        link: LinkId,
    },
    /// A persist finished.
    Persisted {
        /// Which.
        id: PersistId,
        /// How.
        result: Result<(), StoreFailure>,
    },
    /// The takeover snapshot ([`Effect::LoadTakeover`]); `None` when it could not be read.
    Loaded {
        /// The connection it is for.
        link: LinkId,
        /// What the database holds.
        snapshot: Option<Box<Snapshot>>,
    },
    /// The wake job has to wait for a slot on the host (`AGENTHOLD_MAX_AWAKE`); it goes on once
    /// one is free and answers [`Input::Woken`] then.
    WakeQueued {
        /// The wake job.
        job: JobId,
    },
    /// The wake job finished.
    Woken {
        /// The wake job.
        job: JobId,
        /// How it went.
        result: Result<(), WakeError>,
    },
    /// The harness start job finished: `Ok(None)` when the agent is gone.
    Launched {
        /// The start job.
        job: JobId,
        /// What it launched.
        result: Result<Option<Launch>, String>,
    },
    /// Why a harness killed by SIGKILL died ([`Job::ExplainKill`]).
    KillExplained {
        /// The job that asked.
        job: JobId,
        /// `Some(message)` when the engine killed it for want of memory.
        oom: Option<String>,
    },
    /// Whether the sandbox's disk is full, for turns that ended after reporting ENOSPC or EDQUOT
    /// ([`Job::CheckDisk`]): `Some(message)` when it is.
    DiskChecked {
        /// The turns, with their sessions.
        turns: Vec<(TurnId, SessionId)>,
        /// What is full, and why.
        finding: Option<String>,
    },
    /// Whether the egress proxy saw a provider's response cut short for turns the harness failed
    /// ([`Job::CheckProviderStream`]): `Some(what it saw)` when it did.
    ProviderStreamChecked {
        /// The turns, with their sessions.
        turns: Vec<(TurnId, SessionId)>,
        /// What was cut short, and how.
        finding: Option<String>,
    },
    /// The turn got its slot under the server's limit on running turns ([`SlotChange::Ask`]).
    SlotGranted {
        /// The turn.
        turn_id: TurnId,
    },
    /// No slot was free: the turn waits in the server's queue (say so in its session).
    SlotQueued {
        /// The turn.
        turn_id: TurnId,
        /// Turns running under the limit it waits for.
        running: usize,
        /// Turns queued ahead of it.
        ahead: usize,
        /// That limit.
        limit: usize,
        /// Which limit: the server's, its workspace's or its user's.
        scope: SlotScope,
    },
    /// The stop job finished.
    Stopped {
        /// The stop job.
        job: JobId,
        /// Who waits.
        reply: ReplyId,
        /// How it went.
        result: Result<(), String>,
    },
}

/// Something to send to sandboxd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    /// A control message.
    Control(ToSandboxd),
    /// stdin bytes.
    Stdin {
        /// The channel.
        channel: u32,
        /// The offset.
        offset: u64,
        /// The bytes.
        bytes: Bytes,
    },
}

/// A job the shell runs (several IO steps, one result input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Make the sandbox exist and run; answers [`Input::Woken`] (and [`Input::WakeQueued`]
    /// first when it waits for a slot on the host).
    Wake {
        /// Its id.
        job: JobId,
    },
    /// Load the agent, compute the launch, allocate its channel and generation; answers
    /// [`Input::Launched`].
    StartHarness {
        /// Its id.
        job: JobId,
    },
    /// Stop the sandbox; answers [`Input::Stopped`].
    Stop {
        /// Its id.
        job: JobId,
        /// Who waits.
        reply: ReplyId,
    },
    /// Remove the sandbox and reply; the shell ends after it.
    Destroy {
        /// Who waits.
        reply: ReplyId,
    },
    /// Ask the engine whether the sandbox runs (after a restart, turns were running in it); one
    /// that does not is reported as [`Input::SandboxExited`].
    CheckSandbox,
    /// Ask the engine whether the sandbox ran out of memory; answers [`Input::KillExplained`].
    ExplainKill {
        /// Its id.
        job: JobId,
    },
    /// Ask the driver whether the sandbox's disk is full; answers [`Input::DiskChecked`].
    CheckDisk {
        /// The turns that ended after reporting ENOSPC or EDQUOT, with their sessions.
        turns: Vec<(TurnId, SessionId)>,
    },
    /// Ask the egress proxy's report whether a provider's response to this sandbox was cut short
    /// since the turns began; answers [`Input::ProviderStreamChecked`].
    CheckProviderStream {
        /// The turns the harness failed, with their sessions and when each began.
        turns: Vec<(TurnId, SessionId, DateTime<Utc>)>,
    },
    /// Read the open turns again; answers [`Input::OpenTurns`]. Asked after a takeover: its
    /// snapshot was read while prompts could still arrive, and merging it drops the turns it
    /// predates (a later read brings them back).
    LoadTurns,
    /// Allocate a terminal channel on this link and reply with the access.
    Terminal {
        /// Who waits.
        reply: ReplyId,
        /// The connection.
        link: LinkId,
    },
}

/// A reply to a caller.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Whether a turn was cancelled.
    Cancelled(bool),
    /// A lifecycle request's outcome.
    Lifecycle(Result<(), LifecycleError>),
    /// A terminal could not be handed out.
    TerminalFailed(String),
    /// A permission answer's outcome.
    Answered(Result<(), AnswerError>),
}

/// A permission answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The question is not pending (answered already, or its harness is gone).
    #[error("the question is not pending")]
    NotPending,
    /// The choice is not one the harness offered.
    #[error("{0}")]
    BadChoice(String),
    /// The answer could not be stored (the harness gets it after the takeover, if at all).
    #[error("the answer could not be stored")]
    NotRecorded,
}

/// A turn a persist ends, for the server's metrics (counted once the persist commits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnded {
    /// The turn.
    pub turn_id: TurnId,
    /// Its stop reason (`end_turn`, `cancelled`, `error`, …).
    pub stop_reason: String,
    /// How long it ran (from its prompt to its end).
    pub duration: Duration,
}

/// Effects, in the order they must be performed.
#[derive(Debug)]
pub enum Effect {
    /// Store events and state changes in one transaction; answer [`Input::Persisted`]. Submit
    /// without waiting for the commit.
    Persist {
        /// Its id.
        id: PersistId,
        /// The events.
        events: Vec<NewEvent>,
        /// The state changes.
        side: Vec<SideEffect>,
        /// The turns it ends (their `turn_end` events are among `events`).
        ended: Vec<TurnEnded>,
    },
    /// Send to the current connection (if it is still `link`).
    Send {
        /// The connection.
        link: LinkId,
        /// What.
        out: Outbound,
    },
    /// Close the connection (sandboxd dials again).
    DropLink {
        /// The connection.
        link: LinkId,
    },
    /// Read the takeover snapshot; answer [`Input::Loaded`].
    LoadTakeover {
        /// The connection it is for.
        link: LinkId,
    },
    /// Run a job.
    Job(Job),
    /// Take or give back a turn's slot under the server's limit on running turns.
    Slot(SlotChange),
    /// Answer a caller.
    Reply {
        /// Who.
        to: ReplyId,
        /// What.
        outcome: Outcome,
    },
}

/// Which limit on running turns a queued turn waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotScope {
    /// The server's (`AGENTHOLD_MAX_RUNNING_TURNS`).
    Server,
    /// Its agent's workspace's (`AGENTHOLD_MAX_RUNNING_TURNS_PER_WORKSPACE`).
    Workspace,
    /// Its agent's maker's (`AGENTHOLD_MAX_RUNNING_TURNS_PER_USER`).
    User,
}

impl SlotScope {
    /// How the `TURN_QUEUED` notice names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Workspace => "workspace",
            Self::User => "user",
        }
    }
}

/// A turn's slot under the server's limit on running turns (`supervisor::slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotChange {
    /// A turn not yet sent wants one: answer [`Input::SlotGranted`] once it has it (and
    /// [`Input::SlotQueued`] first if it has to wait).
    Ask(TurnId),
    /// A turn that already runs in its harness takes one at once, even past the limit.
    Take(TurnId),
    /// The turn gives its slot back (or leaves the queue): it ended, or waits for a person.
    Release(TurnId),
}

/// Timers, fired in this order when due at the same instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The sandbox must connect back.
    Reconnect,
    /// The harness must answer `Start`.
    HarnessStart,
    /// One of our requests must be answered.
    Request,
    /// A turn ran past its time limit, or past the grace after its cancel.
    Turn,
    /// A delayed stdout acknowledgement is due.
    Ack,
}
