//! Parked turns: a turn whose sandbox is lost while a question of its waits for a person is
//! parked (not failed); the answer resumes it in a new harness (its session loaded again, a
//! prompt telling the answers), and the approved call, asked again, is allowed once under a
//! one-shot grant — a second identical call asks a person again. A parked turn can be cancelled.

use super::*;
use crate::events::side_effects::GrantScope;

const ASK: &str = r#"{"jsonrpc":"2.0","id":"fa-req-1","method":"session/request_permission","params":{"sessionId":"acp-1","toolCall":{"toolCallId":"t1","title":"make deploy","kind":"execute"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}"#;

fn sides(effects: &[Effect]) -> Vec<SideEffect> {
    persists(effects).iter().flat_map(|p| p.2.iter().cloned()).collect()
}

fn events(effects: &[Effect]) -> Vec<NewEvent> {
    persists(effects).iter().flat_map(|p| p.1.iter().cloned()).collect()
}

/// A turn with a waiting question whose sandbox then stopped: parked. Returns the question's id.
fn parked_turn(sim: &mut Sim) -> uuid::Uuid {
    sim.posture = crate::permissions::Posture::Approval;
    let offset = sim.run_until_prompt_sent();
    for (id, ..) in persists(&sim.stdout(offset, &format!("{ASK}\n"))) {
        sim.ok(id);
    }
    let effects = sim.input(Input::SandboxExited { at: sim.now.wall, oom: None });
    let stored = events(&effects);
    assert!(stored.iter().all(|e| e.kind != EventKind::TurnEnd), "parked, not ended: {effects:?}");
    let notice = stored.iter().find(|e| e.payload.value()["code"] == "TURN_PARKED").expect("a TURN_PARKED notice");
    assert_eq!(notice.payload.value()["cause"], "SANDBOX_EXITED");
    assert!(sides(&effects).iter().any(|s| matches!(s, SideEffect::ParkTurn { turn_id } if *turn_id == sim.turn.id)));
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    crate::permissions::question_id(sim.core_agent(), 1, &json!("fa-req-1"))
}

fn answer(sim: &mut Sim, permission_id: uuid::Uuid, choice: crate::permissions::Choice) -> Vec<Effect> {
    sim.input(Input::AnswerPermission { permission_id, choice, by: json!("person"), reply: 7 })
}

#[test]
fn an_answered_parked_turn_resumes_and_its_approved_call_is_allowed_once() {
    let mut sim = Sim::new();
    let permission_id = parked_turn(&mut sim);
    // Nothing wakes the sandbox for a parked turn.
    assert!(sim.advance(Duration::from_secs(3600)).iter().all(|e| !matches!(e, Effect::Job(Job::Wake { .. }))));
    let effects = answer(&mut sim, permission_id, crate::permissions::Choice::Allow);
    let stored = events(&effects);
    let resolved = stored.iter().find(|e| e.kind == EventKind::PermissionResolved).expect("resolved");
    assert_eq!(resolved.payload.value()["parked"], true);
    let resumed = stored.iter().find(|e| e.payload.value()["code"] == "TURN_RESUMED").expect("TURN_RESUMED");
    let text = resumed.payload.value()["prompt"][0]["text"].as_str().expect("prompt text").to_owned();
    assert!(text.starts_with("[agenthold]") && text.contains("\"make deploy\" was approved"), "{text}");
    let side = sides(&effects);
    assert!(
        side.iter().any(|s| matches!(s, SideEffect::PermissionResolved { grant: GrantScope::Once, .. })),
        "{side:?}"
    );
    assert!(side.iter().any(|s| matches!(s, SideEffect::UnparkTurn { .. })), "{side:?}");
    assert!(effects.iter().any(|e| matches!(e, Effect::Job(Job::Wake { .. }))), "the resumed turn wakes the sandbox");
    for (id, ..) in persists(&effects) {
        let replies = sim.ok(id);
        assert!(replies.iter().any(|e| matches!(e, Effect::Reply { to: 7, .. })) || id != persists(&effects)[0].0);
    }
    // A second answer finds nothing to answer.
    let again = answer(&mut sim, permission_id, crate::permissions::Choice::Deny);
    assert!(
        again
            .iter()
            .any(|e| matches!(e, Effect::Reply { outcome: Outcome::Answered(Err(AnswerError::NotPending)), .. }))
    );

    // A new sandbox and harness: the session is loaded again and the resuming prompt sent.
    sim.woken(Ok(()));
    sim.input(Input::Attached { link: 2, processes: Vec::new() });
    let mut row = sim.turn.clone();
    row.acp_session_id = Some("acp-1".to_owned());
    let snapshot = Snapshot { generation: 1, harness: None, turns: vec![row].into() };
    sim.input(Input::Loaded { link: 2, snapshot: Some(Box::new(snapshot)) });
    let start = ProcessStart { channel: 8, argv: vec![], env: vec![], cwd: "/".to_owned(), user: None };
    let gate = crate::permissions::Gate {
        posture: crate::permissions::Posture::Approval,
        ..crate::permissions::Gate::autonomous("/home/agent")
    };
    sim.launched(Ok(Some(Launch {
        generation: 2,
        channel: 8,
        start,
        session_mode: None,
        gate,
        auth: Auth::default(),
        mcp_servers: Default::default(),
        session_cwd: None,
    })));
    let effects = sim.input(Input::Control { link: 2, msg: FromSandboxd::Started { channel: 8 } });
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    let mut offset = 0;
    let mut line = |sim: &mut Sim, text: &str| {
        let bytes = Bytes::from(format!("{text}\n"));
        let effects = sim.input(Input::Stdout { link: 2, channel: 8, offset, bytes: bytes.clone() });
        offset += bytes.len() as u64;
        let mut all = Vec::new();
        for (id, ..) in persists(&effects) {
            all.extend(sim.ok(id));
        }
        (effects, all)
    };
    let (_, after) = line(
        &mut sim,
        r#"{"jsonrpc":"2.0","id":"t-4","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
    );
    assert!(stdin(&after).iter().any(|(_, f)| String::from_utf8_lossy(f).contains("session/load")), "{after:?}");
    let (_, after) = line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-5","result":{}}"#);
    let prompt = stdin(&after);
    assert!(
        prompt.iter().any(|(_, f)| String::from_utf8_lossy(f).contains("[agenthold] The sandbox stopped")),
        "{after:?}"
    );

    // The same call asked again: allowed at once, by the grant.
    let ask = ASK.replace("fa-req-1", "fa-req-9").replace("\"t1\"", "\"t9\"");
    let (effects, after) = line(&mut sim, &ask);
    let stored = events(&effects);
    let resolved = stored.iter().find(|e| e.kind == EventKind::PermissionResolved).expect("answered at once");
    assert_eq!(resolved.payload.value()["by"]["grant"], json!(permission_id));
    assert!(
        sides(&effects).iter().any(|s| matches!(s, SideEffect::GrantUsed { permission_id: p } if *p == permission_id))
    );
    assert!(stdin(&after).iter().any(|(_, f)| String::from_utf8_lossy(f).contains("\"optionId\":\"a\"")), "{after:?}");
    // Once only: the next identical call asks a person.
    let ask = ASK.replace("fa-req-1", "fa-req-10");
    let (effects, _) = line(&mut sim, &ask);
    let stored = events(&effects);
    assert!(stored.iter().any(|e| e.kind == EventKind::Permission), "{effects:?}");
    assert!(stored.iter().all(|e| e.kind != EventKind::PermissionResolved), "a person is asked: {effects:?}");
}

