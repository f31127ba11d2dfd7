//! The gate owns every standing decision: "approve for this session" is agenthold's own grant
//! (the harness gets a once-answer each time; a revocation stops it at once), and a posture or
//! policy change decides the running turn's next request and its questions still waiting.

use super::*;
use crate::events::side_effects::GrantScope;
use crate::permissions::{Choice, Gate, Posture};

const OPTIONS: &str = r#"[{"optionId":"always","name":"Always allow","kind":"allow_always"},{"optionId":"once","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}]"#;

/// A write request of the harness's, JSON-RPC id `id`, for `path`.
fn ask(id: &str, path: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"session/request_permission","params":{{"sessionId":"acp-1","toolCall":{{"toolCallId":"{id}","title":"Write {path}","kind":"edit","locations":[{{"path":"{path}"}}]}},"options":{OPTIONS}}}}}"#
    )
}

fn events(effects: &[Effect]) -> Vec<NewEvent> {
    persists(effects).iter().flat_map(|p| p.1.iter().cloned()).collect()
}

fn sides(effects: &[Effect]) -> Vec<SideEffect> {
    persists(effects).iter().flat_map(|p| p.2.iter().cloned()).collect()
}

/// Feeds one harness line at `offset`, commits what it stored; the effects and what the
/// commits released.
fn line(sim: &mut Sim, offset: &mut u64, text: &str) -> (Vec<Effect>, Vec<Effect>) {
    let effects = sim.stdout(*offset, &format!("{text}\n"));
    *offset += text.len() as u64 + 1;
    let mut after = Vec::new();
    for (id, ..) in persists(&effects) {
        after.extend(sim.ok(id));
    }
    (effects, after)
}

fn commit(sim: &mut Sim, effects: &[Effect]) -> Vec<Effect> {
    let mut after = Vec::new();
    for (id, ..) in persists(effects) {
        after.extend(sim.ok(id));
    }
    after
}

fn answered_with(effects: &[Effect], option: &str) -> bool {
    stdin(effects).iter().any(|(_, f)| String::from_utf8_lossy(f).contains(&format!("\"optionId\":\"{option}\"")))
}

fn question(sim: &Sim, id: &str) -> uuid::Uuid {
    crate::permissions::question_id(sim.core_agent(), 1, &json!(id))
}

#[test]
fn approve_for_this_session_is_agenthold_s_grant_answered_once_each_time_until_revoked() {
    let mut sim = Sim::new();
    sim.posture = Posture::Approval;
    let mut offset = sim.run_until_prompt_sent();
    let (effects, _) = line(&mut sim, &mut offset, &ask("q-1", "/home/agent/a.txt"));
    assert!(events(&effects).iter().all(|e| e.kind != EventKind::PermissionResolved), "a person is asked");

    let first = question(&sim, "q-1");
    let by = json!({"user_id": "00000000-0000-0000-0000-000000000007"});
    let effects =
        sim.input(Input::AnswerPermission { permission_id: first, choice: Choice::AllowForSession, by, reply: 3 });
    let resolved = events(&effects).into_iter().find(|e| e.kind == EventKind::PermissionResolved).expect("resolved");
    assert_eq!(
        (resolved.payload.value()["scope"].clone(), resolved.payload.value()["option_kind"].clone()),
        (json!("session"), json!("allow_once"))
    );
    let granted_by = uuid::Uuid::parse_str("00000000-0000-0000-0000-000000000007").ok();
    assert!(
        sides(&effects).iter().any(|s| matches!(s, SideEffect::PermissionResolved { grant: GrantScope::Session { granted_by: g }, .. } if *g == granted_by)),
        "{effects:?}"
    );
    let after = commit(&mut sim, &effects);
    assert!(answered_with(&after, "once"), "the harness gets its one-time allow, never \"always\": {after:?}");

    // The same call again: agenthold answers it itself, once, naming the grant.
    for id in ["q-2", "q-3"] {
        let (effects, after) = line(&mut sim, &mut offset, &ask(id, "/home/agent/a.txt"));
        let resolved = events(&effects).into_iter().find(|e| e.kind == EventKind::PermissionResolved).expect("at once");
        assert_eq!(resolved.payload.value()["by"], json!({"grant": first, "scope": "session"}));
        assert!(sides(&effects).iter().all(|s| !matches!(s, SideEffect::GrantUsed { .. })), "a session grant stays");
        assert!(answered_with(&after, "once"), "{after:?}");
    }
    // Another call is asked about.
    let (effects, _) = line(&mut sim, &mut offset, &ask("q-4", "/home/agent/b.txt"));
    assert!(events(&effects).iter().all(|e| e.kind != EventKind::PermissionResolved), "another path asks");

    // Revoked: the notice is stored, and the same call asks again.
    let session_id = sim.turn.session_id;
    let effects = sim.input(Input::RevokeGrant { permission_id: first, session_id, by: json!("x"), reply: 4 });
    assert!(
        sides(&effects)
            .iter()
            .any(|s| matches!(s, SideEffect::GrantRevoked { permission_id, .. } if *permission_id == first))
    );
    assert!(events(&effects).iter().any(|e| e.payload.value()["code"] == "GRANT_REVOKED"));
    let after = commit(&mut sim, &effects);
    assert!(
        after.iter().any(|e| matches!(e, Effect::Reply { to: 4, outcome: Outcome::Answered(Ok(())) })),
        "{after:?}"
    );
    let (effects, _) = line(&mut sim, &mut offset, &ask("q-5", "/home/agent/a.txt"));
    assert!(events(&effects).iter().all(|e| e.kind != EventKind::PermissionResolved), "asks again: {effects:?}");
    // A stale read of the grants (from before the revocation) does not bring it back.
    let mut work: OpenWork = vec![sim.turn.clone()].into();
    work.grants.push(StoredGrant {
        permission_id: first,
        session_id,
        tool_call: json!({"toolCallId": "q-1", "title": "Write /home/agent/a.txt", "kind": "edit", "locations": [{"path": "/home/agent/a.txt"}]}),
        standing: true,
    });
    sim.input(Input::OpenTurns(work));
    let (effects, _) = line(&mut sim, &mut offset, &ask("q-6", "/home/agent/a.txt"));
    assert!(events(&effects).iter().all(|e| e.kind != EventKind::PermissionResolved), "still asks: {effects:?}");
}

