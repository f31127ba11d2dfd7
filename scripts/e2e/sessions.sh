#!/usr/bin/env bash
# End-to-end check of sessions against the real running stack (`make e2e`: make up, then this).
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/sessions.sh
#
# Needs AGENTHOLD_URL and AGENTHOLD_TOKEN, a server with the `fake` harness, and jq. Drives the
# API with agentholdctl ($CARGO_TARGET_DIR/debug/agentholdctl, built if missing). Each check
# prints one `ok - …` line; a failure prints `not ok - …` with the events involved and the end
# of .dev/server.log, and exits 1. The agent it creates is deleted whatever happens.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
# Seconds to wait for a turn; the first one also creates and starts the sandbox.
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-180}

log() { printf '[e2e] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN

if ! command -v jq >/dev/null; then
    if (( EUID == 0 )) && command -v apt-get >/dev/null; then
        log "installing jq"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >&2 \
            || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >&2; }
    else
        die "jq is needed: install it (apt-get install jq)"
    fi
fi
if [[ ! -x $CTL ]]; then
    log "building agentholdctl"
    (cd "$ROOT" && cargo build -q -p agenthold-cli)
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-e2e.XXXXXX")
agent=""

cleanup() {
    local status=$?
    if [[ -n $agent ]]; then
        if "$CTL" agents delete "$agent" >/dev/null 2>"$WORK/cleanup.err"; then
            log "cleanup: deleted agent $agent"
        else
            log "cleanup: deleting agent $agent failed: $(cat "$WORK/cleanup.err")"
        fi
    fi
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# fd 3: the script's stdout, also inside functions whose stdout goes to a file.
exec 3>&1
# shellcheck source=scripts/e2e/lib.sh
source "$ROOT/scripts/e2e/lib.sh"

# ctl ARGS… — agentholdctl with compact JSON output; a failure (exit code, stderr) fails the check.
ctl() {
    local rc=0
    "$CTL" --compact "$@" 2>"$WORK/ctl.err" || rc=$?
    if (( rc != 0 )); then
        fail "agentholdctl $* exited $rc: $(cat "$WORK/ctl.err")"
    fi
}

# watch_to FILE ARGS… — `agentholdctl watch ARGS…` into FILE; a failure fails the check.
watch_to() {
    local file=$1 rc=0
    shift
    "$CTL" watch --json "$@" >"$file" 2>"$WORK/watch.err" || rc=$?
    if (( rc != 0 )); then
        fail "agentholdctl watch $* exited $rc: $(cat "$WORK/watch.err")" "$file"
    fi
}

# With a Docker engine we can ask, sleep and delete are also checked on the containers (the
# docker driver labels them agenthold.agent=<id>) and the home volume (named …-home-<id>).
HAVE_DOCKER=0
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then HAVE_DOCKER=1; fi

# The username the current AGENTHOLD_TOKEN acts as.
ctl_me_username() {
    curl -fsS -H "Authorization: Bearer $AGENTHOLD_TOKEN" "$AGENTHOLD_URL/api/v1/me" | jq -r .username
}

# jq_true FILE FILTER — FILTER, run over all lines of FILE as one array (-s), yields true.
jq_true() { [[ "$(jq -s "$2" "$1")" == true ]]; }

# ---------------------------------------------------------------------------------------------
# 0. As a logged-in user: the admin (AGENTHOLD_TOKEN) creates a user; the user logs in (browser
#    session cookie + CSRF token) and makes an API token; everything below runs with that token.
user="e2e-$(date +%s)-$RANDOM"
password="e2e-password-$RANDOM-$RANDOM"
curl -fsS -H "Authorization: Bearer $AGENTHOLD_TOKEN" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$user\",\"password\":\"$password\"}" "$AGENTHOLD_URL/api/v1/users" >"$WORK/user.json" \
    || die "creating a user failed"
curl -fsS -c "$WORK/cookies" -H 'Content-Type: application/json' \
    -d "{\"username\":\"$user\",\"password\":\"$password\"}" "$AGENTHOLD_URL/api/v1/auth/login" >"$WORK/login.json" \
    || die "logging in failed"
csrf=$(jq -r .csrf_token "$WORK/login.json")
status=$(curl -sS -o /dev/null -w '%{http_code}' -b "$WORK/cookies" -H 'Content-Type: application/json' \
    -d '{"name":"e2e"}' "$AGENTHOLD_URL/api/v1/tokens")
[[ $status == 403 ]] || die "a cookie without the CSRF token made a token (HTTP $status)"
curl -fsS -b "$WORK/cookies" -H "X-CSRF-Token: $csrf" -H 'Content-Type: application/json' \
    -d '{"name":"e2e"}' "$AGENTHOLD_URL/api/v1/tokens" >"$WORK/token.json" || die "making a token failed"
AGENTHOLD_TOKEN=$(jq -r .token "$WORK/token.json")
export AGENTHOLD_TOKEN
[[ $(ctl_me_username) == "$user" ]] || die "the new token does not act as $user"
ok "logged in as a new user, made an API token with the session's CSRF token"

# ---------------------------------------------------------------------------------------------
# 1. A turn that writes a file and runs a command.
name="e2e-sessions-$(date +%s)-$$-$RANDOM"
ctl agents create --name "$name" --harness fake >"$WORK/agent.json"
agent=$(jq -r .id "$WORK/agent.json")
[[ -n $agent && $agent != null ]] || fail "agents create returned no id" "$WORK/agent.json"
ctl sessions create "$agent" >"$WORK/session.json"
session=$(jq -r .id "$WORK/session.json")
[[ -n $session && $session != null ]] || fail "sessions create returned no id" "$WORK/session.json"
log "agent $agent ($name), session $session"

ctl prompt "$session" $'write hello.txt hi\nrun cat hello.txt\ntext done' >"$WORK/prompt1.json"
turn1=$(jq -r .turn_id "$WORK/prompt1.json")
watch_to "$WORK/turn1.jsonl" "$session" --after 0 --until turn_end --timeout "$TURN_TIMEOUT"
jq_true "$WORK/turn1.jsonl" 'any(.[]; .type == "update" and .payload.sessionUpdate == "tool_call_update"
        and any(.payload.content[]?; .type == "diff" and (.path | endswith("/hello.txt")) and .newText == "hi"))' \
    || fail "turn 1: no tool_call_update with a diff of hello.txt (newText \"hi\")" "$WORK/turn1.jsonl"
