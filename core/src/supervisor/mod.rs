//! The supervisor's protocol logic without IO: inputs in (commands, sandboxd's messages, commits,
//! finished jobs, time), effects out (persist, send, drop the link, run a job, reply), in one FIFO
//! whose order is the order of execution. No `async`, no database, no sockets, no clock: every
//! input carries [`Now`], request ids come from a per-incarnation prefix and a counter.
//!
//! The rules it keeps (docs/design.md, "The supervisor's core"):
//! - **Record, then send**: a stdin frame leaves only after the persist that journals it
//!   committed; an acknowledgement only covers stdout lines whose events committed.
//! - A failed persist drops the link (the takeover rebuilds from what the database holds); a
//!   persist the database rejects for its content is replaced by an error event, never retried.
//! - Inputs from a link other than the current one are ignored.
//!
//! The server's shell (`agenthold_server::supervisor::shell`) performs the effects and feeds the
//! results back as inputs; the paths `supervisor::…` named in these docs are the server's.

mod auth;
mod disk;
mod endings;
mod failure;
mod grants;
mod harness;
mod joined;
mod lifecycle;
mod lines;
mod observed;
mod outbox;
mod parking;
mod provider;
mod questions;
pub mod sandboxd;
mod slots;
mod stdout;
mod stored;
mod takeover;
#[cfg(test)]
mod tests;
mod timers;
mod turns;
mod types;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use bytes::Bytes;
use lifecycle::Sandbox;

pub use auth::Auth;
pub use disk::says_disk_full;
pub use failure::{Failure, FailureCode, WakeError};
pub use grants::Grant;
pub use harness::{
    Harness, HarnessStreams, Phase, Question, QuestionKind, STDERR_TAIL_BYTES, SessionPhase, with_stderr,
};
pub use observed::Observed;
pub use parking::Parked;
pub use sandboxd::{ExitStatus, FromSandboxd, ProcessStart, ProcessState, ResumeFrom, ToSandboxd};
pub use stored::{OpenTurn, OpenWork, StoredGrant, StoredTurnState, WaitingQuestion};
pub use takeover::{Snapshot, SnapshotHarness};
pub use turns::{Turn, TurnState};
pub use types::{
    AnswerError, Effect, Input, Job, JobId, Launch, LifecycleError, LinkId, Now, Outbound, Outcome, PersistId, ReplyId,
    SlotChange, SlotScope, StoreFailure, Timeouts, Timer, TurnEnded,
};

use crate::events::NewEvent;
use crate::events::side_effects::SideEffect;
use crate::ids::{AgentId, SessionId, TurnId};

/// The connection's state.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LinkState {
    /// No connection.
    Down,
    /// Connected; waiting for persists in flight before reading the snapshot.
    Draining { link: LinkId, processes: Vec<ProcessState> },
    /// Connected; the snapshot is being read.
    Loading { link: LinkId, processes: Vec<ProcessState> },
    /// Taken over.
    Up { link: LinkId },
}

/// What a persist in flight was for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Purpose {
    /// Stdout lines `from..end` (and maybe stdin frames they produced); `lines` of them
    /// (several only when joined, `joined.rs`).
    Line { generation: i64, end: u64, from: u64, sessions: Vec<SessionId>, lines: u32 },
    /// Journals stdin frames only.
    Stdin { generation: i64 },
    /// Records a person's answer to a question and journals the response (whoever answered
    /// hears back once it is stored).
    Answer { generation: i64, reply: Option<ReplyId> },
    /// Records a prompt about to be sent.
    Prompt { generation: i64, turn_id: TurnId },
    /// Ends turns.
    Ending,
    /// Anything else (bookkeeping).
    Other,
}

/// Sessions whose cost so far the core remembers.
const SESSION_COSTS_KEPT: usize = 1024;

