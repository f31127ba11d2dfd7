#!/usr/bin/env bash
# End-to-end check of a real coding agent against the real running stack (`make up`, the base
# image from `make base-image`):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/harness.sh claude-code|codex|opencode
#
# (scripts/e2e/claude-harness.sh, codex.sh and opencode.sh call it.) The harness runs in a real
# sandbox from agenthold/base:latest and reaches its provider only through the real egress proxy,
# whose TEST-ONLY upstream override maps api.anthropic.com / api.openai.com to a local stand-in
# (scripts/e2e/standins/): this script restarts the dev server with the override, and without it
# at the end. It
#   1. stores a provider key as a secret and attaches it (ANTHROPIC_API_KEY / OPENAI_API_KEY);
#   2. shows what the harness advertised (its initialize answer: capabilities, auth methods);
#   3. runs a turn that writes a file: the stand-in answers with the harness's own write tool,
#      the harness asks agenthold's permission gate (a `permission` event, answered), the file is
#      in the sandbox, the turn ends with end_turn, and the stand-in saw the real key in the one
#      header it belongs in while the sandbox holds only a placeholder;
#      codex: a command run outside Codex's own sandbox asks the gate first, then runs and its
#      output comes back; one run without asking changes nothing (docs/harnesses.md);
#   4. replays the session's log from a cursor (the stream from mid-log equals the stored tail);
#   5. puts the agent to sleep, wakes it, and runs a second turn in the same session: the harness
#      loaded the session, so the provider sees the first prompt in the conversation again.
#   6. for the UI: runs the further turns of E2E_EXTRA_PROMPTS (one a line), writes the session's
#      event log to E2E_EVENTS_OUT (the UI's fixtures), and with E2E_UI=1 opens the session in
#      Chromium (web/e2e/tests/real-session.spec.ts). `make test` runs it with E2E_UI=1 and
#      a think, a plan and a run.
# Each check prints `ok - …`; a failure prints `not ok - …` and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS=${1:?usage: $0 claude-code|codex|opencode}

# 1. The stand-in, the server restarted with the test-only upstream override, the key as a secret
# attached to a new agent running the real harness, a session (shared with scripts/e2e/gate.sh).
# shellcheck source=scripts/e2e/real-harness.sh
source "$ROOT/scripts/e2e/real-harness.sh"

# ---------------------------------------------------------------------------------------------
# 2–3. A turn that writes a file, through the permission gate.
started=$SECONDS
turn_writes_hello
turn_secs=$((SECONDS - started))
api GET "/api/v1/agents/$agent" >"$WORK/agent.json"
jq -e '.advertised.protocolVersion' "$WORK/agent.json" >/dev/null || fail "no initialize answer recorded" "$WORK/agent.json"
log "advertised: $(jq -c '.advertised | {protocolVersion, agentInfo, authMethods, agentCapabilities}' "$WORK/agent.json")"
ok "$HARNESS advertised protocol $(jq -c .advertised.protocolVersion "$WORK/agent.json"), auth methods $(jq -c '[.advertised.authMethods[]?.id]' "$WORK/agent.json")"
jq_true "$WORK/turn.jsonl" 'any(.[]; .type == "permission") and any(.[]; .type == "permission_resolved")' \
    || fail "no permission question and answer in the turn: the harness did not ask the gate" "$WORK/turn.jsonl"
log "permission asked: $(jq -s -c '[.[] | select(.type == "permission") | .payload.tool_call | {kind, title}]' "$WORK/turn.jsonl")"
ok "the harness asked the permission gate before writing, and got its answer"
ok "the file is in the sandbox (the turn took ${turn_secs}s, cold)"
case $provider in
anthropic) header=x-api-key expected=$value ;;
openai) header=authorization expected="Bearer $value" ;;
esac
jq -e -s --arg h "$header" --arg v "$expected" 'any(.[]; .headers[$h] == $v)' "$WORK/record.jsonl" >/dev/null \
    || fail "the stand-in never saw the real key in $header" "$WORK/record.jsonl"
sandbox_dump "$container" "$WORK/dump"
# The search reads what the harness holds (its placeholder is there), so an absent key means absent.
grep -qaF "$env_name=" "$WORK/dump" || fail "the sandbox dump does not show the harness's environment"
grep -qaF "$value" "$WORK/dump" && fail "the real key is in the sandbox (a process's environment or command line, or a file)"
ok "the stand-in saw the real key in $header; nothing in the sandbox holds it (environments, command lines, files)"

