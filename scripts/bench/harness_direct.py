"""Runs one real harness DIRECTLY (no agenthold): `docker run -i` of the base image with the
harness's ACP command on stdio, the launch environment agenthold's adapter gives it
(server/src/harness/) and the trust variables sandboxd gives it (the stand-in's root CA instead of
the egress proxy's), in the network namespace of HOLDER, where the provider's stand-in listens on
127.0.0.1:443 under the provider's real host name (scripts/bench/harness_direct.sh). Drives
initialize → session/new → (session/set_mode, as agenthold does) → session/prompt, then a second
prompt in the same session and a third in a session opened after it, and prints one JSON object: each phase in ms from `docker run`
(`*_at_ms`), the first update of each prompt, and the stand-in's first request (from RECORD).

    harness_direct.py HARNESS HOLDER IMAGE RECORD CERTS [--prompt TEXT] [--name CONTAINER] [--label L]
        [--env NAME=VALUE]... [--save-dir HOME_SUBDIR:DEST]...
"""

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time


def codex_catalog_script():
    """codex.rs's CATALOG_CONFIG (the script codex-acp starts through: Codex's model catalog)."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "../../server/src/harness/codex.rs")) as f:
        text = f.read()
    start = text.index('pub const CATALOG_CONFIG: &str = r#"') + len('pub const CATALOG_CONFIG: &str = r#"')
    return text[start:text.index('"#', start)]


# What agenthold's adapters set (server/src/harness/*.rs), without the egress proxy's variables.
# (Codex: its launch's argv; `--argv '["codex-acp"]'` runs it as before the catalog setting.)
HARNESSES = {
    "claude-code": (["claude-agent-acp"], "default", "ANTHROPIC_API_KEY", {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "IS_SANDBOX": "1"}),
    "codex": (["/bin/sh", "-c", codex_catalog_script(), "agenthold-codex", "codex-acp"], "read-only", "OPENAI_API_KEY", {
        "CODEX_CONFIG": json.dumps({"check_for_update_on_startup": False, "analytics": {"enabled": False}}),
        "DEFAULT_AUTH_REQUEST": json.dumps({"methodId": "api-key"}), "NO_BROWSER": "1"}),
    "opencode": (["opencode", "acp"], None, "ANTHROPIC_API_KEY", {
        # The model the bench's agent is made with (else OpenCode picks its own provider, opencode.ai).
        "OPENCODE_CONFIG_CONTENT": json.dumps({"permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
                                               "autoupdate": False, "share": "disabled",
                                               "model": "anthropic/claude-sonnet-4-5"}),
        "OPENCODE_DISABLE_AUTOUPDATE": "1"}),
}
CA_FILE = "/usr/local/share/ca-certificates/agenthold-proxy.crt"  # sandboxd's paths (proxy_ca.rs)
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
TRUST = dict({"NODE_EXTRA_CA_CERTS": CA_FILE}, **{k: BUNDLE for k in (
    "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "CODEX_CA_CERTIFICATE", "GIT_SSL_CAINFO",
    "PIP_CERT", "CARGO_HTTP_CAINFO")})
# --save-dir: every SQLite database in the directory copied beside it as <name>.snapshot (the
# online backup API: Codex's logs_2.sqlite is being written).
SNAPSHOT_DBS = """import glob, sqlite3, sys
for path in glob.glob(sys.argv[1] + '/*.sqlite'):
    src = sqlite3.connect(path)
    dst = sqlite3.connect(path + '.snapshot')
    src.backup(dst)
    dst.close()
    src.close()
