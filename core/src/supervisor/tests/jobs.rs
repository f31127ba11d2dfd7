//! Job results name their job: a result the core no longer waits for changes nothing, and a
//! wake that has to wait for a slot on the host says so in the sessions waiting for it.

use super::*;

fn notices(effects: &[Effect], code: &str) -> Vec<SessionId> {
    persists(effects)
        .iter()
        .flat_map(|(_, events, _)| events.iter())
        .filter(|e| e.kind == EventKind::Notice && e.payload.value()["code"] == json!(code))
        .map(|e| e.session_id)
        .collect()
}

#[test]
fn a_wake_waiting_for_the_host_tells_the_sessions_with_open_turns_once() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let job = sim.latest_job(|j| if let Job::Wake { job } = j { Some(*job) } else { None });
    assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "{effects:?}");
    let effects = sim.input(Input::WakeQueued { job });
    assert_eq!(notices(&effects, "CAPACITY_WAIT"), vec![sim.turn.session_id], "{effects:?}");
    let (id, ..) = persists(&effects)[0];
    sim.ok(id);
    // The wake goes on once a slot is free; news of the wait arriving after it is old news.
    sim.woken(Ok(()));
    let late = sim.input(Input::WakeQueued { job });
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn results_of_jobs_no_longer_waited_for_change_nothing() {
    let mut sim = Sim::new();
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let job = sim.latest_job(|j| if let Job::Wake { job } = j { Some(*job) } else { None });
    let stale = sim.input(Input::Woken { job: job + 100, result: Err(WakeError::StartFailed("old".to_owned())) });
    assert!(stale.is_empty(), "a wake never asked for: {stale:?}");
    assert_eq!(sim.core.observed(), Observed::Starting, "the wake asked for still runs");
    let effects = sim.woken(Ok(()));
    assert!(persists(&effects).is_empty(), "{effects:?}");
    let again = sim.input(Input::Woken { job, result: Err(WakeError::StartFailed("twice".to_owned())) });
    assert!(again.is_empty(), "a second result of the same wake: {again:?}");
    // A harness start's result is taken once, too.
    sim.input(Input::Attached { link: LINK, processes: Vec::new() });
    let snapshot = Snapshot { generation: 0, harness: None, turns: vec![sim.turn.clone()].into() };
    sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    let job = sim.latest_job(|j| if let Job::StartHarness { job } = j { Some(*job) } else { None });
    let effects = sim.input(Input::Launched { job: job + 100, result: Err("not this one".to_owned()) });
    assert!(effects.is_empty(), "{effects:?}");
    let effects = sim.input(Input::Launched { job, result: Err("no such harness".to_owned()) });
    let failed = persists(&effects)
        .iter()
        .flat_map(|(_, events, _)| events.iter())
        .any(|e| e.kind == EventKind::Error && e.payload.value()["code"] == json!("HARNESS_START_FAILED"));
    assert!(failed, "{effects:?}");
    let again = sim.input(Input::Launched { job, result: Err("no such harness".to_owned()) });
    assert!(again.is_empty(), "{again:?}");
}
