#!/usr/bin/env python3
"""TEST TOOL: a stand-in for the Anthropic Messages API, enough for Claude Code to run a turn.

    python3 anthropic.py --cert leaf.pem --key leaf.key [--port 0] --ready PORTFILE --record REC.jsonl

Speaks `POST /v1/messages` (streamed SSE or plain JSON), `POST /v1/messages/count_tokens`,
`GET /v1/models[/ID]`, `GET /api/hello`, and answers HEAD/GET probes of `/` and anything else
harmlessly (logged as `unknown` in the record).

The conversation is scripted by the latest user text (Claude Code's system-reminder blocks are
skipped):
  - `write FILE CONTENT` (and the request offers a write tool) → a streamed `tool_use` of
    Claude Code's `Write` {"file_path", "content"} or OpenCode's `write` {"filePath", "content"};
    FILE is made absolute in the working directory the harness names in its prompt ("Primary
    working directory: …" / "Working directory: …"), else /home/agent;
  - `run COMMAND` (a shell tool offered) → a `tool_use` of Claude Code's `Bash` or OpenCode's
    `bash` {"command", "description"};
  - `plan STEP | STEP …` (a to-do tool offered) → a `tool_use` of Claude Code's `TodoWrite` or
    OpenCode's `todowrite` with those steps (the first in progress; the harness's `plan` update);
  - `think THOUGHT` → a `thinking` block with THOUGHT (and a signature), then the text "thought";
  - a `tool_result` came after the latest user text → the text "done", stop_reason end_turn;
  - agenthold's prompt resuming a parked turn ("[agenthold] … was approved …") → the earlier
    user text again (the model tries the approved call again);
  - anything else → the text "echo: <text>".
"""

import json
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MODEL_DEFAULT = "claude-sonnet-4-5"
CWD_RE = re.compile(r"(?:[Pp]rimary )?[Ww]orking directory:\s*(/[^\s<]*)")
DEFAULT_CWD = "/home/agent"


def blocks(content):
    """A message's content as a list of blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def is_reminder(text):
    t = text.lstrip()
    return t.startswith("<system-reminder>") or t.startswith("<command-") or t.startswith("<local-command")


def user_texts(message):
    """The user's own texts in one message (system reminders and the like left out)."""
    return [b.get("text", "") for b in blocks(message.get("content")) if b.get("type") == "text" and not is_reminder(b.get("text", ""))]


def tool_results(message):
    out = []
    for b in blocks(message.get("content")):
        if b.get("type") == "tool_result":
            c = b.get("content")
            if isinstance(c, list):
                c = "".join(x.get("text", "") for x in c if isinstance(x, dict))
            out.append({"tool_use_id": b.get("tool_use_id"), "is_error": bool(b.get("is_error")), "content": c})
    return out


def system_text(body):
    s = body.get("system")
    if isinstance(s, str):
        return s
    return "\n".join(b.get("text", "") for b in blocks(s))


def find_cwd(body):
    """The working directory Claude Code states (system prompt, or an <env> in a user message)."""
    texts = [system_text(body)]
    for m in body.get("messages") or []:
        texts += [b.get("text", "") for b in blocks(m.get("content")) if b.get("type") == "text"]
    for t in texts:
        m = CWD_RE.search(t)
        if m:
            return m.group(1)
    return DEFAULT_CWD