jq_true "$WORK/turn1.jsonl" 'any(.[]; .type == "update" and .payload.sessionUpdate == "tool_call_update"
        and .payload.status == "completed"
        and any(.payload.content[]?; .type == "content" and .content.text == "hi"))' \
    || fail "turn 1: no completed tool_call_update with the output \"hi\" of \`cat hello.txt\`" "$WORK/turn1.jsonl"
jq_true "$WORK/turn1.jsonl" 'any(.[]; .type == "update" and .payload.sessionUpdate == "agent_message_chunk"
        and .payload.content.text == "done")' \
    || fail "turn 1: no agent_message_chunk \"done\"" "$WORK/turn1.jsonl"
jq_true "$WORK/turn1.jsonl" "last | .type == \"turn_end\" and .payload.stop_reason == \"end_turn\"
        and .payload.turn_id == \"$turn1\"" \
    || fail "turn 1: the turn did not end with turn_end, stop_reason end_turn, turn_id $turn1" "$WORK/turn1.jsonl"
ok "a turn writes hello.txt (diff event), runs cat (output \"hi\") and ends with end_turn"

# ---------------------------------------------------------------------------------------------
# 2. Reload mid-turn: follow the stream, drop it after 40 events, resume from the last seq.
ctl prompt "$session" 'flood 300 100' >"$WORK/prompt2.json"
turn2=$(jq -r .turn_id "$WORK/prompt2.json")
watch_to "$WORK/part1.jsonl" "$session" --after 0 --count 40 --timeout "$TURN_TIMEOUT"
(( $(wc -l <"$WORK/part1.jsonl") == 40 )) || fail "watch --count 40 printed $(wc -l <"$WORK/part1.jsonl") events" "$WORK/part1.jsonl"
jq_true "$WORK/part1.jsonl" "all(.[]; .type != \"turn_end\" or .payload.turn_id != \"$turn2\")" \
    || fail "the flood turn ended within the first 40 events: the stream was not cut mid-turn" "$WORK/part1.jsonl"
