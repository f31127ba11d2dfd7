//! Prompt scripts: every command and how the turn ends.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Fixture, chunk_text, updates_of};

#[test]
fn multi_line_script_emits_updates_in_order() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let script = "text hello\\nworld\n\n  think pondering  \nwrite sub/dir/a.txt line1\\nline2\n\
        append sub/dir/a.txt \\nline3\nrun echo out; echo err >&2\nplan read | edit | test\n\
        tool search Find things\njust chatting";
    let (updates, response) = f.agent.prompt(&sid, script);
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}), "{response}");

    let kinds: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "agent_thought_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "plan",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
    );
    assert_eq!(chunk_text(&updates[0]), "hello\nworld");
    assert_eq!(chunk_text(&updates[1]), "pondering");

    let file = f.work.path().join("sub/dir/a.txt");
    let abs = file.to_str().unwrap();
    let (call, done) = (&updates[2], &updates[3]);
    assert_eq!(call["title"], "Write sub/dir/a.txt");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["status"], "pending");
    assert_eq!(call["locations"], json!([{"path": abs}]));
    assert_eq!(done["toolCallId"], call["toolCallId"]);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"], json!([{"type": "diff", "path": abs, "oldText": null, "newText": "line1\nline2"}]));
    let (call, done) = (&updates[4], &updates[5]);
    assert_eq!(call["title"], "Append sub/dir/a.txt");
    assert_eq!(
        done["content"],
        json!([{"type": "diff", "path": abs, "oldText": "line1\nline2",
            "newText": "line1\nline2\nline3"}])
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "line1\nline2\nline3");

    let (call, done) = (&updates[6], &updates[7]);
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["title"], "echo out; echo err >&2");
    assert_eq!(call["rawInput"], json!({"command": "echo out; echo err >&2"}));
    assert_eq!(done["status"], "completed");
    assert_eq!(done["rawOutput"], json!({"exitCode": 0}));
    assert_eq!(done["content"], json!([{"type": "content", "content": {"type": "text", "text": "out\nerr\n"}}]));

    assert_eq!(
        updates[8]["entries"],
        json!([
            {"content": "read", "priority": "medium", "status": "in_progress"},
            {"content": "edit", "priority": "medium", "status": "pending"},
            {"content": "test", "priority": "medium", "status": "pending"},
        ])
    );
    assert_eq!(updates[9]["kind"], "search");
    assert_eq!(updates[9]["title"], "Find things");
    assert_eq!(updates[10]["status"], "completed");
    assert_eq!(chunk_text(&updates[11]), "fakeagent: just chatting");

    // Tool call ids are unique.
    let mut ids: Vec<&Value> = updates.iter().filter_map(|u| u.get("toolCallId")).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "{ids:?}");
}

#[test]
fn text_blocks_are_joined_into_one_script() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let id = f.agent.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [
            {"type": "text", "text": "text one"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"},
            {"type": "text", "text": "text two"},
        ]}),
    );
    let (before, response) = f.agent.until_response(&id);
    let updates = updates_of(&sid, before);
    let texts: Vec<&str> = updates.iter().map(chunk_text).collect();
    assert_eq!(texts, ["one", "two"]);
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[test]
fn failing_run_and_write_report_failed() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    std::fs::write(f.work.path().join("plainfile"), "x").unwrap();
    let script = "run exit 3\nwrite plainfile/child.txt nope\nrun head -c 100000 /dev/zero | tr '\\0' a";
    let (updates, response) = f.agent.prompt(&sid, script);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(updates[1]["status"], "failed");
    assert_eq!(updates[1]["rawOutput"], json!({"exitCode": 3}));
    assert_eq!(updates[3]["status"], "failed");
    assert!(updates[3]["content"][0]["content"]["text"].as_str().unwrap().contains("plainfile"));
    let big = updates[5]["content"][0]["content"]["text"].as_str().unwrap();
    assert_eq!(big.len(), 64 * 1024);
    assert_eq!(updates[5]["status"], "completed");
}

