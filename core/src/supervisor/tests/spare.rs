//! The warm pool's spare session: a harness taken over with a session opened ahead prompts in
//! it, and what the harness says about that session before any agent's session takes it is kept
//! (within its bounds) and becomes the taking session's first events.

use serde_json::json;

use super::*;
use crate::events::EventKind;

#[test]
fn a_harness_taken_over_with_a_spare_session_prompts_in_it_and_opens_none() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::Attached { link: LINK, processes: vec![process(0, 0)] });
    assert!(matches!(effects[..], [Effect::LoadTakeover { link: LINK }]));
    // The warm pool's harness: initialised, one session opened ahead, none of the agent's yet.
    let mut snapshot = running_snapshot(&sim, 0, Vec::new());
    snapshot.turns = vec![sim.turn.clone()].into();
    let harness = snapshot.harness.as_mut().expect("a harness");
    harness.sessions.clear();
    harness.spare_session = Some("spare-1".to_owned());
    let effects = sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    let written: Vec<String> = stdin(&effects).iter().map(|(_, b)| String::from_utf8_lossy(b).into_owned()).collect();
    assert!(!written.iter().any(|w| w.contains("session/new")), "no session opened: {written:?}");
    // The session taken and the prompt recorded, then sent into the spare session once stored.
    let stored = persists(&effects);
    assert!(
        stored.iter().flat_map(|p| p.2.iter()).any(|s| matches!(s,
            SideEffect::SessionOpened { acp_session_id, .. } if acp_session_id == "spare-1")),
        "{effects:?}"
    );
    let mut sent = Vec::new();
    for id in stored.iter().map(|p| p.0).collect::<Vec<_>>() {
        sent.extend(stdin(&sim.ok(id)));
    }
    assert_eq!(sent.len(), 1, "{sent:?}");
    let prompt = String::from_utf8_lossy(&sent[0].1);
    assert!(prompt.contains("session/prompt") && prompt.contains("\"spare-1\""), "{prompt}");
    assert!(sim.core.harness.as_ref().is_some_and(|h| h.spare_session.is_none()), "taken once");
}

#[test]
fn what_a_harness_says_about_its_spare_session_is_kept_and_becomes_the_taking_session_s_first_events() {
    let mut sim = Sim::new();
    sim.input(Input::Attached { link: LINK, processes: vec![process(0, 0)] });
    // The warm pool's harness, taken over with no turn yet: one update for its spare session
    // was stored before (a takeover read it back), one comes now.
    let mut snapshot = running_snapshot(&sim, 0, Vec::new());
    snapshot.turns = Vec::new().into();
    let harness = snapshot.harness.as_mut().expect("a harness");
    harness.sessions.clear();
    harness.spare_session = Some("spare-1".to_owned());
    harness.spare_updates = vec![json!({"sessionUpdate": "current_mode_update", "currentModeId": "build"})];
    sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    let commands = json!({"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "init"}]});
    let line = json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "spare-1", "update": commands}})
    .to_string()
        + "\n";
    let effects = sim.stdout(0, &line);
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    assert!(stored[0].1.is_empty(), "no session has it yet: not an event");
    assert!(
        stored[0].2.iter().any(|s| matches!(s, SideEffect::SpareUpdate { acp_session_id, update, .. }
            if acp_session_id == "spare-1" && *update == commands)),
        "kept with its line: {effects:?}"
    );
    let id = stored[0].0;
    assert_eq!(acks(&sim.ok(id)), vec![line.len() as u64], "acknowledged once stored");

    // The agent's first session takes the spare one: both updates are its first events, in
    // order, stored with the session's opening.
    let effects = sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let stored = persists(&effects);
    let opened = stored
        .iter()
        .find(|p| {
            p.2.iter()
                .any(|s| matches!(s, SideEffect::SessionOpened { acp_session_id, .. } if acp_session_id == "spare-1"))
        })
        .unwrap_or_else(|| panic!("the spare session taken: {effects:?}"));
    let kinds: Vec<String> =
        opened.1.iter().map(|e| e.payload.value()["sessionUpdate"].as_str().unwrap_or("").to_owned()).collect();
    assert_eq!(kinds, ["current_mode_update", "available_commands_update"], "{effects:?}");
    assert!(opened.1.iter().all(|e| e.session_id == sim.turn.session_id && e.kind == EventKind::Update));
    assert!(sim.core.harness.as_ref().is_some_and(|h| h.spare_session.is_none()), "taken once");
}

#[test]
fn a_spare_session_s_updates_are_kept_within_their_count_and_bytes() {
    use crate::supervisor::harness::{MAX_SPARE_UPDATE_BYTES, MAX_SPARE_UPDATES, SpareUpdates};
    let mut kept = SpareUpdates::default();
    for i in 0..MAX_SPARE_UPDATES {
        assert!(kept.push(json!({"n": i})));
    }
    assert!(!kept.push(json!({"n": "one too many"})));
    assert_eq!(kept.take().len(), MAX_SPARE_UPDATES);
    assert!(kept.push(json!({"text": "x".repeat(MAX_SPARE_UPDATE_BYTES / 2)})));
    assert!(!kept.push(json!({"text": "x".repeat(MAX_SPARE_UPDATE_BYTES / 2)})), "past the bytes");
    assert!(kept.push(json!({"small": true})), "a smaller one still fits");
    let stored = SpareUpdates::from_stored(vec![json!({"text": "x".repeat(MAX_SPARE_UPDATE_BYTES)}), json!(1)]);
    assert_eq!(stored.clone().take(), vec![json!(1)], "read back within the same bounds");
}