/// The supervisor's core.
pub struct Core {
    agent_id: AgentId,
    /// The agent's home inside the sandbox (the sessions' working directory).
    home_dir: String,
    timeouts: Timeouts,
    id_prefix: String,
    next_request: u64,
    next_persist: PersistId,
    link: LinkState,
    /// When a disconnected sandbox must be back (not counted while `database_down`).
    reconnect_at: Option<Instant>,
    database_down: bool,
    harness: Option<Harness>,
    /// The harness start job that runs, if one does.
    launching: Option<JobId>,
    /// Where the sandbox's start stands (a wake running, failed, or waiting for sandboxd to dial
    /// in), or that it was destroyed.
    sandbox: Sandbox,
    /// When the current sandboxd connection attached (a stop reported from before it is old news).
    attached_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The next job's id.
    next_job: JobId,
    turns: Vec<Turn>,
    /// The turns' slots under the server's limit on running turns.
    slots: HashMap<TurnId, slots::SlotState>,
    /// Turns parked until their questions are answered (their harness was lost).
    parked: HashMap<TurnId, Parked>,
    /// Questions of a harness just lost, for the `fail_turns` that follows to park their turns.
    orphaned: Vec<Question>,
    /// The running turns' questions as last read (used when no harness was taken over).
    stored_questions: Vec<Question>,
    /// Open grants: one-shot (approvals given to parked turns' calls) and session grants.
    grants: Vec<Grant>,
    /// Grants used (one-shot) or revoked by this core (a reload must not bring them back before
    /// that commits).
    used_grants: std::collections::HashSet<uuid::Uuid>,
    /// Whether the open work was read once (answers before that wait for it).
    loaded: bool,
    /// Answers that arrived before the open work was read.
    deferred_answers: Vec<(uuid::Uuid, crate::permissions::Choice, serde_json::Value, ReplyId)>,
    /// Turns whose end is being stored, by persist: a reload must not bring them back.
    ending: HashMap<TurnId, PersistId>,
    /// Turns whose end is stored, the latest [`ENDED_REMEMBERED`]: a read of the open turns that
    /// began before the end was stored (a slow database) must not bring them back either.
    ended: VecDeque<TurnId>,
    terminal_waiters: Vec<ReplyId>,
    /// Wake requests waiting for the sandbox.
    wake_waiters: Vec<ReplyId>,
    in_flight: HashMap<PersistId, Purpose>,
    /// The agent's environment changed (a secret attached or detached; a new harness, model or
    /// env): the harness restarts with the new one as soon as no turn runs, and turns not sent
    /// yet wait for it (a prompt sent after the change sees the change).
    environment_changed: bool,
    /// A stop in flight, and the last failure (what [`Observed`] needs).
    condition: observed::Condition,
    /// Running turns that reported ENOSPC or EDQUOT: the disk is checked when they end.
    disk_suspects: std::collections::HashSet<TurnId>,
    /// What each session has cost so far, as its harness last reported (`usage_update`), for
    /// its turns' ends; at most [`SESSION_COSTS_KEPT`] sessions.
    session_costs: HashMap<SessionId, crate::events::usage::Cost>,
    /// Lines of harness `.0` up to stdout offset `.1` are stored one persist each: a joined
    /// persist of theirs was refused (`joined.rs`).
    read_singly: Option<(i64, u64)>,
    effects: VecDeque<Effect>,
}

/// How many ended turns a core remembers against stale reads (a read is at most a few seconds
/// old; an agent ends far fewer turns than this meanwhile).
const ENDED_REMEMBERED: usize = 256;

impl Core {
    /// A core for `agent_id`; request ids are `<id_prefix>-<n>`.
    pub fn new(agent_id: AgentId, home_dir: String, timeouts: Timeouts, id_prefix: String) -> Self {
        Self {
            agent_id,
            home_dir,
            timeouts,
            id_prefix,
            next_request: 1,
            next_persist: 1,
            link: LinkState::Down,
            reconnect_at: None,
            database_down: false,
            harness: None,
            launching: None,
            sandbox: Sandbox::Settled,
            attached_at: None,
            next_job: 1,
            turns: Vec::new(),
            slots: HashMap::new(),
            parked: HashMap::new(),
            orphaned: Vec::new(),
            stored_questions: Vec::new(),
            grants: Vec::new(),
            used_grants: std::collections::HashSet::new(),
            loaded: false,
            deferred_answers: Vec::new(),
            ending: HashMap::new(),
            ended: VecDeque::new(),
            terminal_waiters: Vec::new(),
            wake_waiters: Vec::new(),
            in_flight: HashMap::new(),
            environment_changed: false,
            condition: observed::Condition::default(),
            disk_suspects: std::collections::HashSet::new(),
            session_costs: HashMap::new(),
            read_singly: None,
            effects: VecDeque::new(),
        }
    }