last=$(jq -s 'last.seq' "$WORK/part1.jsonl")
watch_to "$WORK/part2.jsonl" "$session" --after "$last" --until turn_end --timeout "$TURN_TIMEOUT"
cat "$WORK/part1.jsonl" "$WORK/part2.jsonl" >"$WORK/watched.jsonl"
jq_true "$WORK/watched.jsonl" "last | .type == \"turn_end\" and .payload.turn_id == \"$turn2\" and .payload.stop_reason == \"end_turn\"" \
    || fail "the resumed stream did not end with the flood turn's turn_end (end_turn)" "$WORK/watched.jsonl"
n=$(jq -s 'length' "$WORK/watched.jsonl")
jq_true "$WORK/watched.jsonl" '[.[].seq] == [range(1; length + 1)]' \
    || fail "the watched seqs are not exactly 1..$n: $(jq -s -c '[.[].seq]' "$WORK/watched.jsonl")" "$WORK/watched.jsonl"
jq_true "$WORK/watched.jsonl" '[.[] | select(.type == "update" and .payload.sessionUpdate == "agent_message_chunk")
        | .payload.content.text | select(startswith("flood "))] == [range(1; 301) | "flood \(.)"]' \
    || fail "the watched events do not carry flood 1..300 once each, in order" "$WORK/watched.jsonl"

# Every stored event, paged with the largest page.
after=0
: >"$WORK/all.jsonl"
while :; do
    ctl events "$session" --after "$after" --limit 1000 >"$WORK/page.json"
    count=$(jq '.events | length' "$WORK/page.json")
    (( count > 0 )) || break
    jq -c '.events[]' "$WORK/page.json" >>"$WORK/all.jsonl"
    after=$(jq '.next_after' "$WORK/page.json")
done
total=$(wc -l <"$WORK/all.jsonl")
(( total == n )) || fail "watch saw $n events but the log holds $total" "$WORK/all.jsonl"
jq_true "$WORK/all.jsonl" '[.[].seq] == [range(1; length + 1)]' || fail "the stored seqs are not 1..$total" "$WORK/all.jsonl"
# The stream and the REST log must agree event for event (key order aside: JSON objects are unordered).
diff <(jq -S -c '{seq, type, payload}' "$WORK/watched.jsonl") <(jq -S -c '{seq, type, payload}' "$WORK/all.jsonl") >"$WORK/diff.txt" \
    || fail "the streamed events differ from the stored ones" "$WORK/diff.txt"
ctl sessions show "$session" >"$WORK/session.json"
[[ $(jq .last_seq "$WORK/session.json") == "$total" ]] || fail "session last_seq is not $total" "$WORK/session.json"
ok "reload mid-turn: 40 events, then resume after seq $last: seqs 1..$n, no gap, no duplicate, same as the $total stored events"

