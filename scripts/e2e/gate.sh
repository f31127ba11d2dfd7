#!/usr/bin/env bash
# The permission gate, end to end, on a REAL harness (make up, make base-image first):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/gate.sh claude-code|codex|opencode
#
# The harness runs in a real sandbox from agenthold/base and reaches its provider only through the
# real egress proxy, mapped (TEST-ONLY upstream override) to a local stand-in whose scripted
# "model" drives the harness's own tools: `write FILE CONTENT`, `run COMMAND` (Codex:
# `run-escalated COMMAND`, how Codex asks; its plain commands run in its own sandbox, which cannot
# start in ours). The setup is scripts/e2e/real-harness.sh (shared with harness.sh): one agent,
# created with posture `approval`, one session, reused by every item:
#   1. approval: a write and a command each ask (a `permission` event while the turn runs);
#      Deny → no file / the command did not run, the turn ends, and the model is told: a tool
#      result in the same turn (Claude Code), else in the next turn's request (Codex aborts the
#      turn on its only reject option and says so then, with <turn_aborted>; OpenCode ends it);
#      Allow → the file is there / the command ran.
#   2. the harness's own "always" option, picked by a person, reaches the harness as a
#      once-answer (`option_kind` allow_once): the identical call in the next turn asks again; an
#      option the harness did not offer → 400 INVALID_OPTION.
#   3. "Approve for this session" (`allow_for_session`): the identical call in the next turn is
#      answered by agenthold's grant (`by: {grant, scope: session}`), listed by
#      GET /sessions/{id}/grants; revoked (DELETE → 204), the call asks again.
#   6. a parked turn: the sandbox killed while a question waits → TURN_PARKED; the answer resumes
#      it (TURN_RESUMED), the harness tries the call again and the one-shot grant allows it
#      without asking; the file is there.
#   5. a change applies at once: while a write's question waits, PATCH posture `autonomous` → the
#      question is re-decided (`redecided: true`), the turn ends end_turn, the file is there.
#   4. guarded (PATCH posture + policy): a write under /home/agent/** runs without a question
#      (`by: policy:agent:1`), one under /home/agent/secret/** is refused (`policy_denied` naming
#      rule 0) and leaves no file, a command asks.
# Each check prints `ok - …` or `not ok - …` (with the turn's events and the logs' ends on
# stderr); a failed item is left (its turn cancelled) and the next runs; the exit status is 1 if
# any check failed. E2E_GATE_ITEMS="1 4" runs only those items (in the order above).
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS=${1:?usage: $0 claude-code|codex|opencode}
E2E_NAME=e2e-gate-$HARNESS
AGENT_EXTRA='{"posture": "approval"}'
# How long a step of a turn may take (a question to appear, a turn to end, a parked turn to resume).
STEP_TIMEOUT=${E2E_STEP_TIMEOUT:-90}
ITEMS=${E2E_GATE_ITEMS:-1 2 3 6 5 4}

# shellcheck source=scripts/e2e/real-harness.sh
source "$ROOT/scripts/e2e/real-harness.sh"

HOME_DIR=/home/agent
# Codex runs a plain command inside its own sandbox (bubblewrap), which cannot start in ours and
# never asks: a command it should ask about is one it runs outside that sandbox.
RUN=run
[[ $HARNESS == codex ]] && RUN=run-escalated
POLICY='{"rules": [{"effect": "write", "path": "/home/agent/secret/**", "answer": "deny"},
                   {"effect": "write", "path": "/home/agent/**", "answer": "allow"},
                   {"effect": "exec", "answer": "ask"}], "default": "ask"}'

echo 0 >"$WORK/seq"
touch "$WORK/record.jsonl"
# lib.sh's `fail`, noting that a check failed (an item that stops without one failed unexpectedly).
eval "lib_$(declare -f fail)"
fail() { : >"$WORK/flunked"; lib_fail "$@"; }

# ---------------------------------------------------------------------------------------------
# Helpers. Each item runs in a subshell with `set -e`: `fail` (lib.sh) ends the item, not the run.

