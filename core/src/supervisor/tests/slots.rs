//! The core's side of the server-wide limit on running turns and of the per-agent turn time
//! limit: a prompt goes out only once its turn holds a slot, a queued turn says so in its
//! session, a question waiting for a person gives the slot back and its answer takes it again,
//! an ended turn gives it back; an agent's own limit replaces the server's.

use super::*;

fn slot_changes(effects: &[Effect]) -> Vec<SlotChange> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Slot(change) => Some(*change),
            _ => None,
        })
        .collect()
}

#[test]
fn a_prompt_goes_out_only_once_its_turn_holds_a_slot() {
    let mut sim = Sim::new();
    sim.hold_slots = true;
    let turn_id = sim.turn.id;
    let effects = sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    assert_eq!(slot_changes(&effects), vec![SlotChange::Ask(turn_id)], "{effects:?}");
    sim.woken(Ok(()));
    sim.input(Input::Attached { link: LINK, processes: Vec::new() });
    let snapshot = Snapshot { generation: 0, harness: None, turns: vec![sim.turn.clone()].into() };
    let effects = sim.input(Input::Loaded { link: LINK, snapshot: Some(Box::new(snapshot)) });
    assert!(slot_changes(&effects).is_empty(), "asked once: {effects:?}");
    let start = ProcessStart { channel: CHANNEL, argv: vec![], env: vec![], cwd: "/".to_owned(), user: None };
    let gate = crate::permissions::Gate::autonomous("/home/agent");
    let launch = Launch {
        generation: 1,
        channel: CHANNEL,
        start,
        session_mode: None,
        gate,
        auth: Auth::default(),
        mcp_servers: Default::default(),
        session_cwd: None,
    };
    sim.launched(Ok(Some(launch)));
    let effects = sim.input(Input::Control { link: LINK, msg: FromSandboxd::Started { channel: CHANNEL } });
    sim.ok(persists(&effects)[0].0);
    // The server's limit is reached: the turn is queued, and its session says so.
    let effects = sim.input(Input::SlotQueued { turn_id, running: 4, ahead: 1, limit: 4, scope: SlotScope::Workspace });
    let stored = persists(&effects);
    let notice = stored.iter().flat_map(|p| p.1.iter()).find(|e| e.kind == EventKind::Notice).expect("a notice");
    assert_eq!(notice.payload.value()["code"], "TURN_QUEUED");
    assert_eq!(
        (notice.payload.value()["limit"].clone(), notice.payload.value()["ahead"].clone()),
        (json!(4), json!(1))
    );
    assert_eq!(notice.payload.value()["scope"], "workspace");
    assert!(notice.payload.value()["message"].as_str().is_some_and(|m| m.contains("PER_WORKSPACE=4")), "{notice:?}");
    sim.ok(stored[0].0);
    let init =
        r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#;
    let mut offset = 0;
    let effects = sim.stdout(offset, &format!("{init}\n"));
    offset += init.len() as u64 + 1;
    for (id, _, _) in persists(&effects) {
        sim.ok(id);
    }
    let created = r#"{"jsonrpc":"2.0","id":"t-2","result":{"sessionId":"acp-1"}}"#;
    let effects = sim.stdout(offset, &format!("{created}\n"));
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "the session line only, no prompt without a slot: {effects:?}");
    let mut sent = stdin(&sim.ok(stored[0].0));
    assert!(sent.is_empty(), "{sent:?}");
    // The slot comes: the prompt is recorded, then sent.
    let effects = sim.input(Input::SlotGranted { turn_id });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    sent.extend(stdin(&sim.ok(stored[0].0)));
    assert!(sent.iter().any(|(_, f)| String::from_utf8_lossy(f).contains("session/prompt")), "{sent:?}");
}

#[test]
fn a_question_gives_the_slot_back_and_its_answer_takes_it_again() {
    let mut sim = Sim::new();
    sim.posture = crate::permissions::Posture::Approval;
    let turn_id = sim.turn.id;
    let mut offset = sim.run_until_prompt_sent();
    let ask = r#"{"jsonrpc":"2.0","id":"fa-req-1","method":"session/request_permission","params":{"sessionId":"acp-1","toolCall":{"toolCallId":"t1","kind":"execute"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}"#;
    let effects = sim.stdout(offset, &format!("{ask}\n"));
    offset += ask.len() as u64 + 1;
    assert_eq!(slot_changes(&effects), vec![SlotChange::Release(turn_id)], "waiting costs nothing");
    for (id, _, _) in persists(&effects) {
        sim.ok(id);
    }
    let permission_id = crate::permissions::question_id(sim.core_agent(), 1, &json!("fa-req-1"));
    let answer = Input::AnswerPermission {
        permission_id,
        choice: crate::permissions::Choice::Allow,
        by: json!("test"),
        reply: 1,
    };
    let effects = sim.input(answer);
    assert_eq!(slot_changes(&effects), vec![SlotChange::Take(turn_id)], "running again, at once: {effects:?}");
    for (id, _, _) in persists(&effects) {
        sim.ok(id);
    }
    let effects = sim.stdout(offset, END_TURN);
    assert_eq!(slot_changes(&effects), vec![SlotChange::Release(turn_id)], "the ended turn gives it back");
}

#[test]
fn a_cancelled_queued_turn_leaves_the_queue() {
    let mut sim = Sim::new();
    sim.hold_slots = true;
    let turn_id = sim.turn.id;
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let effects = sim.input(Input::Cancel { session_id: sim.turn.session_id, reply: 1 });
    assert_eq!(slot_changes(&effects), vec![SlotChange::Release(turn_id)], "{effects:?}");
    // A grant that crossed the cancel is given back at once.
    let effects = sim.input(Input::SlotGranted { turn_id });
    assert_eq!(slot_changes(&effects), vec![SlotChange::Release(turn_id)], "{effects:?}");
}

#[test]
fn an_agent_s_own_turn_limit_replaces_the_server_s() {
    let mut sim = Sim::new();
    sim.turn.time_limit = Some(Duration::from_secs(5));
    sim.run_until_prompt_sent();
    assert!(sim.advance(Duration::from_secs(4)).iter().all(|e| !matches!(e, Effect::Persist { .. })));
    let effects = sim.advance(Duration::from_secs(1));
    let stored = persists(&effects);
    assert!(
        stored.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("TURN_TIMEOUT"))),
        "{effects:?}"
    );
}
