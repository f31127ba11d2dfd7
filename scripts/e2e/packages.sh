#!/usr/bin/env bash
# End-to-end check of packages through the egress proxy (issue 32) against the real running
# stack (`make up`, `make base-image`; `make e2e` runs it):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/packages.sh
#
# In a real Docker sandbox of the base image, through the real egress proxy: the workspace's
# egress default (presets npm, pypi, debian) is set once and a new agent follows it; the agent's
# harness installs one real small package with each of npm, pip and apt (apt: see the switch
# below) and uses it; a host outside the presets is refused by the proxy (CONNECT and
# plain HTTP), a direct connection does not leave the sandbox, and the proxy's log shows this
# sandbox reached no host but the presets'; in the web terminal (the agent's terminal WebSocket,
# as the UI opens it, through `agentholdctl exec`) the proxy variables are there and
# `npm view is-number version` answers. The workspace's previous default is restored at the end.
#
# Needs the Docker driver, jq, curl, and the registries (npm, PyPI, the Debian mirror) reachable
# from the host. Prints `ok - …` per check; a failure prints `not ok - …` and exits 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-300}
IMAGE=${E2E_BASE_IMAGE:-agenthold/base:latest}
# ---------------------------------------------------------------------------------------------
# How apt runs in the sandbox (E2E_APT_AS):
#   sudo   `sudo apt-get update && sudo apt-get install -y` typed by the agent itself (the
#          image's sudoers keeps the proxy variables): sandboxes get sudo when root in them is not
#          root on the host (docs/security.md, "sudo in a sandbox").
#   user   apt as the agent itself, with its own state and cache directories under ~/apt:
#          `apt-get update` (the mirror's signed InRelease checked against the image's Debian
#          keyring), `apt-get download`, `dpkg -x` — for an engine that does not remap user
#          namespaces (no sudo there).
#   auto   (default) sudo when the engine remaps user namespaces (make dev's engine does) or
#          sandboxes run under gVisor, else user, said in the log.
APT_AS=${E2E_APT_AS:-auto}
# ---------------------------------------------------------------------------------------------
NPM_PACKAGE=is-number NPM_VERSION=7.0.0
PIP_PACKAGE=six PIP_VERSION=1.17.0
APT_PACKAGE=hello
PRESETS='["npm","pypi","debian"]'
# Every host the presets allow (proxy log check).
ALLOWED='registry.npmjs.org registry.yarnpkg.com pypi.org files.pythonhosted.org deb.debian.org security.debian.org'

