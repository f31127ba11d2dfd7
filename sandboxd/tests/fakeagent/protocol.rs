//! initialize, capabilities, errors, malformed input and FAKEAGENT_HANG_ON.

use std::time::Duration;

use serde_json::json;

use crate::support::{Agent, DEADLINE, Fixture, TempDir};

#[test]
fn initialize_advertises_load_and_resume_by_default() {
    let home = TempDir::new("init");
    let mut agent = Agent::start(home.path(), &[]);
    let r = agent.initialize();
    let result = &r["result"];
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentCapabilities"]["sessionCapabilities"]["resume"], json!({}));
    assert_eq!(
        result["agentCapabilities"]["promptCapabilities"],
        json!({"image": false, "audio": false, "embeddedContext": false})
    );
    assert_eq!(result["authMethods"], json!([]));
    assert_eq!(result["agentInfo"]["name"], "fakeagent");
    assert_eq!(result["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn initialize_follows_fakeagent_caps() {
    let home = TempDir::new("caps");
    for (caps, load, resume) in
        [("none", false, false), ("load", true, false), ("resume", false, true), ("load,resume", true, true)]
    {
        let mut agent = Agent::start(home.path(), &[("FAKEAGENT_CAPS", caps)]);
        let r = agent.initialize();
        let caps_obj = &r["result"]["agentCapabilities"];
        assert_eq!(caps_obj["loadSession"], load, "{caps}: {r}");
        assert_eq!(caps_obj["sessionCapabilities"].get("resume").is_some(), resume, "{caps}: {r}");
    }
}

#[test]
fn load_and_resume_are_not_found_without_the_capability() {
    let mut f = Fixture::new(&[("FAKEAGENT_CAPS", "none")]);
    let sid = f.session();
    for method in ["session/load", "session/resume"] {
        let r = f.agent.call(method, json!({"sessionId": sid, "cwd": f.work.str(), "mcpServers": []}));
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
}

#[test]
fn authenticate_unknown_methods_and_notifications() {
    let mut f = Fixture::new(&[]);
    let r = f.agent.call("authenticate", json!({"methodId": "x"}));
    assert_eq!(r["result"], json!({}));
    let r = f.agent.call("session/set_mode", json!({"sessionId": "x", "modeId": "y"}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // An unknown notification gets no answer: the next thing out is the next request's answer.
    f.agent.notify("_fake/whatever", json!({}));
    let r = f.agent.call("authenticate", json!({}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn unknown_session_is_resource_not_found() {
    let mut f = Fixture::new(&[]);
    let work = f.work.str().to_owned();
    let r = f
        .agent
        .call("session/prompt", json!({"sessionId": "fa-nope", "prompt": [{"type": "text", "text": "text hi"}]}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    for method in ["session/load", "session/resume"] {
        for sid in ["fa-nope", "../../etc/passwd"] {
            let r = f.agent.call(method, json!({"sessionId": sid, "cwd": work, "mcpServers": []}));
            assert_eq!(r["error"]["code"], -32002, "{method} {sid}: {r}");
        }
    }
}

#[test]
fn invalid_params_are_rejected() {
    let mut f = Fixture::new(&[]);
    let r = f.agent.call("session/new", json!({"mcpServers": []}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = f.agent.call("session/new", json!({"cwd": "relative/dir", "mcpServers": []}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let sid = f.session();
    let r = f.agent.call("session/prompt", json!({"sessionId": sid, "prompt": "text hi"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn malformed_input_does_not_kill_it() {
    let mut f = Fixture::new(&[]);
    f.agent.send_raw("this is not json {");
    f.agent.stderr_line_containing("parse error");
    f.agent.send_raw("[1, 2, 3]");
    f.agent.send_raw("\"just a string\"");
    f.agent.send_raw("");
    // A known id gets a JSON-RPC error.
    f.agent.send_raw(r#"{"jsonrpc":"2.0","id":"m1"}"#);
    let r = f.agent.next();
    assert_eq!(r["id"], "m1", "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    f.agent.send_raw(r#"{"jsonrpc":"1.0","id":7,"method":"initialize"}"#);
    let r = f.agent.next();
    assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(7), json!(-32600)), "{r}");
    f.agent.send_raw(r#"{"jsonrpc":"2.0","id":8,"method":42}"#);
    let r = f.agent.next();
    assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(8), json!(-32600)), "{r}");
    f.agent.send_raw(r#"{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}"#);
    let r = f.agent.next();
    assert_eq!((r["id"].clone(), r["error"]["code"].clone()), (json!(null), json!(-32600)), "{r}");
    // Invalid UTF-8.
    f.agent.send_bytes(b"\xff\xfe{\n");
    // A response to a request fakeagent never sent.
    f.agent.send_raw(r#"{"jsonrpc":"2.0","id":"fa-req-999","result":{}}"#);
    // Still serving.
    let r = f.agent.initialize();
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
}

#[test]
fn hang_on_session_new_leaves_it_unanswered() {
    let home = TempDir::new("hang");
    let mut agent = Agent::start(home.path(), &[("FAKEAGENT_HANG_ON", "session/new")]);
    agent.initialize();
    agent.request("session/new", json!({"cwd": home.str(), "mcpServers": []}));
    assert_eq!(agent.line_within(Duration::from_millis(500)), None, "session/new was answered");
    // The reader still serves other requests; the hung one stays unanswered.
    let r = agent.call("authenticate", json!({}));
    assert_eq!(r["result"], json!({}));
    assert!(agent.wait_exit(Duration::ZERO).is_none(), "fakeagent exited");
}

#[test]
fn hang_on_initialize_leaves_it_unanswered() {
    let home = TempDir::new("hang-init");
    let mut agent = Agent::start(home.path(), &[("FAKEAGENT_HANG_ON", "initialize")]);
    agent.request("initialize", json!({"protocolVersion": 1}));
    assert_eq!(agent.line_within(Duration::from_millis(500)), None, "initialize was answered");
}

#[test]
fn exits_when_stdin_closes() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    f.agent.start_prompt(&sid, "hang");
    f.agent.close_stdin();
    let status = f.agent.wait_exit(DEADLINE).expect("fakeagent exits after stdin closes");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn hang_on_session_prompt_leaves_it_unanswered() {
    let home = TempDir::new("hang-prompt");
    let mut agent = Agent::start(home.path(), &[("FAKEAGENT_HANG_ON", "session/prompt")]);
    agent.initialize();
    let sid = agent.new_session(home.path());
    agent.start_prompt(&sid, "text never");
    assert_eq!(agent.line_within(Duration::from_millis(500)), None, "the prompt ran or was answered");
    let r = agent.call("authenticate", json!({}));
    assert_eq!(r["result"], json!({}));
}