    /// The next effect to perform.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// Whether the core was destroyed (the shell ends once the effects are drained).
    pub fn is_destroyed(&self) -> bool {
        self.sandbox == Sandbox::Destroyed
    }

    /// Takes one input.
    pub fn handle(&mut self, input: Input, now: Now) {
        if self.is_destroyed() {
            return;
        }
        match input {
            Input::OpenTurns(work) => {
                self.may_wake_again();
                self.merge_turns(work, now);
                if !self.loaded {
                    self.loaded = true;
                    // Turns were running when this process started: if their sandbox is gone,
                    // say so now rather than after the reconnect grace.
                    if self.link == LinkState::Down && self.turns.iter().any(|t| t.request_id().is_some()) {
                        self.effects.push_back(Effect::Job(Job::CheckSandbox));
                    }
                    for (permission_id, choice, by, reply) in std::mem::take(&mut self.deferred_answers) {
                        self.on_answer(permission_id, &choice, by, reply, now);
                    }
                }
            }
            Input::Cancel { session_id, reply } => {
                self.may_wake_again();
                let cancelled = self.cancel(session_id, now);
                self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Cancelled(cancelled) });
            }
            Input::Sleep { reply } => self.sleep(reply),
            Input::Wake { reply } => {
                self.may_wake_again();
                if matches!(self.link, LinkState::Up { .. }) || self.sandbox == Sandbox::Dialing {
                    // Connected, or started and dialing in.
                    self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(Ok(())) });
                } else {
                    self.wake_waiters.push(reply);
                }
            }
            Input::Terminal { reply } => {
                self.may_wake_again();
                self.terminal_waiters.push(reply);
            }
            Input::Destroy { reply } => {
                self.sandbox = Sandbox::Destroyed;
                self.effects.push_back(Effect::Job(Job::Destroy { reply }));
                return;
            }
            Input::EnvironmentChanged => self.environment_changed = true,
            Input::AuthMethodChanged(method) => {
                if let Some(harness) = self.harness.as_mut() {
                    harness.auth.named = method;
                }
            }
            Input::SandboxExited { at, oom } => self.on_sandbox_exited(at, oom, now),
            Input::Database { up } => self.on_database(up, now),
            Input::AnswerPermission { permission_id, choice, by, reply } => {
                let known = self.harness.as_ref().is_some_and(|h| h.questions.contains_key(&permission_id));
                if !known && !self.loaded {
                    // A parked turn's question, maybe: answered once the open work is read.
                    self.deferred_answers.push((permission_id, choice, by, reply));
                } else {
                    self.on_answer(permission_id, &choice, by, reply, now);
                }
            }
            Input::GateChanged(gate) => self.change_gate(*gate, now),
            Input::RevokeGrant { permission_id, session_id, by, reply } => {
                if let Err(error) = self.revoke_grant(permission_id, session_id, by, reply) {
                    self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Answered(Err(error)) });
                }
            }
            Input::Attached { link, processes } => self.on_attached(link, processes, now),
            Input::Stdout { link, channel, offset, bytes } => {
                if self.is_current(link) {
                    self.on_stdout(link, channel, offset, &bytes, now);
                }
            }
            Input::Stderr { link, channel, bytes } => {
                if self.is_current(link)
                    && let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel)
                {
                    harness.keep_stderr(&bytes);
                    self.watch_stderr_for_full_disk(&bytes);
                }
            }
            Input::Control { link, msg } => {
                if self.is_current(link) {
                    self.on_control(link, msg, now);
                }
            }
            Input::LinkClosed { link } => self.on_link_closed(link),
            Input::Persisted { id, result } => self.on_persisted(id, result, now),
            Input::Loaded { link, snapshot } => self.on_loaded(link, snapshot, now),
            Input::WakeQueued { job } => self.on_wake_queued(job),
            Input::Woken { job, result } => self.on_woken(job, result, now),
            Input::Launched { job, result } => self.on_launched(job, result, now),
            Input::KillExplained { job, oom } => self.on_kill_explained(job, oom, now),
            Input::DiskChecked { turns, finding } => self.on_disk_checked(turns, finding),
            Input::ProviderStreamChecked { turns, finding } => self.on_provider_stream_checked(turns, finding, now),
            Input::Stopped { job, reply, result } => {
                if self.condition.stopping == Some(job) {
                    self.condition.stopping = None;
                }
                if let Err(message) = &result {
                    self.failed(Failure::plain(message.clone()));
                }
                let outcome = result.map_err(LifecycleError::Failed);
                self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(outcome) });
            }
            Input::SlotGranted { turn_id } => self.on_slot_granted(turn_id),
            Input::SlotQueued { turn_id, running, ahead, limit, scope } => {
                self.on_slot_queued(turn_id, slots::Queue { running, ahead, limit, scope }, now);
            }
        }
        self.advance(now);
        self.orphaned.clear();
        self.reconcile_slots();
    }

    // ---- helpers shared by the parts ----

    fn is_current(&self, link: LinkId) -> bool {
        self.link == LinkState::Up { link }
    }

    fn current_link(&self) -> Option<LinkId> {
        match self.link {
            LinkState::Up { link } => Some(link),
            _ => None,
        }
    }

    fn new_job_id(&mut self) -> JobId {
        let job = self.next_job;
        self.next_job += 1;
        job
    }

    fn new_request_id(&mut self) -> String {
        let id = format!("{}-{}", self.id_prefix, self.next_request);
        self.next_request += 1;
        id
    }

    fn persist(&mut self, purpose: Purpose, events: Vec<NewEvent>, side: Vec<SideEffect>) -> PersistId {
        self.persist_ending(purpose, events, side, Vec::new())
    }

    /// [`Core::persist`] for a persist that ends turns (`ended`: their ends, for the metrics).
    fn persist_ending(
        &mut self,
        purpose: Purpose,
        events: Vec<NewEvent>,
        side: Vec<SideEffect>,
        ended: Vec<TurnEnded>,
    ) -> PersistId {
        let id = self.next_persist;
        self.next_persist += 1;
        self.in_flight.insert(id, purpose);
        self.effects.push_back(Effect::Persist { id, events, side, ended });
        id
    }

    fn send(&mut self, out: Outbound) {
        if let Some(link) = self.current_link() {
            self.effects.push_back(Effect::Send { link, out });
        }
    }

    /// Drops the current connection (its successor takes over from the database).
    fn drop_link(&mut self, why: &str) {
        let link = match self.link {
            LinkState::Up { link } | LinkState::Draining { link, .. } | LinkState::Loading { link, .. } => link,
            LinkState::Down => return,
        };
        tracing::warn!(agent.id = %self.agent_id, link.id = link, why, "dropping the sandbox connection");
        self.effects.push_back(Effect::DropLink { link });
        self.link = LinkState::Down;
    }

    /// Arms the reconnect deadline when the link is down and a running harness or a sent turn
    /// waits on it. (Waiting work arms it once the sandbox was started: the time to create a
    /// container does not count against the grace.)
    fn arm_reconnect(&mut self, now: Now) {
        let work = self.harness.is_some() || self.turns.iter().any(|t| t.state != TurnState::Waiting);
        if self.link == LinkState::Down && work && self.reconnect_at.is_none() {
            self.reconnect_at = Some(now.mono + self.timeouts.reconnect_grace);
        }
    }

    /// Moves waiting work forward as far as the current state allows.
    fn advance(&mut self, now: Now) {
        if self.is_destroyed() {
            return;
        }
        self.arm_reconnect(now);
        if self.link == LinkState::Down {
            let wanted = self.turns.iter().any(|t| t.state == TurnState::Waiting)
                || !self.terminal_waiters.is_empty()
                || !self.wake_waiters.is_empty();
            if wanted && self.sandbox == Sandbox::Settled {
                let job = self.new_job_id();
                self.sandbox = Sandbox::Waking { job };
                self.effects.push_back(Effect::Job(Job::Wake { job }));
            }
            return;
        }
        let Some(link) = self.current_link() else { return };
        // Turns not sent yet wait for the harness with the new environment (see
        // `open_sessions_and_prompt`): only sent ones and ends being stored hold the restart.
        let sent = self.turns.iter().any(|t| t.state != TurnState::Waiting);
        if self.environment_changed && !sent && self.ending.is_empty() && self.launching.is_none() {
            self.environment_changed = false;
            self.retire_harness();
        }
        for reply in std::mem::take(&mut self.terminal_waiters) {
            self.effects.push_back(Effect::Job(Job::Terminal { reply, link }));
        }
        for reply in std::mem::take(&mut self.wake_waiters) {
            self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(Ok(())) });
        }
        if self.turns.iter().any(|t| t.state == TurnState::Waiting)
            && self.harness.is_none()
            && self.launching.is_none()
        {
            let job = self.new_job_id();
            self.launching = Some(job);
            // The launch reads the agent's environment as it is now: a change before this point
            // needs no restart (one while it runs still does).
            self.environment_changed = false;
            self.effects.push_back(Effect::Job(Job::StartHarness { job }));
        }
        self.open_sessions_and_prompt(now);
        self.release_stdin();
    }

    /// Sends the stdin frames whose journal committed.
    fn release_stdin(&mut self) {
        let Some(link) = self.current_link() else { return };
        let Some(harness) = self.harness.as_mut() else { return };
        let channel = harness.channel;
        for frame in harness.outbox.release() {
            let out = Outbound::Stdin { channel, offset: frame.offset, bytes: frame.bytes };
            self.effects.push_back(Effect::Send { link, out });
        }
    }

    fn on_persisted(&mut self, id: PersistId, result: Result<(), StoreFailure>, now: Now) {
        let Some(purpose) = self.in_flight.remove(&id) else {
            tracing::warn!(agent.id = %self.agent_id, persist = id, "a commit for an unknown persist");
            debug_assert!(false, "Persisted for an unknown persist {id}");
            return;
        };
        let ended: Vec<TurnId> = self.ending.iter().filter(|(_, p)| **p == id).map(|(turn, _)| *turn).collect();
        self.ending.retain(|_, persist| *persist != id);
        if result.is_ok() {
            // A parked turn's id comes back when it resumes: only ends are remembered.
            for turn in ended.into_iter().filter(|turn| !self.parked.contains_key(turn)) {
                if self.ended.len() == ENDED_REMEMBERED {
                    self.ended.pop_front();
                }
                self.ended.push_back(turn);
            }
        }
        if let Purpose::Answer { reply: Some(reply), .. } = &purpose {
            let outcome = result.as_ref().map(|_| ()).map_err(|_| types::AnswerError::NotRecorded);
            self.effects.push_back(Effect::Reply { to: *reply, outcome: Outcome::Answered(outcome) });
        }
        let generation = self.harness.as_ref().map(|h| h.generation);
        match (purpose, result) {
            (Purpose::Line { generation: g, end, lines, .. }, Err(StoreFailure::Rejected))
                if Some(g) == generation && lines > 1 =>
            {
                self.read_again_singly(g, end);
            }
            (Purpose::Line { generation: g, end, from, sessions, .. }, Err(StoreFailure::Rejected))
                if Some(g) == generation =>
            {
                self.line_rejected(id, end, from, sessions);
            }
            (Purpose::Ending, Err(_)) => {
                // Not stored: the turns are still open in the database; the takeover reloads them.
                self.drop_link("storing the end of turns failed");
            }
            (Purpose::Prompt { generation: g, turn_id }, Ok(())) => {
                if let Some(turn) = self.turns.iter_mut().find(|t| t.id == turn_id)
                    && let TurnState::Recording { request_id, .. } = &turn.state
                {
                    turn.state = TurnState::Sent { request_id: request_id.clone(), generation: g };
                    // The prompt goes out now: what the harness sends for its session from here
                    // on is the turn's, not a replay of the history it loaded.
                    let session_id = turn.session_id;
                    if let Some(harness) = self.harness.as_mut().filter(|h| h.generation == g) {
                        harness.replaying.remove(&session_id);
                    }
                }
                self.committed(id);
            }
            (_, Ok(())) => self.committed(id),
            (purpose, Err(failure)) => {
                tracing::error!(agent.id = %self.agent_id, persist = id, ?purpose, ?failure, "storing failed");
                if let Purpose::Prompt { turn_id, .. } = purpose
                    && let Some(turn) = self.turns.iter_mut().find(|t| t.id == turn_id)
                {
                    // The harness never saw it: it goes again after the takeover.
                    turn.state = TurnState::Waiting;
                    turn.deadline = None;
                    turn.deadline_at = None;
                }
                self.drop_link("storing events failed");
            }
        }
        self.after_commit(now);
    }

    /// A persist committed: release what waited for it.
    fn committed(&mut self, id: PersistId) {
        if let Some(harness) = self.harness.as_mut() {
            harness.stdout.stored(id);
            harness.outbox.committed(id);
        }
    }

    fn after_commit(&mut self, now: Now) {
        self.acknowledge(now);
        if let LinkState::Draining { link, .. } = self.link
            && self.in_flight.is_empty()
        {
            self.begin_load(link);
        }
        self.finish_exit_if_drained(now);
    }

    fn on_link_closed(&mut self, link: LinkId) {
        let ours = match &self.link {
            LinkState::Up { link: l } | LinkState::Draining { link: l, .. } | LinkState::Loading { link: l, .. } => {
                *l == link
            }
            LinkState::Down => false,
        };
        if ours {
            self.link = LinkState::Down;
            self.stop_dialing();
        }
    }

    fn on_control(&mut self, link: LinkId, msg: FromSandboxd, now: Now) {
        match msg {
            FromSandboxd::Started { channel } => self.on_started(channel, now),
            FromSandboxd::StartFailed { channel, message } => {
                if self.harness.as_ref().is_some_and(|h| h.channel == channel) {
                    let text = format!("the harness could not start: {message}");
                    self.harness_failed(FailureCode::HarnessStartFailed, &text, false, now);
                }
            }
            FromSandboxd::Exited { channel, status, stdout_end } => {
                match self.harness.as_mut().filter(|h| h.channel == channel) {
                    Some(harness) => harness.exited = Some((status, stdout_end)),
                    None => self
                        .effects
                        .push_back(Effect::Send { link, out: Outbound::Control(ToSandboxd::Forget { channel }) }),
                }
                self.finish_exit_if_drained(now);
            }
            FromSandboxd::StdinWritten { channel, offset } => {
                if let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel) {
                    harness.outbox.confirm_written(offset);
                }
            }
            FromSandboxd::StdinRejected { channel, offset, expected, reason } => {
                let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel) else { return };
                tracing::warn!(agent.id = %self.agent_id, channel, offset, expected, %reason, "sandboxd rejected stdin");
                if !harness.outbox.rewind(expected) {
                    self.drop_link("sandboxd's stdin is out of step with the server's");
                }
            }
        }
    }

    /// Answers a question of the running harness's, else of a parked turn's; accepted answers
    /// are replied to once stored (`on_persisted`).
    fn on_answer(
        &mut self,
        permission_id: uuid::Uuid,
        choice: &crate::permissions::Choice,
        by: serde_json::Value,
        reply: ReplyId,
        now: Now,
    ) {
        let running = self.harness.as_ref().is_some_and(|h| h.questions.contains_key(&permission_id));
        let answered = if running {
            self.answer_question(permission_id, choice, by, Some(reply), now)
        } else {
            self.answer_parked(permission_id, choice, by, Some(reply))
        };
        if let Err(error) = answered {
            self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Answered(Err(error)) });
        }
    }

    /// The turns as stored, merged with what memory knows (a reload never resurrects a turn
    /// whose end is being stored).
    fn merge_turns(&mut self, work: OpenWork, now: Now) {
        let mut merged = Vec::with_capacity(work.turns.len());
        let mut parked_rows = Vec::new();
        for row in &work.turns {
            if self.ending.contains_key(&row.id) || self.ended.contains(&row.id) {
                continue;
            }
            match self.turns.iter().position(|t| t.id == row.id) {
                Some(index) => {
                    let mut turn = self.turns.swap_remove(index);
                    turn.limit = row.time_limit;
                    merged.push(turn);
                }
                None if row.state == StoredTurnState::Parked => parked_rows.push(Turn::from_stored(row.clone(), now)),
                None => merged.push(Turn::from_stored(row.clone(), now)),
            }
        }
        // Turns memory holds that the rows lack were ended elsewhere (a deleted session).
        self.turns = merged;
        self.merge_parked(&work, parked_rows);
    }

    /// Cancels the session's turn: one not yet sent ends at once; a sent one is cancelled in the
    /// harness, which answers its prompt with `cancelled`.
    fn cancel(&mut self, session_id: SessionId, now: Now) -> bool {
        let Some(index) = self.turns.iter().position(|t| t.session_id == session_id) else {
            return self.cancel_parked(session_id, now);
        };
        match self.turns[index].state {
            TurnState::Waiting => {
                let turn = self.turns.remove(index);
                let ending = turns::ending(&turn, "cancelled", None, None, now.wall);
                self.end_turns(vec![ending.event], vec![ending.effect], vec![ending.ended]);
            }
            TurnState::Recording { .. } | TurnState::Sent { .. } => {
                self.cancel_questions(session_id, now);
                self.send_cancel(session_id);
            }
        }
        true
    }

    /// Queues `session/cancel` for a session the harness knows.
    fn send_cancel(&mut self, session_id: SessionId) {
        let Some(harness) = self.harness.as_ref() else { return };
        let Some(SessionPhase::Ready(acp_id)) = harness.sessions.get(&session_id) else { return };
        let params = crate::acp::messages::cancel(acp_id);
        let frame = crate::acp::wire::notification(crate::acp::messages::method::SESSION_CANCEL, &params);
        self.journal_and_queue(vec![frame]);
    }

    /// Queues frames behind one journaling persist (record, then send).
    fn journal_and_queue(&mut self, frames: Vec<Vec<u8>>) -> Option<PersistId> {
        let generation = self.harness.as_ref()?.generation;
        let id = self.next_persist;
        let side = self.queue_frames(id, frames);
        self.persist(Purpose::Stdin { generation }, Vec::new(), side);
        Some(id)
    }

    /// Puts frames into the outbox gated on persist `id`; returns their journal entries.
    fn queue_frames(&mut self, id: PersistId, frames: Vec<Vec<u8>>) -> Vec<SideEffect> {
        let agent_id = self.agent_id;
        let Some(harness) = self.harness.as_mut() else { return Vec::new() };
        let written = harness.outbox.written();
        frames
            .into_iter()
            .map(|frame| {
                let bytes = Bytes::from(frame);
                let offset = harness.outbox.push(bytes.clone(), Some(id));
                SideEffect::PendingStdin { agent_id, generation: harness.generation, offset, bytes, written }
            })
            .collect()
    }

    /// Sends a request we wait for (journaled first).
    fn request(&mut self, method: &str, params: &serde_json::Value, what: harness::Pending, now: Now) -> String {
        let id = self.new_request_id();
        let frame = crate::acp::wire::request(&id, method, params);
        let deadline = Some(now.mono + self.timeouts.harness_request);
        if let Some(harness) = self.harness.as_mut() {
            harness.pending.insert(id.clone(), harness::Request { what, deadline });
        }
        self.journal_and_queue(vec![frame]);
        id
    }
}