log() { printf '[e2e-packages] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN
for cmd in jq curl docker; do command -v "$cmd" >/dev/null || die "$cmd is needed"; done
[[ ${AGENTHOLD_DRIVER:-docker} == docker ]] || { log "skipped: the local driver does not use the proxy"; exit 0; }
if [[ $APT_AS == auto ]]; then
    if docker info --format '{{json .SecurityOptions}}' 2>/dev/null | grep -q 'name=userns' \
        || [[ ${AGENTHOLD_SANDBOX_RUNTIME:-} == runsc ]]; then
        APT_AS=sudo
    else
        APT_AS=user
        log "the engine does not remap user namespaces: no sudo in sandboxes, so apt runs as the agent (E2E_APT_AS=user)"
    fi
fi
[[ $APT_AS == sudo || $APT_AS == user ]] || die "E2E_APT_AS is auto, sudo or user, not $APT_AS"
[[ -x $CTL ]] || (cd "$ROOT" && cargo build -q -p agenthold-cli)
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "$IMAGE does not exist; run make base-image"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-e2e-packages.XXXXXX")
agent=""
workspace=""
previous=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    [[ -n $agent ]] && { "$CTL" agents delete "$agent" >/dev/null 2>&1 || log "cleanup: deleting agent $agent failed"; }
    if [[ -n $previous ]]; then
        api PUT "/api/v1/workspaces/$workspace/egress" "$previous" >/dev/null 2>&1 || log "cleanup: restoring the workspace's egress default failed"
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
# 1. The workspace's default: npm, PyPI and the Debian mirror; a new agent follows it.
workspace=$(api GET /api/v1/me | jq -r '.workspaces[] | select(.personal) | .workspace_id')
[[ -n $workspace ]] || fail "no personal workspace" "$WORK/answer.json"
previous=$(api GET "/api/v1/workspaces/$workspace/egress")
[[ $(status) == 200 ]] || fail "reading the workspace's egress default: HTTP $(status)" "$WORK/answer.json"
api PUT "/api/v1/workspaces/$workspace/egress" "{\"presets\":$PRESETS}" >"$WORK/default.json"
[[ $(status) == 200 ]] || fail "setting the workspace's egress default: HTTP $(status)" "$WORK/default.json"
api POST /api/v1/agents "{\"name\":\"e2e-packages-$(date +%s)-$RANDOM\",\"harness\":\"fake\",\"image\":\"$IMAGE\"}" >"$WORK/agent.json"
agent=$(jq -r .id "$WORK/agent.json")
[[ -n $agent && $agent != null ]] || fail "creating the agent: HTTP $(status)" "$WORK/agent.json"
jq -e --argjson p "$PRESETS" '.egress_inherited == true and .egress.presets == $p' "$WORK/agent.json" >/dev/null \
    || fail "the new agent does not follow the workspace's default" "$WORK/agent.json"
ok "the workspace's egress default (npm, pypi, debian) set once; a new agent of $IMAGE follows it"

"$CTL" --compact sessions create "$agent" >"$WORK/session.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
session=$(jq -r .id "$WORK/session.json")
last_seq=0
# run COMMAND — one fakeagent `run` turn (the harness's own environment), waited for; its
# output in $WORK/out.
run() {
    "$CTL" --compact prompt "$session" "run $1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    "$CTL" watch --compact "$session" --after "$last_seq" --until turn_end --timeout "$TURN_TIMEOUT" \
        >"$WORK/turn.jsonl" 2>"$WORK/watch.err" || fail "watching the turn" "$WORK/turn.jsonl" "$WORK/watch.err"
    last_seq=$(jq -s 'last.seq' "$WORK/turn.jsonl")
    jq -s -r '[.[] | select(.payload.rawOutput.exitCode != null)] | last | .payload.content[0].content.text // ""' \
        "$WORK/turn.jsonl" >"$WORK/out"
}

# ---------------------------------------------------------------------------------------------
# 2. npm, pip and apt, each installing one real small package through the proxy.
run "cd \"\$(mktemp -d)\" && npm install --no-audit --no-fund --loglevel=error $NPM_PACKAGE@$NPM_VERSION && node -p 'require(\"$NPM_PACKAGE\")(42) ? \"npm-ok\" : \"npm-wrong\"'"
grep -qx 'npm-ok' "$WORK/out" || fail "npm install $NPM_PACKAGE through the proxy" "$WORK/out"
ok "npm install $NPM_PACKAGE@$NPM_VERSION in the sandbox, through the proxy, and it loads"

run "pip install --no-cache-dir --quiet $PIP_PACKAGE==$PIP_VERSION && python3 -c 'import $PIP_PACKAGE; print(\"pip-ok\", $PIP_PACKAGE.__version__)'"
grep -qx "pip-ok $PIP_VERSION" "$WORK/out" || fail "pip install $PIP_PACKAGE through the proxy" "$WORK/out"
ok "pip install $PIP_PACKAGE==$PIP_VERSION (into ~/.local: the image's pip.conf) through the proxy, and it imports"

case $APT_AS in
    sudo)
        run "sudo -n apt-get update -qq && sudo -n apt-get install -y -qq --no-install-recommends $APT_PACKAGE >/dev/null && $APT_PACKAGE"
        ;;
    user)
        run "a=\$HOME/apt; mkdir -p \$a/lists/partial \$a/cache/archives/partial \$a/pkg && o=\"-o Dir::State::Lists=\$a/lists -o Dir::Cache=\$a/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=\$(id -un)\" && apt-get \$o -qq update && cd \$a/pkg && apt-get \$o -qq download $APT_PACKAGE && dpkg -x ${APT_PACKAGE}_*.deb \$a/root && \$a/root/usr/bin/$APT_PACKAGE"
        ;;
