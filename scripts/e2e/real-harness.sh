# What the real-harness end-to-end scripts (scripts/e2e/harness.sh, scripts/e2e/gate.sh) share:
# a real harness in a real sandbox from agenthold/base, reaching a local stand-in for its provider
# (scripts/e2e/standins/) only through the real egress proxy. Source it from a script running
# `set -euo pipefail` with ROOT (the checkout) and HARNESS (claude-code | codex | opencode) set,
# and optionally:
#   E2E_NAME    the name in log lines and the scratch directory (default e2e-$HARNESS);
#   AGENT_EXTRA a JSON object merged into the new agent's body (e.g. {"posture": "approval"});
#   E2E_CREDENTIAL  `secret` (default: a provider key stored as a secret and attached) or `login`
#               (an account login on the caller's account instead — Claude Code a Claude
#               subscription token, Codex a ChatGPT login's auth.json — which the agent uses as its
#               creator's; nothing attached).
#   E2E_POOLED=1    the server also keeps a pooled harness of this one (AGENTHOLD_WARM_POOL_HARNESSES,
#               docs/design.md "Pooled harnesses"): the script waits until it answered `initialize`,
#               and the agent names its secret on create (`secrets`), as a pooled claim needs.
# It
#   - starts the stand-in (its record, with request bodies, in $WORK/record.jsonl; its port in
#     $port) and restarts the dev server with the TEST-ONLY upstream override mapping
#     api.anthropic.com and api.openai.com to it (and restarts it without the override at exit);
#   - stores a provider key ($value) as a secret and attaches it to a new agent ($agent) running
#     the harness (as $env_name), or connects an account login ($login; $value is the token the
#     provider gets: for a ChatGPT login the access token the stand-in issued at connect); makes a
#     session ($session);
#   - defines `log`, `die`, `prompt TEXT` (one turn, waited for: its events in $WORK/turn.jsonl,
#     $last_seq the log's last seq), `jq_true FILE FILTER`, plus lib.sh's `ok`, `fail`, `api`,
#     `status`, `sandbox_dump`, `sandbox_container`.
# At exit it deletes the agent and the secret (E2E_KEEP=1 keeps a failed run's agent and $WORK).

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
STANDINS=${E2E_STANDINS:-$ROOT/scripts/e2e/standins}
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-300}
IMAGE=${E2E_HARNESS_IMAGE:-agenthold/base:latest}
CREDENTIAL=${E2E_CREDENTIAL:-secret}
E2E_NAME=${E2E_NAME:-e2e-$HARNESS}
AGENT_EXTRA=${AGENT_EXTRA:-'{}'}

