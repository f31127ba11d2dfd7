//! What changes a running agent, on the simulator of the parent module: a changed environment
//! restarts an idle harness, sessions are put in the adapter's mode, permission questions stop
//! the turn's clock and are answered, a request for an unknown session is refused, and a sandbox
//! that stops on its own ends its turn.

use std::time::Duration;

use serde_json::json;

use super::*;

#[test]
fn a_changed_environment_restarts_the_harness_only_once_no_turn_runs() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    // Mid-turn: nothing happens to the harness.
    let effects = sim.input(Input::EnvironmentChanged);
    assert!(sends(&effects).iter().all(|s| !matches!(s, Outbound::Control(ToSandboxd::Signal { .. }))), "{effects:?}");
    assert!(persists(&effects).is_empty(), "{effects:?}");
    // The turn ends; once its end is stored, the idle harness is cleared, then killed.
    let effects = sim.stdout(offset, END_TURN);
    assert!(sends(&effects).iter().all(|s| !matches!(s, Outbound::Control(ToSandboxd::Signal { .. }))));
    let mut retired = Vec::new();
    for (id, _, _) in persists(&effects) {
        retired.extend(sim.ok(id));
    }
    let cleared = persists(&retired)
        .iter()
        .any(|(_, _, side)| side.iter().any(|s| matches!(s, SideEffect::ClearHarness { generation: 1, .. })));
    assert!(cleared, "{retired:?}");
    assert!(
        sends(&retired).contains(&Outbound::Control(ToSandboxd::Signal { channel: CHANNEL, signal: 9 })),
        "{retired:?}"
    );
    // Once: a later input does not kill again.
    let effects = sim.advance(Duration::from_millis(10));
    assert!(sends(&effects).iter().all(|s| !matches!(s, Outbound::Control(ToSandboxd::Signal { .. }))));
}

#[test]
fn a_turn_that_arrives_after_a_change_waits_for_the_harness_with_the_new_environment() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let ending = sim.stdout(offset, END_TURN);
    // A secret is attached and the next prompt arrives while the first turn's end is still being
    // stored (the race a second replica's forwarded change made visible).
    let effects = sim.input(Input::EnvironmentChanged);
    assert!(sends(&effects).is_empty(), "{effects:?}");
    let mut next = open_turn();
    next.session_id = sim.turn.session_id;
    let effects = sim.input(Input::OpenTurns(vec![next].into()));
    assert!(stdin(&effects).is_empty(), "the next prompt does not go to the old harness: {effects:?}");
    assert!(persists(&effects).is_empty(), "nor is it recorded for it: {effects:?}");
    // The end stored, the old harness is stopped and a new one started for the waiting turn.
    let mut after = Vec::new();
    for (id, _, _) in persists(&ending) {
        after.extend(sim.ok(id));
    }
    assert!(
        sends(&after).contains(&Outbound::Control(ToSandboxd::Signal { channel: CHANNEL, signal: 9 })),
        "{after:?}"
    );
    assert!(after.iter().any(|e| matches!(e, Effect::Job(Job::StartHarness { .. }))), "{after:?}");
}

#[test]
fn a_changed_environment_with_no_harness_running_does_nothing() {
    let mut sim = Sim::new();
    let effects = sim.input(Input::EnvironmentChanged);
    assert!(effects.is_empty(), "{effects:?}");
}