def tool_names(body):
    return [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


def from_schema(schema, text):
    """A small value matching a JSON schema (structured-output requests, e.g. session titles)."""
    if not isinstance(schema, dict):
        return text
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: from_schema(v, text) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return text


def plan(body):
    """What to answer: ("tool_use", name, input), ("thinking", thought, text) or ("text", text)."""
    messages = body.get("messages") or []
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
    if fmt.get("type") == "json_schema":
        return ("text", json.dumps(from_schema(fmt.get("schema"), "Stand-in")))
    # The latest user text, and whether a tool result came after it (then the turn is answered).
    # Claude Code may add system messages or reminder blocks anywhere; neither counts.
    text, result_after = "", False
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        texts = user_texts(m)
        if tool_results(m) and not texts:
            result_after = True
            continue
        if texts:
            text = texts[-1]
            break
    if result_after:
        return ("text", "done")
    if text.lstrip().startswith(common.RESUMING_PREFIX):
        # agenthold resumed a parked turn: an approved call is tried again
        text = common.acted_on([t for m in messages if m.get("role") == "user" for t in user_texts(m)])
    if text.startswith("[SUGGESTION MODE"):
        return ("text", "")  # Claude Code's next-prompt suggestion after a turn: suggest nothing
    offered = tool_names(body)
    scripted = scripted_tool(text, offered)
    if scripted:
        return scripted
    thought = re.match(r"\s*think\s+(.+)", text, re.S)
    if thought:
        return ("thinking", thought.group(1).strip(), "thought")
    write = common.parse_write(text)
    if write and ("Write" in offered or "write" in offered):
        path, content = write
        if not path.startswith("/"):
            path = os.path.join(find_cwd(body), path)
        if "Write" in offered:  # Claude Code
            return ("tool_use", "Write", {"file_path": path, "content": content})
        return ("tool_use", "write", {"filePath": path, "content": content})  # OpenCode
    return ("text", "echo: " + (text.strip()[:200] or "(nothing)"))


def scripted_tool(text, offered):
    """`run COMMAND` or `plan STEP | STEP` as the offered tool's call, else None."""
    run = re.match(r"\s*run\s+(.+)", text, re.S)
    if run and ("Bash" in offered or "bash" in offered):
        command = run.group(1).strip()
        name = "Bash" if "Bash" in offered else "bash"
        return ("tool_use", name, {"command": command, "description": "Run " + command.split()[0]})
    steps = re.match(r"\s*plan\s+(.+)", text, re.S)
    if steps and ("TodoWrite" in offered or "todowrite" in offered):
        items = [step.strip() for step in steps.group(1).split("|") if step.strip()]
        status = lambda i: "in_progress" if i == 0 else "pending"  # noqa: E731
        if "TodoWrite" in offered:
            todos = [{"content": c, "status": status(i), "activeForm": c} for i, c in enumerate(items)]
            return ("tool_use", "TodoWrite", {"todos": todos})
        todos = [{"content": c, "status": status(i), "priority": "medium", "id": str(i + 1)} for i, c in enumerate(items)]
        return ("tool_use", "todowrite", {"todos": todos})
    return None


def usage(input_tokens, output_tokens):
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def rough_tokens(body):
    return max(1, len(json.dumps(body.get("messages") or [])) // 4)


class Handler(common.StandinHandler):
    provider = "anthropic"

    def summary(self, body):
        """What a test wants from a request body: model, stream, the user texts, tool results."""
        messages = body.get("messages") or []
        texts, results = [], []
        for m in messages:
            if m.get("role") == "user":
                texts += user_texts(m)
                results += tool_results(m)
        return {
            "model": body.get("model"),
            "stream": bool(body.get("stream")),
            "messages": len(messages),
            "tools": tool_names(body),
            "user_texts": texts,
            "tool_results": results,
        }

    # -- routes ----------------------------------------------------------------------------

    def route(self):
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_HEAD(self):  # noqa: N802
        self.record()
        self.send_json(200, {})

    def do_GET(self):  # noqa: N802
        path = self.route()
        if path == "/v1/models":
            self.record()
            models = [self.model_info(m) for m in (MODEL_DEFAULT, "claude-opus-4-1", "claude-haiku-4-5")]
            self.send_json(200, {"data": models, "has_more": False, "first_id": models[0]["id"], "last_id": models[-1]["id"]})
        elif path.startswith("/v1/models/"):
            self.record()
            self.send_json(200, self.model_info(path.rsplit("/", 1)[1]))
        elif path == "/api/hello":
            self.record()
            self.send_json(200, {"message": "hello"})
        elif path == "/":
            self.record()
            self.send_json(200, {})
        else:
            self.unknown()

    def do_POST(self):  # noqa: N802
        path = self.route()
        body = self.json_body()
        if not isinstance(body, dict):
            self.record(error="body is not a JSON object")
            return self.error(400, "invalid_request_error", "body must be a JSON object")
        if path == "/v1/messages":
            return self.messages(body)
        if path == "/v1/messages/count_tokens":
            self.record(**self.summary(body))
            return self.send_json(200, {"input_tokens": rough_tokens(body)})
        self.unknown()

    def do_PUT(self):  # noqa: N802
        self.unknown()

    def do_DELETE(self):  # noqa: N802
        self.unknown()

    def unknown(self):
        if self.command in ("POST", "PUT", "PATCH"):
            self.read_body()
        self.record(unknown=True)
        common.log(self.provider, "UNKNOWN", self.command, self.path)
        self.error(404, "not_found_error", "stand-in: no such route %s %s" % (self.command, self.path))

    def error(self, status, kind, message):
        self.send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

    @staticmethod
    def model_info(model_id):
        return {"type": "model", "id": model_id, "display_name": model_id, "created_at": "2025-01-01T00:00:00Z"}

    # -- /v1/messages ----------------------------------------------------------------------

    def messages(self, body):
        answer = plan(body)
        extra = {"tool": answer[1]} if answer[0] == "tool_use" else {}
        answer_kind = "text" if answer[0] == "thinking" else answer[0]
        self.record(answer=answer_kind, **extra, **self.summary(body))
        model = body.get("model") or MODEL_DEFAULT
        msg_id = common.new_id("msg_")
        in_tokens = rough_tokens(body)
        thinking = None
        if answer[0] == "tool_use":
            block = {"type": "tool_use", "id": common.new_id("toolu_"), "name": answer[1], "input": answer[2]}
            stop = "tool_use"
        elif answer[0] == "thinking":
            thinking = {"type": "thinking", "thinking": answer[1], "signature": "c3RhbmQtaW4="}
            block = {"type": "text", "text": answer[2]}
            stop = "end_turn"
        else:
            block = {"type": "text", "text": answer[1]}
            stop = "end_turn"
        headers = {"request-id": common.new_id("req_")}
        if not body.get("stream"):
            return self.send_json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [thinking, block] if thinking else [block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage(in_tokens, 5),
                },
                headers,
            )
        self.start_sse(headers)
        self.sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage(in_tokens, 1),
                },
            },
        )
        index = 0
        if thinking:
            start = {"type": "thinking", "thinking": "", "signature": ""}
            self.sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start})
            for delta in ({"type": "thinking_delta", "thinking": thinking["thinking"]}, {"type": "signature_delta", "signature": thinking["signature"]}):
                self.sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            self.sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
        if block["type"] == "tool_use":
            start = dict(block, input={})
            self.sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start})
            self.sse("ping", {"type": "ping"})
            raw = json.dumps(block["input"])
            step = max(1, len(raw) // 3 + 1)
            for i in range(0, len(raw), step):
                self.sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": raw[i : i + step]}},
                )
        else:
            self.sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            self.sse("ping", {"type": "ping"})
            text = block["text"]
            for i in range(0, len(text), 16):
                self.sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text[i : i + 16]}},
                )
        self.sse("content_block_stop", {"type": "content_block_stop", "index": index})
        self.sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"input_tokens": in_tokens, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
            },
        )
        self.sse("message_stop", {"type": "message_stop"})
        self.end_sse()


if __name__ == "__main__":
    common.main(Handler, "Anthropic Messages API stand-in")
