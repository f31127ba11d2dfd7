//! A prompt accepted while a restarted server takes a running harness over: the takeover's
//! snapshot was read before the prompt's turn existed, so merging it drops that turn; the core
//! then asks for the open turns again, and the later read brings the turn back and it is sent.

use super::*;

#[test]
fn a_turn_missing_from_the_takeover_snapshot_comes_back_with_the_next_read() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::Attached { link: LINK, processes: vec![process(120, 10)] });
    assert!(matches!(effects[..], [Effect::LoadTakeover { link: LINK }]));
    let snapshot = running_snapshot(&sim, 100, Vec::new());
    let running = snapshot.turns.turns[0].clone();
    // The snapshot is being read; a prompt to a new session is accepted and read first.
    let late = open_turn();
    sim.input(Input::OpenTurns(vec![running.clone(), late.clone()].into()));
    assert!(sim.core.turns.iter().any(|t| t.id == late.id));
    // The snapshot predates the new turn: merging it drops the turn, and a new read is asked.
    let effects = sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::LoadTurns))), "{effects:?}");
    // That read has the turn: it is back, and its session is opened in the running harness.
    let effects = sim.input(Input::OpenTurns(vec![running, late.clone()].into()));
    assert!(sim.core.turns.iter().any(|t| t.id == late.id), "the late turn is back");
    let opened = persists(&effects).iter().any(|(_, _, side)| {
        side.iter().any(|s| matches!(s, SideEffect::PendingStdin { bytes, .. } if String::from_utf8_lossy(bytes).contains("session/new")))
    });
    assert!(opened, "its session is opened in the taken-over harness: {effects:?}");
}
