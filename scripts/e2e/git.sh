#!/usr/bin/env bash
# End-to-end check of git with a token that never enters the sandbox, and of an agent for a
# repository, against the real running stack (`make e2e` runs it after secrets.sh; `make up` and
# `make base-image` first):
#
#   set -a; . .dev/env; set +a; bash scripts/e2e/git.sh
#
# A local git server over HTTPS (scripts/e2e/standins/git_server.py: `git http-backend` behind
# HTTP Basic with a token, on loopback, with a test root) stands in for github.com, reached through
# the real egress proxy's TEST-ONLY upstream override (docs/proxy.md). An agent of the base image
# made with `repo` and a `git_token` secret gets the repository cloned into its home before its
# harness starts; its session starts in the clone; it commits and pushes a branch from inside
# (the fake harness's `run`, with the harness's environment); the push lands on the server with
# the real token; the token is in no process's environment or command line and no file under
# /home /tmp /etc /root /run /var/tmp /opt of the sandbox, nor in any event or log. This script
# restarts the dev server with the override and a proxy CA that covers github.com (made here:
# a CA made before github.com was a preset host does not cover it), and restarts it without both
# at the end.
#
# Needs the Docker driver, the base image (E2E_GIT_IMAGE, default agenthold/base:latest: it has
# git), git, python3, jq, curl. Prints `ok - …` per check; a failure prints `not ok - …`, exit 1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
CTL=$TARGET/debug/agentholdctl
PROXY_BIN=$TARGET/debug/agenthold-proxy
TURN_TIMEOUT=${E2E_TURN_TIMEOUT:-300}
IMAGE=${E2E_GIT_IMAGE:-agenthold/base:latest}

log() { printf '[e2e-git] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${AGENTHOLD_URL:?set AGENTHOLD_URL (and AGENTHOLD_TOKEN): set -a; . .dev/env; set +a}"
: "${AGENTHOLD_TOKEN:?set AGENTHOLD_TOKEN: set -a; . .dev/env; set +a}"
export AGENTHOLD_URL AGENTHOLD_TOKEN
for cmd in jq curl git python3 docker; do command -v "$cmd" >/dev/null || die "$cmd is needed"; done
[[ ${AGENTHOLD_DRIVER:-docker} == docker ]] || { log "skipped: the local driver does not use the proxy"; exit 0; }
[[ -x $CTL ]] || (cd "$ROOT" && cargo build -q -p agenthold-cli)
[[ -x $PROXY_BIN ]] || (cd "$ROOT" && cargo build -q -p agenthold-proxy)
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "the image $IMAGE is missing (make base-image)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agenthold-e2e-git.XXXXXX")
agent=""
secret=""
workspace=""
git_pid=""
restarted=0

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    [[ -n $agent ]] && { "$CTL" agents delete "$agent" >/dev/null 2>&1 || log "cleanup: deleting agent $agent failed"; }
    [[ -n $secret ]] && { api DELETE "/api/v1/workspaces/$workspace/secrets/$secret" >/dev/null 2>&1 || true; }
    [[ -n $git_pid ]] && kill "$git_pid" 2>/dev/null
    if (( restarted )); then
        log "cleanup: restarting the server without the test-only upstream override and CA"
        env -u AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES -u AGENTHOLD_PROXY_CA_DIR "$ROOT/scripts/dev/server.sh" start \
            >/dev/null 2>&1 || log "cleanup: the restart failed (see .dev/server.log)"
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
# The git server: a bare org/repo.git with one commit, behind Basic auth with the token.
token="ghp_e2e$(openssl rand -hex 20)"
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
"$ROOT/scripts/e2e/standins/make-cert.sh" "$WORK/certs" github.com >/dev/null 2>&1 || fail "making the test certificates"
mkdir -p "$WORK/root/org" "$WORK/seed"
git init -q --bare -b main "$WORK/root/org/repo.git"
git -C "$WORK/seed" init -q -b main
echo "the e2e repository" >"$WORK/seed/README.md"
git -C "$WORK/seed" add README.md
git -C "$WORK/seed" -c user.name=e2e -c user.email=e2e@example.com commit -q -m first
git -C "$WORK/seed" push -q "$WORK/root/org/repo.git" main
: >"$WORK/passwords"
python3 "$ROOT/scripts/e2e/standins/git_server.py" --root "$WORK/root" --token "$token" \
    --cert "$WORK/certs/leaf.pem" --key "$WORK/certs/leaf.key" --ready "$WORK/git.port" \
    --record "$WORK/passwords" 2>"$WORK/git.err" &
git_pid=$!
for _ in $(seq 100); do [[ -s $WORK/git.port ]] && break; sleep 0.1; done
[[ -s $WORK/git.port ]] || fail "the git server did not start" "$WORK/git.err"
port=$(tr -d '\n' <"$WORK/git.port")

# A proxy CA that covers github.com (and the presets), and the override github.com → the server.
"$PROXY_BIN" ca init --out "$WORK/ca" --with-presets --host github.com >/dev/null 2>"$WORK/ca.err" \
    || fail "making a proxy CA that covers github.com" "$WORK/ca.err"
overrides=$(jq -cn --arg addr "127.0.0.1:$port" --arg ca "$WORK/certs/root.pem" '{"github.com:443": {addr: $addr, ca_cert: $ca}}')
log "restarting the server with the test-only upstream override github.com → 127.0.0.1:$port"
restarted=1
AGENTHOLD_PROXY_CA_DIR=$WORK/ca AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES=$overrides \
    "$ROOT/scripts/dev/server.sh" start >/dev/null 2>"$WORK/restart.err" || fail "restarting the server" "$WORK/restart.err"

