//! A turn that hit a full disk: a tool call reporting ENOSPC (or EDQUOT, or harness stderr saying
//! so) makes the core ask the driver when the turn ends, and its answer becomes a `DISK_FULL`
//! notice naming the turn; a turn that reported nothing of the kind costs no check.

use super::*;

fn checks(effects: &[Effect]) -> Vec<Vec<(TurnId, SessionId)>> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Job(Job::CheckDisk { turns }) => Some(turns.clone()),
            _ => None,
        })
        .collect()
}

fn tool_output(text: &str) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"acp-1","update":{
        "sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed",
        "content":[{"type":"content","content":{"type":"text","text":text}}]}}})
    .to_string()
        + "\n"
}

#[test]
fn a_turn_whose_tool_ran_out_of_space_gets_a_disk_full_notice_when_the_driver_agrees() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let full = tool_output("dd: error writing '/home/agent/big': No space left on device");
    let effects = sim.stdout(offset, &full);
    assert!(checks(&effects).is_empty(), "not before the turn ends: {effects:?}");
    let effects = sim.stdout(offset + full.len() as u64, END_TURN);
    let turn = (sim.turn.id, sim.turn.session_id);
    assert_eq!(checks(&effects), vec![vec![turn]], "{effects:?}");

    let message = "the sandbox's home (/home/agent) is full".to_owned();
    let effects = sim.input(Input::DiskChecked { turns: vec![turn], finding: Some(message.clone()) });
    let stored = persists(&effects);
    assert_eq!(stored.len(), 1, "{effects:?}");
    let notice = &stored[0].1[0];
    assert_eq!((notice.kind, notice.session_id), (EventKind::Notice, sim.turn.session_id));
    assert_eq!(notice.payload, json!({"code": "DISK_FULL", "message": message, "turn_id": sim.turn.id}));

    // The driver found room (the words came from elsewhere): nothing is stored.
    assert!(persists(&sim.input(Input::DiskChecked { turns: vec![turn], finding: None })).is_empty());
}

#[test]
fn a_turn_without_the_words_costs_no_check() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let fine = tool_output("wrote 10 MiB");
    sim.stdout(offset, &fine);
    let effects = sim.stdout(offset + fine.len() as u64, END_TURN);
    assert!(checks(&effects).is_empty(), "{effects:?}");
}

#[test]
fn a_harness_that_fails_saying_so_on_stderr_has_its_turns_checked() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let said = Bytes::from_static(b"Error: ENOSPC: No space left on device, write\n");
    sim.input(Input::Stderr { link: LINK, channel: CHANNEL, bytes: said });
    let status = ExitStatus { code: Some(1), signal: None };
    let effects = sim.input(Input::Control {
        link: LINK,
        msg: FromSandboxd::Exited { channel: CHANNEL, status, stdout_end: offset },
    });
    assert!(
        persists(&effects).iter().any(|p| p.1.iter().any(|e| e.payload.value()["code"] == json!("HARNESS_EXITED")))
    );
    assert_eq!(checks(&effects), vec![vec![(sim.turn.id, sim.turn.session_id)]], "{effects:?}");
}
