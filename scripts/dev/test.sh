#!/usr/bin/env bash
# Everything CI runs (`make test`, called by .ci/run), on a fresh Debian machine:
#
#   0. the structure checks: no new import cycle between the server's modules, agenthold-core
#      builds without IO crates
#   1. Postgres (private cluster, or DATABASE_URL), the Docker engine, the images
#   2. the browser UI: npm ci + vite build (make web), its unit tests (vitest)
#   3. cargo build --workspace --bins            (SQLX_OFFLINE=true: the
#   4. cargo nextest run --workspace              committed .sqlx/ must be
#      (cargo test --workspace without nextest)   complete); the API tests run on
#                                                 the Docker driver, then again on
#                                                 the local driver
#   5. end to end: make up, scripts/e2e/sessions.sh (if present), the other
#      e2e scripts, the UI's generated types against the server's OpenAPI document, every browser
#      flow in Chromium (web/e2e/tests, @playwright/test, axe; the server restarted mid-turn last),
#      make down
#
# A test that cannot run here skips saying so (server/tests/api/support/skip.rs): the skips are
# counted and listed at the end ("N tests skipped:"). With CI=true (AGENTHOLD_SKIPS_FATAL=1) a test
# that lacks what this script provides (root, the Docker engine) fails instead; one that lacks a
# kernel or filesystem feature of this machine, or runs on the other driver, still skips.
#
# Whatever happens, the server is stopped at the end, the sandboxes the end-to-end part made
# are removed (the dev stack's others are left alone), and so is the private Postgres cluster
# if this run started it. dockerd stays up.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT" || exit 1

export SQLX_OFFLINE=true
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
MAKE=${MAKE:-make}
T0=$SECONDS

step() { printf '\n==== [%4ds] %s\n' "$(( SECONDS - T0 ))" "$*" >&2; }

pg_started_here=0
if [[ -z "${DATABASE_URL:-}" ]] && ! scripts/dev/postgres.sh status 2>/dev/null; then
    pg_started_here=1
fi

# The dev stack's sandboxes that were there before the end-to-end part (the developer's own);
# the others are the run's, removed when it ends (sandboxes outlive their server by design, so
# without this every run left a score of containers running).
E2E_STARTED=0
E2E_BEFORE=
e2e_agents() {
    docker ps -a --filter label=agenthold.instance=agenthold --format '{{.Label "agenthold.agent"}}' 2>/dev/null | sort -u
}
remove_e2e_sandboxes() {
    (( E2E_STARTED )) || return 0
    local id
    for id in $(comm -13 <(printf '%s\n' "$E2E_BEFORE" | sort -u) <(e2e_agents)); do
        [[ -n $id ]] || continue
        docker ps -aq --filter "label=agenthold.agent=$id" | xargs -r docker rm -f >/dev/null 2>&1 || true
        docker volume ls -q --filter "label=agenthold.agent=$id" | xargs -r docker volume rm >/dev/null 2>&1 || true
        docker network ls -q --filter "label=agenthold.agent=$id" | xargs -r docker network rm >/dev/null 2>&1 || true
    done
}

