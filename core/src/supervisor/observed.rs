//! What the core knows of its sandbox, as people see it: [`Observed`] (starting, awake, stopping,
//! asleep, or an error with its reason), read by the shell after every input and published for
//! the API (`supervisor::observed`). The desired state (awake/asleep) is the agent's row; this is
//! what actually happened: a wake that failed, a harness that would not start, a container that
//! stopped on its own.

use super::lifecycle::Sandbox;
use super::{Core, Failure, JobId, LinkState};

/// The sandbox's observed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Being started, or waiting for sandboxd to dial in (again).
    Starting,
    /// Connected.
    Awake,
    /// Being stopped (a sleep, a deletion).
    Stopping,
    /// Not running.
    Asleep,
    /// The last start or run failed; the reason is for people.
    Error(String),
}

/// What [`Observed`] needs beyond the core's other fields.
#[derive(Debug, Default)]
pub(super) struct Condition {
    /// The stop job that runs, if one does.
    pub stopping: Option<JobId>,
    /// Why the sandbox or its harness last failed (cleared by a start that works, or a sleep).
    pub failure: Option<Failure>,
}

impl Core {
    /// The sandbox's state as observed now.
    pub fn observed(&self) -> Observed {
        if self.sandbox == Sandbox::Destroyed || self.condition.stopping.is_some() {
            return Observed::Stopping;
        }
        // sandboxd's hello clears the last failure: one with a link up is this start's own (its
        // harness failed), shown at once, before the wake job reports back.
        if let Some(failure) = &self.condition.failure
            && (self.link != LinkState::Down || !matches!(self.sandbox, Sandbox::Waking { .. }))
        {
            return Observed::Error(failure.to_string());
        }
        if matches!(self.sandbox, Sandbox::Waking { .. }) {
            return Observed::Starting;
        }
        if self.link != LinkState::Down {
            return Observed::Awake;
        }
        if self.sandbox == Sandbox::Dialing || self.reconnect_at.is_some() {
            return Observed::Starting;
        }
        Observed::Asleep
    }

    /// The sandbox or its harness failed: shown until a start works or the agent sleeps.
    pub(super) fn failed(&mut self, failure: Failure) {
        self.condition.failure = Some(failure);
    }