#[test]
fn ask_waits_for_the_permission_answer() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    for (answer, text, status) in [
        (json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}), "permission: allow-once", "completed"),
        (
            json!({"outcome": {"outcome": "selected", "optionId": "reject-always"}}),
            "permission: reject-always",
            "failed",
        ),
        (json!({"outcome": {"outcome": "cancelled"}}), "permission: cancelled", "failed"),
    ] {
        let prompt_id = f.agent.start_prompt(&sid, "ask execute Run rm -rf build\ntext after");
        let call = f.agent.next();
        let call = &call["params"]["update"];
        assert_eq!(call["sessionUpdate"], "tool_call");
        assert_eq!(call["status"], "pending");
        assert_eq!(call["kind"], "execute");
        let request = f.agent.next();
        assert_eq!(request["method"], "session/request_permission", "{request}");
        let params = &request["params"];
        assert_eq!(params["sessionId"], sid);
        assert_eq!(
            params["toolCall"],
            json!({"toolCallId": call["toolCallId"], "title": "Run rm -rf build", "kind": "execute"})
        );
        let kinds: Vec<&str> =
            params["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once", "reject_always"]);
        f.agent.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": answer}));
        let (before, response) = f.agent.until_response(&prompt_id);
        let updates = updates_of(&sid, before);
        assert_eq!(chunk_text(&updates[0]), text);
        assert_eq!(updates[1]["sessionUpdate"], "tool_call_update");
        assert_eq!(updates[1]["toolCallId"], call["toolCallId"]);
        assert_eq!(updates[1]["status"], status);
        assert_eq!(chunk_text(&updates[2]), "after");
        assert_eq!(response["result"]["stopReason"], "end_turn");
    }
}

#[test]
fn cancel_interrupts_a_long_sleep() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let id = f.agent.start_prompt(&sid, "text before\nsleep 10000\ntext after");
    let first = f.agent.next();
    assert_eq!(chunk_text(&first["params"]["update"]), "before");
    let sent = Instant::now();
    f.agent.notify("session/cancel", json!({"sessionId": sid}));
    let (before, response) = f.agent.until_response(&id);
    assert!(sent.elapsed() < Duration::from_secs(1), "took {:?}", sent.elapsed());
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
    // The session takes a new prompt at once.
    let (updates, response) = f.agent.prompt(&sid, "text again");
    assert_eq!(chunk_text(&updates[0]), "again");
    assert_eq!(response["result"]["stopReason"], "end_turn");
}

#[test]
fn cancel_forgets_a_pending_permission_request() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let id = f.agent.start_prompt(&sid, "ask edit Edit\ntext never");
    f.agent.next(); // tool_call
    let request = f.agent.next();
    assert_eq!(request["method"], "session/request_permission");
    f.agent.notify("session/cancel", json!({"sessionId": sid}));
    let (before, response) = f.agent.until_response(&id);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
    // A late answer is ignored.
    f.agent.send(&json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"outcome": {"outcome": "cancelled"}}}));
    let r = f.agent.call("authenticate", json!({}));
    assert_eq!(r["result"], json!({}));
}

#[test]
fn cancel_interrupts_a_running_command_and_a_flood() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    for script in ["run sleep 30", "flood 1000000 10"] {
        let id = f.agent.start_prompt(&sid, script);
        f.agent.next(); // the tool call or the first flood chunk
        let sent = Instant::now();
        f.agent.notify("session/cancel", json!({"sessionId": sid}));
        let (_, response) = f.agent.until_response(&id);
        assert!(sent.elapsed() < Duration::from_secs(1), "{script}: took {:?}", sent.elapsed());
        assert_eq!(response["result"]["stopReason"], "cancelled");
    }
}

#[test]
fn hang_answers_only_when_cancelled() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let id = f.agent.start_prompt(&sid, "text a\nhang\ntext never");
    f.agent.next();
    assert_eq!(f.agent.line_within(Duration::from_millis(300)), None);
    f.agent.notify("session/cancel", json!({"sessionId": sid}));
    let (before, response) = f.agent.until_response(&id);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[test]
fn flood_at_full_speed_numbers_every_chunk() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let (updates, response) = f.agent.prompt(&sid, "flood 200 0");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(updates.len(), 200);
    let mut last_us = 0;
    for (n, u) in updates.iter().enumerate() {
        let i = n as u64 + 1;
        assert_eq!(u["sessionUpdate"], "agent_message_chunk");
        assert_eq!(chunk_text(u), format!("flood {i}"));
        assert_eq!(u["_meta"]["fakeagent"]["i"], i);
        let us = u["_meta"]["fakeagent"]["emittedAtUs"].as_u64().unwrap();
        assert!(us >= last_us);
        last_us = us;
    }
}