# The tests' skips (server/tests/api/support/skip.rs, sandboxd/tests/tunnel/harness.rs): each
# appends `SKIPPED <test>: <reason>` to AGENTHOLD_SKIP_LOG (nextest keeps a passing test's output
# to itself). Set once the tests start.
SKIP_LOG=
report_skips() {
    [[ -n $SKIP_LOG ]] || return 0
    local skipped
    skipped=$(sort -u "$SKIP_LOG" 2>/dev/null || true)
    if [[ -z $skipped ]]; then
        step "no test skipped"
    else
        step "$(wc -l <<<"$skipped") tests skipped:"
        printf '%s\n' "$skipped" >&2
    fi
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    step "cleanup (exit status $rc)"
    scripts/dev/server.sh stop || true
    remove_e2e_sandboxes
    if (( pg_started_here )); then env -u DATABASE_URL scripts/dev/postgres.sh stop || true; fi
    report_skips
    step "done: $([[ $rc == 0 ]] && echo PASSED || echo "FAILED ($rc)") in $(( SECONDS - T0 )) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "structure: no new import cycle between the server's modules; the supervisor's core does no IO"
python3 scripts/check-module-cycles.py
scripts/check-core-deps.sh

step "postgres"
DATABASE_URL=$(scripts/dev/postgres.sh)
export DATABASE_URL

step "docker engine"
scripts/dev/docker.sh

step "images"
scripts/dev/images.sh

step "the base image (real harnesses; built once, then cached by the hash of its inputs)"
scripts/dev/base-image.sh
scripts/dev/base-image.sh check

step "the browser UI: make web (npm ci when the lockfile changed, vite build), vitest"
"$MAKE" --no-print-directory web
"$MAKE" --no-print-directory web-test

step "cargo build --workspace --bins (SQLX_OFFLINE=true)"
cargo build --workspace --bins

export AGENTHOLD_TEST_IMAGE=agenthold/test:latest
SKIP_LOG="$DEV_DIR/skipped-tests.log"
: >"$SKIP_LOG"
export AGENTHOLD_SKIP_LOG=$SKIP_LOG
if [[ ${CI:-} == true ]]; then export AGENTHOLD_SKIPS_FATAL=${AGENTHOLD_SKIPS_FATAL:-1}; fi
profile=()
if cargo nextest --version >/dev/null 2>&1; then
    # A [profile.ci] in .config/nextest.toml (retries, timeouts, JUnit) is used under CI.
    if [[ -n "${CI:-}" ]] && grep -qs '^\[profile\.ci\]' .config/nextest.toml; then profile=(--profile ci); fi
    step "cargo nextest run --workspace ${profile[*]}"
    cargo nextest run --workspace --no-tests=warn "${profile[@]}"
else
    step "cargo test --workspace (cargo-nextest not installed)"
    cargo test --workspace
fi
nextest_or_test() {
    if cargo nextest --version >/dev/null 2>&1; then cargo nextest run "$@" "${profile[@]}"; else cargo test "$@"; fi
}

step "the API tests again on the local driver (sandboxd as a child process, no Docker)"
AGENTHOLD_TEST_DRIVER=local nextest_or_test -p agenthold-server --test api

step "end to end: make up"
# The end-to-end scripts and the browser flows make many agents as the admin, on a dev stack
# that may hold earlier runs' agents: above the default per-user and per-workspace quotas.
export AGENTHOLD_MAX_AGENTS_PER_WORKSPACE=100000 AGENTHOLD_MAX_AGENTS_PER_USER=100000
E2E_BEFORE=$(e2e_agents)
E2E_STARTED=1
"$MAKE" --no-print-directory up
if [[ -x scripts/e2e/sessions.sh || -f scripts/e2e/sessions.sh ]]; then
    step "end to end: scripts/e2e/sessions.sh"
    (
        set -a
        # shellcheck disable=SC1091
        . "$DEV_DIR/env"
        set +a
        bash scripts/e2e/sessions.sh
    )
else
    step "end to end: scripts/e2e/sessions.sh does not exist yet; skipped"
fi
# The real harnesses' sessions are also opened in Chromium (E2E_UI=1), after a thought, a plan
# and a command (the stand-ins' think / plan / run).
scripts/dev/ui-browser.sh
for script in secrets packages provider-logins claude-harness codex opencode; do
    step "end to end: scripts/e2e/$script.sh (through the real egress proxy)"
    (
        set -a
        . "$DEV_DIR/env"
        set +a
        E2E_UI=1 E2E_EXTRA_PROMPTS=$'think Which file should I read first?\nplan Read the code | Fix the bug | Run the tests\nrun printf \'\\033[32mgreen\\033[0m plain\\n\'; ls /home/agent' \
            bash "scripts/e2e/$script.sh"
    )
done
# git with a token that never enters the sandbox, and an agent for a repository, in the base
# image, against a local HTTPS git server through the real proxy (scripts/e2e/git.sh).
step "end to end: scripts/e2e/git.sh (clone, commit and push through the real egress proxy)"
(
    set -a
    . "$DEV_DIR/env"
    set +a
    bash scripts/e2e/git.sh
)
# The permission gate on each real harness: approval (deny and allow), the harness's own "always"
# option, approve for this session, a parked turn, a posture change while a question waits, and
# a guarded policy (scripts/e2e/gate.sh).
for harness in claude-code codex opencode; do
    step "end to end: scripts/e2e/gate.sh $harness (the permission gate on the real harness)"
    (
        set -a
        . "$DEV_DIR/env"
        set +a
        bash scripts/e2e/gate.sh "$harness"
    )
done
# Pooled real harnesses: the server keeps each harness started and initialised, bound to no one;
# an agent created with its key takes it running, a turn runs on it, the stand-in sees only that
# agent's key and the claim is audited (scripts/e2e/pooled.sh).
for harness in claude-code codex opencode; do
    step "end to end: scripts/e2e/pooled.sh $harness (a pooled real harness taken running)"
    (
        set -a
        . "$DEV_DIR/env"
        set +a
        bash scripts/e2e/pooled.sh "$harness"
    )
done
# Account logins on the real harnesses: a Claude subscription token (Claude Code) and a ChatGPT
# login (Codex) reach them as placeholders and a turn runs on them (scripts/e2e/account-logins.sh).
# (Codex signed in with ChatGPT sends zstd-compressed requests; its stand-in undoes them with zstd.)
ensure_cmd zstd zstd
for harness in claude-code codex; do
    step "end to end: scripts/e2e/account-logins.sh $harness (an account login on the real harness)"
    (
        set -a
        . "$DEV_DIR/env"
        set +a
        bash scripts/e2e/account-logins.sh "$harness"
    )
done

step "the UI's types match the server's OpenAPI document (web: npm run check-types)"
(
    set -a
    . "$DEV_DIR/env"
    set +a
    cd web && npm run --silent check-types
)

# Every browser flow, each test its own user, axe on every page; the `restart` project last
# (AGENTHOLD_UI_RESTART=1: it kills the server mid-turn and starts it again with server.sh).
# A failure's trace and screenshot: .dev/playwright/results/; the report: .dev/playwright/report/.
step "end to end: the UI in Chromium (web/e2e/tests: @playwright/test, axe, the server restarted mid-turn)"
scripts/dev/ui-browser.sh
(
    set -a
    . "$DEV_DIR/env"
    set +a
    cd web && SCREENSHOTS="$DEV_DIR/ui-screenshots" AGENTHOLD_UI_RESTART=1 UI_RETRIES=1 npx playwright test
)

step "end to end: make down"
scripts/dev/server.sh stop
