#!/usr/bin/env bash
# End-to-end check of account logins on the real harnesses (issue 31, item 8), against the real
# running stack (`make up`, the base image from `make base-image`):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/account-logins.sh claude-code|codex
#
# A login connected on the caller's account (docs/logins.md) — Claude Code: a Claude subscription
# token (`claude setup-token`); Codex: a ChatGPT login's auth.json, refreshed once by the server
# at connect — reaches the real harness as a placeholder shaped as the harness expects, and a turn
# runs on it through the real egress proxy to the local stand-in (scripts/e2e/standins/), which
# sees the real token in `Authorization` where it belongs; nothing in the sandbox holds it; Codex
# goes to chatgpt.com's backend as a ChatGPT-signed-in Codex does, never to api.openai.com with
# an API key it was not given. Each check prints `ok - …`; a failure prints `not ok - …` and
# exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS=${1:?usage: $0 claude-code|codex}
E2E_NAME=e2e-login-$HARNESS
E2E_CREDENTIAL=login
# shellcheck source=scripts/e2e/real-harness.sh
source "$ROOT/scripts/e2e/real-harness.sh"
[[ $HARNESS != codex ]] || command -v zstd >/dev/null || die "zstd is needed (Codex's requests to chatgpt.com are zstd-compressed)"

turn_writes_hello
ok "a turn ran on the $login_kind login: the file is in the sandbox"

case $HARNESS in
claude-code) path_filter='startswith("/v1/messages")' ;;
codex) path_filter='startswith("/backend-api/codex/responses")' ;;
esac
jq -e -s --arg v "Bearer $value" "any(.[]; (.path | $path_filter) and .headers.authorization == \$v)" "$WORK/record.jsonl" >/dev/null \
    || fail "the stand-in never saw the real token in Authorization on the model's route" "$WORK/record.jsonl"
if [[ $HARNESS == codex ]]; then
    jq -e -s 'all(.[]; (.path | startswith("/v1/responses")) | not)' "$WORK/record.jsonl" >/dev/null \
        || fail "Codex went to api.openai.com's /v1/responses: it signed in with an API key it was not given" "$WORK/record.jsonl"
fi
sandbox_dump "$container" "$WORK/dump"
case $HARNESS in
claude-code) probe=CLAUDE_CODE_OAUTH_TOKEN= ;;
codex) probe=CODEX_HOME= ;; # its auth.json is written from a variable the harness does not keep
esac
grep -qaF "$probe" "$WORK/dump" || fail "the sandbox dump does not show the harness's environment"
grep -qaF "$value" "$WORK/dump" && fail "the real token is in the sandbox (a process's environment or command line, or a file)"
case $HARNESS in
claude-code)
    placeholder=$(grep -aoE "CLAUDE_CODE_OAUTH_TOKEN=[^[:space:][:cntrl:]]+" "$WORK/dump" | head -1 | cut -d= -f2)
    [[ $placeholder == sk-ant-oat* ]] || fail "CLAUDE_CODE_OAUTH_TOKEN in the sandbox is not shaped as a subscription token: '$placeholder'"
    ;;
codex)
    auth=$(docker exec -u agent "$container" cat /home/agent/.codex/auth.json 2>/dev/null || true)
    jq -e '.auth_mode == "chatgpt" and (.tokens.access_token | type == "string" and contains("agenthold-login-"))' <<<"$auth" >/dev/null \
        || fail "~/.codex/auth.json in the sandbox does not hold ChatGPT-mode placeholder tokens"
    jq -e '.OPENAI_API_KEY == null' <<<"$auth" >/dev/null || fail "~/.codex/auth.json in the sandbox holds an API key"
    ;;
esac
ok "the stand-in saw the real token in Authorization; the sandbox holds a placeholder shaped as $HARNESS expects, and nothing in it holds the token"