"""
# agenthold's `initialize` (core/src/acp/messages.rs).
INITIALIZE = {"protocolVersion": 1, "clientInfo": {"name": "agenthold", "version": "0"},
              "clientCapabilities": {"_meta": {"terminal_output_delta": True, "terminal-auth": True},
                                     "elicitation": {"form": {}}, "auth": {"terminal": True}}}


class Harness:
    def __init__(self, argv):
        self.t0 = time.time()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox, self.next_id, self.stderr = queue.Queue(), 0, []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.inbox.put((time.time(), json.loads(line)))
            except ValueError:
                pass
        self.inbox.put((time.time(), None))

    def ms(self, t):
        return round((t - self.t0) * 1000, 1)

    def send(self, method, params):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()
        return self.next_id, time.time()

    def call(self, method, params, deadline, updates):
        """Sends a request; returns (answer time, result), noting every session/update on the way."""
        rid, _ = self.send(method, params)
        while True:
            t, msg = self.inbox.get(timeout=max(0.1, deadline - time.time()))
            if msg is None:
                raise RuntimeError("the harness exited: " + b"".join(self.stderr[-20:]).decode(errors="replace"))
            if msg.get("method") == "session/update":
                updates.append((t, (msg.get("params") or {}).get("update", {}).get("sessionUpdate")))
            elif "method" in msg and "id" in msg:  # a request of the harness's: none expected for "hello"
                answer = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not offered"}}
                if msg["method"] == "session/request_permission":
                    answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "cancelled"}}}
                self.proc.stdin.write((json.dumps(answer) + "\n").encode())
                self.proc.stdin.flush()
            elif msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return t, msg.get("result") or {}


def records(path, since):
    """The model requests (POSTs) the stand-in recorded since `since`."""
    try:
        with open(path) as f:
            return [r for r in map(json.loads, f) if r["time"] >= since and r["method"] == "POST" and not r.get("unknown")]
    except FileNotFoundError:
        return []


def dns_stub(log_path):
    """A resolver on 127.0.0.1:53 (in the holder) that answers every query at once with NXDOMAIN
    and logs its name: a host the harness tries besides its provider fails fast, as the egress
    proxy refuses it at once, instead of waiting out the resolver of the host's resolv.conf,
    which a container without a network cannot reach (musl waits 5 s for it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    with open(log_path, "a") as log:
        while True:
            q, peer = sock.recvfrom(512)
            if len(q) < 12:
                continue
            labels, i = [], 12
            while i < len(q) and q[i]:
                labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace"))
                i += 1 + q[i]
            qtype = int.from_bytes(q[i + 1:i + 3], "big") if i + 3 <= len(q) else 0
            log.write(json.dumps({"time": time.time(), "name": ".".join(labels), "type": qtype}) + "\n")
            log.flush()
            # The question back, QR=1, RD copied, RA=1, RCODE=3 (NXDOMAIN), no answers.
            flags = 0x8000 | (int.from_bytes(q[2:4], "big") & 0x0100) | 0x0080 | 3
            sock.sendto(q[:2] + flags.to_bytes(2, "big") + q[4:6] + b"\0\0\0\0\0\0" + q[12:i + 5], peer)


def main():
    if sys.argv[1:2] == ["--dns-stub"]:
        return dns_stub(sys.argv[2])
    p = argparse.ArgumentParser(fromfile_prefix_chars="@")  # @FILE: more arguments, one a line
    p.add_argument("harness", choices=HARNESSES)
    p.add_argument("holder")
    p.add_argument("image")
    p.add_argument("record")
    p.add_argument("certs", help="a directory with root.pem (the stand-in's CA) and bundle.pem (the image's bundle with it)")
    p.add_argument("--prompt", default="hello")
    p.add_argument("--name", default=f"bench-direct-{os.getpid()}")
    p.add_argument("--label", default="agenthold.bench-direct=1")
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE on top (e.g. RUST_LOG=debug)")
    p.add_argument("--no-key", action="store_true", help="no API key variable (a harness signed in otherwise)")
    p.add_argument("--argv", help="the harness's command instead of the usual one, as a JSON array "
                                  "(e.g. a launch of a changed adapter)")
    p.add_argument("--stderr", help="write the harness's stderr here")
    p.add_argument("--save-dir", action="append", default=[], metavar="SUBDIR:DEST",
                   help="copy /home/agent/SUBDIR out to DEST before the harness is stopped "
                        "(e.g. .codex:/tmp/x, for Codex's log ~/.codex/logs_2.sqlite)")
    p.add_argument("--pause", type=float, default=3, help="seconds between the first turn's end and the warm prompt")
    p.add_argument("--second-session", action="store_true",
                   help="the warm prompt goes to a session opened after the first turn (what the harness "
                        "keeps per process, not per session)")
    a = p.parse_args()
    argv, mode, key_var, env = HARNESSES[a.harness]
    if a.argv:
        argv = json.loads(a.argv)
    env = dict(env, HOME="/home/agent", NODE_OPTIONS="--max-old-space-size=1536", **TRUST)
    if not a.no_key:
        env[key_var] = f"sk-direct-{os.getpid()}"
    env.update(e.split("=", 1) for e in a.env)
    # The limits of an agent of the server's defaults (2 CPUs, 2048 MiB: docker.rs, security::limit).
    docker = ["docker", "run", "-i", "--rm", "--name", a.name, "--label", a.label,
              f"--network=container:{a.holder}", "-u", "agent", "-w", "/home/agent",
              "--cpus", "2", "--memory", "2048m", "--memory-swap", "2048m",
              "-v", f"{a.certs}/root.pem:{CA_FILE}:ro", "-v", f"{a.certs}/bundle.pem:{BUNDLE}:ro"]
    for k, v in env.items():
        docker += ["-e", f"{k}={v}"]
    out = {"harness": a.harness}
    h = Harness(docker + [a.image] + argv)
    deadline = h.t0 + a.timeout
    updates = []
    try:
        t, _ = h.call("initialize", INITIALIZE, deadline, updates)
        out["initialize_at_ms"] = h.ms(t)
        t, result = h.call("session/new", {"cwd": "/home/agent", "mcpServers": []}, deadline, updates)
        out["session_new_at_ms"] = h.ms(t)
        sid = result["sessionId"]
        if mode:
            t, _ = h.call("session/set_mode", {"sessionId": sid, "modeId": mode}, deadline, updates)
            out["set_mode_at_ms"] = h.ms(t)
        # cold: the process's first prompt; warm: a second prompt in the same session; new_session:
        # the first prompt of a session opened after both (what a pooled harness that ran a
        # warm-up turn does: OpenCode's).
        for turn in ("cold", "warm", "new_session"):
            if turn != "cold":
                time.sleep(a.pause)
                while not h.inbox.empty():  # late updates of the first turn (a title, say)
                    t, msg = h.inbox.get()
                    if msg and msg.get("method") == "session/update":
                        updates.append((t, "late"))
                if turn == "new_session" or a.second_session:
                    t, result = h.call("session/new", {"cwd": "/home/agent", "mcpServers": []}, deadline, updates)
                    sid = result["sessionId"]
                    if mode:
                        h.call("session/set_mode", {"sessionId": sid, "modeId": mode}, deadline, updates)
            before = len(updates)
            sent = time.time()
            t_end, result = h.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": a.prompt}]},
                                   deadline, updates)
            mine = updates[before:]
            reqs = records(a.record, sent)
            base = h.t0 if turn == "cold" else sent
            prefix = {"cold": "", "warm": "warm_", "new_session": "new_session_"}[turn]
            # The first update of this prompt: for the cold figure any update since `docker run`
            # (as agenthold's cold figure takes the session's first `update`), else the first after it.
            first = updates[0] if turn == "cold" and updates else (mine[0] if mine else None)
            out[f"{prefix}prompt_sent_at_ms"] = round((sent - base) * 1000, 1)
            out[f"{prefix}first_request_at_ms"] = round((reqs[0]["time"] - base) * 1000, 1) if reqs else None
            out[f"{prefix}first_update_after_prompt_at_ms"] = round((mine[0][0] - base) * 1000, 1) if mine else None
            out[f"{prefix}first_update_ms"] = round((first[0] - base) * 1000, 1) if first else None
            out[f"{prefix}first_update_kind"] = first[1] if first else None
            # The model's first text of this prompt (agent_message_chunk), from its sending.
            text = next((u for u in mine if u[1] == "agent_message_chunk"), None)
            out[f"{prefix}first_text_after_prompt_ms"] = round((text[0] - sent) * 1000, 1) if text else None
            out[f"{prefix}turn_end_at_ms"] = round((t_end - base) * 1000, 1)
            out[f"{prefix}stop_reason"] = result.get("stopReason")
            out[f"{prefix}requests"] = len(reqs)
            out[f"{prefix}request_paths"] = sorted({r["path"] for r in reqs})
    except (RuntimeError, queue.Empty, KeyError) as e:
        out["error"] = str(e) or "timeout"
    finally:
        if a.save_dir:
            time.sleep(12)  # Codex writes its log in batches
        for spec in a.save_dir:  # while the container still runs (it is --rm)
            sub, dest = spec.split(":", 1)
            # A consistent copy of each SQLite database first (a copied -wal may not match).
            snap = subprocess.run(["docker", "exec", a.name, "python3", "-c", SNAPSHOT_DBS, f"/home/agent/{sub}"],
                                  capture_output=True, check=False)
            if snap.returncode:
                out["save_error"] = snap.stderr.decode(errors="replace")[-500:]
            subprocess.run(["docker", "cp", f"{a.name}:/home/agent/{sub}", dest], capture_output=True, check=False)
        h.proc.stdin.close()
        subprocess.run(["docker", "rm", "-f", a.name], capture_output=True, check=False)
        h.proc.wait()
        if a.stderr:
            with open(a.stderr, "wb") as f:
                f.writelines(h.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
