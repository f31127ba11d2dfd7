//! Session history on disk, session/load (replay) and session/resume (no replay).

use serde_json::{Value, json};

use crate::support::{Agent, Fixture, TempDir, chunk_text, updates_of};

/// Runs two prompts and returns everything the history should hold, in order.
fn make_history(f: &mut Fixture, sid: &str) -> Vec<Value> {
    let mut expected = Vec::new();
    for script in ["text first\nwrite notes.txt hi\nplan a | b", "think again\nunknown\nflood 3 0"] {
        let (updates, response) = f.agent.prompt(sid, script);
        assert_eq!(response["result"]["stopReason"], "end_turn");
        expected.push(json!({"sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": script}}));
        expected.extend(updates);
    }
    expected
}

#[test]
fn load_replays_the_history_before_answering() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let expected = make_history(&mut f, &sid);
    let history = f.home.path().join(".fakeagent/sessions").join(format!("{sid}.jsonl"));
    assert!(history.is_file(), "no history at {}", history.display());

    // The same process.
    let id = f.agent.request("session/load", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    let (before, response) = f.agent.until_response(&id);
    assert_eq!(response["result"], json!({}), "{response}");
    assert_eq!(updates_of(&sid, before), expected);

    // A new process over the same HOME, which then keeps the session going.
    let mut agent = Agent::start(f.home.path(), &[]);
    agent.initialize();
    let id = agent.request("session/load", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    let (before, response) = agent.until_response(&id);
    assert_eq!(response["result"], json!({}));
    assert_eq!(updates_of(&sid, before), expected);
    let (updates, _) = agent.prompt(&sid, "write notes.txt bye");
    assert_eq!(updates[1]["content"][0]["oldText"], "hi", "relative to the loaded cwd");
    let id = agent.request("session/load", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    let (before, _) = agent.until_response(&id);
    assert_eq!(before.len(), expected.len() + 3);
}

/// `FAKEAGENT_REPLAY_LATE=1`: the load is answered first and the history streams after it (as
/// some agents do); `FAKEAGENT_STDERR=1` logs every request on stderr.
#[test]
fn load_can_replay_the_history_after_answering_and_log_on_stderr() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let expected = make_history(&mut f, &sid);
    let mut agent = Agent::start(f.home.path(), &[("FAKEAGENT_REPLAY_LATE", "1"), ("FAKEAGENT_STDERR", "1")]);
    agent.initialize();
    assert!(agent.stderr_line_containing("handling initialize").contains("fakeagent:"));
    let id = agent.request("session/load", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    let (before, response) = agent.until_response(&id);
    assert!(before.is_empty(), "nothing before the answer: {before:?}");
    assert_eq!(response["result"], json!({}));
    let after: Vec<Value> = (0..expected.len()).map(|_| agent.next()).collect();
    assert_eq!(updates_of(&sid, after), expected);
    agent.stderr_line_containing(&format!("replayed {} updates", expected.len()));
    let (updates, _) = agent.prompt(&sid, "text after the late replay");
    assert_eq!(chunk_text(&updates[0]), "after the late replay");
}

#[test]
fn load_of_a_session_without_prompts_replays_nothing() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let r = f.agent.call("session/load", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn resume_answers_without_replay() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    make_history(&mut f, &sid);
    let mut agent = Agent::start(f.home.path(), &[("FAKEAGENT_CAPS", "resume")]);
    agent.initialize();
    let r = agent.call("session/resume", json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
    assert_eq!(r["result"], json!({}), "{r}");
    let (updates, response) = agent.prompt(&sid, "text resumed");
    assert_eq!(chunk_text(&updates[0]), "resumed");
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[test]
fn prompt_needs_load_or_resume_in_a_new_process() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let mut agent = Agent::start(f.home.path(), &[]);
    agent.initialize();
    let r = agent.call("session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": "text hi"}]}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
}

#[test]
fn state_dir_overrides_home() {
    let state = TempDir::new("state");
    let mut f = Fixture::new(&[("FAKEAGENT_STATE_DIR", state.str())]);
    let sid = f.session();
    f.agent.prompt(&sid, "text saved");
    let lines = std::fs::read_to_string(state.path().join(format!("{sid}.jsonl"))).unwrap();
    let updates: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0]["sessionUpdate"], "user_message_chunk");
    assert_eq!(chunk_text(&updates[1]), "saved");
    assert!(!f.home.path().join(".fakeagent").exists());
}