esac
grep -qx 'Hello, world!' "$WORK/out" || fail "apt ($APT_AS): $APT_PACKAGE from the Debian mirror through the proxy" "$WORK/out"
ok "apt ($APT_AS): $APT_PACKAGE from the Debian mirror (signatures checked) through the proxy, $([[ $APT_AS == sudo ]] && echo installed || echo unpacked), and it runs"

# ---------------------------------------------------------------------------------------------
# 3. Nothing else leaves: a host outside the presets is refused by the proxy (CONNECT and plain
# HTTP), a direct connection does not get out, and the proxy saw no other destination of this
# sandbox's.
run "curl -s -o /dev/null -m 20 -w 'connect=%{http_connect}\n' https://example.com/; curl -s -o /dev/null -m 20 -w 'plain=%{http_code}\n' http://example.com/; curl -s -o /dev/null -m 10 --noproxy '*' https://example.com/ && echo direct=open || echo direct=closed"
grep -qx 'connect=403' "$WORK/out" || fail "CONNECT example.com:443 was not refused by the proxy" "$WORK/out"
grep -qx 'plain=403' "$WORK/out" || fail "plain HTTP to example.com was not refused by the proxy" "$WORK/out"
grep -qx 'direct=closed' "$WORK/out" || fail "a direct connection left the sandbox" "$WORK/out"
ok "example.com (outside the presets) is refused by the proxy (CONNECT 403, plain HTTP 403); a direct connection does not leave"

proxy_log=$ROOT/.dev/proxy.log
if [[ -f $proxy_log ]]; then
    # Every destination the proxy let this sandbox reach ("CONNECT" tunnels, "plain HTTP forwarded").
    sed $'s/\x1b\[[0-9;]*m//g' "$proxy_log" | grep -F "$agent" | grep -E 'decision="?(tunnel|intercept)|plain HTTP forwarded' \
        | grep -oE 'target=[^ ]+' | sed 's/^target=//; s/:[0-9]*$//' | sort -u >"$WORK/reached" || true
    [[ -s $WORK/reached ]] || fail "the proxy's log shows no destination of this sandbox (is .dev/proxy.log this stack's?)" "$proxy_log"
    # Besides the presets' hosts: agenthold's own MCP route, which every harness behind the proxy
    # is offered and connects to when its session opens (docs/triggers.md).
    while read -r host; do
        [[ " $ALLOWED mcp.agenthold.internal " == *" $host "* ]] || fail "the sandbox reached $host, outside the presets" "$WORK/reached"
    done <"$WORK/reached"
    ok "the proxy's log: this sandbox reached only $(tr '\n' ' ' <"$WORK/reached")"
else
    log "no .dev/proxy.log (the proxy is not this stack's): the log check is skipped"
fi

# ---------------------------------------------------------------------------------------------
# 4. The web terminal: the same proxy environment; npm answers there.
"$CTL" exec --timeout 180 "$agent" "echo proxies=\$(env | grep -ci proxy); npm view $NPM_PACKAGE@$NPM_VERSION version" \
    >"$WORK/terminal.out" 2>"$WORK/terminal.err" || fail "the terminal command failed" "$WORK/terminal.out" "$WORK/terminal.err"
# The terminal's bytes: its control sequences (colours, title, npm's spinner) taken out.
tr -d '\r' <"$WORK/terminal.out" | sed -E $'s/\x1b\\[[0-9;?]*[A-Za-z]//g; s/\x1b\\][^\x07]*\x07//g' >"$WORK/terminal.txt"
count=$(grep -ao 'proxies=[0-9][0-9]*' "$WORK/terminal.txt" | tail -n 1 | cut -d= -f2)
(( ${count:-0} > 0 )) || fail "the terminal has no proxy variables" "$WORK/terminal.txt"
grep -aqE "(^|[^0-9.])${NPM_VERSION//./\\.}\$" "$WORK/terminal.txt" || fail "npm view in the terminal did not answer $NPM_VERSION" "$WORK/terminal.txt"
ok "in the web terminal: $count proxy variables, and npm view $NPM_PACKAGE answers $NPM_VERSION"