#[test]
fn a_denied_parked_call_resumes_the_turn_without_a_grant() {
    let mut sim = Sim::new();
    let permission_id = parked_turn(&mut sim);
    let effects = answer(&mut sim, permission_id, crate::permissions::Choice::Deny);
    assert!(
        sides(&effects).iter().any(|s| matches!(s, SideEffect::PermissionResolved { grant: GrantScope::None, .. }))
    );
    let resumed = events(&effects).into_iter().find(|e| e.payload.value()["code"] == "TURN_RESUMED").expect("resumed");
    assert!(
        resumed.payload.value()["prompt"][0]["text"].as_str().is_some_and(|t| t.contains("was denied")),
        "{resumed:?}"
    );
}

#[test]
fn a_parked_turn_can_be_cancelled() {
    let mut sim = Sim::new();
    let permission_id = parked_turn(&mut sim);
    let effects = sim.input(Input::Cancel { session_id: sim.turn.session_id, reply: 3 });
    assert!(effects.iter().any(|e| matches!(e, Effect::Reply { to: 3, outcome: Outcome::Cancelled(true) })));
    let stored = events(&effects);
    let end = stored.iter().find(|e| e.kind == EventKind::TurnEnd).expect("ended");
    assert_eq!(end.payload.value()["stop_reason"], "cancelled");
    assert!(
        stored
            .iter()
            .any(|e| e.kind == EventKind::PermissionResolved
                && e.payload.value()["permission_id"] == json!(permission_id))
    );
}

#[test]
fn a_parked_turn_found_at_load_keeps_its_questions() {
    let mut sim = Sim::new();
    let mut row = sim.turn.clone();
    row.state = StoredTurnState::Parked;
    let permission_id = uuid::Uuid::new_v4();
    let question = Question {
        permission_id,
        session_id: row.session_id,
        request_id: json!("old-1"),
        options: json!([{"optionId": "a", "name": "Allow", "kind": "allow_once"}]),
        tool_call: json!({"title": "deploy", "kind": "execute"}),
        kind: QuestionKind::Permission,
    };
    let work = OpenWork {
        turns: vec![row.clone()],
        questions: vec![WaitingQuestion { turn_id: row.id, question }],
        grants: Vec::new(),
    };
    // An answer that arrives before the load waits for it.
    let early = answer(&mut sim, permission_id, crate::permissions::Choice::Allow);
    assert!(early.is_empty(), "{early:?}");
    let effects = sim.input(Input::OpenTurns(work));
    assert!(sides(&effects).iter().any(|s| matches!(s, SideEffect::UnparkTurn { .. })), "{effects:?}");
}