#[test]
fn a_session_is_put_in_the_adapters_mode_before_its_first_prompt() {
    let mut sim = Sim::new();
    sim.session_mode = Some("default".to_owned());
    sim.start_harness();
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
    offset += created.len() as u64 + 1;
    let mut sent = Vec::new();
    for (id, _, _) in persists(&effects) {
        sent.extend(stdin(&sim.ok(id)));
    }
    // Only the mode request went out: the prompt waits for its answer.
    assert_eq!(sent.len(), 1, "{sent:?}");
    let frame = String::from_utf8_lossy(&sent[0].1).into_owned();
    assert!(frame.contains("session/set_mode") && frame.contains(r#""modeId":"default""#), "{frame}");
    assert!(frame.contains(r#""sessionId":"acp-1""#) && frame.contains(r#""id":"t-3""#), "{frame}");
    // Refused: a notice says so, and the prompt goes out anyway.
    let refused = r#"{"jsonrpc":"2.0","id":"t-3","error":{"code":-32602,"message":"no such mode"}}"#;
    let effects = sim.stdout(offset, &format!("{refused}\n"));
    let notices: Vec<&NewEvent> = persists(&effects)
        .iter()
        .flat_map(|(_, events, _)| events.iter())
        .filter(|e| e.kind == EventKind::Notice)
        .collect();
    assert_eq!(notices.len(), 1, "{effects:?}");
    assert_eq!(notices[0].payload.value()["code"], "SESSION_MODE_NOT_SET");
    let mut sent = Vec::new();
    for (id, _, _) in persists(&effects) {
        sent.extend(stdin(&sim.ok(id)));
    }
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(String::from_utf8_lossy(&sent[0].1).contains("session/prompt"));
}

#[test]
fn a_change_before_the_harness_starts_needs_no_restart() {
    let mut sim = Sim::new();
    sim.input(Input::EnvironmentChanged);
    let offset = sim.run_until_prompt_sent();
    let effects = sim.stdout(offset, END_TURN);
    let mut after = Vec::new();
    for (id, _, _) in persists(&effects) {
        after.extend(sim.ok(id));
    }
    assert!(sends(&after).iter().all(|s| !matches!(s, Outbound::Control(ToSandboxd::Signal { .. }))), "{after:?}");
}

#[test]
fn waiting_for_a_person_does_not_count_against_the_turn_s_time_limit() {
    let mut sim = Sim::new();
    sim.posture = crate::permissions::Posture::Approval;
    let offset = sim.run_until_prompt_sent();
    // 40 s into the turn, the harness asks; a person takes an hour to answer.
    sim.advance(Duration::from_secs(40));
    let ask = r#"{"jsonrpc":"2.0","id":"fa-req-1","method":"session/request_permission","params":{"sessionId":"acp-1","toolCall":{"toolCallId":"t1","kind":"execute"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}"#;
    let effects = sim.stdout(offset, &format!("{ask}\n"));
    let stored = persists(&effects);
    assert!(stored.iter().any(|p| kinds(p.1).contains(&EventKind::Permission)), "{effects:?}");
    assert!(
        stored.iter().any(|p| p.2.iter().any(|s| matches!(s, SideEffect::TurnDeadline { deadline_at: None, .. }))),
        "the stored deadline is cleared while the question waits"
    );
    for (id, _, _) in stored {
        sim.ok(id);
    }
    assert!(sim.advance(Duration::from_secs(3600)).is_empty(), "no time limit while the question waits");
    let permission_id = crate::permissions::question_id(sim.core_agent(), 1, &json!("fa-req-1"));
    let effects = sim.input(Input::AnswerPermission {
        permission_id,
        choice: crate::permissions::Choice::Allow,
        by: json!("test"),
        reply: 1,
    });
    let stored = persists(&effects);
    assert!(
        stored.iter().any(|p| p.2.iter().any(|s| matches!(s, SideEffect::TurnDeadline { deadline_at: Some(_), .. }))),
        "{effects:?}"
    );
    for (id, _, _) in stored {
        sim.ok(id);
    }
    // The 60 s that were left run again from the answer.
    assert!(sim.advance(Duration::from_secs(59)).iter().all(|e| !matches!(e, Effect::Persist { .. })));
    let effects = sim.advance(Duration::from_secs(1));
    assert!(persists(&effects).iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("TURN_TIMEOUT"))));
}

#[test]
fn a_permission_request_for_an_unknown_session_is_refused_and_reported() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let ask = r#"{"jsonrpc":"2.0","id":"x-1","method":"session/request_permission","params":{"sessionId":"acp-nope","toolCall":{"toolCallId":"t1"},"options":[]}}"#;
    let effects = sim.stdout(offset, &format!("{ask}\n"));
    let stored = persists(&effects);
    let errors: Vec<&NewEvent> =
        stored.iter().flat_map(|p| p.1.iter()).filter(|e| e.kind == EventKind::Error).collect();
    assert_eq!(errors.len(), 1, "{effects:?}");
    assert_eq!(errors[0].session_id, sim.turn.session_id);
    assert_eq!(errors[0].payload.value()["code"], "HARNESS_PROTOCOL_ERROR");
    assert!(stored.iter().all(|p| !kinds(p.1).contains(&EventKind::TurnEnd)), "the turn goes on");
    let mut sent = Vec::new();
    for (id, _, _) in stored {
        sent.extend(stdin(&sim.ok(id)));
    }
    assert!(sent.iter().any(|(_, f)| String::from_utf8_lossy(f).contains("unknown session")), "{sent:?}");
}

#[test]
fn a_sandbox_that_stops_on_its_own_ends_its_running_turn_at_once() {
    let mut sim = Sim::new();
    sim.run_until_prompt_sent();
    // A stop from before the current connection is an earlier container's: ignored.
    let before = sim.now.wall - chrono::Duration::seconds(30);
    assert!(sim.input(Input::SandboxExited { at: before, oom: None }).is_empty());
    let effects = sim.input(Input::SandboxExited { at: sim.now.wall, oom: None });
    assert_eq!(drops(&effects), 1, "{effects:?}");
    let stored = persists(&effects);
    assert!(
        stored.iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_EXITED"))),
        "{effects:?}"
    );
    assert!(stored.iter().any(|p| kinds(p.1).contains(&EventKind::TurnEnd)), "{effects:?}");
    // Out of memory says so.
    let mut sim = Sim::new();
    sim.run_until_prompt_sent();
    let oom = Some("the harness ran out of memory (limit 512 MiB)".to_owned());
    let effects = sim.input(Input::SandboxExited { at: sim.now.wall, oom });
    assert!(persists(&effects).iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("OUT_OF_MEMORY"))));
    // Nothing runs: nothing to end.
    let mut sim = Sim::new();
    let at = sim.now.wall;
    assert!(persists(&sim.input(Input::SandboxExited { at, oom: None })).is_empty());
}