#[test]
fn picking_the_harness_s_always_option_answers_once_and_the_next_call_asks_again() {
    let mut sim = Sim::new();
    sim.posture = Posture::Approval;
    let mut offset = sim.run_until_prompt_sent();
    line(&mut sim, &mut offset, &ask("q-1", "/home/agent/a.txt"));
    let choice = Choice::Option("always".into());
    let effects =
        sim.input(Input::AnswerPermission { permission_id: question(&sim, "q-1"), choice, by: json!("p"), reply: 3 });
    let after = commit(&mut sim, &effects);
    assert!(answered_with(&after, "once") && !answered_with(&after, "always"), "{after:?}");
    let (effects, _) = line(&mut sim, &mut offset, &ask("q-2", "/home/agent/a.txt"));
    assert!(events(&effects).iter().all(|e| e.kind != EventKind::PermissionResolved), "asks again: {effects:?}");
}

#[test]
fn a_posture_change_decides_the_waiting_question_and_the_next_request() {
    let mut sim = Sim::new();
    sim.posture = Posture::Approval;
    let mut offset = sim.run_until_prompt_sent();
    line(&mut sim, &mut offset, &ask("q-1", "/home/agent/secret/key"));
    line(&mut sim, &mut offset, &ask("q-2", "/home/agent/notes.txt"));

    // Guarded: secret/ denied, the rest asks — q-1 is answered (denied), q-2 keeps waiting.
    let policy = crate::permissions::policy::Policy::parse(&json!({
        "rules": [{"effect": "write", "path": "/home/agent/secret/**", "answer": "deny"}],
        "default": "ask",
    }))
    .expect("policy");
    let gate = Gate { posture: Posture::Guarded, policy: Some(policy.into()), ..Gate::autonomous("/home/agent") };
    let effects = sim.input(Input::GateChanged(Box::new(gate)));
    let stored = events(&effects);
    assert!(stored.iter().any(|e| e.kind == EventKind::PolicyApplied), "the running turn is told: {stored:?}");
    let denied = stored.iter().find(|e| e.kind == EventKind::PolicyDenied).expect("policy_denied");
    assert_eq!(denied.payload.value()["by"], json!("policy:agent:0"));
    let resolved: Vec<&NewEvent> = stored.iter().filter(|e| e.kind == EventKind::PermissionResolved).collect();
    assert_eq!(resolved.len(), 1, "only q-1 is settled: {stored:?}");
    assert_eq!(resolved[0].payload.value()["permission_id"], json!(question(&sim, "q-1")));
    assert_eq!(resolved[0].payload.value()["redecided"], json!(true));
    let after = commit(&mut sim, &effects);
    assert!(answered_with(&after, "no"), "{after:?}");

    // Autonomous: the question still waiting is allowed now, and a later request at once.
    let effects = sim.input(Input::GateChanged(Box::new(Gate::autonomous("/home/agent"))));
    let resolved = events(&effects).into_iter().find(|e| e.kind == EventKind::PermissionResolved).expect("q-2");
    assert_eq!(resolved.payload.value()["permission_id"], json!(question(&sim, "q-2")));
    assert_eq!(resolved.payload.value()["by"], json!("auto"));
    let after = commit(&mut sim, &effects);
    assert!(answered_with(&after, "once"), "{after:?}");
    let (effects, after) = line(&mut sim, &mut offset, &ask("q-3", "/home/agent/other.txt"));
    assert!(events(&effects).iter().any(|e| e.kind == EventKind::PermissionResolved), "answered at once");
    assert!(answered_with(&after, "once"));
    // A person's late answer to a settled question finds nothing to answer.
    let effects = sim.input(Input::AnswerPermission {
        permission_id: question(&sim, "q-2"),
        choice: Choice::Deny,
        by: json!("p"),
        reply: 9,
    });
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Reply { to: 9, outcome: Outcome::Answered(Err(AnswerError::NotPending)) }))
    );
}
