//! A turn the harness failed: the core holds the error answer (and every line after it) while
//! the shell reads the egress proxy's report, then the turn's error is `PROVIDER_STREAM_ENDED`
//! ("the provider's stream ended early: … (the harness said: …)") when the proxy saw the
//! provider's stream cut short, else the harness's own `HARNESS_ERROR`; a turn that ends well
//! costs no check.

use super::*;

const FAILED: &str = concat!(r#"{"jsonrpc":"2.0","id":"t-3","error":{"code":-32603,"message":"terminated"}}"#, "\n");

const FINDING: &str = "the egress proxy saw api.anthropic.com's response to /v1/messages (status 200) end after 100 \
                       of 1000 bytes: the upstream closed the connection before the response ended";

fn checks(effects: &[Effect]) -> Vec<Vec<(TurnId, SessionId, chrono::DateTime<chrono::Utc>)>> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Job(Job::CheckProviderStream { turns }) => Some(turns.clone()),
            _ => None,
        })
        .collect()
}

/// The error answer arrives: the core asks, stores nothing yet.
fn fail_the_turn(sim: &mut Sim, offset: u64, after: &str) -> (TurnId, SessionId) {
    let effects = sim.stdout(offset, &format!("{FAILED}{after}"));
    assert!(persists(&effects).is_empty(), "nothing is stored while the report is read: {effects:?}");
    assert!(acks(&effects).is_empty(), "nothing is acknowledged either: {effects:?}");
    let asked = checks(&effects);
    assert_eq!(asked.len(), 1, "{effects:?}");
    assert_eq!(asked[0].len(), 1);
    let (turn_id, session_id, started) = asked[0][0];
    assert_eq!((turn_id, session_id), (sim.turn.id, sim.turn.session_id));
    assert_eq!(started, sim.turn.created_at, "since the turn began");
    (turn_id, session_id)
}

#[test]
fn a_turn_failed_on_a_cut_stream_says_the_provider_s_stream_ended_early() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let (turn_id, session_id) = fail_the_turn(&mut sim, offset, "");
    let effects =
        sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: Some(FINDING.into()) });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    let events = stored[0].1;
    assert_eq!(kinds(events), [EventKind::Error, EventKind::TurnEnd]);
    assert_eq!(events[0].payload.value()["code"], "PROVIDER_STREAM_ENDED");
    assert_eq!(
        events[0].payload.value()["message"],
        format!("the provider's stream ended early: {FINDING} (the harness said: terminated)")
    );
    assert_eq!(events[0].payload.value()["rpc_error"]["message"], "terminated", "the harness's own error is kept");
    assert_eq!(events[1].payload.value()["stop_reason"], "error");
    assert_eq!(stored_range(stored[0].2), Some((offset, offset + FAILED.len() as u64)), "the held line's range");
}

#[test]
fn a_turn_failed_with_no_cut_keeps_the_harness_s_error() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let (turn_id, session_id) = fail_the_turn(&mut sim, offset, "");
    let effects = sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: None });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    assert_eq!(kinds(stored[0].1), [EventKind::Error, EventKind::TurnEnd]);
    assert_eq!(stored[0].1[0].payload.value()["code"], "HARNESS_ERROR");
    assert_eq!(stored[0].1[0].payload.value()["message"], "terminated");
    assert!(checks(&effects).is_empty(), "asked once: {effects:?}");
}

#[test]
fn lines_after_the_held_answer_wait_behind_it_in_order() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let late = update("after the failure");
    let (turn_id, session_id) = fail_the_turn(&mut sim, offset, &late);
    // More stdout while the report is read: held too.
    let later = update("later still");
    let at = offset + (FAILED.len() + late.len()) as u64;
    let effects = sim.stdout(at, &later);
    assert!(persists(&effects).is_empty(), "{effects:?}");
    let effects = sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: None });
    let stored = persists(&effects);
    let events: Vec<&NewEvent> = stored.iter().flat_map(|p| p.1.iter()).collect();
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Error, EventKind::TurnEnd, EventKind::Update, EventKind::Update], "{effects:?}");
    let last = stored.last().expect("stored");
    assert_eq!(stored_range(last.2).map(|(_, to)| to), Some(at + later.len() as u64));
}

#[test]
fn an_exit_waits_for_the_held_lines() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let end = offset + FAILED.len() as u64;
    let (turn_id, session_id) = fail_the_turn(&mut sim, offset, "");
    let status = ExitStatus { code: Some(1), signal: None };
    let exited = FromSandboxd::Exited { channel: CHANNEL, status, stdout_end: end };
    let effects = sim.input(Input::Control { link: LINK, msg: exited });
    assert!(persists(&effects).is_empty(), "the exit waits: {effects:?}");
    let effects =
        sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: Some(FINDING.into()) });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    assert_eq!(stored[0].1[0].payload.value()["code"], "PROVIDER_STREAM_ENDED", "the turn's own failure, not the exit");
    let effects = sim.ok(stored[0].0);
    let after = persists(&effects);
    assert!(!after.iter().any(|p| p.1.iter().any(|e| e.kind == EventKind::TurnEnd)), "ended once: {effects:?}");
}

#[test]
fn a_turn_that_ended_otherwise_gets_a_notice() {
    let mut sim = Sim::new();
    sim.run_until_prompt_sent();
    let effects = sim.input(Input::ProviderStreamChecked {
        turns: vec![(sim.turn.id, sim.turn.session_id)],
        finding: Some(FINDING.into()),
    });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    let notice = &stored[0].1[0];
    assert_eq!(notice.kind, EventKind::Notice);
    assert_eq!(
        notice.payload,
        json!({"code": "PROVIDER_STREAM_ENDED", "message": format!("the provider's stream ended early: {FINDING}"),
            "turn_id": sim.turn.id})
    );
    let effects =
        sim.input(Input::ProviderStreamChecked { turns: vec![(sim.turn.id, sim.turn.session_id)], finding: None });
    assert!(persists(&effects).is_empty(), "nothing seen, nothing stored");
}

#[test]
fn a_turn_that_ends_well_costs_no_check() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    assert!(checks(&effects).is_empty(), "{effects:?}");
}