#[test]
fn a_wake_with_no_room_on_the_host_fails_its_waiting_turns_with_capacity() {
    let mut sim = Sim::new();
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let effects = sim.woken(Err(WakeError::Capacity("no free subnet: the pool 10.214.0.0/16 is full".to_owned())));
    let errors: Vec<&NewEvent> = persists(&effects)
        .iter()
        .flat_map(|(_, events, _)| events.iter())
        .filter(|e| e.payload.value()["code"].is_string())
        .collect();
    assert_eq!(errors.len(), 1, "{effects:?}");
    assert_eq!(errors[0].payload.value()["code"], json!("CAPACITY"));
    assert_eq!(errors[0].payload.value()["message"], json!("no free subnet: the pool 10.214.0.0/16 is full"));
    // Any other failure keeps its code.
    let mut sim = Sim::new();
    sim.input(Input::OpenTurns(vec![sim.turn.clone()].into()));
    let effects = sim.woken(Err(WakeError::StartFailed("the sandbox could not start (see the server log)".to_owned())));
    assert!(
        persists(&effects)
            .iter()
            .any(|(_, events, _)| events.iter().any(|e| e.payload.value()["code"] == json!("SANDBOX_START_FAILED")))
    );
}

#[test]
fn a_harness_that_asks_to_sign_in_is_signed_in_with_a_method_the_server_holds_once() {
    let mut sim = Sim::new();
    sim.auto_auth = vec!["api-key".to_owned()];
    sim.start_harness();
    let init =
        r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1,"authMethods":[{"id":"api-key","name":"Key"}]}}"#;
    let mut offset = 0;
    let mut line = |sim: &mut Sim, text: &str| {
        let effects = sim.stdout(offset, &format!("{text}\n"));
        offset += text.len() as u64 + 1;
        let mut sent = Vec::new();
        for (id, ..) in persists(&effects) {
            sent.extend(stdin(&sim.ok(id)));
        }
        (effects, sent)
    };
    let (_, sent) = line(&mut sim, init);
    assert!(sent.iter().any(|(_, f)| String::from_utf8_lossy(f).contains("session/new")));
    // auth_required: the server authenticates with its method, then asks for the session again.
    let refused = r#"{"jsonrpc":"2.0","id":"t-2","error":{"code":-32000,"message":"Authentication required"}}"#;
    let (effects, sent) = line(&mut sim, refused);
    assert!(persists(&effects).iter().all(|p| !kinds(p.1).contains(&EventKind::TurnEnd)), "the turn goes on");
    let frame = sent.iter().map(|(_, f)| String::from_utf8_lossy(f).into_owned()).collect::<String>();
    assert!(frame.contains("\"authenticate\"") && frame.contains("\"methodId\":\"api-key\""), "{frame}");
    let (effects, sent) = line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-3","result":{}}"#);
    let stored: Vec<NewEvent> = persists(&effects).iter().flat_map(|p| p.1.iter().cloned()).collect();
    assert!(stored.iter().any(|e| e.payload.value()["code"] == "AUTHENTICATED"), "{effects:?}");
    assert!(sent.iter().any(|(_, f)| String::from_utf8_lossy(f).contains("session/new")), "{sent:?}");
    // Refused again: no second try with the same method; the turn fails.
    let refused = r#"{"jsonrpc":"2.0","id":"t-4","error":{"code":-32000,"message":"Authentication required"}}"#;
    let (effects, _) = line(&mut sim, refused);
    let stored: Vec<NewEvent> = persists(&effects).iter().flat_map(|p| p.1.iter().cloned()).collect();
    assert!(stored.iter().any(|e| e.payload.value()["code"] == "SESSION_START_FAILED"), "{effects:?}");
}