# events_after SEQ — the session's events after SEQ, as one JSON array, into $WORK/events.json.
events_after() {
    local after=$1 out=$WORK/events.json count
    echo '[]' >"$out"
    while :; do
        api GET "/api/v1/sessions/$session/events?after=$after&limit=1000" >"$WORK/page.json"
        [[ $(status) == 200 ]] || fail "reading the session's events: HTTP $(status)" "$WORK/page.json"
        count=$(jq '.events | length' "$WORK/page.json")
        (( count > 0 )) || break
        jq -s '.[0] + .[1].events' "$out" "$WORK/page.json" >"$out.new"
        mv "$out.new" "$out"
        after=$(jq .next_after "$WORK/page.json")
    done
}

# seq_now — the session's last event's seq.
seq_now() {
    events_after "$(cat "$WORK/seq")"
    jq --argjson known "$(cat "$WORK/seq")" 'last.seq // $known' "$WORK/events.json" >"$WORK/seq.new"
    mv "$WORK/seq.new" "$WORK/seq"
    cat "$WORK/seq"
}

# begin TEXT — starts a turn (not waited for): its events are those after $start; the stand-in's
# requests from line $records + 1 of its record.
begin() {
    start=$(seq_now)
    records=$(wc -l <"$WORK/record.jsonl")
    turn_text=$1
    "$CTL" --compact prompt "$session" "$1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    ! jq -e '.answered' "$WORK/prompt.json" >/dev/null \
        || fail "the prompt answered a question still waiting instead of starting a turn" "$WORK/prompt.json"
}

# turn_events — this turn's events into $WORK/turn.json.
turn_events() {
    events_after "$start"
    cp "$WORK/events.json" "$WORK/turn.json"
}

# until_events FILTER WHAT [SECONDS] — polls this turn's events until the jq FILTER (over the array) is
# true; fails naming WHAT after SECONDS (default $STEP_TIMEOUT).
until_events() {
    local filter=$1 what=$2 limit=${3:-$STEP_TIMEOUT} waited=$SECONDS
    while :; do
        turn_events
        [[ $(jq "$filter" "$WORK/turn.json") == true ]] && return 0
        (( SECONDS - waited < limit )) || fail "no $what within ${limit}s" "$WORK/turn.json" "$WORK/standin.log"
        sleep 0.3
    done
}

# The questions of this turn still waiting (permission events without a permission_resolved).
PENDING='[.[] | select(.type == "permission_resolved") | .payload.permission_id] as $done
    | [.[] | select(.type == "permission" and (.payload.permission_id as $id | $done | index($id) | not))]'
ENDED='any(.[]; .type == "turn_end")'