#[test]
fn flood_is_paced_against_the_start() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let (updates, _) = f.agent.prompt(&sid, "flood 41 200");
    assert_eq!(updates.len(), 41);
    let at = |n: usize| updates[n]["_meta"]["fakeagent"]["emittedAtUs"].as_u64().unwrap();
    let span_ms = (at(40) - at(0)) / 1000;
    // 40 intervals at 200/s = 200 ms.
    assert!((190..1000).contains(&span_ms), "span {span_ms} ms");
}

#[test]
fn big_unknown_garbage_and_stderr() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let id = f.agent.start_prompt(&sid, "big 100000\nunknown\ngarbage\nstderr to the log\ntext end");
    let (before, response) = f.agent.until_response(&id);
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(before.len(), 4, "{before:?}");
    let big = chunk_text(&before[0]["params"]["update"]);
    assert_eq!(big.len(), 100_000);
    assert!(big.is_ascii());
    assert_eq!(before[1]["params"]["update"], json!({"sessionUpdate": "fakeagent_future_variant", "detail": "x"}));
    assert_eq!(before[2], json!("this is not json {"));
    assert_eq!(chunk_text(&before[3]["params"]["update"]), "end");
    f.agent.stderr_line_containing("to the log");
}

#[test]
fn crash_exits_with_the_code_mid_turn() {
    for (script, code) in [("text a\ncrash 7\ntext never", 7), ("crash", 1)] {
        let mut f = Fixture::new(&[]);
        let sid = f.session();
        f.agent.start_prompt(&sid, script);
        let status = f.agent.wait_exit(crate::support::DEADLINE).expect("fakeagent exits");
        assert_eq!(status.code(), Some(code), "{script}");
        // Nothing answers the prompt: output ends after at most the first chunk.
        let mut rest = Vec::new();
        while let Some(line) = f.agent.line_within(Duration::from_secs(2)) {
            rest.push(line);
        }
        assert!(rest.iter().all(|l| !l.contains("\"result\"")), "{rest:?}");
    }
}

#[test]
fn error_stop_and_usage_shape_the_answer() {
    let mut f = Fixture::new(&[]);
    let sid = f.session();
    let (updates, response) = f.agent.prompt(&sid, "text a\nerror model overloaded\ntext never");
    assert_eq!(updates.len(), 1);
    assert_eq!(response["error"], json!({"code": -32603, "message": "model overloaded"}));
    let (_, response) = f.agent.prompt(&sid, "stop max_tokens\nusage 10 32\ntext a");
    assert_eq!(
        response["result"],
        json!({"stopReason": "max_tokens",
            "usage": {"inputTokens": 10, "outputTokens": 32, "totalTokens": 42}})
    );
}

#[test]
fn prompts_to_different_sessions_run_concurrently() {
    let mut f = Fixture::new(&[]);
    let a = f.session();
    let b = f.session();
    let slow = f.agent.start_prompt(&a, "hang");
    // A second prompt to the busy session is refused.
    let r = f.agent.call("session/prompt", json!({"sessionId": a, "prompt": [{"type": "text", "text": "text x"}]}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // Another session runs meanwhile.
    let (updates, response) = f.agent.prompt(&b, "text from b");
    assert_eq!(chunk_text(&updates[0]), "from b");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    f.agent.notify("session/cancel", json!({"sessionId": a}));
    let (_, response) = f.agent.until_response(&slow);
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[test]
fn concurrent_floods_keep_lines_whole() {
    let mut f = Fixture::new(&[]);
    let a = f.session();
    let b = f.session();
    let ia = f.agent.start_prompt(&a, "flood 300 0\nbig 50000");
    let ib = f.agent.start_prompt(&b, "flood 300 0\nbig 50000");
    let (mut done_a, mut done_b) = (false, false);
    let (mut na, mut nb) = (0, 0);
    while !(done_a && done_b) {
        let m = f.agent.next();
        assert!(m.is_object(), "a torn or non-JSON line: {m}");
        if m.get("method").is_none() {
            done_a |= m["id"] == ia;
            done_b |= m["id"] == ib;
            continue;
        }
        if m["params"]["sessionId"] == a.as_str() { na += 1 } else { nb += 1 }
    }
    assert_eq!((na, nb), (301, 301));
}
