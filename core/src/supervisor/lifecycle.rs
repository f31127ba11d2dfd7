//! The sandbox's lifecycle as the core decides it: sleeping (only without turns), a wake's
//! outcome (then sandboxd has the reconnect grace to dial in), giving up when it does not, and
//! the harness process's launch.

use super::sandboxd::ToSandboxd;
use super::types::{Effect, Job, Launch, Now, Outbound, Outcome, ReplyId};
use super::{Core, Harness, LinkState, Phase, Purpose, Turn, TurnState, harness};
use super::{Failure, FailureCode, LifecycleError, WakeError};
use crate::events::side_effects::SideEffect;

impl Core {
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
        self.awaiting_connect = false;
        self.recovered();
        self.condition.stopping = true;
        self.effects.push_back(Effect::Job(Job::Stop { reply }));
    }

    pub(super) fn on_woken(&mut self, result: Result<(), WakeError>, now: Now) {
        self.waking = false;
        let waiters = std::mem::take(&mut self.wake_waiters);
        match result {
            Ok(()) => {
                // sandboxd may have dialed in before the wake job reported back: then there is
                // nothing to wait for, its hello cleared the old failure already, and one since
                // (its harness failing to start) is newer than this start and stays.
                if self.link == LinkState::Down {
                    self.recovered();
                    self.awaiting_connect = true;
                    if self.reconnect_at.is_none_or(|at| at < now.mono) {
                        self.reconnect_at = Some(now.mono + self.timeouts.reconnect_grace);
                    }
                }
                for reply in waiters {
                    self.effects.push_back(Effect::Reply { to: reply, outcome: Outcome::Lifecycle(Ok(())) });
                }
            }
            Err(error) => {
                self.wake_failed = true;
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
        self.awaiting_connect = false;
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
        if self.waking || self.attached_at.is_some_and(|attached| at < attached) {
            return;
        }
        if let LinkState::Up { link } | LinkState::Draining { link, .. } | LinkState::Loading { link, .. } = self.link {
            self.effects.push_back(Effect::DropLink { link });
        }
        self.link = LinkState::Down;
        self.awaiting_connect = false;
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

    pub(super) fn on_launched(&mut self, result: Result<Option<Launch>, String>, now: Now) {
        self.launching = false;
        match result {
            Ok(Some(launch)) => {
                if self.current_link().is_none() {
                    return;
                }
                let mut harness = Harness::new(launch.generation, launch.channel, Phase::Starting, 0, 0, 0, 0);
                harness.start_deadline = Some(now.mono + self.timeouts.harness_request);
                harness.session_mode = launch.session_mode;
                harness.auto_auth = launch.auto_auth;
                harness.mcp_servers = launch.mcp_servers;
                harness.gate = launch.gate;
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