# 3a. What the real harness sees of its sandbox and what the server shows of it: the harness
# process's own environment holds NODE_OPTIONS with three quarters of the agent's memory limit
# (docs/harnesses.md, "Memory"), and its admins can read its harness log while it runs.
case $HARNESS in claude-code) process=claude-agent-acp ;; codex) process=codex-acp ;; opencode) process=opencode ;; esac
memory=$(jq -r '.limits.memory_mib' "$WORK/agent.json")
[[ $memory =~ ^[0-9]+$ ]] || fail "the agent view has no limits.memory_mib" "$WORK/agent.json"
node_options=$(docker exec -u agent "$container" sh -c '
    for p in /proc/[0-9]*; do
        if tr "\0" " " <"$p/cmdline" 2>/dev/null | grep -q -- "$1"; then
            tr "\0" "\n" <"$p/environ" | grep "^NODE_OPTIONS=" && exit 0
        fi
    done' sh "$process" 2>/dev/null | head -n 1 || true)
[[ $node_options == "NODE_OPTIONS=--max-old-space-size=$(( memory * 3 / 4 ))" ]] \
    || fail "the $process process's NODE_OPTIONS is '$node_options', not 3/4 of $memory MiB"
api GET "/api/v1/agents/$agent/harness-log" >"$WORK/harness-log.json"
[[ $(status) == 200 ]] || fail "reading the harness log: HTTP $(status)" "$WORK/harness-log.json"
jq -e '.live == true and .ring_bytes == 65536 and (.text | type) == "string"' "$WORK/harness-log.json" >/dev/null \
    || fail "the harness log is not that of a running harness" "$WORK/harness-log.json"
ok "the running $process sees $node_options (limits.memory_mib $memory); its harness log answers ($(jq '.text | length' "$WORK/harness-log.json") characters of stderr)"

# ---------------------------------------------------------------------------------------------
# 3b. Codex: commands run, and only through the gate. Its own sandbox (bubblewrap) cannot start in
# ours (docs/harnesses.md, "Codex's own sandbox"): a command it asks to run outside that sandbox
# (`require_escalated`, as its instructions say) is put to the gate first, then runs directly in
# the container and its output comes back; one it runs without asking cannot write anything.
if [[ $HARNESS == codex ]]; then
    token=$(openssl rand -hex 6)
    # The output (ran-TOKEN) is not in the command's text, so finding it means the command ran.
    prompt "run-escalated touch /home/agent/ran.txt && printf 'ran-%s\n' $token"
    jq_true "$WORK/turn.jsonl" 'last | .type == "turn_end" and .payload.stop_reason == "end_turn"' \
        || fail "the command's turn did not end with end_turn" "$WORK/turn.jsonl" "$WORK/record.jsonl"
    order=$(jq -s -c --arg out "ran-$token" '{asked: ([.[] | select(.type == "permission")][0].seq),
        output: ([.[] | select(.type != "permission" and (tojson | contains($out)))][0].seq)}' "$WORK/turn.jsonl")
    log "run outside Codex's sandbox: $order; asked: $(jq -s -c '[.[] | select(.type == "permission") | .payload.tool_call | {kind, title}]' "$WORK/turn.jsonl")"
    jq -e '.asked != null and .output != null and .asked < .output' <<<"$order" >/dev/null \
        || fail "the command did not ask the gate first and then show its output" "$WORK/turn.jsonl" "$WORK/record.jsonl"
    docker exec -u agent "$container" test -f /home/agent/ran.txt || fail "the allowed command did not run in the sandbox"
    grep -qF "runs inside agenthold's container sandbox" "$WORK/record.jsonl" \
        || fail "the model never got the adapter's developer instructions (run every command outside Codex's sandbox)" "$WORK/record.jsonl"
    ok "a command Codex runs outside its own sandbox (as its instructions say) asks the gate first, then runs in the container and its output comes back"
    prompt "run touch /home/agent/ungated.txt"
    jq_true "$WORK/turn.jsonl" 'last | .type == "turn_end" and .payload.stop_reason == "end_turn"' \
        || fail "the unasked command's turn did not end with end_turn" "$WORK/turn.jsonl"
    asked=$(jq -s 'any(.[]; .type == "permission")' "$WORK/turn.jsonl")
    if docker exec -u agent "$container" test -e /home/agent/ungated.txt; then
        [[ $asked == true ]] || fail "a command that did not ask the gate wrote a file" "$WORK/turn.jsonl"
        ok "a command Codex ran without asking first was retried only through the gate"
    else
        log "run inside Codex's sandbox: asked $asked; $(jq -s -r '[.[] | tojson | select(contains("bwrap"))] | length' "$WORK/turn.jsonl") event(s) name bwrap"
        ok "a command Codex runs without asking the gate changes nothing (its own sandbox cannot start: fails closed)"
    fi
fi

# ---------------------------------------------------------------------------------------------
# 4. Replay from a cursor: the stream from mid-log equals the stored tail.
middle=$(( last_seq / 2 ))
"$CTL" watch --compact "$session" --after "$middle" --count $(( last_seq - middle )) --timeout 30 \
    >"$WORK/replay.jsonl" 2>"$WORK/watch.err" || fail "replaying from $middle" "$WORK/watch.err"
"$CTL" --compact events "$session" --after "$middle" --limit 1000 >"$WORK/page.json" 2>/dev/null || fail "reading the events"
diff <(jq -S -c '{seq, type, payload}' "$WORK/replay.jsonl") <(jq -S -c '.events[] | {seq, type, payload}' "$WORK/page.json") \
    >"$WORK/diff.txt" || fail "the replay from seq $middle differs from the stored events" "$WORK/diff.txt"
ok "replaying from seq $middle gives the stored events $((middle + 1))..$last_seq"

# ---------------------------------------------------------------------------------------------
# 5. Sleep, wake, and a second turn in the same session: the history survived.
api POST "/api/v1/agents/$agent/sleep" >/dev/null
[[ $(status) == 200 ]] || fail "sleeping: HTTP $(status)" "$WORK/answer.json"
api POST "/api/v1/agents/$agent/wake" >/dev/null
[[ $(status) == 200 ]] || fail "waking: HTTP $(status)" "$WORK/answer.json"
requests_before=$(wc -l <"$WORK/record.jsonl")
prompt "what did I ask you before?"
jq_true "$WORK/turn.jsonl" 'last | .type == "turn_end" and .payload.stop_reason == "end_turn"' \
    || fail "the turn after waking did not end with end_turn" "$WORK/turn.jsonl"
jq_true "$WORK/turn.jsonl" 'all(.[]; .type != "notice" or .payload.code != "CONTEXT_RESET")' \
    || fail "the session was not restored after waking (CONTEXT_RESET)" "$WORK/turn.jsonl"
# The stand-in records a request once it has streamed its answer, so its line may land just after
# the turn ended: give it a few seconds.
seen_first=0
for _ in $(seq 50); do
    if tail -n +"$((requests_before + 1))" "$WORK/record.jsonl" | grep -qF "please write hello.txt hi"; then
        seen_first=1
        break
    fi
    sleep 0.2
done
(( seen_first )) || fail "after waking, the provider did not see the first prompt in the conversation" "$WORK/record.jsonl"
ok "after sleep and wake the session was loaded: the provider saw the earlier prompt again"

# 6. For the UI (docs/ui.md, "Checks"):
# E2E_EXTRA_PROMPTS (one prompt a line, e.g. the stand-ins' `think …`, `plan … | …`, `run …`): further
# turns, each ended with end_turn;
while IFS= read -r extra; do
    [[ -n $extra ]] || continue
    prompt "$extra"
    jq_true "$WORK/turn.jsonl" 'last | .type == "turn_end" and .payload.stop_reason == "end_turn"' \
        || fail "the turn \"$extra\" did not end with end_turn" "$WORK/turn.jsonl"
    ok "a further turn: $extra"
done <<<"${E2E_EXTRA_PROMPTS:-}"
# E2E_EVENTS_OUT=FILE keeps the session's whole event log (what this real harness sent, as stored):
# the UI's rendering tests use such logs as fixtures (web/test/fixtures/, make-fixture.mjs);
if [[ -n ${E2E_EVENTS_OUT:-} ]]; then
    "$CTL" --compact events "$session" --after 0 --limit 1000 >"$E2E_EVENTS_OUT" || fail "keeping the events"
    ok "the session's events are in $E2E_EVENTS_OUT"
fi
# E2E_UI=1: the UI's Chromium check opens this session (web/e2e/tests/real-session.spec.ts).
if [[ ${E2E_UI:-} == 1 ]]; then
    (cd "$ROOT/web" && AGENTHOLD_UI_REAL_SESSION="$agent/$session" npx playwright test --project=ui real-session.spec.ts) >"$WORK/ui.log" 2>&1 \
        || fail "the UI did not render the session as it should" "$WORK/ui.log"
    grep -q '1 passed' "$WORK/ui.log" || fail "the UI's check of the session did not run" "$WORK/ui.log"
    ok "the UI renders the session in Chromium (web/e2e/tests/real-session.spec.ts)"
fi
