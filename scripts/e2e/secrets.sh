#!/usr/bin/env bash
# End-to-end check of secrets and the egress proxy against the real running stack (`make e2e`
# runs it after sessions.sh; `make up` first):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/secrets.sh
#
# A secret attached to an agent reaches its real Docker sandbox as a placeholder only; a request
# from inside the sandbox to a local HTTPS stand-in for api.anthropic.com, reached through the
# real egress proxy, arrives with the real value in x-api-key; detaching the secret takes the
# host away within seconds; the value is in no event and no log. The stand-in is reached through
# the proxy's TEST-ONLY upstream override (docs/proxy.md), so this script restarts the dev server
# with AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES set, and restarts it without at the end.
#
# Needs the Docker driver, python3, openssl, jq, curl. Prints `ok - …` per check; a failure
# prints `not ok - …` and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-180}
# How long a detached secret may keep working (the proxy re-reads its file every second).
DETACH_DEADLINE=${E2E_DETACH_DEADLINE:-15}

log() { printf '[e2e-secrets] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN
for cmd in jq curl openssl python3; do command -v "$cmd" >/dev/null || die "$cmd is needed"; done
[[ ${AGENTHOLD_DRIVER:-docker} == docker ]] || { log "skipped: the local driver does not use the proxy"; exit 0; }
[[ -x $CTL ]] || (cd "$ROOT" && cargo build -q -p agenthold-cli)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-e2e-secrets.XXXXXX")
agent=""
stand_in_pid=""
restarted=0

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    [[ -n $agent ]] && { "$CTL" agents delete "$agent" >/dev/null 2>&1 || log "cleanup: deleting agent $agent failed"; }
    [[ -n $stand_in_pid ]] && kill "$stand_in_pid" 2>/dev/null
    if (( restarted )); then
        log "cleanup: restarting the server without the test-only upstream override"
        env -u AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES "$ROOT/scripts/dev/server.sh" start >/dev/null 2>&1 \
            || log "cleanup: the restart failed (see .dev/server.log)"
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

exec 3>&1
# shellcheck source=scripts/e2e/lib.sh
source "$ROOT/scripts/e2e/lib.sh"

# ---------------------------------------------------------------------------------------------
# The stand-in: an HTTPS server for api.anthropic.com on loopback, with a certificate from a root
# made here, recording the x-api-key of every request (one line each, "-" for none).
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj '/CN=e2e stand-in root' \
    -keyout "$WORK/root.key" -out "$WORK/root.pem" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj '/CN=api.anthropic.com' -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.anthropic.com\n' >"$WORK/leaf.ext"
openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/root.pem" -CAkey "$WORK/root.key" -CAcreateserial -days 1 \
    -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
cat >"$WORK/stand_in.py" <<'PY'
import http.server, ssl, sys
seen_path, ready_path = sys.argv[1], sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self):
        with open(seen_path, "a") as seen:
            seen.write((self.headers.get("x-api-key") or "-") + "\n")
        body = b"stand-in says hello"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *args): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[3], sys.argv[4])
server.socket = context.wrap_socket(server.socket, server_side=True)
open(ready_path, "w").write(str(server.server_address[1]))
server.serve_forever()
PY
: >"$WORK/seen"
python3 "$WORK/stand_in.py" "$WORK/seen" "$WORK/port" "$WORK/leaf.pem" "$WORK/leaf.key" 2>"$WORK/stand_in.err" &
stand_in_pid=$!
for _ in $(seq 50); do [[ -s $WORK/port ]] && break; sleep 0.1; done
[[ -s $WORK/port ]] || fail "the stand-in did not start" "$WORK/stand_in.err"
port=$(cat "$WORK/port")

overrides=$(jq -cn --arg addr "127.0.0.1:$port" --arg ca "$WORK/root.pem" '{"api.anthropic.com:443": {addr: $addr, ca_cert: $ca}}')
log "restarting the server with the test-only upstream override api.anthropic.com → 127.0.0.1:$port"
restarted=1
AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES=$overrides "$ROOT/scripts/dev/server.sh" start >/dev/null 2>"$WORK/restart.err" \
    || fail "restarting the server" "$WORK/restart.err"
grep -q '^AGENTHOLD_PROXY_ADDR=\|egress proxy' "$WORK/restart.err" || true

# ---------------------------------------------------------------------------------------------
# 1. A secret, attached to a new agent as ANTHROPIC_API_KEY.
workspace=$(api GET /api/v1/me | jq -r '.workspaces[] | select(.personal) | .workspace_id')
[[ -n $workspace ]] || fail "no personal workspace" "$WORK/answer.json"
value="sk-ant-e2e-$(openssl rand -hex 24)"
api POST "/api/v1/workspaces/$workspace/secrets" \
    "{\"name\":\"e2e-anthropic-$RANDOM\",\"preset\":\"anthropic\",\"value\":\"$value\"}" >"$WORK/secret.json"