log() { printf '[%s] %s\n' "$E2E_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

case $HARNESS in
claude-code) provider=anthropic preset=anthropic env_name=ANTHROPIC_API_KEY model="" ;;
opencode) provider=anthropic preset=anthropic env_name=ANTHROPIC_API_KEY model="anthropic/claude-sonnet-4-5" ;;
codex) provider=openai preset=openai env_name=OPENAI_API_KEY model="" ;;
*) die "unknown harness $HARNESS (claude-code|codex|opencode)" ;;
esac
case $CREDENTIAL/$HARNESS in
secret/*) ;;
login/claude-code) login_kind=claude_subscription env_name=CLAUDE_CODE_OAUTH_TOKEN ;;
login/codex) login_kind=chatgpt_login env_name=AGENTHOLD_CODEX_AUTH_JSON ;;
*) die "E2E_CREDENTIAL=$CREDENTIAL: $HARNESS takes no account login (docs/logins.md)" ;;
esac

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN
for cmd in jq curl openssl python3 docker; do command -v "$cmd" >/dev/null || die "$cmd is needed"; done
[[ ${AGENTHOLD_DRIVER:-docker} == docker ]] || { log "skipped: real harnesses run in Docker sandboxes"; exit 0; }
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "$IMAGE does not exist: make base-image"
[[ -x $CTL ]] || (cd "$ROOT" && cargo build -q -p agenthold-cli)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-$E2E_NAME.XXXXXX")
agent=""
secret=""
login=""
workspace=""
standin_pid=""
restarted=0

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    # E2E_KEEP=1 keeps a failed run's agent (and its sandbox) and scratch directory.
    if [[ -n $agent ]] && { (( status == 0 )) || [[ -z ${E2E_KEEP:-} ]]; }; then
        "$CTL" agents delete "$agent" >/dev/null 2>&1 || log "cleanup: deleting agent $agent failed"
    fi
    if [[ -n $secret ]]; then
        curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $AGENTHOLD_TOKEN" \
            "$AGENTHOLD_URL/api/v1/workspaces/$workspace/secrets/$secret" || true
    fi
    if [[ -n $login ]]; then
        curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $AGENTHOLD_TOKEN" \
            "$AGENTHOLD_URL/api/v1/me/providers/$login" || true
    fi
    [[ -n $standin_pid ]] && kill "$standin_pid" 2>/dev/null
    if (( restarted )); then
        log "cleanup: restarting the server without the test-only upstream override"
        env -u AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES "$ROOT/scripts/dev/server.sh" start >/dev/null 2>&1 \
            || log "cleanup: the restart failed (see .dev/server.log)"
    fi
    if (( status != 0 )) && [[ -n ${E2E_KEEP:-} ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

exec 3>&1
# shellcheck source=scripts/e2e/lib.sh
source "$ROOT/scripts/e2e/lib.sh"

# ---------------------------------------------------------------------------------------------
# The stand-in, and the server restarted with both provider hosts mapped to it.
"$STANDINS/make-cert.sh" "$WORK/certs" api.anthropic.com api.openai.com auth.openai.com chatgpt.com >/dev/null
python3 "$STANDINS/$provider.py" --cert "$WORK/certs/leaf.pem" --key "$WORK/certs/leaf.key" \
    --ready "$WORK/port" --record "$WORK/record.jsonl" --record-body 2>"$WORK/standin.log" &
standin_pid=$!
for _ in $(seq 100); do [[ -s $WORK/port ]] && break; sleep 0.1; done
[[ -s $WORK/port ]] || fail "the $provider stand-in did not start" "$WORK/standin.log"
port=$(cat "$WORK/port")
overrides=$(jq -cn --arg addr "127.0.0.1:$port" --arg ca "$WORK/certs/root.pem" \
    '{"api.anthropic.com:443": {addr: $addr, ca_cert: $ca}, "api.openai.com:443": {addr: $addr, ca_cert: $ca},
      "auth.openai.com:443": {addr: $addr, ca_cert: $ca}, "chatgpt.com:443": {addr: $addr, ca_cert: $ca}}')
log "restarting the server with the test-only upstream override → the $provider stand-in on 127.0.0.1:$port"
restarted=1
pooled_profile=""
[[ -z ${E2E_POOLED:-} ]] || pooled_profile=$HARNESS${model:+@$model}
AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES=$overrides AGENTHOLD_WARM_POOL_HARNESSES=$pooled_profile \
    "$ROOT/scripts/dev/server.sh" start >/dev/null 2>"$WORK/restart.err" \
    || fail "restarting the server" "$WORK/restart.err"
SERVER_LOG=$ROOT/.dev/server.log
if [[ -n $pooled_profile ]]; then
    log "waiting for the pooled $pooled_profile harness"
    for _ in $(seq 600); do grep -q 'a pooled harness answered `initialize`' "$SERVER_LOG" && break; sleep 0.2; done
    grep -q 'a pooled harness answered `initialize`' "$SERVER_LOG" || fail "no pooled $pooled_profile harness within 120 s" "$SERVER_LOG"
fi

# ---------------------------------------------------------------------------------------------
# The key as a secret attached to a new agent running the real harness, or an account login the
# agent uses as its creator's; a session.
workspace=$(api GET /api/v1/me | jq -r '.workspaces[] | select(.personal) | .workspace_id')
if [[ $CREDENTIAL == secret ]]; then
    value="sk-e2e-$HARNESS-$(openssl rand -hex 20)"
    api POST "/api/v1/workspaces/$workspace/secrets" \
        "$(jq -cn --arg n "$E2E_NAME-$RANDOM" --arg p "$preset" --arg v "$value" '{name: $n, preset: $p, value: $v}')" \
        >"$WORK/secret.json"
    [[ $(status) == 201 ]] || fail "creating the secret: HTTP $(status)" "$WORK/secret.json"
    secret=$(jq -r .id "$WORK/secret.json")
else
    if [[ $login_kind == claude_subscription ]]; then
        value="sk-ant-oat01-e2e-$(openssl rand -hex 24)"
        connect=$value
    else
        # A ChatGPT login as `codex login` writes it; the server refreshes it once at connect, so
        # the token the provider gets is the one the stand-in issued then.
        now=$(date +%s)
        b64() { printf '%s' "$1" | base64 -w0 | tr '+/' '-_' | tr -d '='; }
        jwt() { printf '%s.%s.sig' "$(b64 '{"alg":"RS256"}')" "$(b64 "$1")"; }
        connect=$(jq -cn --arg id "$(jwt "{\"email\":\"e2e@example.com\",\"exp\":$((now + 3600))}")" \
            --arg at "$(jwt "{\"exp\":$((now + 3600))}")" \
            '{auth_mode: "chatgpt", OPENAI_API_KEY: null, tokens: {id_token: $id, access_token: $at, refresh_token: "rt-e2e-0", account_id: "acct-e2e"}}')
    fi
    api POST /api/v1/me/providers "$(jq -cn --arg k "$login_kind" --arg v "$connect" '{kind: $k, value: $v}')" >"$WORK/login.json"
    [[ $(status) == 201 ]] || fail "connecting the $login_kind login: HTTP $(status)" "$WORK/login.json" "$WORK/standin.log"
    login=$(jq -r .id "$WORK/login.json")
    if [[ $login_kind == chatgpt_login ]]; then
        value=$(jq -r -s '[.[] | select(.issued_access_token != null)] | last | .issued_access_token // empty' "$WORK/record.jsonl")
        [[ -n $value ]] || fail "connecting the ChatGPT login made no refresh at the stand-in" "$WORK/record.jsonl"
    fi
    sleep 3 # the proxy follows a login just connected within about two seconds (docs/logins.md)
fi
body=$(jq -cn --arg n "$E2E_NAME-$(date +%s)-$RANDOM" --arg h "$HARNESS" --arg i "$IMAGE" --arg m "$model" \
    --argjson extra "$AGENT_EXTRA" \
    '{name: $n, harness: $h, image: $i} + (if $m == "" then {} else {model: $m} end) + $extra')
[[ -z $pooled_profile ]] || body=$(jq -c --arg e "$env_name" --arg s "$secret" '. + {secrets: {($e): $s}}' <<<"$body")
api POST /api/v1/agents "$body" >"$WORK/agent.json"
agent=$(jq -r .id "$WORK/agent.json")
[[ -n $agent && $agent != null ]] || fail "creating the agent: HTTP $(status)" "$WORK/agent.json"
if [[ $CREDENTIAL == secret && -z $pooled_profile ]]; then
    api PUT "/api/v1/agents/$agent/secrets/$env_name" "{\"secret_id\":\"$secret\"}" >/dev/null
    [[ $(status) =~ ^20 ]] || fail "attaching the secret: HTTP $(status)" "$WORK/answer.json"
fi
extra=$(jq -c 'if . == {} then "" else " \(.)" end' -r <<<"$AGENT_EXTRA")
if [[ $CREDENTIAL == secret ]]; then
    ok "$HARNESS agent on $IMAGE with a $preset secret attached as $env_name$extra"
else
    ok "$HARNESS agent on $IMAGE using its creator's $login_kind login$extra"
fi

"$CTL" --compact sessions create "$agent" >"$WORK/session.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
session=$(jq -r .id "$WORK/session.json")
last_seq=0
# prompt TEXT — one turn, waited for; its events in $WORK/turn.jsonl.
prompt() {
    "$CTL" --compact prompt "$session" "$1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    "$CTL" watch --compact "$session" --after "$last_seq" --until turn_end --timeout "$TURN_TIMEOUT" \
        >"$WORK/turn.jsonl" 2>"$WORK/watch.err" || fail "watching the turn" "$WORK/turn.jsonl" "$WORK/watch.err" "$WORK/standin.log"
    last_seq=$(jq -s 'last.seq' "$WORK/turn.jsonl")
}
jq_true() { [[ "$(jq -s "$2" "$1")" == true ]]; }
# The turn every real-harness script runs first: "please write hello.txt hi" ends with end_turn
# and the file is in the sandbox. Sets `container` (the agent's sandbox) for the checks after.
turn_writes_hello() {
    prompt "please write hello.txt hi"
    jq_true "$WORK/turn.jsonl" 'last | .type == "turn_end" and .payload.stop_reason == "end_turn"' \
        || fail "the turn did not end with end_turn" "$WORK/turn.jsonl" "$WORK/record.jsonl" "$WORK/standin.log"
    container=$(sandbox_container "$agent")
    [[ -n $container ]] || fail "no container for agent $agent"
    local written
    written=$(docker exec -u agent "$container" cat /home/agent/hello.txt 2>/dev/null || true)
    [[ $written == hi ]] || fail "hello.txt in the sandbox holds '$written', not 'hi'" "$WORK/turn.jsonl" "$WORK/record.jsonl"
}