#[test]
fn without_a_method_it_holds_the_server_does_not_authenticate() {
    let mut sim = Sim::new();
    sim.start_harness();
    let init = r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1}}"#;
    let effects = sim.stdout(0, &format!("{init}\n"));
    let offset = init.len() as u64 + 1;
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    let refused = r#"{"jsonrpc":"2.0","id":"t-2","error":{"code":-32000,"message":"Authentication required"}}"#;
    let effects = sim.stdout(offset, &format!("{refused}\n"));
    let stored: Vec<NewEvent> = persists(&effects).iter().flat_map(|p| p.1.iter().cloned()).collect();
    assert!(stored.iter().any(|e| e.payload.value()["code"] == "SESSION_START_FAILED"), "{effects:?}");
}

/// A session the harness cannot open fails with the end of what the harness printed on stderr
/// while it still runs (issue 31: a misconfigured key looked like a hang with no reason).
#[test]
fn a_session_that_cannot_start_fails_with_the_end_of_the_running_harness_stderr() {
    let mut sim = Sim::new();
    sim.start_harness();
    let said = bytes::Bytes::from_static(b"warming up\nError: invalid x-api-key\n");
    sim.input(Input::Stderr { link: LINK, channel: CHANNEL, bytes: said });
    let init = r#"{"jsonrpc":"2.0","id":"t-1","result":{"protocolVersion":1}}"#;
    let effects = sim.stdout(0, &format!("{init}\n"));
    let offset = init.len() as u64 + 1;
    for (id, ..) in persists(&effects) {
        sim.ok(id);
    }
    let refused = r#"{"jsonrpc":"2.0","id":"t-2","error":{"code":-32603,"message":"no way in"}}"#;
    let effects = sim.stdout(offset, &format!("{refused}\n"));
    let stored: Vec<NewEvent> = persists(&effects).iter().flat_map(|p| p.1.iter().cloned()).collect();
    let failed = stored.iter().find(|e| e.payload.value()["code"] == "SESSION_START_FAILED").expect("failed");
    let payload = failed.payload.value();
    let message = payload["message"].as_str().expect("message");
    assert!(
        message.contains("no way in") && message.ends_with("stderr: warming up\nError: invalid x-api-key"),
        "{message}"
    );
    assert_eq!(sim.core.harness_channel().map(|(channel, _)| channel), Some(CHANNEL), "the harness runs on");
}
