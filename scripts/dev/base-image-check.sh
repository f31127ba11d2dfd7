#!/usr/bin/env bash
# Quick self-check of the harness image (default agenthold/base:latest; `make base-image` builds
# it): node is the pinned Node.js 24, the harness commands and tools are on PATH for `agent`,
# passwordless sudo, /opt/agenthold; `claude` runs, Chromium renders a local page headless as
# `agent`, pip/git/sudo are set for the egress proxy; and each of claude-agent-acp, codex-acp and `opencode acp`
# answers an ACP `initialize` request with a result that has a protocolVersion — in a container
# without any network (--network none).
#
#   scripts/dev/base-image-check.sh [IMAGE [HARNESS...]]
#
# HARNESS (claude-agent-acp, codex-acp, opencode, or `command:PROGRAM [ARG...]` for an agent's
# `command` harness, e.g. 'command:my-acp-agent --stdio') limits the check to those harnesses and
# to what any agent image needs (the `agent` user, /opt/agenthold): for a custom image.
# Prints each harness's answer as `<harness> <json>` on stdout, and what it advertised (agent
# info, auth methods, capabilities) on stderr; exits 1 if any check fails.
# AGENTHOLD_CHECK_TIMEOUT: seconds each harness may take to answer (default 60).
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

IMAGE=${1:-agenthold/base:latest}
shift || true
FULL=1
HARNESSES=(claude-agent-acp codex-acp opencode)
if (( $# )); then FULL=0; HARNESSES=("$@"); fi
# The programs that must be on PATH: a command harness's PROGRAM.
CMDS=()
for h in "${HARNESSES[@]}"; do
    case $h in
        command:*) read -r -a argv <<<"${h#command:}"; (( ${#argv[@]} )) || die "$h names no program"; CMDS+=("${argv[0]}") ;;
        *) CMDS+=("$h") ;;
    esac
done
TIMEOUT=${AGENTHOLD_CHECK_TIMEOUT:-60}
NODE_WANT=v24.22.3
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}'

timeout 10 docker info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/dev/docker.sh (make docker) first"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "$IMAGE does not exist; run make base-image first"

failed=0
fail() { log "FAIL: $*"; failed=1; }

# The tools, as the agent user with a login shell (what a terminal in the sandbox sees) and with
# the image's own environment (what sandboxd gives a harness).
env_out=$(docker run --rm --network none --user agent -e "FULL=$FULL" -e "CMDS=${CMDS[*]}" "$IMAGE" bash -c '
    set -e
    tools=$CMDS
    if [ "$FULL" = 1 ]; then
        node --version
        tools="$tools npm git python3 rg jq chromium"
        sudo -n true 2>/dev/null || { echo "no passwordless sudo"; exit 1; }
    fi
    for c in $tools; do command -v "$c" >/dev/null || { echo "missing: $c"; exit 1; }; done
    for c in $CMDS; do bash -lc "command -v $c" >/dev/null || { echo "$c is not on a login shell PATH"; exit 1; }; done
    test -d /opt/agenthold || { echo "no /opt/agenthold"; exit 1; }
    [ "$(id -u):$HOME" = "1000:/home/agent" ] || { echo "agent is $(id -u) with home $HOME"; exit 1; }
    echo ok' 2>&1) || true
want=ok
(( FULL )) && want="$NODE_WANT"$'\n'ok
if [[ $env_out == "$want" ]]; then
    if (( FULL )); then
        log "ok: node $NODE_WANT; harnesses, tools, sudo and /opt/agenthold there for agent"
    else
        log "ok: ${CMDS[*]} and /opt/agenthold there for agent"
    fi
else
    fail "the image's tools: $env_out"
fi

# The rest of the base image's promise (FULL only), as `agent` in a container confined like a
# sandbox (no new privileges, no capabilities, no network): `claude` on PATH runs; Chromium
# renders a local page headless (its script ran: the DOM holds what it wrote); pip installs into
# ~/.local despite PEP 668 and trusts the system bundle; git trusts it too.
if (( FULL )); then
    promise=$(docker run --rm --network none --user agent --security-opt no-new-privileges --cap-drop ALL "$IMAGE" bash -lc '
        set -e
        claude --version | grep -q "(Claude Code)" || { echo "claude --version: $(claude --version 2>&1 | head -n 1)"; exit 1; }
        printf "%s" "<html><body><p id=out>static</p><script>document.getElementById(\"out\").textContent = \"rendered \" + 6 * 7</script></body></html>" >/tmp/page.html
        dom=$(timeout 60 chromium --headless --dump-dom file:///tmp/page.html 2>/tmp/chromium.err) || { echo "chromium failed: $(tail -n 3 /tmp/chromium.err)"; exit 1; }
        case $dom in *"<p id=\"out\">rendered 42</p>"*) ;; *) echo "chromium rendered: $dom"; exit 1 ;; esac
        pip config list 2>/dev/null | grep -qx "global.break-system-packages=.true." || { echo "pip: no break-system-packages"; exit 1; }
        [ "$(git config --system http.sslCAInfo)" = /etc/ssl/certs/ca-certificates.crt ] || { echo "git: no sslCAInfo"; exit 1; }
        echo ok' 2>&1) || true
    if [[ $promise == ok ]]; then
        log "ok: claude on PATH, chromium --headless renders a local page as agent, pip and git configured"
    else
        fail "the base image's promise: $promise"
    fi
    # sudo keeps the proxy's variables (sudo apt-get goes through the proxy): checked where sudo
    # works (a plain container; agenthold's sandboxes are the sudo setting's business).
    kept=$(docker run --rm --network none --user agent -e HTTPS_PROXY=http://u:p@proxy.invalid:3128 -e SSL_CERT_FILE=/x \
        "$IMAGE" sudo -n sh -c 'echo "$HTTPS_PROXY $SSL_CERT_FILE"' 2>/dev/null) || true
    if [[ $kept == "http://u:p@proxy.invalid:3128 /x" ]]; then
        log "ok: sudo keeps the proxy's and the CA's variables"
    else
        fail "sudo does not keep the proxy's variables: $kept"
    fi
fi

# advertised NAME JSON — logs what the harness's initialize result advertised.
advertised() {
    python3 - "$1" "$2" <<'PY' >&2 || log "($1: its answer is not a JSON-RPC result)"
import json, sys
name, answer = sys.argv[1], json.loads(sys.argv[2])
r = answer.get("result") or {}
info = r.get("agentInfo") or {}
caps = r.get("agentCapabilities") or {}
auth = [m.get("id") or m.get("methodId") or "?" for m in r.get("authMethods") or [] if isinstance(m, dict)]
print(f"  {name}: protocolVersion {r.get('protocolVersion')}; agent {info.get('name', '?')} {info.get('version', '')}".rstrip()
      + f"; authMethods {auth or 'none'}; loadSession {json.dumps(caps.get('loadSession', False))}"
      + f"; capabilities {sorted(k for k in caps if k != 'loadSession') or 'none'}")
PY
}

# probe NAME CMD... — runs CMD in a container, sends INIT, waits for the answer to id 1.
probe() {
    local name=$1 cname line deadline left answer="" errf
    shift
    cname="agenthold-base-check-$$-$name"
    errf=$(mktemp)
    coproc PROBE { exec timeout "$((TIMEOUT + 10))" docker run --rm -i --network none --user agent --name "$cname" "$IMAGE" "$@" 2>"$errf"; }
    local out_fd=${PROBE[0]} in_fd=${PROBE[1]} pid=$PROBE_PID
    printf '%s\n' "$INIT" >&"$in_fd"
    deadline=$((SECONDS + TIMEOUT))
    while left=$((deadline - SECONDS)); (( left > 0 )) && IFS= read -r -t "$left" line <&"$out_fd"; do
        if [[ $line == *'"id":1'* && $line == *'"result"'* && $line == *'"protocolVersion"'* ]]; then
            answer=$line
            break
        fi
    done
    docker kill "$cname" >/dev/null 2>&1 || true
    exec {in_fd}>&- || true
    wait "$pid" 2>/dev/null || true
    if [[ -n $answer ]]; then
        log "ok: $name answered initialize"
        advertised "$name" "$answer"
        printf '%s %s\n' "$name" "$answer"
    else
        fail "$name did not answer initialize within ${TIMEOUT}s; its stderr:"
        tail -n 20 "$errf" >&2
    fi
    rm -f "$errf"
}

for h in "${HARNESSES[@]}"; do
    case $h in
        claude-agent-acp | codex-acp) probe "$h" "$h" ;;
        opencode) probe opencode opencode acp ;;
        command:*) read -r -a argv <<<"${h#command:}"; probe "${argv[0]##*/}" "${argv[@]}" ;;
        *) fail "unknown harness $h (claude-agent-acp, codex-acp, opencode, or command:PROGRAM [ARG...])" ;;
    esac
done

exit "$failed"
