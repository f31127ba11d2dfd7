#!/usr/bin/env bash
# End-to-end check of a pooled real harness (issue 36, docs/design.md "Pooled harnesses") against
# the real running stack (`make up`, the base image from `make base-image`):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/pooled.sh claude-code|codex|opencode
#
# The server keeps the harness started and initialised in a pooled sandbox, bound to no one; an
# agent created with its provider key named on create (`secrets`) takes it running: the server's
# log and the audit say the harness was taken (not started again), a turn runs on it through the
# real egress proxy to the local stand-in (scripts/e2e/standins/), and every request the stand-in
# gets carries this agent's key — none the pool's placeholder or another's; the session the pool
# opened ahead has agenthold's MCP server (its tools offered to the model). Each check prints
# `ok - …`; a failure prints `not ok - …` and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS=${1:?usage: $0 claude-code|codex|opencode}
E2E_NAME=e2e-pooled-$HARNESS
E2E_POOLED=1
# shellcheck source=scripts/e2e/real-harness.sh
source "$ROOT/scripts/e2e/real-harness.sh"

strip() { sed 's/\x1b\[[0-9;]*m//g' "$SERVER_LOG"; }
strip | grep 'took a running harness from the warm pool' | grep -qF "$agent" \
    || fail "agent $agent did not take the pooled harness running" "$WORK/agent.json" "$SERVER_LOG"
ok "the agent took the pooled $HARNESS harness running"
if [[ $HARNESS == opencode ]]; then
    # Its first prompt in a process boots OpenCode's own services: the pool spent that before
    # the claim, in a throwaway turn of its own (docs/design.md "Pooled harnesses").
    strip | grep 'a pooled harness answered `initialize`' | grep -F "$agent" | grep -qE 'warm_up_ms=[0-9]+' \
        || fail "the pool ran no warm-up turn on the pooled OpenCode" "$SERVER_LOG"
    ok "the pool ran OpenCode's warm-up turn before the claim"
fi

turn_writes_hello
strip | grep -F "$agent" | grep -q 'starting the harness' \
    && fail "the agent's first turn started a harness of its own" "$SERVER_LOG"
ok "a turn ran on the pooled harness: the file is in the sandbox, no harness was started for it"
if [[ $HARNESS == opencode ]]; then
    # OpenCode announces its commands right after `session/new`: for the session the pool opened
    # ahead that was before the claim, and the announcement is kept for the session taking it.
    jq_true "$WORK/turn.jsonl" 'any(.[]; .type == "update" and .payload.sessionUpdate == "available_commands_update"
            and (.payload.availableCommands | length) > 0)' \
        || fail "the pooled session lacks the commands OpenCode announced for it" "$WORK/turn.jsonl"
    ok "the commands OpenCode announced for the session opened ahead are in the session's log"
fi

# The model's route got this agent's key, and every request that carried a credential carried
# it: the pool's placeholder reached nothing.
case $HARNESS in
codex) model_route='startswith("/v1/responses")' ;;
*) model_route='startswith("/v1/messages")' ;;
esac
jq -e -s --arg v "$value" "any(.[]; (.path | $model_route) and ((.headers[\"x-api-key\"] // .headers.authorization // \"\") | contains(\$v)))" \
    "$WORK/record.jsonl" >/dev/null \
    || fail "the model's route never got this agent's key" "$WORK/record.jsonl"
jq -e -s --arg v "$value" 'all(.[]; (.headers["x-api-key"] // .headers.authorization) as $k | $k == null or ($k | contains($v)))' \
    "$WORK/record.jsonl" >/dev/null \
    || fail "the stand-in got a credential that is not this agent's key" "$WORK/record.jsonl"
ok "the stand-in got this agent's key on the model's route, and no other credential ($(jq -s length "$WORK/record.jsonl") requests)"

# The session the pool opened ahead (before the claim, when the sandbox's proxy entry allowed
# agenthold's MCP route only) connected to agenthold's MCP server: the proxy forwarded this
# sandbox's MCP requests, and the model's requests name agenthold's tools (OpenCode lists them
# with its own; Claude Code defers MCP tools and names them for its tool search).
proxy_log=$ROOT/.dev/proxy.log
if [[ -f $proxy_log ]]; then
    sed $'s/\x1b\[[0-9;]*m//g' "$proxy_log" | grep -F "sandbox=$agent" | grep -F 'target=mcp.agenthold.internal:443' \
        | grep -q 'status=200' || fail "the proxy forwarded no MCP request of this sandbox" "$proxy_log"
fi
jq -e -s 'any(.[]; tostring | test("list_agents"))' "$WORK/record.jsonl" >/dev/null \
    || fail "the model was not offered agenthold's MCP tools in the pooled session" "$WORK/record.jsonl" "$WORK/turn.jsonl"
jq_true "$WORK/turn.jsonl" 'any(.[]; (.payload.content.text // "") | test("MCP server .* failed"))' \
    && fail "the harness said an MCP server failed to start" "$WORK/turn.jsonl"
ok "the pooled session had agenthold's MCP server (connected through the proxy before the claim)"

api GET "/api/v1/workspaces/$workspace/audit?limit=200" >"$WORK/audit.json"
jq -e --arg a "$agent" 'any(.records[]; .action == "agent.pooled_harness_claimed" and .resource_id == $a
        and .detail.harness_taken == true and .detail.proxy_identity_bound == true)' "$WORK/audit.json" >/dev/null \
    || fail "no audit record of the claim with the harness taken" "$WORK/audit.json"
grep -qF "$value" "$WORK/audit.json" && fail "the audit holds the key"
ok "the claim is audited (harness taken, identity bound), without the key"