[[ $(status) == 201 ]] || fail "creating the secret: HTTP $(status)" "$WORK/secret.json"
secret=$(jq -r .id "$WORK/secret.json")
grep -qF "$value" "$WORK/secret.json" && fail "the secret's answer holds its value" "$WORK/secret.json"
api POST /api/v1/agents "{\"name\":\"e2e-secrets-$(date +%s)-$RANDOM\",\"harness\":\"fake\"}" >"$WORK/agent.json"
agent=$(jq -r .id "$WORK/agent.json")
[[ -n $agent && $agent != null ]] || fail "creating the agent: HTTP $(status)" "$WORK/agent.json"
api PUT "/api/v1/agents/$agent/secrets/ANTHROPIC_API_KEY" "{\"secret_id\":\"$secret\"}" >/dev/null
[[ $(status) =~ ^20 ]] || fail "attaching the secret: HTTP $(status)" "$WORK/answer.json"
api GET "/api/v1/agents/$agent" >"$WORK/agent.json"
jq -e '.secrets | any(.env_name == "ANTHROPIC_API_KEY" and .preset == "anthropic")' "$WORK/agent.json" >/dev/null \
    || fail "the agent's view does not list the attached secret" "$WORK/agent.json"
ok "a secret stored in the workspace and attached to an agent as ANTHROPIC_API_KEY (the answers hold no value)"

"$CTL" --compact sessions create "$agent" >"$WORK/session.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
session=$(jq -r .id "$WORK/session.json")
last_seq=0
# prompt TEXT — one turn, waited for; its events in $WORK/turn.jsonl.
prompt() {
    "$CTL" --compact prompt "$session" "$1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    "$CTL" watch --compact "$session" --after "$last_seq" --until turn_end --timeout "$TURN_TIMEOUT" \
        >"$WORK/turn.jsonl" 2>"$WORK/watch.err" || fail "watching the turn" "$WORK/turn.jsonl" "$WORK/watch.err"
    last_seq=$(jq -s 'last.seq' "$WORK/turn.jsonl")
    jq -e -s --arg t "$(jq -r .turn_id "$WORK/prompt.json")" 'last | .type == "turn_end" and .payload.turn_id == $t' \
        "$WORK/turn.jsonl" >/dev/null || fail "the turn did not end as expected" "$WORK/turn.jsonl"
}
# The last fetch's tool_call_update: its rawOutput.status and text.
fetch_status() { jq -s -r '[.[] | select(.payload.sessionUpdate == "tool_call_update" and .payload.rawOutput.status != null)] | last | .payload.rawOutput.status' "$WORK/turn.jsonl"; }

# ---------------------------------------------------------------------------------------------
# 2. From inside the sandbox, through the proxy, to the stand-in: the real value arrives.
prompt 'fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY'
[[ $(fetch_status) == 200 ]] || fail "the fetch through the proxy answered $(fetch_status), not 200" "$WORK/turn.jsonl"
[[ $(tail -n 1 "$WORK/seen") == "$value" ]] || fail "the stand-in did not get the real value in x-api-key"
ok "a request from inside the sandbox reaches the stand-in through the proxy with the real value in x-api-key"

# 3. The sandbox holds a placeholder only.
prompt 'run env'
placeholder=$(jq -s -r '[.[] | select(.payload.rawOutput.exitCode != null)] | last | .payload.content[0].content.text' "$WORK/turn.jsonl" \
    | sed -n 's/^ANTHROPIC_API_KEY=//p')
[[ -n $placeholder && $placeholder != "$value" ]] || fail "ANTHROPIC_API_KEY in the sandbox is missing or the value" "$WORK/turn.jsonl"
grep -qF "$value" "$WORK/turn.jsonl" && fail "the value is in the sandbox's environment"
container=$(sandbox_container "$agent")
[[ -n $container ]] || fail "no container for agent $agent"
sandbox_dump "$container" "$WORK/dump"
# The search reads what the harness holds (the placeholder is there), so an absent value means absent.
grep -qaF "ANTHROPIC_API_KEY=$placeholder" "$WORK/dump" || fail "the sandbox dump does not show the harness's environment"
grep -qaF "$value" "$WORK/dump" && fail "the value is in the sandbox (a process's environment or command line, or a file)"
ok "the sandbox holds a placeholder only: no environment, command line or file in it holds the value"

# 4. Detached: the proxy refuses the host within seconds.
api DELETE "/api/v1/agents/$agent/secrets/ANTHROPIC_API_KEY" >/dev/null
[[ $(status) == 204 ]] || fail "detaching the secret: HTTP $(status)" "$WORK/answer.json"
detached=$SECONDS
while :; do
    prompt 'fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY'
    [[ $(fetch_status) == 403 ]] && break
    (( SECONDS - detached < DETACH_DEADLINE )) || fail "api.anthropic.com still answered $(fetch_status) ${DETACH_DEADLINE}s after detaching" "$WORK/turn.jsonl"
done
ok "detaching the secret takes api.anthropic.com away within $((SECONDS - detached))s (403 from the proxy)"

# 5. The value nowhere: not in any event, the server's log or the proxy's log.
"$CTL" --compact events "$session" --after 0 --limit 1000 >"$WORK/events.json" 2>/dev/null || fail "reading the events"
for file in "$WORK/events.json" "$ROOT/.dev/server.log" "$ROOT/.dev/proxy.log"; do
    [[ ! -f $file ]] || ! grep -qF "$value" "$file" || fail "the value is in $(basename "$file")"
done
ok "the value is in no event, nor in the server's or the proxy's log"
api DELETE "/api/v1/workspaces/$workspace/secrets/$secret" >/dev/null
