//! Issue 31: a harness that asks to sign in when its sessions are loaded (any ACP agent, not only
//! those an adapter knows) is signed in with the agent's named method, the adapter's, or the only
//! advertised method whose key is delivered, and the load is tried again before a new session
//! (`CONTEXT_RESET`); the history a load replays is never stored, before or after its answer,
//! until the session's next prompt goes out.

use super::*;

/// The harness's side of the conversation: each line is printed, every persist it causes is
/// committed, and what was stored and sent comes back.
struct Talk {
    offset: u64,
}

/// What one line caused.
struct Caused {
    events: Vec<NewEvent>,
    /// The stdin frames sent, as text.
    sent: Vec<String>,
}

impl Caused {
    fn codes(&self) -> Vec<String> {
        self.events.iter().filter_map(|e| e.payload.value()["code"].as_str().map(str::to_owned)).collect()
    }

    fn sent_method(&self, method: &str) -> Option<Value> {
        self.sent
            .iter()
            .filter_map(|f| serde_json::from_str::<Value>(f).ok())
            .find(|f| f["method"] == method)
            .map(|f| f["params"].clone())
    }

    fn updates(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.kind == EventKind::Update)
            .map(|e| e.payload.value()["sessionUpdate"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Talk {
    fn line(&mut self, sim: &mut Sim, text: &str) -> Caused {
        let text = format!("{text}\n");
        let effects = sim.stdout(self.offset, &text);
        self.offset += text.len() as u64;
        Self::commit_all(sim, effects)
    }

    fn commit_all(sim: &mut Sim, effects: Vec<Effect>) -> Caused {
        let mut caused = Caused { events: Vec::new(), sent: Vec::new() };
        let mut queue = vec![effects];
        while let Some(effects) = queue.pop() {
            caused.sent.extend(stdin(&effects).into_iter().map(|(_, b)| String::from_utf8_lossy(&b).into_owned()));
            for (id, events, _) in persists(&effects) {
                caused.events.extend(events.iter().cloned());
                queue.push(sim.ok(id));
            }
        }
        caused
    }
}

fn update_line(acp_id: &str, update: Value) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId": acp_id, "update": update}}).to_string()
}

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

const NEEDS_AUTH: &str = r#"{"code":-32000,"message":"Authentication required"}"#;

/// A harness started for a turn of session `acp-old` (stored from an earlier harness), which
/// answers `initialize` with `init`: `session/load` (t-2) has been sent.
fn loading(sim: &mut Sim, init: Value) -> Talk {
    sim.turn.acp_session_id = Some("acp-old".to_owned());
    sim.start_harness();
    let mut talk = Talk { offset: 0 };
    let answer = json!({"jsonrpc":"2.0","id":"t-1","result": init}).to_string();
    let caused = talk.line(sim, &answer);
    let load = caused.sent_method("session/load").expect("session/load sent");
    assert_eq!(load["sessionId"], "acp-old");
    talk
}

fn init_with(methods: Value) -> Value {
    json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}, "authMethods": methods})
}

#[test]
fn a_load_that_asks_to_sign_in_is_signed_in_with_the_named_method_and_loaded_again() {
    let mut sim = Sim::new();
    sim.auth_method = Some("acme-key".to_owned());
    let mut talk =
        loading(&mut sim, init_with(json!([{"id": "acme-key", "name": "Key"}, {"id": "sso", "name": "SSO"}])));
    let caused = talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    assert_eq!(caused.sent_method("authenticate"), Some(json!({"methodId": "acme-key"})));
    assert!(caused.sent_method("session/new").is_none(), "no new session before signing in");
    assert!(caused.codes().is_empty(), "nothing fails: {:?}", caused.codes());

    let caused = talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-3","result":{}}"#);
    assert_eq!(caused.codes(), vec!["AUTHENTICATED"]);
    let load = caused.sent_method("session/load").expect("the load goes again");
    assert_eq!(load["sessionId"], "acp-old");

    let caused = talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-4","result":{}}"#);
    assert!(!caused.codes().contains(&"CONTEXT_RESET".to_owned()), "{:?}", caused.codes());
    let prompt = caused.sent_method("session/prompt").expect("the prompt goes to the loaded session");
    assert_eq!(prompt["sessionId"], "acp-old");
}

