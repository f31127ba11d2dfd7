"""Runs inside a container of the base image (as `agent`, network off): starts each harness in
ACP mode, sends `initialize`, and prints one JSON object per harness with the milliseconds from
the process's start to the answer (median of ROUNDS), beside the same for `true` (the cost of
starting any process there). Used by scripts/bench/harnesses.sh."""

import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = int(os.environ.get("ROUNDS", "3"))
HARNESSES = {
    "claude_code": ["claude-agent-acp"],
    "codex": ["codex-acp"],
    "opencode": ["opencode", "acp"],
}
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n"


def once(argv, home):
    env = dict(os.environ, HOME=home, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", IS_SANDBOX="1",
               NO_BROWSER="1", OPENCODE_DISABLE_AUTOUPDATE="1")
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(INIT.encode())
    proc.stdin.flush()
    buf = b""
    deadline = started + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            buf += chunk
            for line in buf.split(b"\n")[:-1]:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("id") == 1 and "result" in msg:
                    return (time.monotonic() - started) * 1000
        return None
    finally:
        proc.kill()
        proc.wait()


def main():
    out = {}
    base = []
    for _ in range(ROUNDS):
        t = time.monotonic()
        subprocess.run(["true"], check=False)
        base.append((time.monotonic() - t) * 1000)
    out["process_start_ms"] = round(statistics.median(base), 1)
    for name, argv in HARNESSES.items():
        samples = []
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as home:
                ms = once(argv, home)
            if ms is not None:
                samples.append(ms)
        out[f"{name}_init_ms"] = round(statistics.median(samples), 1) if samples else None
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