# question — waits until this turn asks (a question waiting for a person) and prints its id; the
# `permission` event in $WORK/question.json. Fails if the turn ends first.
question() {
    until_events "($PENDING | length > 0) or $ENDED" "question or end of the turn"
    jq -e "$PENDING | length > 0" "$WORK/turn.json" >/dev/null \
        || fail "the turn ended without asking: $(jq -c "[.[] | select(.type == \"permission_resolved\") | .payload.by]" "$WORK/turn.json") answered it" \
            "$WORK/turn.json"
    jq "$PENDING | first" "$WORK/turn.json" >"$WORK/question.json"
    jq -r .payload.permission_id "$WORK/question.json"
}

# asked — the last question's tool call, as a line for the log.
asked() { jq -c '.payload | {kind: .tool_call.kind, title: .tool_call.title, call, options: [.options[]? | "\(.optionId)=\(.kind)"]}' "$WORK/question.json"; }

# answer ID BODY — answers a question; the answer's status in $(status), its body in $WORK/answer.json.
answer() { api POST "/api/v1/permissions/$1/answer" "$2" >/dev/null; }

# finish — waits for this turn's end (a question appearing instead fails it); prints stop_reason.
finish() {
    until_events "$ENDED or ($PENDING | length > 0)" "end of the turn"
    if ! jq -e "$ENDED" "$WORK/turn.json" >/dev/null; then
        jq "$PENDING | first" "$WORK/turn.json" >"$WORK/question.json"
        fail "the turn asked a question nobody should have had to answer: $(asked)" "$WORK/turn.json"
    fi
    log "turn \"$turn_text\": $(jq -r '[.[] | select(.type == "turn_end")][0].payload | "\(.stop_reason) after \(.duration_ms / 1000)s"' "$WORK/turn.json")"
    jq -r '[.[] | select(.type == "turn_end")][0].payload.stop_reason' "$WORK/turn.json"
}

# resolved ID — the permission_resolved payload of question ID in this turn (null if none).
resolved() { jq -c --arg id "$1" '[.[] | select(.type == "permission_resolved" and .payload.permission_id == $id)][0].payload' "$WORK/turn.json"; }

# in_sandbox COMMAND… — runs COMMAND in the agent's sandbox container as `agent`.
in_sandbox() {
    local container
    container=$(sandbox_container "$agent")
    [[ -n $container ]] || fail "the agent's sandbox is not running"
    docker exec -u agent "$container" "$@"
}
exists() { in_sandbox test -e "$1"; }

# told — what the harness sent the model after its call was answered in this turn: the latest tool
# result in the stand-in's requests of this turn (its conversation, not a title or suggestion).
# Empty if the model never heard back. (The stand-in records a request before it answers, so once
# the turn has ended its requests are all in the record.)
told() {
    tail -n +"$((records + 1))" "$WORK/record.jsonl" | jq -s -r --arg t "$turn_text" '
        [.[] | select((.user_texts // []) | last // "" | contains($t))]
        | (first | (.tool_results // .tool_outputs // []) | length) as $before
        | [.[] | select(((.tool_results // .tool_outputs // []) | length) > $before)]
        | last // empty | (.tool_results // .tool_outputs) | last
        | (.content // .output) | tostring | .[0:160]'
}

# patch BODY — PATCH the agent; fails unless 200.
patch() {
    api PATCH "/api/v1/agents/$agent" "$1" >"$WORK/patched.json"
    [[ $(status) == 200 ]] || fail "PATCH $1: HTTP $(status)" "$WORK/patched.json"
}

# settle — after a failed item: a turn still running (its question waiting) is cancelled and
# waited for, so the next item's prompt starts a turn and answers nothing.
settle() {
    api POST "/api/v1/sessions/$session/cancel" >/dev/null
    [[ $(status) == 202 ]] || return 0
    log "cancelled the turn left running"
    local waited=$SECONDS
    while (( SECONDS - waited < STEP_TIMEOUT )); do
        events_after "$start"
        jq -e "$ENDED" "$WORK/events.json" >/dev/null && return 0
        sleep 0.5
    done
    log "the cancelled turn did not end"
}

# ---------------------------------------------------------------------------------------------
# The items.

# deny_then_allow WHAT PROMPT_DENIED PROMPT_ALLOWED DENIED_PATH ALLOWED_PATH
deny_then_allow() {
    local what=$1 id told_text stop deny_stop seen
    begin "$2"
    id=$(question)
    log "$what asked: $(asked)"
    answer "$id" '{"decision": "deny"}'
    [[ $(status) == 200 ]] || fail "answering deny: HTTP $(status)" "$WORK/answer.json"
    stop=$(finish)
    exists "$4" && fail "$4 exists although the $what was denied" "$WORK/turn.json"
    told_text=$(told)
    log "after the deny the harness told the model in that turn: ${told_text:-(nothing)}; the turn ended $stop"
    deny_stop=$stop
    # How many tool results the model had seen by the end of that turn.
    seen=$(tail -n +"$((records + 1))" "$WORK/record.jsonl" | jq -s --arg t "$2" \
        '[.[] | select((.user_texts // []) | last // "" | contains($t)) | (.tool_results // .tool_outputs // []) | length] | max // 0')
    if [[ -n $told_text ]]; then
        ok "approval: the $what asks; Deny → $4 is absent, the model was told in the turn ($told_text), the turn ended $stop"
    else
        # Codex's only reject option (`cancel`) aborts the turn, OpenCode ends it: the model hears
        # of the refusal in the next turn's request, checked below.
        [[ $stop == end_turn || $stop == cancelled ]] || fail "after the deny the turn ended $stop" "$WORK/turn.json"
        ok "approval: the $what asks; Deny → $4 is absent, the harness ended the turn ($stop) without a further request"
    fi

    begin "$3"
    id=$(question)
    answer "$id" '{"decision": "allow"}'
    [[ $(status) == 200 ]] || fail "answering allow: HTTP $(status)" "$WORK/answer.json"
    stop=$(finish)
    [[ $stop == end_turn ]] || fail "the allowed $what's turn ended $stop, not end_turn" "$WORK/turn.json"
    if [[ -z $told_text ]]; then
        # This turn's first request to the model: what the harness says of the refused call.
        tail -n +"$((records + 1))" "$WORK/record.jsonl" | jq -s -c --arg t "$3" \
            --argjson seen "$seen" '[.[] | select((.user_texts // []) | last // "" | contains($t))][0]
             | (.tool_results // .tool_outputs // []) as $results
             | {aborted_turn: (.body | tojson | contains("<turn_aborted>")), new_results: (($results | length) - $seen),
                result: ($results | last | (.content // .output) | tostring | .[0:160])}' \
            >"$WORK/next-request.json"
        log "the next turn's request to the model: $(cat "$WORK/next-request.json")"
        jq -e '.new_results > 0' "$WORK/next-request.json" >/dev/null \
            || fail "the model never heard of the refused call: the next request carries no result for it (the deny's turn ended $deny_stop)" "$WORK/next-request.json"
        ok "approval: the harness's next request tells the model of the refused call: $(jq -r .result "$WORK/next-request.json")$(jq -r 'if .aborted_turn then " (and <turn_aborted>)" else "" end' "$WORK/next-request.json")"
    fi
    ok "approval: the $what asks; Allow → $5 is there, the turn ended end_turn"
}

item_1() {
    deny_then_allow "write" "write gate-denied.txt no" "write gate-allowed.txt yes" \
        "$HOME_DIR/gate-denied.txt" "$HOME_DIR/gate-allowed.txt"
    deny_then_allow "command" "$RUN touch $HOME_DIR/gate-ran-denied" "$RUN touch $HOME_DIR/gate-ran-allowed" \
        "$HOME_DIR/gate-ran-denied" "$HOME_DIR/gate-ran-allowed"
}

item_2() {
    local id always again by kind stop
    begin "write gate-always.txt always"
    id=$(question)
    log "asked: $(asked)"
    always=$(jq -r '[.payload.options[] | select(.kind == "allow_always")][0].optionId // empty' "$WORK/question.json")
    [[ -n $always ]] || fail "the harness offered no allow_always option: $(asked)"
    answer "$id" '{"option_id": "no-such-option"}'
    [[ $(status) == 400 && $(jq -r .error.code "$WORK/answer.json") == INVALID_OPTION ]] \
        || fail "an option the harness did not offer: HTTP $(status) $(cat "$WORK/answer.json"), not 400 INVALID_OPTION"
    ok "an option the harness did not offer → 400 INVALID_OPTION"
    answer "$id" "$(jq -cn --arg o "$always" '{option_id: $o}')"
    [[ $(status) == 200 ]] || fail "answering with the harness's option $always: HTTP $(status)" "$WORK/answer.json"
    stop=$(finish)
    kind=$(resolved "$id" | jq -r .option_kind)
    log "picked $always (allow_always): resolved $(resolved "$id"); the turn ended $stop"
    exists "$HOME_DIR/gate-always.txt" || fail "gate-always.txt is absent although it was allowed" "$WORK/turn.json"
    [[ $kind == allow_once ]] || fail "the harness's \"always\" option $always reached it as $kind, not as a once-answer (allow_once)" "$WORK/turn.json"
    in_sandbox rm -f "$HOME_DIR/gate-always.txt"
    begin "write gate-always.txt always"
    until_events "($PENDING | length > 0) or $ENDED" "question or end of the turn"
    if ! jq -e "$PENDING | length > 0" "$WORK/turn.json" >/dev/null; then
        by=$(jq -r '[.[] | select(.type == "permission_resolved") | .payload.by] | if . == [] then "the harness did not ask" else "answered by \(tojson)" end' "$WORK/turn.json")
        fail "after an \"always\" pick the identical call did not ask again ($by)" "$WORK/turn.json"
    fi
    again=$(jq -r "$PENDING | first | .payload.permission_id" "$WORK/turn.json")
    answer "$again" '{"decision": "allow"}'
    [[ $(status) == 200 ]] || fail "answering the second question: HTTP $(status)" "$WORK/answer.json"
    finish >/dev/null
    ok "the harness's own \"always\" option ($always) picked by a person reaches it as allow_once; the identical call in the next turn asks again"
}

item_3() {
    local id by grant stop
    begin "write gate-session.txt session"
    id=$(question)
    answer "$id" '{"decision": "allow_for_session"}'
    [[ $(status) == 200 ]] || fail "answering allow_for_session: HTTP $(status) $(cat "$WORK/answer.json")" "$WORK/answer.json"
    stop=$(finish)
    exists "$HOME_DIR/gate-session.txt" || fail "gate-session.txt is absent after allow_for_session" "$WORK/turn.json"
    log "allow_for_session: $(resolved "$id"); the turn ended $stop"
    in_sandbox rm -f "$HOME_DIR/gate-session.txt"
    begin "write gate-session.txt session"
    stop=$(finish)
    by=$(jq -c '[.[] | select(.type == "permission_resolved")][0].payload.by' "$WORK/turn.json")
    grant=$(jq -r '.grant // empty' <<<"$by")
    [[ -n $grant && $(jq -r .scope <<<"$by") == session ]] \
        || fail "the identical call was not answered by the session's grant: by $by" "$WORK/turn.json"
    exists "$HOME_DIR/gate-session.txt" || fail "gate-session.txt is absent although the grant allowed it" "$WORK/turn.json"
    ok "allow_for_session: the identical call in the next turn ran without a person (by $by)"
    api GET "/api/v1/sessions/$session/grants" >"$WORK/grants.json"
    [[ $(status) == 200 ]] || fail "listing the grants: HTTP $(status)" "$WORK/grants.json"
    jq -e --arg g "$grant" '[(.grants? // .)[] | .id] | index($g)' "$WORK/grants.json" >/dev/null \
        || fail "GET /sessions/{id}/grants does not list grant $grant" "$WORK/grants.json"
    log "grants: $(jq -c . "$WORK/grants.json")"
    api DELETE "/api/v1/sessions/$session/grants/$grant" >/dev/null
    [[ $(status) == 204 ]] || fail "revoking the grant: HTTP $(status)" "$WORK/answer.json"
    in_sandbox rm -f "$HOME_DIR/gate-session.txt"
    begin "write gate-session.txt session"
    id=$(question)
    answer "$id" '{"decision": "deny"}'
    finish >/dev/null
    ok "the grant is listed (GET …/grants), revoked (DELETE → 204), and the identical call asks again"
}

item_6() {
    local id container started_at now waited by stop
    begin "write gate-parked.txt parked"
    id=$(question)
    container=$(sandbox_container "$agent")
    started_at=$(docker inspect -f '{{.State.StartedAt}}' "$container")
    docker kill "$container" >/dev/null || fail "docker kill $container"
    log "killed the sandbox $container while question $id waited"
    until_events 'any(.[]; .type == "notice" and .payload.code == "TURN_PARKED") or '"$ENDED" "TURN_PARKED notice"
    jq -e "$ENDED" "$WORK/turn.json" >/dev/null \
        && fail "the turn ended instead of being parked: $(jq -c '[.[] | select(.type == "turn_end" or .type == "error" or .type == "notice") | .payload]' "$WORK/turn.json")" "$WORK/turn.json"
    ok "the sandbox killed while a question waits: the turn is parked (TURN_PARKED), not ended"
    waited=$SECONDS
    while :; do
        answer "$id" '{"decision": "allow"}'
        [[ $(status) == 409 ]] && (( SECONDS - waited < 30 )) || break
        sleep 0.3
    done
    [[ $(status) == 200 ]] || fail "answering the parked question: HTTP $(status)" "$WORK/answer.json"
    until_events 'any(.[]; .type == "notice" and .payload.code == "TURN_RESUMED")' "TURN_RESUMED notice"
    until_events "$ENDED or ($PENDING | length > 0)" "end of the resumed turn" $((STEP_TIMEOUT * 2))
    if ! jq -e "$ENDED" "$WORK/turn.json" >/dev/null; then
        jq "$PENDING | first" "$WORK/turn.json" >"$WORK/question.json"
        log "the resumed harness asked again, not answered by the one-shot grant: $(asked) (the first: $(jq -c "[.[] | select(.type == \"permission\") | .payload.call][0]" "$WORK/turn.json"))"
        fail "the call tried again after the resume was asked about again, not allowed by the one-shot grant" "$WORK/turn.json"
    fi
    stop=$(jq -r '[.[] | select(.type == "turn_end")][0].payload.stop_reason' "$WORK/turn.json")
    log "resumed turn: $(jq -c '[.[] | select(.type == "notice" or .type == "permission_resolved" or .type == "turn_end") | {type, code: .payload.code, by: .payload.by, stop: .payload.stop_reason}]' "$WORK/turn.json")"
    by=$(jq -c --arg id "$id" '[.[] | select(.type == "permission_resolved" and .payload.by.grant == $id)][0].payload.by' "$WORK/turn.json")
    if [[ $by == null ]]; then
        log "CONTEXT_RESET: $(jq -c '[.[] | select(.type == "notice" and .payload.code == "CONTEXT_RESET")] | length' "$WORK/turn.json"); requests after the resume: $(tail -n +"$((records + 1))" "$WORK/record.jsonl" | jq -c '{texts: (.user_texts | .[-2:] | map(.[0:60])), answer, tool}' | tail -n 4 | tr '\n' ' ')"
        fail "the resumed harness did not try the call again under the one-shot grant (the turn ended $stop)" "$WORK/turn.json"
    fi
    [[ $stop == end_turn ]] || fail "the resumed turn ended $stop, not end_turn" "$WORK/turn.json"
    # The sandbox was started again (the same container, or a new one).
    now=$(sandbox_container "$agent")
    [[ $now != "$container" || $(docker inspect -f '{{.State.StartedAt}}' "$now") != "$started_at" ]] \
        || fail "the resumed turn ran in a sandbox that was never started again"
    exists "$HOME_DIR/gate-parked.txt" || fail "gate-parked.txt is absent after the resumed turn" "$WORK/turn.json"
    ok "answered allow, the parked turn resumed (TURN_RESUMED) in the sandbox started again, the harness tried the call again and the one-shot grant allowed it without asking (by $by); the file is there"
}

item_5() {
    local id stop res container
    begin "write gate-redecided.txt redecided"
    id=$(question)
    container=$(sandbox_container "$agent")
    patch '{"posture": "autonomous"}'
    until_events "$ENDED or ($PENDING | length == 0)" "answer to the waiting question after the PATCH" 30
    stop=$(finish)
    res=$(resolved "$id")
    log "after PATCH autonomous: $res; the turn ended $stop"
    [[ $(jq -r .redecided <<<"$res") == true ]] || fail "the waiting question was not re-decided by the new posture: $res" "$WORK/turn.json"
    [[ $(jq -r '.by | type' <<<"$res") == string ]] || fail "the re-decided question names a person or a grant, not the posture: $res" "$WORK/turn.json"
    [[ $stop == end_turn ]] || fail "the turn ended $stop, not end_turn" "$WORK/turn.json"
    exists "$HOME_DIR/gate-redecided.txt" || fail "gate-redecided.txt is absent" "$WORK/turn.json"
    # The same harness went on: the same sandbox, the turn neither parked nor resumed.
    [[ $(sandbox_container "$agent") == "$container" ]] || fail "the sandbox was made again after the PATCH"
    jq -e 'any(.[]; .type == "notice" and (.payload.code | test("TURN_PARKED|TURN_RESUMED|CONTEXT_RESET")))' "$WORK/turn.json" >/dev/null \
        && fail "the turn was parked or its session reset after the PATCH" "$WORK/turn.json"
    ok "a PATCH to posture autonomous answers the waiting question at once (redecided, by $(jq -c .by <<<"$res")); the turn ended end_turn, the file is there"
}

item_4() {
    local id stop by denied told_text
    patch "$(jq -cn --argjson p "$POLICY" '{posture: "guarded", policy: $p}')"
    [[ $(jq -r .posture "$WORK/patched.json") == guarded ]] || fail "the agent's posture is not guarded after the PATCH" "$WORK/patched.json"
    log "the agent after the PATCH: $(jq -c '{posture, permission_policy}' "$WORK/patched.json")"
    begin "write $HOME_DIR/gate-guarded.txt guarded"
    stop=$(finish)
    by=$(jq -c '[.[] | select(.type == "permission_resolved")][0].payload.by' "$WORK/turn.json")
    [[ $by == '"policy:agent:1"' ]] || fail "the allowed write was answered by $by, not policy:agent:1" "$WORK/turn.json"
    exists "$HOME_DIR/gate-guarded.txt" || fail "gate-guarded.txt is absent although the policy allows it" "$WORK/turn.json"
    jq -e 'any(.[]; .type == "policy_applied")' "$WORK/turn.json" >/dev/null || fail "no policy_applied event before the turn" "$WORK/turn.json"
    ok "guarded: a write under /home/agent/** runs without a question (by policy:agent:1; the turn ended $stop)"

    begin "write $HOME_DIR/secret/gate.txt denied"
    stop=$(finish)
    denied=$(jq -c '[.[] | select(.type == "policy_denied")][0].payload' "$WORK/turn.json")
    jq -e '.rule.origin == "agent" and .rule.index == 0 and .rule.path == "/home/agent/secret/**" and .effect == "write"' <<<"$denied" >/dev/null \
        || fail "no policy_denied naming the agent's rule 0: $denied" "$WORK/turn.json"
    exists "$HOME_DIR/secret/gate.txt" && fail "secret/gate.txt exists although the policy denies it" "$WORK/turn.json"
    ok "guarded: a write under /home/agent/secret/** is refused (policy_denied $denied), no file (the turn ended $stop)"
    told_text=$(told)
    log "after the policy's deny the harness told the model in that turn: ${told_text:-(nothing: it ended the turn)}"

    begin "$RUN touch $HOME_DIR/gate-guarded-ran"
    id=$(question)
    log "asked: $(asked)"
    answer "$id" '{"decision": "allow"}'
    finish >/dev/null
    exists "$HOME_DIR/gate-guarded-ran" || fail "the command did not run although it was allowed" "$WORK/turn.json"
    ok "guarded: a command asks (the exec rule's ask), and runs once allowed"
}

# ---------------------------------------------------------------------------------------------
failed=()
started_all=$SECONDS
for item in $ITEMS; do
    declare -F "item_$item" >/dev/null || die "no item $item (1-6)"
    started=$SECONDS
    rm -f "$WORK/flunked"
    set +e
    (
        set -e
        start=0 records=0 turn_text=""
        "item_$item"
    )
    rc=$?
    set -e
    log "item $item: $( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - started))s"
    if (( rc != 0 )); then
        [[ -e $WORK/flunked ]] || printf 'not ok - item %s stopped on an unexpected error (see stderr)\n' "$item" >&3
        failed+=("$item")
        start=$(cat "$WORK/seq")
        settle
    fi
done
log "all items in $((SECONDS - started_all))s"
(( ${#failed[@]} == 0 )) || { log "failed items: ${failed[*]}"; exit 1; }
