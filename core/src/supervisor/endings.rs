//! How turns and harnesses end: turns failed with an `error` and a `turn_end` (or parked when a
//! question of theirs waits), a harness that failed or exited (once every line it printed is
//! stored), and a SIGKILL explained by the engine (the memory limit, or not).

use super::{
    Core, Effect, ExitStatus, Failure, FailureCode, Job, JobId, Now, Outbound, Purpose, SideEffect, ToSandboxd, Turn,
    TurnEnded, harness, turns,
};
use crate::events::NewEvent;
use crate::ids::TurnId;

impl Core {
    /// Ends the turns matching `which` with an `error` event and a `turn_end` — except those
    /// whose harness was just lost while a question of theirs waited: those are parked.
    pub(super) fn fail_turns(&mut self, which: impl Fn(&Turn) -> bool, code: FailureCode, message: &str, now: Now) {
        let (failed, kept): (Vec<Turn>, Vec<Turn>) =
            std::mem::take(&mut self.turns).into_iter().partition(|t| which(t));
        self.turns = kept;
        let failed = self.park_waiting(failed, code, message);
        if failed.is_empty() {
            return;
        }
        tracing::warn!(agent.id = %self.agent_id, %code, message, turns = failed.len(), "turns failed");
        for turn in &failed {
            self.turn_ended_maybe_on_full_disk(turn.id, turn.session_id, message);
        }
        let (mut events, mut side, mut ended) = (Vec::new(), Vec::new(), Vec::new());
        for turn in &failed {
            events.push(turns::failure(turn, code, message));
            let ending = turns::ending(turn, "error", None, None, now.wall);
            events.push(ending.event);
            side.push(ending.effect);
            ended.push(ending.ended);
            if let Some(harness) = self.harness.as_mut()
                && let Some(request_id) = turn.request_id()
            {
                harness.pending.remove(request_id);
            }
        }
        self.end_turns(events, side, ended);
    }

    /// Stores the end of turns (`ended`); until it commits, a reload does not bring them back.
    pub(super) fn end_turns(&mut self, events: Vec<NewEvent>, side: Vec<SideEffect>, ended: Vec<TurnEnded>) {
        let ids: Vec<TurnId> = ended.iter().map(|e| e.turn_id).collect();
        let id = self.persist_ending(Purpose::Ending, events, side, ended);
        self.ending.extend(ids.into_iter().map(|turn| (turn, id)));
    }

    /// The harness failed: every open turn ends with an error; optionally kill it.
    pub(super) fn harness_failed(&mut self, code: FailureCode, message: &str, kill: bool, now: Now) {
        let Some(harness) = self.drop_harness() else { return };
        let message = harness::with_stderr(message, &harness.stderr_text());
        self.failed(Failure::coded(code, message.clone()));
        self.fail_turns(|_| true, code, &message, now);
        let side = vec![SideEffect::ClearHarness { agent_id: self.agent_id, generation: harness.generation }];
        self.persist(Purpose::Other, Vec::new(), side);
        if kill {
            self.send(Outbound::Control(ToSandboxd::Signal { channel: harness.channel, signal: 9 }));
        }
        if harness.exited.is_some() {
            self.send(Outbound::Control(ToSandboxd::Forget { channel: harness.channel }));
        }
    }

    /// The running harness's tunnel channel and generation, if there is one (the shell keeps its
    /// stderr for the harness log under this generation).
    pub fn harness_channel(&self) -> Option<(u32, i64)> {
        self.harness.as_ref().map(|h| (h.channel, h.generation))
    }

    /// `message`, followed by the end of the running harness's stderr when it printed any.
    pub(super) fn with_harness_stderr(&self, message: &str) -> String {
        match &self.harness {
            Some(harness) => harness::with_stderr(message, &harness.stderr_text()),
            None => message.to_owned(),
        }
    }

    /// Stops an idle harness so that the next turn starts one with the agent's new environment
    /// (its sessions are loaded again, as after any restart).
    pub(super) fn retire_harness(&mut self) {
        let Some(harness) = self.harness.take() else { return };
        tracing::info!(agent.id = %self.agent_id, generation = harness.generation, "the environment changed: the idle harness stops, the next turn starts it anew");
        let side = vec![SideEffect::ClearHarness { agent_id: self.agent_id, generation: harness.generation }];
        self.persist(Purpose::Other, Vec::new(), side);
        if harness.exited.is_some() {
            self.send(Outbound::Control(ToSandboxd::Forget { channel: harness.channel }));
        } else {
            self.send(Outbound::Control(ToSandboxd::Signal { channel: harness.channel, signal: 9 }));
        }
    }

    /// The harness exited: once every line it printed is stored, end what is still open.
    pub(super) fn finish_exit_if_drained(&mut self, now: Now) {
        let Some(harness) = self.harness.as_ref() else { return };
        let Some((status, stdout_end)) = harness.exited else { return };
        if harness.stdout.received() < stdout_end || !harness.stdout.settled() || harness.held.is_some() {
            return;
        }
        if status.signal == Some(9) || status.code == Some(128 + 9) {
            // SIGKILL (or a wrapper shell reporting it): ask the engine whether it was the
            // memory limit before saying why.
            if self.harness.as_ref().is_some_and(|h| h.explaining.is_none()) {
                let job = self.new_job_id();
                if let Some(harness) = self.harness.as_mut() {
                    harness.explaining = Some(job);
                }
                self.effects.push_back(Effect::Job(Job::ExplainKill { job }));
            }
            return;
        }
        let how = exit_text(status);
        self.harness_failed(FailureCode::HarnessExited, &how, false, now);
    }

    pub(super) fn on_kill_explained(&mut self, job: JobId, oom: Option<String>, now: Now) {
        let Some(harness) = self.harness.as_ref().filter(|h| h.explaining == Some(job)) else { return };
        let Some((status, _)) = harness.exited else { return };
        match oom {
            Some(message) => self.harness_failed(FailureCode::OutOfMemory, &message, false, now),
            None => self.harness_failed(FailureCode::HarnessExited, &exit_text(status), false, now),
        }
    }
}

/// How an exit reads for people.
fn exit_text(status: ExitStatus) -> String {
    match (status.code, status.signal) {
        (Some(code), _) => format!("the harness exited with code {code}"),
        (None, Some(9)) => "the harness was killed (SIGKILL)".to_owned(),
        (None, Some(signal)) => format!("the harness was killed by signal {signal}"),
        (None, None) => "the harness exited".to_owned(),
    }
}