    /// A start worked (the sandbox started, sandboxd attached, a harness launched).
    pub(super) fn recovered(&mut self) {
        self.condition.failure = None;
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::ids::{AgentId, SessionId, TurnId};
    use crate::supervisor::{Effect, Input, Job, JobId, Now, OpenTurn, Snapshot, StoredTurnState, Timeouts, WakeError};

    fn core() -> (Core, Now) {
        let timeouts = Timeouts {
            harness_request: Duration::from_secs(10),
            turn: Duration::from_secs(100),
            cancel_grace: Duration::from_secs(5),
            reconnect_grace: Duration::from_secs(60),
            ack_delay: Duration::ZERO,
        };
        let core = Core::new(AgentId::new(), "/home/agent".to_owned(), timeouts, "t".to_owned());
        (core, Now { mono: Instant::now(), wall: chrono::Utc::now() })
    }

    /// The jobs among the effects so far.
    fn jobs(core: &mut Core) -> Vec<Job> {
        std::iter::from_fn(|| core.poll_effect())
            .filter_map(|e| match e {
                Effect::Job(job) => Some(job),
                _ => None,
            })
            .collect()
    }

    /// The id of the job `id_of` picks among the effects so far.
    fn job(core: &mut Core, id_of: impl Fn(&Job) -> Option<JobId>) -> JobId {
        jobs(core).iter().find_map(id_of).expect("the job was asked for")
    }

    fn wake(job: &Job) -> Option<JobId> {
        if let Job::Wake { job } = job { Some(*job) } else { None }
    }

    fn stop(job: &Job) -> Option<JobId> {
        if let Job::Stop { job, .. } = job { Some(*job) } else { None }
    }

    #[test]
    fn a_wake_starts_fails_with_its_reason_and_a_sleep_clears_it() {
        let (mut core, now) = core();
        assert_eq!(core.observed(), Observed::Asleep);
        core.handle(Input::Wake { reply: 1 }, now);
        let waking = job(&mut core, wake);
        assert_eq!(core.observed(), Observed::Starting);
        let result = Err(WakeError::StartFailed("no such image".to_owned()));
        core.handle(Input::Woken { job: waking, result }, now);
        assert_eq!(core.observed(), Observed::Error("SANDBOX_START_FAILED: no such image".to_owned()));
        core.handle(Input::Sleep { reply: 2 }, now);
        let stopping = job(&mut core, stop);
        assert_eq!(core.observed(), Observed::Stopping);
        core.handle(Input::Stopped { job: stopping, reply: 2, result: Ok(()) }, now);
        assert_eq!(core.observed(), Observed::Asleep);
        // A stop that fails is an error too.
        core.handle(Input::Sleep { reply: 3 }, now);
        let stopping = job(&mut core, stop);
        core.handle(Input::Stopped { job: stopping, reply: 3, result: Err("the engine is gone".to_owned()) }, now);
        assert_eq!(core.observed(), Observed::Error("the engine is gone".to_owned()));
    }

    #[test]
    fn a_stop_is_observed_until_the_last_one_asked_for_ends() {
        let (mut core, now) = core();
        core.handle(Input::Sleep { reply: 1 }, now);
        let first = job(&mut core, stop);
        core.handle(Input::Sleep { reply: 2 }, now);
        let second = job(&mut core, stop);
        core.handle(Input::Stopped { job: first, reply: 1, result: Ok(()) }, now);
        assert_eq!(core.observed(), Observed::Stopping, "the second stop still runs");
        core.handle(Input::Stopped { job: second, reply: 2, result: Ok(()) }, now);
        assert_eq!(core.observed(), Observed::Asleep);
    }

    #[test]
    fn a_wake_after_a_failure_is_starting_again() {
        let (mut core, now) = core();
        core.handle(Input::Wake { reply: 1 }, now);
        let waking = job(&mut core, wake);
        core.handle(Input::Woken { job: waking, result: Err(WakeError::StartFailed("no such image".to_owned())) }, now);
        assert!(matches!(core.observed(), Observed::Error(_)));
        core.handle(Input::Wake { reply: 2 }, now);
        let _ = job(&mut core, wake);
        assert_eq!(core.observed(), Observed::Starting, "the old failure is not this start's");
    }

    #[test]
    fn a_wake_reported_after_its_harness_failed_keeps_the_failure() {
        // sandboxd dialled in and the harness failed to start before the wake job (slowed by
        // recording the sandbox's address) reported back: the failure stays.
        let (mut core, now) = core();
        let turn = OpenTurn {
            id: TurnId::new(),
            session_id: SessionId::new(),
            prompt: serde_json::json!([]),
            state: StoredTurnState::Pending,
            created_at: now.wall,
            deadline_at: None,
            acp_session_id: None,
            time_limit: None,
        };
        core.handle(Input::OpenTurns(vec![turn.clone()].into()), now);
        let waking = job(&mut core, wake);
        core.handle(Input::Attached { link: 1, processes: Vec::new() }, now);
        let snapshot = Snapshot { generation: 0, harness: None, turns: vec![turn].into() };
        core.handle(Input::Loaded { link: 1, snapshot: Some(Box::new(snapshot)) }, now);
        let starting = job(&mut core, |j| if let Job::StartHarness { job } = j { Some(*job) } else { None });
        let result = Err("no-such-acp-agent: not found".to_owned());
        core.handle(Input::Launched { job: starting, result }, now);
        // The turns failed in that step: the state says why before the wake job reports back.
        assert_eq!(core.observed(), Observed::Error("HARNESS_START_FAILED: no-such-acp-agent: not found".to_owned()));
        core.handle(Input::Woken { job: waking, result: Ok(()) }, now);
        assert_eq!(core.observed(), Observed::Error("HARNESS_START_FAILED: no-such-acp-agent: not found".to_owned()));
    }

    #[test]
    fn a_started_sandbox_is_starting_until_sandboxd_dials_in() {
        let (mut core, now) = core();
        core.handle(Input::Wake { reply: 1 }, now);
        let waking = job(&mut core, wake);
        core.handle(Input::Woken { job: waking, result: Ok(()) }, now);
        assert_eq!(core.observed(), Observed::Starting, "waiting for sandboxd");
        core.handle(Input::Attached { link: 1, processes: Vec::new() }, now);
        assert_eq!(core.observed(), Observed::Awake);
    }
}
