#!/usr/bin/env python3
"""TEST TOOL: checks the stand-ins themselves (no harness, no network): python3 selftest.py

Makes a CA with make-cert.sh, starts anthropic.py and openai.py on free loopback ports, and
speaks to them over TLS (verified against the CA, SNI api.anthropic.com / api.openai.com) on one
keep-alive connection each: the scripted tool call, the answer to its result, an echo, a
structured-output request, the record. Prints `ok - …` lines; exits 1 on the first failure.
"""

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def ok(msg):
    print("ok -", msg, flush=True)


def fail(msg):
    print("not ok -", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    ok(msg)


def start(work, module):
    ready = os.path.join(work, module + ".port")
    record = os.path.join(work, module + ".jsonl")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, module + ".py"), "--cert", os.path.join(work, "leaf.pem"),
         "--key", os.path.join(work, "leaf.key"), "--ready", ready, "--record", record],
        stderr=open(os.path.join(work, module + ".log"), "w"),
    )
    for _ in range(100):
        if os.path.exists(ready):
            break
        time.sleep(0.05)
    else:
        fail("%s did not write its port" % module)
    return proc, int(open(ready).read()), record


class Conn:
    """One keep-alive HTTPS connection to 127.0.0.1:port that presents `host`."""

    def __init__(self, port, host, cafile):
        ctx = ssl.create_default_context(cafile=cafile)
        self.c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        # connect to loopback but verify the certificate for `host`
        self.c.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=host)

    def post(self, path, body, headers):
        self.c.request("POST", path, json.dumps(body), dict({"Content-Type": "application/json"}, **headers))
        r = self.c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read().decode()

    def get(self, path, headers=None):
        self.c.request("GET", path, headers=headers or {})
        r = self.c.getresponse()
        return r.status, r.read().decode()


def sse(text):
    """[(event, data)] of an SSE body."""
    out = []
    for block in text.split("\n\n"):
        ev, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if data is not None:
            out.append((ev, data))
    return out