# ---------------------------------------------------------------------------------------------
# 1. A git_token secret for github.com, and an agent of the base image for the repository.
workspace=$(api GET /api/v1/me | jq -r '.workspaces[] | select(.personal) | .workspace_id')
[[ -n $workspace ]] || fail "no personal workspace" "$WORK/answer.json"
api POST "/api/v1/workspaces/$workspace/secrets" \
    "{\"name\":\"e2e-git-$RANDOM\",\"preset\":\"git_token\",\"value\":\"$token\",\"host\":\"github.com\"}" >"$WORK/secret.json"
[[ $(status) == 201 ]] || fail "creating the git_token secret: HTTP $(status)" "$WORK/secret.json"
secret=$(jq -r .id "$WORK/secret.json")
grep -qF "$token" "$WORK/secret.json" && fail "the secret's answer holds its value"
body=$(jq -cn --arg name "e2e-git-$(date +%s)-$RANDOM" --arg image "$IMAGE" \
    '{name: $name, harness: "fake", image: $image, repo: {url: "https://github.com/org/repo.git", branch: "main"}}')
api POST /api/v1/agents "$body" >"$WORK/agent.json"
agent=$(jq -r .id "$WORK/agent.json")
[[ $(status) == 201 && -n $agent && $agent != null ]] || fail "creating the agent: HTTP $(status)" "$WORK/agent.json"
[[ $(jq -r .repo.state "$WORK/agent.json") == pending ]] || fail "a new agent's repository is not pending" "$WORK/agent.json"
api PUT "/api/v1/agents/$agent/secrets/GIT_TOKEN" "{\"secret_id\":\"$secret\"}" >/dev/null
[[ $(status) == 200 ]] || fail "attaching the secret: HTTP $(status)" "$WORK/answer.json"
ok "a git_token secret for github.com and an agent of $IMAGE for https://github.com/org/repo.git"

"$CTL" --compact sessions create "$agent" >"$WORK/session.json" 2>"$WORK/ctl.err" || fail "creating a session: $(cat "$WORK/ctl.err")"
session=$(jq -r .id "$WORK/session.json")
last_seq=0
# run COMMAND — one `run` turn, waited for; its output in $WORK/out.
run() {
    "$CTL" --compact prompt "$session" "run $1" >"$WORK/prompt.json" 2>"$WORK/ctl.err" || fail "prompting: $(cat "$WORK/ctl.err")"
    "$CTL" watch --compact "$session" --after "$last_seq" --until turn_end --timeout "$TURN_TIMEOUT" \
        >"$WORK/turn.jsonl" 2>"$WORK/watch.err" || fail "watching the turn" "$WORK/turn.jsonl" "$WORK/watch.err"
    last_seq=$(jq -s 'last.seq' "$WORK/turn.jsonl")
    jq -s -r '[.[] | select(.payload.rawOutput.exitCode != null)] | last | .payload.content[0].content.text // ""' \
        "$WORK/turn.jsonl" >"$WORK/out"
}

# 2. The first wake clones (through the proxy, with the token the proxy puts in); the session
#    starts in the clone.
run 'pwd; cat README.md; git rev-parse --abbrev-ref HEAD'
api GET "/api/v1/agents/$agent" >"$WORK/agent.json"
[[ $(jq -r .repo.state "$WORK/agent.json") == cloned ]] || fail "the repository is not cloned" "$WORK/agent.json" "$WORK/git.err"
[[ $(sed -n 1p "$WORK/out") == /home/agent/repo && $(sed -n 2p "$WORK/out") == "the e2e repository" ]] \
    || fail "the session does not start in the clone" "$WORK/out"
ok "cloned at the first wake through the proxy; the session starts in /home/agent/repo (state cloned)"

# 3. A commit on a branch, pushed from inside the sandbox: it lands on the server.
run 'git checkout -q -b e2e-work && date > CHANGE && git add CHANGE && git -c user.name=agent -c user.email=agent@example.com commit -q -m "from the sandbox" && git push -q origin e2e-work 2>&1; echo pushed=$?'
grep -q '^pushed=0$' "$WORK/out" || fail "the push from the sandbox failed" "$WORK/out" "$WORK/git.err"
[[ $(git -C "$WORK/root/org/repo.git" log -1 --format=%s e2e-work 2>/dev/null) == "from the sandbox" ]] \
    || fail "the pushed branch is not on the git server" "$WORK/git.err"
grep -qxF "$token" "$WORK/passwords" || fail "the git server never got the real token"
grep -vxF -e "$token" -e - "$WORK/passwords" && fail "the git server got a password other than the token (a placeholder?)"
ok "a commit pushed from inside the sandbox (git-receive-pack through the proxy) lands on the git server with the real token"

# 4. The sandbox holds no copy of the token.
container=$(sandbox_container "$agent")
[[ -n $container ]] || fail "no container for agent $agent"
sandbox_dump "$container" "$WORK/dump"
# The search reads what the harness holds (its git configuration is there), so an absent token means absent.
grep -qaF "GIT_CONFIG_KEY_0=credential.https://github.com.helper" "$WORK/dump" || fail "the sandbox dump does not show the harness's git configuration"
grep -qaF "$token" "$WORK/dump" && fail "the token is in the sandbox (a process's environment or command line, or a file)"
ok "the sandbox holds no copy of the token: no environment, command line or file in it"

# 5. Nor any event or log.
"$CTL" --compact events "$session" --after 0 --limit 1000 >"$WORK/events.json" 2>/dev/null || fail "reading the events"
for file in "$WORK/events.json" "$ROOT/.dev/server.log" "$ROOT/.dev/proxy.log"; do
    [[ ! -f $file ]] || ! grep -qF "$token" "$file" || fail "the token is in $(basename "$file")"
done
ok "the token is in no event, nor in the server's or the proxy's log"
