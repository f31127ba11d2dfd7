#!/usr/bin/env python3
"""TEST TOOL: a stand-in for the OpenAI Responses API, enough for Codex to run a turn.

    python3 openai.py --cert leaf.pem --key leaf.key [--port 0] --ready PORTFILE --record REC.jsonl

Speaks `POST /v1/responses` (streamed SSE when `stream: true`, else one JSON response) and
`GET /v1/models` (also under chatgpt.com's `/backend-api/codex/`, where Codex signed in with a
ChatGPT login goes, with `GET /backend-api/wham/accounts/check`, its workspace discovery), and
`POST /oauth/token` (auth.openai.com's refresh exchange: new tokens);
anything else is answered 404 and recorded as `unknown` (a WebSocket upgrade
of /v1/responses too, so Codex falls back to HTTP streaming).

The conversation is scripted by the latest user text (Codex's own context messages —
<environment_context>, AGENTS.md instructions, … — are skipped):
  - a structured-output request (`text.format` json_schema, e.g. Codex's title) → a small JSON
    value of that schema;
  - `write FILE CONTENT` → a tool call that makes Codex create FILE (relative to the session's
    cwd) containing CONTENT: `apply_patch` when the request offers it (a freeform/custom tool or
    a function), else a shell-like function (`exec_command`, `shell_command`, `shell`);
  - `run COMMAND` → a call that runs COMMAND: in code mode `exec` with
    `tools.exec_command({"cmd": COMMAND})`, else `exec_command` / `shell_command` / `shell`;
  - `run-escalated COMMAND` → the same call asking to run COMMAND outside Codex's own sandbox
    (`"sandbox_permissions": "require_escalated"` and a `justification`), which Codex asks the
    client about first;
  - `think THOUGHT` → a `reasoning` item whose summary is THOUGHT, then the text "thought";
  - a tool call's output came after the latest user text → the text "done";
  - agenthold's prompt resuming a parked turn ("[agenthold] … was approved …") → the earlier
    user text again (the model tries the approved call again);
  - anything else → the text "echo: <text>".
"""

import base64
import json
import re
import os
import shlex
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CONTEXT_PREFIXES = ("<environment_context", "<user_instructions", "# AGENTS.md", "<permissions", "<collaboration_mode", "<skills", "<apps", "<personality", "<INSTRUCTIONS", "<turn_aborted", "<user_shell_command", "<subagent")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output")


def content_texts(item):
    c = item.get("content")
    if isinstance(c, str):
        return [c]
    return [p.get("text", "") for p in c or [] if isinstance(p, dict) and p.get("type") in ("input_text", "text", "output_text")]


