//! The sandbox's lifecycle as the core decides it ([`Sandbox`]): sleeping (only without turns),
//! a wake (waiting for a slot on the host, its outcome; then sandboxd has the reconnect grace to
//! dial in), giving up when it does not, and the harness process's launch. Every job's result
//! names its job: one the core no longer waits for is ignored.

use std::collections::BTreeSet;

use super::sandboxd::ToSandboxd;
use super::types::{Effect, Job, JobId, Launch, Now, Outbound, Outcome, ReplyId};
use super::{Core, Harness, HarnessStreams, LinkState, Phase, Purpose, Turn, TurnState, harness};
use super::{Failure, FailureCode, LifecycleError, WakeError};
use crate::events::side_effects::SideEffect;
use crate::events::{NewEvent, NoticeCode};

/// What the `CAPACITY_WAIT` notice says.
const CAPACITY_WAIT: &str =
    "this host runs as many sandboxes as it may (AGENTHOLD_MAX_AWAKE): the prompt waits until one sleeps";

/// Where the sandbox's start stands. Whether sandboxd is connected is the link's state
/// ([`LinkState`]); a stop in flight is [`super::observed::Condition::stopping`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sandbox {
    /// No wake in progress: asleep, or started and connected (or dialing back on its own after
    /// a dropped link, within the reconnect grace).
    Settled,
    /// The wake job `job` runs.
    Waking {
        /// Its id.
        job: JobId,
    },
    /// The last wake failed: no new one until a command asks again.
    WakeFailed,
    /// A wake started it: sandboxd dials in before the reconnect deadline (rather than the
    /// sandbox being started again).
    Dialing,
    /// Removed: nothing more happens (sticky).
    Destroyed,
}

impl Core {
    /// A new command may try a wake that failed again.
    pub(super) fn may_wake_again(&mut self) {
        if self.sandbox == Sandbox::WakeFailed {
            self.sandbox = Sandbox::Settled;
        }
    }

    /// sandboxd dialed in, or will not: stop waiting for it as for a started sandbox.
    pub(super) fn stop_dialing(&mut self) {
        if self.sandbox == Sandbox::Dialing {
            self.sandbox = Sandbox::Settled;
        }
    }

