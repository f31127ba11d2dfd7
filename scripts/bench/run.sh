#!/usr/bin/env bash
# make bench: agenthold's benchmarks against a server instance of their own.
#
# Brings up what it needs (the private Postgres, the Docker engine, the images),
# builds the release binaries (server, sandboxd + fakeagent, the benchmark),
# starts its OWN server — ports ${BENCH_PORT:-17800}/${BENCH_TUNNEL_PORT:-17801},
# AGENTHOLD_INSTANCE=bench, data in .dev/bench, a fresh database agenthold_bench,
# Docker driver, image agenthold/test:latest — runs target/release/agenthold-bench,
# stops the server and prints the benchmark's JSON object as the LAST line of
# stdout. Everything else goes to stderr. The dev stack on 7700/7701 is left
# alone. See docs/benchmarks.md.
#
# Environment: BENCH_PORT, BENCH_TUNNEL_PORT, BENCH_ARGS (extra flags for
# agenthold-bench, e.g. "--flood-events 5000"), BENCH_SKIP_BUILD=1.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/../dev/lib.sh"
cd "$REPO_ROOT" || exit 1

PORT=${BENCH_PORT:-17800}
TUNNEL_PORT=${BENCH_TUNNEL_PORT:-17801}
INSTANCE=bench
IMAGE=agenthold/test:latest
BENCH_DIR=$DEV_DIR/bench
TARGET=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
[[ $TARGET == /* ]] || TARGET=$REPO_ROOT/$TARGET
SERVER_BIN=$TARGET/release/agenthold
BENCH_BIN=$TARGET/release/agenthold-bench
URL=http://127.0.0.1:$PORT
SERVER_PID=
mkdir -p "$BENCH_DIR"

# --- the stack ------------------------------------------------------------------
log "Postgres, Docker engine, images"
BASE_URL=$(scripts/dev/postgres.sh)
scripts/dev/docker.sh >&2
scripts/dev/images.sh >&2

export SQLX_OFFLINE=true  # build against the committed .sqlx/, like make test
if [[ ${BENCH_SKIP_BUILD:-} != 1 ]]; then
    log "cargo build --release (server, sandboxd, fakeagent, proxy, bench)"
    cargo build --release -p agenthold-server -p agenthold-sandboxd -p agenthold-proxy -p agenthold-bench --bins >&2
fi
PROXY_BENCH_BIN=$TARGET/release/proxy-bench
for bin in "$SERVER_BIN" "$TARGET/release/sandboxd" "$TARGET/release/fakeagent" "$BENCH_BIN" "$PROXY_BENCH_BIN"; do
    [[ -x $bin ]] || die "$bin not found (build failed?)"
done

# shellcheck disable=SC2012
PSQL=$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)
PSQL=${PSQL:-$(command -v psql || true)}
[[ -n $PSQL ]] || die "psql not found (apt-get install postgresql-client)"
# Swap the database name of a URL, keeping any ?query parameters.
db_url() { local base=${BASE_URL%%\?*}; echo "${base%/*}/$1${BASE_URL#"$base"}"; }
BENCH_DB_URL=$(db_url agenthold_bench)
SCRATCH_DB_URL=$(db_url agenthold_bench_scratch)

# --- cleanup (also on failure and Ctrl-C) ----------------------------------------
remove_bench_sandboxes() {
    local filter="label=agenthold.instance=$INSTANCE"
    docker ps -aq --filter "$filter" | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker volume ls -q --filter "$filter" | xargs -r docker volume rm >/dev/null 2>&1 || true
    docker network ls -q --filter "$filter" | xargs -r docker network rm >/dev/null 2>&1 || true
}

stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        log "stopping the bench server (pid $SERVER_PID)"
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        if ! wait_until 20 "the bench server to exit" bash -c "! kill -0 $SERVER_PID"; then
            kill -KILL "$SERVER_PID" 2>/dev/null || true
        fi
    fi
    SERVER_PID=
}

cleanup() {
    stop_server
    remove_bench_sandboxes
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$PORT" "$TUNNEL_PORT"; do
    port_taken "$p" && die "port $p is taken; set BENCH_PORT / BENCH_TUNNEL_PORT"
done

log "removing leftover sandboxes of instance '$INSTANCE'"
remove_bench_sandboxes

log "fresh databases agenthold_bench and agenthold_bench_scratch"
export PGOPTIONS="-c client_min_messages=warning"
for db in agenthold_bench agenthold_bench_scratch; do
    "$PSQL" "$BASE_URL" -v ON_ERROR_STOP=1 -q \
        -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >&2
done
# The raw-insert baseline's scratch copy of the schema: the migrations, applied by psql.
for f in $(printf '%s\n' migrations/*.sql | sort -V); do
    [[ $f == *.down.sql ]] && continue
    "$PSQL" "$SCRATCH_DB_URL" -v ON_ERROR_STOP=1 -q --single-transaction -f "$f" >/dev/null
done

# --- the server under test --------------------------------------------------------
TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
rm -rf "$BENCH_DIR/data"
mkdir -p "$BENCH_DIR/data"
log "starting $SERVER_BIN on $URL (tunnel :$TUNNEL_PORT, log $BENCH_DIR/server.log)"
(
    export DATABASE_URL=$BENCH_DB_URL
    export AGENTHOLD_LISTEN=127.0.0.1:$PORT
    export AGENTHOLD_TUNNEL_LISTEN=0.0.0.0:$TUNNEL_PORT
    export AGENTHOLD_DATA_DIR=$BENCH_DIR/data
    export AGENTHOLD_ADMIN_TOKEN=$TOKEN
    export AGENTHOLD_DRIVER=docker
    export AGENTHOLD_IMAGE=$IMAGE
    export AGENTHOLD_INSTANCE=$INSTANCE
    export AGENTHOLD_MODE=test  # a throwaway master key in the data dir
    unset AGENTHOLD_TUNNEL_URL AGENTHOLD_SANDBOX_BIN_DIR AGENTHOLD_MASTER_KEY AGENTHOLD_MASTER_KEY_FILE
    exec setsid "$SERVER_BIN" </dev/null >"$BENCH_DIR/server.log" 2>&1
) &
SERVER_PID=$!
ready() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$URL/readyz")" == 200 ]]; }
deadline=$(( SECONDS + 60 ))
until ready; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        tail -n 30 "$BENCH_DIR/server.log" >&2
        die "the bench server exited"
    fi
    (( SECONDS < deadline )) || { tail -n 30 "$BENCH_DIR/server.log" >&2; die "no 200 from $URL/readyz within 60 s"; }
    sleep 0.5
done

# --- the benchmark ----------------------------------------------------------------
log "running $BENCH_BIN"
started=$SECONDS
# shellcheck disable=SC2086
if ! AGENTHOLD_URL=$URL AGENTHOLD_TOKEN=$TOKEN BENCH_SCRATCH_DATABASE_URL=$SCRATCH_DB_URL \
    AGENTHOLD_INSTANCE=$INSTANCE AGENTHOLD_IMAGE=$IMAGE BENCH_SERVER_PID=$SERVER_PID \
    "$BENCH_BIN" ${BENCH_ARGS:-} >"$BENCH_DIR/result.json"; then
    log "the benchmark failed; last lines of $BENCH_DIR/server.log:"
    tail -n 20 "$BENCH_DIR/server.log" >&2
    exit 1
fi
log "benchmark took $(( SECONDS - started )) s"
cleanup
trap - EXIT

# --- the egress proxy (loopback only: the provider host maps to a local server) ---
log "running $PROXY_BENCH_BIN"
"$PROXY_BENCH_BIN" >"$BENCH_DIR/proxy.jsonl" || die "the proxy benchmark failed"
ensure_cmd jq jq
# --- the real harnesses (when the base image exists: make base-image) --------------
# Process start → `initialize` answered, per harness, inside a container of the base image
# (network off), beside starting `true` there; and the image's size.
BASE_IMAGE=${AGENTHOLD_BASE_IMAGE:-agenthold/base:latest}
echo '{}' >"$BENCH_DIR/harnesses.json"
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "measuring the harnesses' start in $BASE_IMAGE"
    container=$(docker run -d --network none -u agent "$BASE_IMAGE" sleep infinity)
    docker exec -i -u agent "$container" python3 - <"$REPO_ROOT/scripts/bench/harness_init.py" \
        >"$BENCH_DIR/harnesses.json" || log "the harness measurement failed"
    docker rm -f "$container" >/dev/null
    size=$(docker image inspect --format '{{.Size}}' "$BASE_IMAGE")
    jq -c --argjson size "$size" '. + {base_image_mib: ($size / 1048576 | round)}' "$BENCH_DIR/harnesses.json" \
        >"$BENCH_DIR/harnesses.json.tmp" && mv "$BENCH_DIR/harnesses.json.tmp" "$BENCH_DIR/harnesses.json"
else
    log "no $BASE_IMAGE (make base-image): the harness figures are left out"
fi

# One JSON object: the server's figures, the proxy's and the harnesses' beside them, and the
# proxy's targets.
jq -c --slurpfile proxy "$BENCH_DIR/proxy.jsonl" --slurpfile harnesses "$BENCH_DIR/harnesses.json" '
    ($proxy | add) as $p
    | . + $p + $harnesses[0]
    | .proxy_stream_vs_direct = (($p.proxy_stream_mb_per_s / $p.direct_stream_mb_per_s) * 1000 | round / 1000)
    | .targets += {
        proxy_overhead_p50_ms: {target: "<= 1", value: $p.proxy_overhead_p50_ms, pass: ($p.proxy_overhead_p50_ms <= 1)},
        proxy_stream_vs_direct: {target: ">= 0.8", value: .proxy_stream_vs_direct, pass: (.proxy_stream_vs_direct >= 0.8)},
        proxy_rss_idle_mib: {target: "<= 20", value: $p.proxy_rss_idle_mib, pass: ($p.proxy_rss_idle_mib <= 20)}
      }
    | .all_pass = ([.targets[].pass] | all)
' <(tail -n 1 "$BENCH_DIR/result.json")