#[test]
fn a_refused_sign_in_fails_the_turn_naming_the_method_and_the_harness_s_reason() {
    let mut sim = Sim::new();
    sim.auth_method = Some("acme-key".to_owned());
    let mut talk = loading(&mut sim, init_with(json!([{"id": "acme-key", "name": "Key"}])));
    talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    let refused = r#"{"jsonrpc":"2.0","id":"t-3","error":{"code":-32602,"message":"the key ACME_API_KEY is not set"}}"#;
    let caused = talk.line(&mut sim, refused);
    let error = caused.events.iter().find(|e| e.kind == EventKind::Error).expect("an error event");
    assert_eq!(error.payload.value()["code"], "SESSION_START_FAILED");
    let payload = error.payload.value();
    let message = payload["message"].as_str().expect("message");
    assert!(message.contains("\"acme-key\"") && message.contains("the key ACME_API_KEY is not set"), "{message}");
    assert!(kinds(&caused.events).contains(&EventKind::TurnEnd));
    assert!(caused.sent_method("session/new").is_none(), "no new session: it would ask again");
}

#[test]
fn a_load_still_refused_after_signing_in_starts_a_new_session_with_a_reset_notice() {
    let mut sim = Sim::new();
    sim.auth_method = Some("acme-key".to_owned());
    let mut talk = loading(&mut sim, init_with(json!([{"id": "acme-key", "name": "Key"}])));
    talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-3","result":{}}"#);
    let caused = talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-4","error":{NEEDS_AUTH}}}"#));
    assert!(caused.sent_method("authenticate").is_none(), "signed in once per call");
    assert!(caused.sent_method("session/new").is_some());
    let caused = talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-5","result":{"sessionId":"acp-new"}}"#);
    assert_eq!(caused.codes(), vec!["CONTEXT_RESET"]);
}

#[test]
fn without_a_method_a_load_that_asks_to_sign_in_falls_back_to_a_new_session() {
    let mut sim = Sim::new();
    let mut talk = loading(&mut sim, init_with(json!([{"id": "browser", "name": "Browser"}])));
    let caused = talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    assert!(caused.sent_method("authenticate").is_none(), "an agent-type method is never guessed");
    assert!(caused.sent_method("session/new").is_some());
}

#[test]
fn the_only_advertised_method_whose_key_is_delivered_is_used_when_none_is_named() {
    let mut sim = Sim::new();
    sim.delivered = vec!["ACME_API_KEY".to_owned(), "HOME".to_owned()];
    let methods = json!([
        {"id": "browser", "name": "Browser"},
        {"id": "acme-env", "name": "Key", "type": "env_var", "vars": [{"name": "ACME_API_KEY"}]},
        {"id": "other-env", "name": "Other", "type": "env_var", "vars": [{"name": "OTHER_API_KEY"}]},
    ]);
    let mut talk = loading(&mut sim, init_with(methods));
    let caused = talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    assert_eq!(caused.sent_method("authenticate"), Some(json!({"methodId": "acme-env"})));
}