# ---------------------------------------------------------------------------------------------
# 3. Terminal, sleep and wake: the home volume survives.
# prompt_and_watch FILE TEXT — prompts, follows the stream from the session's last seq through
# the turn's turn_end.
prompt_and_watch() {
    local file=$1 text=$2 from
    ctl sessions show "$session" >"$WORK/session.json"
    from=$(jq .last_seq "$WORK/session.json")
    ctl prompt "$session" "$text" >"$WORK/prompt.json"
    watch_to "$file" "$session" --after "$from" --until turn_end --timeout "$TURN_TIMEOUT"
}
# home_file_read FILE — the turn in FILE ran `cat` and printed "persisted", and ended normally.
home_file_read() {
    jq_true "$1" 'any(.[]; .type == "update" and .payload.sessionUpdate == "tool_call_update"
            and .payload.status == "completed"
            and any(.payload.content[]?; .type == "content" and (.content.text | contains("persisted"))))
            and (last | .type == "turn_end" and .payload.stop_reason == "end_turn")'
}

# sleep_agent — puts the agent to sleep and checks it is (its container stopped).
sleep_agent() {
    local running
    ctl agents sleep "$agent" >"$WORK/agent.json"
    [[ $(jq -r .desired_state "$WORK/agent.json") == asleep ]] || fail "agents sleep: desired_state is not asleep" "$WORK/agent.json"
    if (( HAVE_DOCKER )); then
        running=$(sandbox_container "$agent")
        [[ -z $running ]] || fail "agents sleep: the agent's container $running still runs"
    fi
}

rc=0
"$CTL" exec --timeout 60 "$agent" 'echo persisted > ~/from-terminal.txt' >"$WORK/exec.out" 2>"$WORK/exec.err" || rc=$?
(( rc == 0 )) || fail "exec exited $rc: $(cat "$WORK/exec.err")" "$WORK/exec.out"
sleep_agent
ctl agents wake "$agent" >"$WORK/agent.json"
[[ $(jq -r .desired_state "$WORK/agent.json") == awake ]] || fail "agents wake: desired_state is not awake" "$WORK/agent.json"
prompt_and_watch "$WORK/turn3.jsonl" 'run cat /home/agent/from-terminal.txt'
home_file_read "$WORK/turn3.jsonl" \
    || fail "after sleep + wake, \`cat /home/agent/from-terminal.txt\` did not print \"persisted\"" "$WORK/turn3.jsonl" "$WORK/exec.out"
ok "a file written through the terminal survives sleep + wake (read back by a prompt)"

sleep_agent
prompt_and_watch "$WORK/turn4.jsonl" 'run cat /home/agent/from-terminal.txt'
home_file_read "$WORK/turn4.jsonl" \
    || fail "after sleep, a prompt did not wake the agent and read \"persisted\"" "$WORK/turn4.jsonl"
ctl agents show "$agent" >"$WORK/agent.json"
[[ $(jq -r .desired_state "$WORK/agent.json") == awake ]] || fail "a prompt woke the agent but desired_state is not awake" "$WORK/agent.json"
ok "a prompt to a sleeping agent wakes it; the home file is still there"

# ---------------------------------------------------------------------------------------------
# 4. Cleanup: deleting the agent removes it and its sessions.
ctl agents delete "$agent"
deleted=$agent
agent=""
# expect_not_found ARGS… — `agentholdctl ARGS…` fails with the API code NOT_FOUND.
expect_not_found() {
    local rc=0
    "$CTL" "$@" >/dev/null 2>"$WORK/show.err" || rc=$?
    if (( rc == 0 )) || ! grep -q NOT_FOUND "$WORK/show.err"; then
        fail "$* after delete: exit $rc, $(cat "$WORK/show.err") (expected NOT_FOUND)"
    fi
}
expect_not_found agents show "$deleted"
expect_not_found sessions show "$session"
if (( HAVE_DOCKER )); then
    left=$(docker ps -aq --filter "label=agenthold.agent=$deleted")
    [[ -z $left ]] || fail "after delete, the agent's container $left is still there"
    left=$(docker volume ls -q --filter "name=home-$deleted")
    [[ -z $left ]] || fail "after delete, the agent's home volume $left is still there"
fi
ok "agent deleted; it and its session are gone (NOT_FOUND)"
