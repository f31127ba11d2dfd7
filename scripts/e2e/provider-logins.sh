#!/usr/bin/env bash
# End-to-end check of provider logins on the account against the real running stack (`make test`
# runs it after secrets.sh; `make up` first):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/provider-logins.sh
#
# (seed 003's second check) An account login reaches a real sandbox as a placeholder only — no
# environment, command line or file in the sandbox holds the value; a request from inside the
# sandbox, through the real egress proxy, reaches a local HTTPS stand-in for the provider with
# the real value; a ChatGPT login's refresh asked by two sandboxes at once is answered by the
# proxy itself (the provider sees only the server's one refresh, at connect); disconnecting takes
# the login away. Like secrets.sh, the stand-in is reached through the proxy's TEST-ONLY upstream
# override: the dev server is restarted with it, and without it at the end.
#
# Needs the Docker driver, python3, openssl, jq, curl. Prints `ok - …` per check; a failure
# prints `not ok - …` and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-180}
DETACH_DEADLINE=${E2E_DETACH_DEADLINE:-15}

log() { printf '[e2e-logins] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN
for cmd in jq curl openssl python3; do command -v "$cmd" >/dev/null || die "$cmd is needed"; done
[[ ${AGENTHOLD_DRIVER:-docker} == docker ]] || { log "skipped: the local driver does not use the proxy"; exit 0; }
[[ -x $CTL ]] || (cd "$ROOT" && cargo build -q -p agenthold-cli)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-e2e-logins.XXXXXX")
agents=()
logins=()
stand_in_pid=""
restarted=0

cleanup() {
    local status=$? id
    trap - EXIT INT TERM
    for id in "${agents[@]}"; do "$CTL" agents delete "$id" >/dev/null 2>&1 || log "cleanup: deleting agent $id failed"; done
    for id in "${logins[@]}"; do api DELETE "/api/v1/me/providers/$id" >/dev/null 2>&1 || true; done
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
# The stand-in: one HTTPS server on loopback for api.anthropic.com, auth.openai.com and
# chatgpt.com (a certificate from a root made here). It records every request as one JSON line
# (method, path, x-api-key, authorization) and answers 200; POST /oauth/token issues tokens.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj '/CN=e2e stand-in root' \
    -keyout "$WORK/root.key" -out "$WORK/root.pem" -addext basicConstraints=critical,CA:TRUE 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj '/CN=api.anthropic.com' -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" 2>/dev/null
printf 'subjectAltName=DNS:api.anthropic.com,DNS:auth.openai.com,DNS:chatgpt.com\n' >"$WORK/leaf.ext"
openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/root.pem" -CAkey "$WORK/root.key" -CAcreateserial -days 1 \
    -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
cat >"$WORK/stand_in.py" <<'PY'
import base64, http.server, json, ssl, sys, threading, time
seen_path, ready_path = sys.argv[1], sys.argv[2]
lock, issued = threading.Lock(), [0]
def jwt(claims):
    b64 = lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).rstrip(b"=").decode()
    return b64({"alg": "RS256"}) + "." + b64(claims) + ".sig"
class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        with lock, open(seen_path, "a") as seen:
            seen.write(json.dumps({"method": self.command, "path": self.path, "x-api-key": self.headers.get("x-api-key"),
                                   "authorization": self.headers.get("authorization"), "body": body.decode(errors="replace")}) + "\n")
        if self.path == "/oauth/token":
            with lock:
                issued[0] += 1
                n = issued[0]
            out = json.dumps({"access_token": jwt({"exp": int(time.time()) + 7200, "n": n}), "refresh_token": f"rt-{n}"}).encode()
        else:
            out = b'{"data": []}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
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
overrides=$(jq -cn --arg addr "127.0.0.1:$port" --arg ca "$WORK/root.pem" \
    '{"api.anthropic.com:443": {addr: $addr, ca_cert: $ca}, "auth.openai.com:443": {addr: $addr, ca_cert: $ca},
      "chatgpt.com:443": {addr: $addr, ca_cert: $ca}}')
log "restarting the server with the test-only upstream override for the providers → 127.0.0.1:$port"
restarted=1
AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES=$overrides "$ROOT/scripts/dev/server.sh" start >/dev/null 2>"$WORK/restart.err" \
    || fail "restarting the server" "$WORK/restart.err"

# seen_count JQ-FILTER — how many recorded requests match.
seen_count() { jq -s "[.[] | select($1)] | length" "$WORK/seen"; }

# ---------------------------------------------------------------------------------------------
# 1. Connect an Anthropic API key on the account: checked with the provider (the stand-in).
value="sk-ant-e2e-login-$(openssl rand -hex 24)"
api POST /api/v1/me/providers "{\"kind\":\"anthropic_api_key\",\"value\":\"$value\"}" >"$WORK/login.json"
[[ $(status) == 201 ]] || fail "connecting the login: HTTP $(status)" "$WORK/login.json"
logins+=("$(jq -r .id "$WORK/login.json")")
grep -qF "$value" "$WORK/login.json" && fail "the login's answer holds its value" "$WORK/login.json"
[[ $(seen_count ".path == \"/v1/models\" and .\"x-api-key\" == \"$value\"") -ge 1 ]] \
    || fail "the login was not checked with the provider" "$WORK/seen"
ok "an Anthropic API key connected on the account, checked with the provider, never answered back"

# 2. An agent of the caller's uses it: a placeholder in the sandbox, the value through the proxy.
new_agent() {
    api POST /api/v1/agents "{\"name\":\"e2e-logins-$(date +%s)-$RANDOM\",\"harness\":\"fake\"}" >"$WORK/agent.json"
    local id
    id=$(jq -r .id "$WORK/agent.json")
    [[ -n $id && $id != null ]] || fail "creating an agent: HTTP $(status)" "$WORK/agent.json"
    agents+=("$id")
    printf '%s' "$id"
}
agent=$(new_agent)
"$CTL" --compact sessions create "$agent" >"$WORK/session.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
session=$(jq -r .id "$WORK/session.json")
last_seq=0
prompt() {
    "$CTL" --compact prompt "$session" "$1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    "$CTL" watch --compact "$session" --after "$last_seq" --until turn_end --timeout "$TURN_TIMEOUT" \
        >"$WORK/turn.jsonl" 2>"$WORK/watch.err" || fail "watching the turn" "$WORK/turn.jsonl" "$WORK/watch.err"
    last_seq=$(jq -s 'last.seq' "$WORK/turn.jsonl")
}
fetch_status() { jq -s -r '[.[] | select(.payload.sessionUpdate == "tool_call_update" and .payload.rawOutput.status != null)] | last | .payload.rawOutput.status' "$WORK/turn.jsonl"; }
prompt 'run env'
placeholder=$(jq -s -r '[.[] | select(.payload.rawOutput.exitCode != null)] | last | .payload.content[0].content.text' "$WORK/turn.jsonl" \
    | sed -n 's/^ANTHROPIC_API_KEY=//p')
[[ $placeholder == sk-ant-api03-agenthold-login-* ]] || fail "ANTHROPIC_API_KEY in the sandbox is not a login placeholder" "$WORK/turn.jsonl"
container=$(sandbox_container "$agent")
[[ -n $container ]] || fail "no container for agent $agent"
sandbox_dump "$container" "$WORK/dump"
grep -qaF "ANTHROPIC_API_KEY=$placeholder" "$WORK/dump" || fail "the sandbox dump does not show the harness's environment"
grep -qaF "$value" "$WORK/dump" && fail "the value is in the sandbox (a process's environment or command line, or a file)"
ok "the agent's sandbox holds a placeholder only: no environment, command line or file in it holds the value"
prompt 'fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY'
[[ $(fetch_status) == 200 ]] || fail "the fetch through the proxy answered $(fetch_status)" "$WORK/turn.jsonl"
[[ $(seen_count ".path == \"/v1/messages\" and .\"x-api-key\" == \"$value\"") -ge 1 ]] \
    || fail "the stand-in did not get the real value in x-api-key" "$WORK/seen"
ok "a request from inside the sandbox reaches the provider through the proxy with the real value"

# 3. A ChatGPT login: one refresh by the server at connect; two sandboxes asking to refresh at
#    once are answered by the proxy, and the provider sees no more refreshes.
now=$(date +%s)
b64() { printf '%s' "$1" | base64 -w0 | tr '+/' '-_' | tr -d '='; }
jwt() { printf '%s.%s.sig' "$(b64 '{"alg":"RS256"}')" "$(b64 "$1")"; }
auth_json=$(jq -cn --arg id "$(jwt "{\"email\":\"e2e@example.com\",\"exp\":$((now + 600))}")" \
    --arg at "$(jwt "{\"exp\":$((now + 600))}")" \
    '{auth_mode: "chatgpt", OPENAI_API_KEY: null, tokens: {id_token: $id, access_token: $at, refresh_token: "rt-e2e-0", account_id: "acct-e2e"}}')
api POST /api/v1/me/providers "$(jq -cn --arg v "$auth_json" '{kind: "chatgpt_login", value: $v}')" >"$WORK/chatgpt.json"
[[ $(status) == 201 ]] || fail "connecting the ChatGPT login: HTTP $(status)" "$WORK/chatgpt.json"
logins+=("$(jq -r .id "$WORK/chatgpt.json")")
refreshes=$(seen_count '.path == "/oauth/token"')
[[ $refreshes == 1 ]] || fail "connecting made $refreshes refreshes, not 1" "$WORK/seen"
second=$(new_agent)
sessions=()
for id in "$agent" "$second"; do
    "$CTL" --compact sessions create "$id" >"$WORK/s.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
    sessions+=("$(jq -r .id "$WORK/s.json")")
done
sleep 3 # the proxy follows the new login within seconds
for s in "${sessions[@]}"; do
    "$CTL" --compact prompt "$s" 'fetch https://auth.openai.com/oauth/token' >/dev/null 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
done
for s in "${sessions[@]}"; do
    "$CTL" watch --compact "$s" --after 0 --until turn_end --timeout "$TURN_TIMEOUT" >"$WORK/turn.jsonl" 2>"$WORK/watch.err" \
        || fail "watching a refresh turn" "$WORK/turn.jsonl" "$WORK/watch.err"
    [[ $(fetch_status) == 200 ]] || fail "a sandbox's refresh was answered $(fetch_status)" "$WORK/turn.jsonl"
    jq -s -e '[.[] | select(.payload.sessionUpdate == "tool_call_update")] | last | .payload.content[0].content.text | contains("agenthold-login-")' \
        "$WORK/turn.jsonl" >/dev/null || fail "the refresh answer does not hold the placeholders" "$WORK/turn.jsonl"
done
[[ $(seen_count '.path == "/oauth/token"') == 1 ]] || fail "a sandbox's refresh reached the provider" "$WORK/seen"
ok "a ChatGPT login refreshed once by the server; two sandboxes refreshing at once got the placeholders from the proxy, the provider saw no more"

# 4. Disconnected: the proxy refuses the host within seconds.
api DELETE "/api/v1/me/providers/${logins[0]}" >/dev/null
[[ $(status) == 204 ]] || fail "disconnecting: HTTP $(status)" "$WORK/answer.json"
detached=$SECONDS
while :; do
    prompt 'fetch https://api.anthropic.com/v1/messages x-api-key:$ANTHROPIC_API_KEY'
    [[ $(fetch_status) == 403 ]] && break
    (( SECONDS - detached < DETACH_DEADLINE )) || fail "api.anthropic.com still answered $(fetch_status) ${DETACH_DEADLINE}s after disconnecting" "$WORK/turn.jsonl"
done
ok "disconnecting the login takes api.anthropic.com away within $((SECONDS - detached))s (403 from the proxy)"

for file in "$ROOT/.dev/server.log" "$ROOT/.dev/proxy.log"; do
    [[ ! -f $file ]] || ! grep -qF "$value" "$file" || fail "the value is in $(basename "$file")"
done
ok "the value is in neither the server's nor the proxy's log"