def anthropic(work):
    proc, port, record = start(work, "anthropic")
    try:
        c = Conn(port, "api.anthropic.com", os.path.join(work, "root.pem"))
        h = {"x-api-key": "k-123", "anthropic-version": "2023-06-01"}
        user = {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ignore write a.txt b</system-reminder>"}, {"type": "text", "text": "please write hello.txt hi there"}]}
        body = {"model": "m", "stream": True, "system": [{"type": "text", "text": "Primary working directory: /work/x\n"}], "tools": [{"name": "Write"}], "messages": [user]}
        status, ctype, text = c.post("/v1/messages?beta=true", body, h)
        events = sse(text)
        kinds = [e for e, _ in events]
        check(status == 200 and ctype.startswith("text/event-stream"), "anthropic: streamed answer")
        check(kinds[0] == "message_start" and kinds[-1] == "message_stop" and "message_delta" in kinds, "anthropic: message_start … message_delta, message_stop")
        start_block = next(d for e, d in events if e == "content_block_start")["content_block"]
        partial = "".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta")
        check(start_block["type"] == "tool_use" and start_block["name"] == "Write", "anthropic: a tool_use of Write")
        check(json.loads(partial) == {"file_path": "/work/x/hello.txt", "content": "hi there"}, "anthropic: input_json_delta builds the Write input in the stated cwd")
        stop = next(d for e, d in events if e == "message_delta")
        check(stop["delta"]["stop_reason"] == "tool_use" and "output_tokens" in stop["usage"], "anthropic: stop_reason tool_use with usage")

        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": start_block["id"], "content": "File created"}]}
        body["messages"] = [user, {"role": "assistant", "content": [dict(start_block, input=json.loads(partial))]}, result]
        status, _, text = c.post("/v1/messages?beta=true", body, h)
        events = sse(text)
        said = "".join(d["delta"]["text"] for e, d in events if e == "content_block_delta")
        check(said == "done" and next(d for e, d in events if e == "message_delta")["delta"]["stop_reason"] == "end_turn", "anthropic: after the tool_result, 'done' and end_turn (same connection)")

        body["messages"].append({"role": "system", "content": "# Environment …"})
        status, _, text = c.post("/v1/messages?beta=true", body, h)
        said = "".join(d["delta"]["text"] for e, d in sse(text) if e == "content_block_delta")
        check(said == "done", "anthropic: a trailing system message does not undo the tool_result")

        body["messages"] += [{"role": "assistant", "content": [{"type": "text", "text": "done"}]}, {"role": "user", "content": "now write b.txt two"}]
        events = sse(c.post("/v1/messages?beta=true", body, h)[2])
        partial = "".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta")
        check(json.loads(partial)["file_path"] == "/work/x/b.txt", "anthropic: a second turn's write")

        status, ctype, text = c.post("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hello"}]}, h)
        msg = json.loads(text)
        check(status == 200 and msg["content"][0]["text"] == "echo: hello" and msg["stop_reason"] == "end_turn", "anthropic: non-streamed echo")

        status, _, text = c.post("/v1/messages", {"model": "m", "messages": [user], "tools": [{"name": "Write"}], "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}, h)
        check(set(json.loads(json.loads(text)["content"][0]["text"])) == {"title"}, "anthropic: structured output answered with the schema, not a tool call")

        # run / plan / think: the tools the request offers (Claude Code's or OpenCode's names).
        def tool_input(text, tools):
            events = sse(c.post("/v1/messages", {"model": "m", "stream": True, "tools": [{"name": t} for t in tools], "messages": [{"role": "user", "content": text}]}, h)[2])
            block = next(d for e, d in events if e == "content_block_start")["content_block"]
            return block["name"], json.loads("".join(d["delta"]["partial_json"] for e, d in events if e == "content_block_delta"))
        check(tool_input("run ls -la /tmp", ["Bash", "Write"]) == ("Bash", {"command": "ls -la /tmp", "description": "Run ls"}), "anthropic: run → Bash")
        check(tool_input("run echo hi", ["bash"])[0] == "bash", "anthropic: run → OpenCode's bash")
        name, todo = tool_input("plan Read | Edit | Test", ["TodoWrite"])
        check(name == "TodoWrite" and [t["content"] for t in todo["todos"]] == ["Read", "Edit", "Test"] and todo["todos"][0]["status"] == "in_progress", "anthropic: plan → TodoWrite")
        check(tool_input("plan A | B", ["todowrite"])[1]["todos"][1] == {"content": "B", "status": "pending", "priority": "medium", "id": "2"}, "anthropic: plan → OpenCode's todowrite")
        events = sse(c.post("/v1/messages", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "think Which file first?"}]}, h)[2])
        deltas = [d["delta"] for e, d in events if e == "content_block_delta"]
        check(deltas[0] == {"type": "thinking_delta", "thinking": "Which file first?"} and deltas[1]["type"] == "signature_delta" and deltas[-1] == {"type": "text_delta", "text": "thought"}, "anthropic: think → a thinking block, then text")
        msg = json.loads(c.post("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "think quietly"}]}, h)[2])
        check([b["type"] for b in msg["content"]] == ["thinking", "text"], "anthropic: think, not streamed")

        # agenthold's prompt resuming a parked turn: an approved call is tried again.
        resumed = [user, {"role": "assistant", "content": [dict(start_block, input={})]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": start_block["id"], "content": "interrupted", "is_error": True},
                                                {"type": "text", "text": '[agenthold] The sandbox stopped … "Write hello.txt" was approved (it is allowed once when you try it again). Continue the task where you left off.'}]}]
        events = sse(c.post("/v1/messages", dict(body, messages=resumed), h)[2])
        partial = "".join(d["delta"].get("partial_json", "") for e, d in events if e == "content_block_delta")
        check(partial and json.loads(partial) == {"file_path": "/work/x/hello.txt", "content": "hi there"}, "anthropic: a resumed turn's approval → the interrupted write again")
        resumed[-1]["content"][1]["text"] = '[agenthold] The sandbox stopped … "Write hello.txt" was denied (do not try it again). Continue …'
        msg = json.loads(c.post("/v1/messages", {"model": "m", "tools": [{"name": "Write"}], "messages": resumed}, h)[2])
        check(msg["content"][0]["text"].startswith("echo: [agenthold]"), "anthropic: a resumed turn's denial → no call")

        check(c.get("/v1/models")[0] == 200, "anthropic: GET /v1/models")
        check(c.get("/api/whatever")[0] == 404, "anthropic: unknown path 404")
        lines = [json.loads(l) for l in open(record)]
        check(lines[0]["headers"]["x-api-key"] == "k-123" and lines[0]["headers"]["anthropic-version"] == "2023-06-01", "anthropic record: credential header as received")
        check(lines[0]["user_texts"] == ["please write hello.txt hi there"] and lines[0]["answer"] == "tool_use" and lines[0]["tool"] == "Write", "anthropic record: the user's text (reminders left out) and the answer")
        check(lines[1]["tool_results"][0]["content"] == "File created", "anthropic record: tool results")
        check(lines[-1].get("unknown") is True, "anthropic record: unknown paths marked")
    finally:
        proc.terminate()


def openai(work):
    proc, port, record = start(work, "openai")
    try:
        c = Conn(port, "api.openai.com", os.path.join(work, "root.pem"))
        h = {"Authorization": "Bearer sk-xyz"}
        ctx = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>write x y</environment_context>"}]}
        user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "please write hello.txt hi"}]}
        for tools, kind, name in (
            ([{"type": "custom", "name": "apply_patch"}], "custom_tool_call", "apply_patch"),
            ([{"type": "function", "name": "shell"}], "function_call", "shell"),
            ([], None, None),
        ):
            body = {"model": "gpt", "stream": True, "input": [ctx, user], "tools": tools}
            status, ctype, text = c.post("/v1/responses", body, h)
            events = sse(text)
            types = [d["type"] for _, d in events]
            check(status == 200 and types[0] == "response.created" and types[-1] == "response.completed", "openai: stream response.created … response.completed (tools %s)" % (name or "none"))
            item = next(d["item"] for _, d in events if d["type"] == "response.output_item.done")
            if kind:
                check(item["type"] == kind and item["name"] == name, "openai: a %s of %s" % (kind, name))
            else:
                check(item["type"] == "message" and item["content"][0]["text"] == "echo: please write hello.txt hi", "openai: echo without a usable tool")
        completed = events[-1][1]["response"]
        check(completed["usage"]["total_tokens"] > 0, "openai: usage on response.completed")

        body = {"model": "gpt", "stream": True, "input": [{"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace", "name": "functions", "tools": [{"type": "custom", "name": "exec"}]}]}, user]}
        events = sse(c.post("/v1/responses", body, h)[2])
        item = next(d["item"] for _, d in events if d["type"] == "response.output_item.done")
        deltas = "".join(d["delta"] for _, d in events if d["type"] == "response.custom_tool_call_input.delta")
        check(item["type"] == "custom_tool_call" and item["name"] == "exec" and "tools.apply_patch(" in item["input"] and deltas == item["input"], "openai: code mode: exec running apply_patch, input streamed")

        out = {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "Done!"}
        body["input"] = body["input"] + [item, out]
        events = sse(c.post("/v1/responses", body, h)[2])
        said = "".join(d["delta"] for _, d in events if d["type"] == "response.output_text.delta")
        check(said == "done", "openai: after the tool output, 'done' (same connection)")

        # run / think
        def first_item(text, tools):
            events = sse(c.post("/v1/responses", {"model": "gpt", "stream": True, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}], "tools": tools}, h)[2])
            return [d["item"] for _, d in events if d["type"] == "response.output_item.done"], events
        items, _ = first_item("run ls -la", [{"type": "function", "name": "exec_command"}])
        check(items[0]["name"] == "exec_command" and json.loads(items[0]["arguments"]) == {"cmd": "ls -la"}, "openai: run → exec_command")
        items, _ = first_item("run ls", [{"type": "custom", "name": "exec"}])
        check(items[0]["name"] == "exec" and 'tools.exec_command({"cmd": "ls"})' in items[0]["input"], "openai: run in code mode → exec running exec_command")
        items, _ = first_item("run-escalated touch x", [{"type": "function", "name": "exec_command"}])
        args = json.loads(items[0]["arguments"])
        check(args["cmd"] == "touch x" and args["sandbox_permissions"] == "require_escalated" and args["justification"], "openai: run-escalated → exec_command outside Codex's sandbox")
        items, _ = first_item("run-escalated ls", [{"type": "custom", "name": "exec"}])
        check(items[0]["name"] == "exec" and '"sandbox_permissions": "require_escalated"' in items[0]["input"], "openai: run-escalated in code mode → exec asking to leave Codex's sandbox")
        items, events = first_item("think Which file first?", [])
        summary = "".join(d["delta"] for _, d in events if d["type"] == "response.reasoning_summary_text.delta")
        check([i["type"] for i in items] == ["reasoning", "message"] and summary == "Which file first?" and items[1]["content"][0]["text"] == "thought", "openai: think → a reasoning summary, then the text")
        check([i["type"] for i in events[-1][1]["response"]["output"]] == ["reasoning", "message"], "openai: think, both items in response.completed")

        resume = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": '[agenthold] The sandbox stopped … "Edit files" was approved (it is allowed once when you try it again). Continue …'}]}
        events = sse(c.post("/v1/responses", {"model": "gpt", "stream": True, "input": [user, resume], "tools": [{"type": "custom", "name": "apply_patch"}]}, h)[2])
        item = next(d["item"] for _, d in events if d["type"] == "response.output_item.done")
        check(item["type"] == "custom_tool_call" and "*** Add File: hello.txt" in item["input"], "openai: a resumed turn's approval → the interrupted write again")

        body["input"].append({"type": "configuration_update", "reasoning": {"effort": "low"}})
        events = sse(c.post("/v1/responses", body, h)[2])
        said = "".join(d["delta"] for _, d in events if d["type"] == "response.output_text.delta")
        check(said == "done", "openai: a trailing configuration_update does not undo the tool output")

        body = {"model": "gpt", "input": [user], "tools": [{"type": "custom", "name": "apply_patch"}], "text": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}}}
        status, _, text = c.post("/v1/responses", body, h)
        resp = json.loads(text)
        check(status == 200 and set(json.loads(resp["output"][0]["content"][0]["text"])) == {"title"}, "openai: structured output, not a tool call (non-streamed)")

        status, _ = c.get("/v1/responses", {"Upgrade": "websocket", "Connection": "Upgrade"})
        check(status == 426, "openai: a WebSocket upgrade gets 426")
        check(c.get("/v1/models")[0] == 200, "openai: GET /v1/models")
        lines = [json.loads(l) for l in open(record)]
        check(lines[0]["headers"]["authorization"] == "Bearer sk-xyz" and lines[0]["user_texts"] == ["please write hello.txt hi"], "openai record: credential header and the user's text (context left out)")
        check(any(l.get("tool_outputs") for l in lines), "openai record: tool outputs")
    finally:
        proc.terminate()


def main():
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([os.path.join(HERE, "make-cert.sh"), work, "api.anthropic.com", "api.openai.com"], check=True, stdout=subprocess.DEVNULL)
        anthropic(work)
        openai(work)
    print("selftest passed")


if __name__ == "__main__":
    main()