def input_items(body):
    inp = body.get("input")
    if isinstance(inp, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": inp}]}]
    return [i for i in inp or [] if isinstance(i, dict)]


def user_texts(items):
    out = []
    for item in items:
        if item.get("type", "message") == "message" and item.get("role") == "user":
            out += [t for t in content_texts(item) if not t.lstrip().startswith(CONTEXT_PREFIXES)]
    return out


def tool_outputs(items):
    out = []
    for item in items:
        if item.get("type") in OUTPUT_TYPES:
            o = item.get("output")
            if isinstance(o, dict):
                o = o.get("content", json.dumps(o))
            elif isinstance(o, list):
                o = "".join(p.get("text", "") for p in o if isinstance(p, dict))
            out.append({"type": item["type"], "call_id": item.get("call_id"), "output": o})
    return out


def tools(body):
    """{name: type} of the offered tools (type `function`, `custom`, …): the request's `tools`,
    plus those of `additional_tools` input items, namespaces flattened."""
    out = {}

    def add(ts):
        for t in ts or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                add(t.get("tools"))
                continue
            name = t.get("name") or (t.get("function") or {}).get("name") or t.get("type")
            out[name] = t.get("type")

    add(body.get("tools"))
    for item in input_items(body):
        if item.get("type") == "additional_tools":
            add(item.get("tools"))
    return out


def patch_for(path, content):
    lines = content.split("\n")
    return "*** Begin Patch\n*** Add File: %s\n%s\n*** End Patch\n" % (path, "\n".join("+" + l for l in lines))


def write_call(offered, path, content):
    """(item type, tool name, payload) of a call that writes `content` into `path`, or None."""
    if offered.get("exec") == "custom":
        # Codex "code mode": one freeform `exec` tool running JavaScript, nested tools on `tools`.
        js = "const r = await tools.apply_patch(%s);\ntext(r);\n" % json.dumps(patch_for(path, content))
        return ("custom_tool_call", "exec", js)
    if "apply_patch" in offered:
        patch = patch_for(path, content)
        if offered["apply_patch"] == "custom":
            return ("custom_tool_call", "apply_patch", patch)
        return ("function_call", "apply_patch", json.dumps({"input": patch}))
    script = "printf '%%s\\n' %s > %s" % (shlex.quote(content), shlex.quote(path))
    if "exec_command" in offered:
        return ("function_call", "exec_command", json.dumps({"cmd": script}))
    if "shell_command" in offered:
        return ("function_call", "shell_command", json.dumps({"command": script}))
    if "shell" in offered:
        return ("function_call", "shell", json.dumps({"command": ["bash", "-lc", script]}))
    return None


def run_call(offered, command, escalated=False):
    """(item type, tool name, payload) of a call that runs `command` in a shell, or None. Escalated:
    outside Codex's own sandbox, which it asks the client about first."""
    extra = {}
    if escalated:
        extra = {"sandbox_permissions": "require_escalated",
                 "justification": "Do you want to run %s?" % command[:80]}
    if offered.get("exec") == "custom":
        js = "const r = await tools.exec_command(%s);\ntext(r);\n" % json.dumps(dict({"cmd": command}, **extra))
        return ("custom_tool_call", "exec", js)
    if "exec_command" in offered:
        return ("function_call", "exec_command", json.dumps(dict({"cmd": command}, **extra)))
    if "shell_command" in offered:
        return ("function_call", "shell_command", json.dumps(dict({"command": command}, **extra)))
    if "shell" in offered:
        return ("function_call", "shell", json.dumps(dict({"command": ["bash", "-lc", command]}, **extra)))
    return None


def plan(body):
    """("call", item type, name, payload), ("think", thought, text) or ("text", text)."""
    items = input_items(body)
    # A tool output after the latest user text: the turn is answered. (Codex appends items such as
    # `configuration_update` anywhere; they do not count.)
    for item in reversed(items):
        if item.get("type") in OUTPUT_TYPES:
            return ("text", "done")
        if item.get("type", "message") == "message" and item.get("role") == "user" and user_texts([item]):
            break
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        # structured output (e.g. Codex's session title): a value of the schema, never a tool call
        return ("text", json.dumps(from_schema(fmt.get("schema"), "Stand-in")))
    # agenthold's prompt resuming a parked turn: an approved call is tried again.
    text = common.acted_on(user_texts(items))
    run = re.match(r"\s*run(-escalated)?\s+(.+)", text, re.S)
    if run:
        call = run_call(tools(body), run.group(2).strip(), escalated=bool(run.group(1)))
        if call:
            return ("call",) + call
    thought = re.match(r"\s*think\s+(.+)", text, re.S)
    if thought:
        return ("think", thought.group(1).strip(), "thought")
    write = common.parse_write(text)
    if write:
        call = write_call(tools(body), *write)
        if call:
            return ("call",) + call
    return ("text", "echo: " + (text.strip()[:200] or "(nothing)"))


def from_schema(schema, text):
    if not isinstance(schema, dict):
        return text
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        return {k: from_schema(v, text) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return text


def jwt(claims):
    """An unsigned JWT-shaped token holding `claims` (Codex reads `exp` and the account from it)."""
    b64 = lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return b64({"alg": "RS256", "typ": "JWT"}) + "." + b64(claims) + ".sig"


class Handler(common.StandinHandler):
    provider = "openai"

    def summary(self, body):
        items = input_items(body)
        return {
            "model": body.get("model"),
            "stream": bool(body.get("stream")),
            "items": len(items),
            "tools": sorted(tools(body)),
            "user_texts": user_texts(items),
            "tool_outputs": tool_outputs(items),
        }

    def route(self):
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_HEAD(self):  # noqa: N802
        self.record()
        self.send_json(200, {})

    def do_GET(self):  # noqa: N802
        path = self.route()
        if path.endswith("/models") and "upgrade" not in self.headers:
            self.record()
            ids = ["gpt-5.5", "gpt-5.4", "gpt-5.3-codex"]
            return self.send_json(200, {"object": "list", "data": [{"id": i, "object": "model", "created": 1735689600, "owned_by": "openai"} for i in ids]})
        if path == "/":
            self.record()
            return self.send_json(200, {})
        if path == "/backend-api/wham/accounts/check":
            # Codex signed in with ChatGPT asks which workspace its account routes to before a turn.
            self.record()
            account = self.headers.get("chatgpt-account-id") or "acct-e2e"
            entry = {"id": account, "structure": "personal",
                     "workspace_backend_origin": "NO_CONSTRAINT", "account_routing_override": "NO_CONSTRAINT"}
            return self.send_json(200, {"accounts": [entry], "account_ordering": [account], "default_account_id": account})
        if self.headers.get("Upgrade", "").lower() == "websocket":
            # Responses over WebSocket is not spoken here: 426 makes Codex fall back to HTTP+SSE.
            self.record(websocket=True)
            return self.send_json(426, {"error": {"type": "invalid_request_error", "message": "stand-in: no WebSocket, use HTTP", "code": None, "param": None}})
        self.unknown()

    def do_POST(self):  # noqa: N802
        path = self.route()
        body = self.json_body()
        if not isinstance(body, dict):
            self.record(error="body is not a JSON object")
            return self.send_json(400, {"error": {"type": "invalid_request_error", "message": "body must be a JSON object", "code": None, "param": None}})
        if path.endswith("/responses"):
            return self.create_response(body)
        if path == "/oauth/token":
            return self.issue_tokens(body)
        self.unknown()

    def issue_tokens(self, body):
        """The refresh exchange of a ChatGPT login (auth.openai.com): fresh tokens, the access
        token a JWT that expires in two hours; the record names it (`issued_access_token`) so a
        test knows which token the provider should see next."""
        if body.get("grant_type") != "refresh_token" or not body.get("refresh_token"):
            self.record(error="not a refresh exchange")
            return self.send_json(400, {"error": "invalid_request"})
        access = jwt({"exp": int(time.time()) + 7200, "n": common.new_id("at_")})
        self.record(issued_access_token=access)
        self.send_json(200, {"access_token": access, "refresh_token": common.new_id("rt_"), "id_token": jwt({"email": "e2e@example.com"})})

    def do_PUT(self):  # noqa: N802
        self.unknown()

    def do_DELETE(self):  # noqa: N802
        self.unknown()

    def unknown(self):
        self.record(unknown=True)
        common.log(self.provider, "UNKNOWN", self.command, self.path)
        self.send_json(404, {"error": {"type": "invalid_request_error", "message": "stand-in: no such route %s %s" % (self.command, self.path), "code": "not_found", "param": None}})

    # -- /v1/responses ---------------------------------------------------------------------

    def create_response(self, body):
        answer = plan(body)
        extra = {"tool": answer[2]} if answer[0] == "call" else {}
        self.record(answer="text" if answer[0] == "think" else answer[0], **extra, **self.summary(body))
        resp_id = common.new_id("resp_")
        model = body.get("model") or "gpt-5.5"
        in_tokens = max(1, len(json.dumps(body.get("input") or [])) // 4)
        usage = {
            "input_tokens": in_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": in_tokens + 5,
        }
        if answer[0] == "call":
            _, kind, name, payload = answer
            item = {"type": kind, "id": common.new_id("fc_" if kind == "function_call" else "ctc_"), "call_id": common.new_id("call_"), "name": name, "status": "completed"}
            item["arguments" if kind == "function_call" else "input"] = payload
        else:
            item = {
                "type": "message",
                "id": common.new_id("msg_"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer[-1], "annotations": []}],
            }
        # `think`: a reasoning item (its summary holds the thought) before the message.
        reasoning = None
        if answer[0] == "think":
            summary = [{"type": "summary_text", "text": answer[1]}]
            reasoning = {"type": "reasoning", "id": common.new_id("rs_"), "summary": summary, "encrypted_content": None}
        output = [reasoning, item] if reasoning else [item]
        response = {
            "id": resp_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": model,
            "output": [],
            "usage": None,
        }
        headers = {"x-request-id": common.new_id("req_"), "openai-model": model}
        if not body.get("stream"):
            return self.send_json(200, dict(response, status="completed", output=output, usage=usage), headers)

        seq = [0]

        def ev(kind, **fields):
            fields["type"] = kind
            fields["sequence_number"] = seq[0]
            seq[0] += 1
            self.sse(kind, fields)

        self.start_sse(headers)
        ev("response.created", response=response)
        ev("response.in_progress", response=response)
        at = 0
        if reasoning:
            rid, part = reasoning["id"], reasoning["summary"][0]
            ev("response.output_item.added", output_index=0, item=dict(reasoning, summary=[]))
            ev("response.reasoning_summary_part.added", item_id=rid, output_index=0, summary_index=0, part=dict(part, text=""))
            ev("response.reasoning_summary_text.delta", item_id=rid, output_index=0, summary_index=0, delta=part["text"])
            ev("response.reasoning_summary_text.done", item_id=rid, output_index=0, summary_index=0, text=part["text"])
            ev("response.reasoning_summary_part.done", item_id=rid, output_index=0, summary_index=0, part=part)
            ev("response.output_item.done", output_index=0, item=reasoning)
            at = 1
        if item["type"] == "message":
            text = item["content"][0]["text"]
            ev("response.output_item.added", output_index=at, item=dict(item, status="in_progress", content=[]))
            ev("response.content_part.added", item_id=item["id"], output_index=at, content_index=0, part={"type": "output_text", "text": "", "annotations": []})
            for i in range(0, len(text), 16):
                ev("response.output_text.delta", item_id=item["id"], output_index=at, content_index=0, delta=text[i : i + 16])
            ev("response.output_text.done", item_id=item["id"], output_index=at, content_index=0, text=text)
            ev("response.content_part.done", item_id=item["id"], output_index=at, content_index=0, part=item["content"][0])
        elif item["type"] == "function_call":
            args = item["arguments"]
            ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", arguments=""))
            step = max(1, len(args) // 3 + 1)
            for i in range(0, len(args), step):
                ev("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=args[i : i + step])
            ev("response.function_call_arguments.done", item_id=item["id"], output_index=0, arguments=args)
        else:
            inp = item["input"]
            ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", input=""))
            step = max(1, len(inp) // 3 + 1)
            for i in range(0, len(inp), step):
                ev("response.custom_tool_call_input.delta", item_id=item["id"], output_index=0, delta=inp[i : i + step])
            ev("response.custom_tool_call_input.done", item_id=item["id"], output_index=0, input=inp)
        ev("response.output_item.done", output_index=at, item=item)
        ev("response.completed", response=dict(response, status="completed", output=output, usage=usage))
        self.end_sse()


if __name__ == "__main__":
    common.main(Handler, "OpenAI Responses API stand-in")