#[test]
fn a_method_named_while_the_harness_runs_is_used_the_next_time_it_asks() {
    let mut sim = Sim::new();
    sim.start_harness();
    let mut talk = Talk { offset: 0 };
    let init = json!({"jsonrpc":"2.0","id":"t-1","result": init_with(json!([{"id": "acme-key", "name": "Key"}]))});
    talk.line(&mut sim, &init.to_string());
    assert!(sim.input(Input::AuthMethodChanged(Some("acme-key".to_owned()))).is_empty(), "nothing restarts");
    let caused = talk.line(&mut sim, &format!(r#"{{"jsonrpc":"2.0","id":"t-2","error":{NEEDS_AUTH}}}"#));
    assert_eq!(caused.sent_method("authenticate"), Some(json!({"methodId": "acme-key"})));
    talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-3","result":{}}"#);
    let caused = talk.line(&mut sim, r#"{"jsonrpc":"2.0","id":"t-4","result":{"sessionId":"acp-1"}}"#);
    assert!(caused.sent_method("session/prompt").is_some());
}

#[test]
fn history_replayed_after_the_load_answer_is_not_stored_until_the_next_prompt_goes_out() {
    let mut sim = Sim::new();
    let mut talk = loading(&mut sim, init_with(json!([])));
    // Before the answer: history dropped; a state update kept.
    let caused = talk.line(&mut sim, &update_line("acp-old", chunk("user_message_chunk", "first question")));
    assert!(caused.events.is_empty());
    let commands = json!({"sessionUpdate": "available_commands_update", "availableCommands": []});
    let caused = talk.line(&mut sim, &update_line("acp-old", commands.clone()));
    assert_eq!(caused.updates(), vec!["available_commands_update"]);

    // The answer, then the late replay in the same read (as sandboxd forwards a burst): the prompt
    // is recorded with the answer's line and goes out only once that record commits.
    let late = [
        chunk("agent_message_chunk", "first answer"),
        chunk("agent_thought_chunk", "thinking"),
        json!({"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Write a", "kind": "edit"}),
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed"}),
        json!({"sessionUpdate": "plan", "entries": []}),
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "ask"}),
    ];
    let mut burst = r#"{"jsonrpc":"2.0","id":"t-2","result":{}}"#.to_owned() + "\n";
    for update in &late {
        burst.push_str(&update_line("acp-old", update.clone()));
        burst.push('\n');
    }
    let effects = sim.stdout(talk.offset, &burst);
    let caused = Talk::commit_all(&mut sim, effects);
    assert_eq!(caused.updates(), vec!["current_mode_update"], "only the state update is stored");
    assert!(caused.sent_method("session/prompt").is_some(), "the prompt went out");

    // Replays that come later still, but before the prompt is sent, are dropped too.
    let mut sim = Sim::new();
    let mut talk = loading(&mut sim, init_with(json!([])));
    let answer = r#"{"jsonrpc":"2.0","id":"t-2","result":{}}"#.to_owned() + "\n";
    let effects = sim.stdout(talk.offset, &answer);
    talk.offset += answer.len() as u64;
    let line = persists(&effects)[0].0;
    let record = persists(&effects)[1].0;
    sim.ok(line);
    let replay = update_line("acp-old", chunk("agent_message_chunk", "first answer")) + "\n";
    let effects = sim.stdout(talk.offset, &replay);
    talk.offset += replay.len() as u64;
    assert!(persists(&effects).is_empty(), "a replay after the answer, before the prompt is sent");
    let sent = stdin(&sim.ok(record));
    assert!(String::from_utf8_lossy(&sent[0].1).contains("session/prompt"));
    // From here on the session's updates are the turn's.
    let caused = talk.line(&mut sim, &update_line("acp-old", chunk("agent_message_chunk", "the new answer")));
    assert_eq!(caused.updates(), vec!["agent_message_chunk"]);
    assert_eq!(caused.events[0].payload.value()["content"]["text"], "the new answer");
}

#[test]
fn a_new_session_s_updates_are_not_taken_for_a_replay() {
    let mut sim = Sim::new();
    let offset = sim.run_until_prompt_sent();
    let mut talk = Talk { offset };
    let caused = talk.line(&mut sim, &update_line("acp-1", chunk("user_message_chunk", "echo of the prompt")));
    assert_eq!(caused.updates(), vec!["user_message_chunk"]);
}
