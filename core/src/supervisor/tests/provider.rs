//! A turn the harness failed: the core asks whether the egress proxy saw the provider's stream
//! cut short since the turn began, and the answer becomes a `PROVIDER_STREAM_ENDED` notice naming
//! the turn ("the provider's stream ended early: …"); a turn that ends well costs no check.

use super::*;

fn checks(effects: &[Effect]) -> Vec<Vec<(TurnId, SessionId, chrono::DateTime<chrono::Utc>)>> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Job(Job::CheckProviderStream { turns }) => Some(turns.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_the_harness_failed_gets_a_notice_when_the_proxy_saw_the_stream_cut() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let failed = r#"{"jsonrpc":"2.0","id":"t-3","error":{"code":-32603,"message":"terminated"}}"#.to_owned() + "\n";
    let effects = sim.stdout(offset, &failed);
    let asked = checks(&effects);
    assert_eq!(asked.len(), 1, "{effects:?}");
    assert_eq!(asked[0].len(), 1);
    let (turn_id, session_id, started) = asked[0][0];
    assert_eq!((turn_id, session_id), (sim.turn.id, sim.turn.session_id));
    assert_eq!(started, sim.turn.created_at, "since the turn began");

    let finding = "the proxy saw api.anthropic.com end its response to /v1/messages after 100 of 1000 bytes \
                   (the upstream closed the connection)"
        .to_owned();
    let effects =
        sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: Some(finding.clone()) });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    let notice = &stored[0].1[0];
    assert_eq!((notice.kind, notice.session_id), (EventKind::Notice, sim.turn.session_id));
    assert_eq!(
        notice.payload,
        json!({"code": "PROVIDER_STREAM_ENDED", "message": format!("the provider's stream ended early: {finding}"),
            "turn_id": sim.turn.id})
    );
    // The proxy saw nothing: nothing is stored.
    let effects = sim.input(Input::ProviderStreamChecked { turns: vec![(turn_id, session_id)], finding: None });
    assert!(persists(&effects).is_empty());
}

#[test]
fn a_turn_that_ends_well_costs_no_check() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    assert!(checks(&effects).is_empty(), "{effects:?}");
}
