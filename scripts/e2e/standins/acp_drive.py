#!/usr/bin/env python3
"""TEST TOOL: drive one ACP agent (a real harness) through one prompt turn on stdin/stdout.

    python3 acp_drive.py [--cwd DIR] [--mode MODE] [--authenticate METHOD] [--prompt TEXT]
                         [--expect-file NAME --expect-content TEXT] [--timeout SECS] [--linger SECS]
                         -- CMD [ARG...]

initialize → (authenticate METHOD) → session/new {cwd} → (session/set_mode MODE) →
session/prompt TEXT (once per --prompt, in one session), answering every `session/request_permission` with the option of kind
allow_once (else allow_always), and any other agent request with -32601. Prints every message
sent (`->`) and received (`<-`) on stdout, one JSON per line. The harness's stderr goes to ours.
Exit 0 when the prompt ended (any stop reason) and, with --expect-file, the file exists under the
cwd with --expect-content (surrounding whitespace ignored); 1 otherwise; 2 on timeout.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cwd", help="the session's cwd (default: a new temp dir)")
    p.add_argument("--mode", help="session/set_mode to this mode id after session/new")
    p.add_argument("--authenticate", help="call authenticate with this methodId before session/new")
    p.add_argument("--prompt", action="append", help="a prompt; repeat for several turns (default: please write hello.txt hi)")
    p.add_argument("--expect-file", default=None)
    p.add_argument("--expect-content", default=None)
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument("--linger", type=float, default=0, help="seconds to keep the agent running after the turn (its late messages are printed)")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("no agent command given (after --)")
    cwd = os.path.abspath(a.cwd or tempfile.mkdtemp(prefix="acp-drive-"))
    os.makedirs(cwd, exist_ok=True)
    print("# cwd", cwd, flush=True)
    deadline = time.monotonic() + a.timeout

    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd)
    inbox = queue.Queue()

    def reader():
        for line in proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                inbox.put(json.loads(line))
            except ValueError:
                print("# non-JSON from agent:", line[:500].decode("utf-8", "replace"), flush=True)
        inbox.put(None)

    threading.Thread(target=reader, daemon=True).start()
    next_id = [0]
    state = {"permissions": 0, "updates": {}}

    def send(obj):
        print("->", json.dumps(obj), flush=True)
        proc.stdin.write((json.dumps(obj) + "\n").encode())
        proc.stdin.flush()

    def handle_agent_request(msg):
        method = msg.get("method")
        if method == "session/request_permission":
            state["permissions"] += 1
            options = msg["params"].get("options") or []
            chosen = None
            for kind in ("allow_once", "allow_always"):
                chosen = next((o for o in options if o.get("kind") == kind), None)
                if chosen:
                    break
            outcome = {"outcome": "selected", "optionId": chosen["optionId"]} if chosen else {"outcome": "cancelled"}
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": outcome}})
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found: %s" % method}})

    def request(method, params):
        next_id[0] += 1
        rid = next_id[0]
        send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print("# TIMEOUT waiting for", method, flush=True)
                proc.kill()
                sys.exit(2)
            try:
                msg = inbox.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if msg is None:
                print("# agent closed stdout (exit %s) while waiting for %s" % (proc.wait(), method), flush=True)
                sys.exit(1)
            print("<-", json.dumps(msg), flush=True)
            if "method" in msg and "id" in msg:
                handle_agent_request(msg)
            elif "method" in msg:
                if msg["method"] == "session/update":
                    kind = (msg.get("params") or {}).get("update", {}).get("sessionUpdate")
                    state["updates"][kind] = state["updates"].get(kind, 0) + 1
            elif msg.get("id") == rid:
                if "error" in msg:
                    print("# %s failed: %s" % (method, json.dumps(msg["error"])), flush=True)
                    proc.kill()
                    sys.exit(1)
                return msg.get("result")

    init = request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "agenthold-acp-drive", "version": "0.1.0"},
        },
    )
    print("# agent", json.dumps((init or {}).get("agentInfo")), "authMethods", [m.get("id") for m in (init or {}).get("authMethods") or []], flush=True)
    if a.authenticate:
        request("authenticate", {"methodId": a.authenticate})
    new = request("session/new", {"cwd": cwd, "mcpServers": []})
    sid = new["sessionId"]
    modes = new.get("modes") or {}
    print("# session", sid, "mode", modes.get("currentModeId"), "modes", [m.get("id") for m in modes.get("availableModes") or []], flush=True)
    if a.mode:
        request("session/set_mode", {"sessionId": sid, "modeId": a.mode})
    for text in a.prompt or ["please write hello.txt hi"]:
        result = request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        print("# stopReason", (result or {}).get("stopReason"), "permissions", state["permissions"], "updates", json.dumps(state["updates"]), flush=True)

    end = time.monotonic() + a.linger
    while time.monotonic() < end:
        try:
            msg = inbox.get(timeout=max(0.05, end - time.monotonic()))
        except queue.Empty:
            continue
        if msg is None:
            break
        print("<-", json.dumps(msg), flush=True)
        if "method" in msg and "id" in msg:
            handle_agent_request(msg)

    ok = True
    if a.expect_file:
        path = os.path.join(cwd, a.expect_file)
        if not os.path.exists(path):
            print("# MISSING", path, flush=True)
            ok = False
        else:
            content = open(path, encoding="utf-8", errors="replace").read()
            print("# file", path, json.dumps(content), flush=True)
            if a.expect_content is not None and content.strip() != a.expect_content.strip():
                ok = False
    try:
        proc.stdin.close()
        proc.wait(timeout=5)
    except Exception:
        proc.kill()
    print("# RESULT", "ok" if ok else "FAILED", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