    pub(super) fn sleep(&mut self, reply: ReplyId) {
        if !self.turns.is_empty() {
            self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(Err(LifecycleError::Busy)) });
            return;
        }
        if let Some(harness) = self.harness.take() {
            let side = vec![SideEffect::ClearHarness { agent_id: self.agent_id, generation: harness.generation }];
            self.persist(Purpose::Other, Vec::new(), side);
        }
        if let LinkState::Up { link } | LinkState::Draining { link, .. } | LinkState::Loading { link, .. } = self.link {
            self.effects.push_back(Effect::DropLink { link });
        }
        self.link = LinkState::Down;
        self.reconnect_at = None;
        self.stop_dialing();
        self.recovered();
        let job = self.new_job_id();
        self.condition.stopping = Some(job);
        self.effects.push_back(Effect::Job(Job::Stop { job, reply }));
    }

    /// The wake waits for a slot on the host: the sessions with open turns are told why (a
    /// `CAPACITY_WAIT` notice each).
    pub(super) fn on_wake_queued(&mut self, job: JobId) {
        if self.sandbox != (Sandbox::Waking { job }) {
            return;
        }
        let parked = self.parked.values().map(|p| &p.turn);
        let sessions: BTreeSet<_> = self.turns.iter().chain(parked).map(|t| t.session_id).collect();
        tracing::info!(agent.id = %self.agent_id, sessions = sessions.len(), "the host is full; the wake waits for a slot");
        let events =
            sessions.into_iter().map(|s| NewEvent::notice(s, NoticeCode::CapacityWait, CAPACITY_WAIT)).collect();
        self.persist(Purpose::Other, events, Vec::new());
    }

    pub(super) fn on_woken(&mut self, job: JobId, result: Result<(), WakeError>, now: Now) {
        if self.sandbox != (Sandbox::Waking { job }) {
            tracing::warn!(agent.id = %self.agent_id, job, "the result of a wake no longer waited for");
            return;
        }
        self.sandbox = Sandbox::Settled;
        let waiters = std::mem::take(&mut self.wake_waiters);
        match result {
            Ok(()) => {
                // sandboxd may have dialed in before the wake job reported back: then there is
                // nothing to wait for, its hello cleared the old failure already, and one since
                // (its harness failing to start) is newer than this start and stays.
                if self.link == LinkState::Down {
                    self.recovered();
                    self.sandbox = Sandbox::Dialing;
                    if self.reconnect_at.is_none_or(|at| at < now.mono) {
                        self.reconnect_at = Some(now.mono + self.timeouts.reconnect_grace);
                    }
                }
                for reply in waiters {
                    self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(Ok(())) });
                }
            }
            Err(error) => {
                self.sandbox = Sandbox::WakeFailed;
                let waiting = |t: &Turn| t.state == TurnState::Waiting;
                self.failed(Failure::coded(error.code(), error.message()));
                self.fail_turns(waiting, error.code(), error.message(), now);
                // Callers waiting for the sandbox hear it as people read it, code first.
                let message = error.to_string();
                self.fail_terminal_waiters(&message);
                for reply in waiters {
                    let outcome = Outcome::Lifecycle(Err(LifecycleError::Failed(message.clone())));
                    self.effects.push_back(Effect::Reply { to: reply, outcome });
                }
            }
        }
    }

    /// Postgres stopped or started answering. While it does not, the reconnect grace is held
    /// (a sandbox's reconnects are refused then, through no fault of its own); once it does, a
    /// grace that was running starts again in full.
    pub(super) fn on_database(&mut self, up: bool, now: Now) {
        self.database_down = !up;
        if up && self.reconnect_at.is_some() {
            self.reconnect_at = Some(now.mono + self.timeouts.reconnect_grace);
        }
    }

    pub(super) fn on_reconnect_expired(&mut self, now: Now) {
        self.stop_dialing();
        for reply in std::mem::take(&mut self.wake_waiters) {
            let outcome = Outcome::Lifecycle(Err(LifecycleError::Failed("the sandbox did not connect".to_owned())));
            self.effects.push_back(Effect::Reply { to: reply, outcome });
        }
        if self.turns.is_empty() && self.harness.is_none() && self.terminal_waiters.is_empty() {
            return;
        }
        self.drop_harness();
        let text = "the sandbox did not connect back in time (was it stopped or deleted?)";
        self.failed(Failure::plain(text));
        self.fail_turns(|_| true, FailureCode::SandboxUnreachable, text, now);
        self.fail_terminal_waiters(text);
    }

    /// The sandbox's container stopped on its own: whatever sandboxd held is gone, so the turns
    /// running in its harness end now (not after the reconnect grace). Turns not yet started
    /// stay: the next wake starts the container again. While a wake is in flight (a container
    /// being made again stops its old one) nothing is done.
    pub(super) fn on_sandbox_exited(&mut self, at: chrono::DateTime<chrono::Utc>, oom: Option<String>, now: Now) {
        // A stop from before the current connection (an earlier container's) is old news.
        if matches!(self.sandbox, Sandbox::Waking { .. }) || self.attached_at.is_some_and(|attached| at < attached) {
            return;
        }
        if let LinkState::Up { link } | LinkState::Draining { link, .. } | LinkState::Loading { link, .. } = self.link {
            self.effects.push_back(Effect::DropLink { link });
        }
        self.link = LinkState::Down;
        self.stop_dialing();
        self.reconnect_at = None;
        if self.drop_harness().is_none() && !self.turns.iter().any(|t| t.request_id().is_some()) {
            return;
        }
        let (code, text) = match &oom {
            Some(message) => (FailureCode::OutOfMemory, message.as_str()),
            None => (FailureCode::SandboxExited, "the sandbox's container stopped (killed or crashed)"),
        };
        self.failed(Failure::coded(code, text));
        self.fail_turns(|t| t.request_id().is_some(), code, text, now);
        self.fail_terminal_waiters(text);
    }

    pub(super) fn fail_terminal_waiters(&mut self, message: &str) {
        for reply in std::mem::take(&mut self.terminal_waiters) {
            self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::TerminalFailed(message.to_owned()) });
        }
    }

    pub(super) fn on_started(&mut self, channel: u32, now: Now) {
        let Some(harness) = self.harness.as_mut().filter(|h| h.channel == channel && h.phase == Phase::Starting) else {
            return;
        };
        harness.phase = Phase::Initializing;
        harness.start_deadline = None;
        let params = crate::acp::messages::initialize();
        self.request(crate::acp::messages::method::INITIALIZE, &params, harness::Pending::Initialize, now);
    }

    pub(super) fn on_launched(&mut self, job: JobId, result: Result<Option<Launch>, String>, now: Now) {
        if self.launching != Some(job) {
            tracing::warn!(agent.id = %self.agent_id, job, "the result of a harness start no longer waited for");
            return;
        }
        self.launching = None;
        match result {
            Ok(Some(launch)) => {
                if self.current_link().is_none() {
                    return;
                }
                let streams = HarnessStreams::FRESH;
                let mut harness =
                    Harness::new(launch.generation, launch.channel, Phase::Starting, streams, launch.gate);
                harness.start_deadline = Some(now.mono + self.timeouts.harness_request);
                harness.session_mode = launch.session_mode;
                harness.auth = launch.auth;
                harness.mcp_servers = launch.mcp_servers;
                harness.session_cwd = launch.session_cwd;
                self.harness = Some(harness);
                self.recovered();
                self.send(Outbound::Control(ToSandboxd::Start(launch.start)));
            }
            Ok(None) => {}
            Err(message) => {
                self.failed(Failure::coded(FailureCode::HarnessStartFailed, message.clone()));
                self.fail_turns(|_| true, FailureCode::HarnessStartFailed, &message, now);
            }
        }
    }
}
