#!/usr/bin/env bash
# make bench's runtimes part (docs/benchmarks.md, "What root containment costs"): how a sandbox
# starts and wakes under each way this machine can run one, beside the default, in the same run.
#
#   default  runc on the engine scripts/dev/docker.sh starts: user namespaces remapped, so
#            sandboxes get sudo (docs/security.md, "sudo in a sandbox")
#   plain    runc on an engine without remapping (no sudo): a second dockerd started here on a
#            socket, data-root, network pool and default bridge of its own, stopped again at
#            the end; the test image is copied into it
#            from the default engine (`docker save | docker load`, once per build of it)
#   runsc    gVisor, when the default engine has the runtime registered
#            (AGENTHOLD_DOCKER_RUNTIMES=runsc) — else said as skipped with the reason
#
# Each is `BENCH_ONLY=startup scripts/bench/run.sh` (docker run, cold start, pooled start, wake)
# against a bench server of its own. Prints ONE JSON object as the last line of stdout:
# {"runtimes": {"default": {...}, "plain": {...}}, "runtimes_skipped": {...},
#  "runtime_<name>_vs_default": {"docker_run": r, "cold_start": r, "wake": r}}; everything else
# goes to stderr. Needs the release binaries (scripts/bench/run.sh builds them).
#   BENCH_RUNTIMES_PLAIN_ROOT  the plain engine's data-root (default /var/lib/agenthold-docker-plain)
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/../dev/lib.sh"
cd "$REPO_ROOT"

OUT=$DEV_DIR/bench/runtimes
mkdir -p "$OUT"
PLAIN_SOCKET=/run/agenthold-bench-plain.sock
PLAIN_ROOT=${BENCH_RUNTIMES_PLAIN_ROOT:-/var/lib/agenthold-docker-plain}
PLAIN_PIDFILE=$DEV_DIR/dockerd-agenthold-bench-plain.pid
log() { printf '[bench-runtimes] %s\n' "$*" >&2; }

# startup NAME [env…] — one startup run, its figures into $OUT/NAME.json.
startup() {
    local name=$1
    shift
    log "$name: BENCH_ONLY=startup"
    if env "$@" BENCH_DIR="$OUT/$name" BENCH_ONLY=startup BENCH_SKIP_BUILD=1 BENCH_RUNTIMES=0 \
        bash scripts/bench/run.sh >"$OUT/$name.out"; then
        tail -n 1 "$OUT/$name.out" | jq -c '{docker_run_ms, cold_start_ms, pooled_start_ms, wake_ms}' >"$OUT/$name.json"
    else
        log "$name: the startup benchmark failed"
        jq -cn --arg why "its startup benchmark failed (see $OUT/$name.out and $OUT/$name/server.log)" '{skipped: $why}' \
            >"$OUT/$name.json"
    fi
}

# copy_image IMAGE — the default engine's IMAGE into the plain engine, unless it has that very one.
copy_image() {
    local id
    id=$(docker image inspect --format '{{.Id}}' "$1") || return 1
    [[ $(DOCKER_HOST=unix://$PLAIN_SOCKET docker image inspect --format '{{.Id}}' "$1" 2>/dev/null) == "$id" ]] && return 0
    log "plain: copying $1 from the default engine"
    docker save "$1" | DOCKER_HOST=unix://$PLAIN_SOCKET docker load -q >&2
}

stop_plain() {
    [[ -f $PLAIN_PIDFILE ]] || return 0
    local pid
    pid=$(cat "$PLAIN_PIDFILE")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    rm -f "$PLAIN_PIDFILE"
}
trap stop_plain EXIT

rm -f "$OUT"/*.json
startup default

# The plain engine: no remapping, no disk image, an address pool, a default bridge and agent
# subnets apart from the default engine's (`--bridge none` would not do: a dockerd without a bridge of its own removes
# docker0, the other engine's).
PLAIN_BRIDGE=ahbenchplain0
if ! ip link show "$PLAIN_BRIDGE" >/dev/null 2>&1; then
    ip link add "$PLAIN_BRIDGE" type bridge && ip addr add 10.217.0.1/24 dev "$PLAIN_BRIDGE" \
        && ip link set "$PLAIN_BRIDGE" up || log "plain: could not make the bridge $PLAIN_BRIDGE"
fi
log "plain: a second dockerd without user-namespace remapping on $PLAIN_SOCKET (data-root $PLAIN_ROOT)"
if AGENTHOLD_DOCKERD_SOCKET=$PLAIN_SOCKET AGENTHOLD_DOCKER_USERNS=off AGENTHOLD_DOCKER_DISK=off \
    AGENTHOLD_DOCKER_ADDRESS_POOL=10.215.0.0/16 \
    AGENTHOLD_DOCKERD_ARGS="--data-root $PLAIN_ROOT --bridge $PLAIN_BRIDGE" scripts/dev/docker.sh >&2 \
    && copy_image agenthold/test:latest; then
    # Agent subnets apart from the default engine's (10.214.0.0/16): two engines' bridges on one
    # subnet would take each other's routes, and each server checks only its own engine's networks.
    startup plain DOCKER_HOST="unix://$PLAIN_SOCKET" BENCH_SKIP_IMAGES=1 AGENTHOLD_SANDBOX_SUBNET_POOL=10.216.0.0/16
else
    jq -cn '{skipped: "the second engine or its images did not come up (see .dev/dockerd-agenthold-bench-plain.log)"}' \
        >"$OUT/plain.json"
fi
stop_plain

if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    startup runsc AGENTHOLD_SANDBOX_RUNTIME=runsc
else
    jq -cn '{skipped: "the engine has no runtime runsc (AGENTHOLD_DOCKER_RUNTIMES=runsc scripts/dev/docker.sh registers Debian'"'"'s; docs/security.md says why it does not run sandboxes on this kernel)"}' \
        >"$OUT/runsc.json"
fi

# One object: each runtime's figures, the skipped ones with their reason, the ratios to the default.
jq -cs '
    (.[0]) as $d
    | {runtimes: ({default: .[0], plain: .[1], runsc: .[2]} | with_entries(select(.value.skipped == null))),
       runtimes_skipped: ({default: .[0], plain: .[1], runsc: .[2]}
                          | with_entries(select(.value.skipped != null) | .value = .value.skipped))}
    | . + ([.runtimes | to_entries[] | select(.key != "default" and $d.skipped == null) | {
          key: "runtime_\(.key)_vs_default",
          value: {
            docker_run: ((.value.docker_run_ms / $d.docker_run_ms) * 100 | round / 100),
            cold_start: ((.value.cold_start_ms / $d.cold_start_ms) * 100 | round / 100),
            wake: ((.value.wake_ms / $d.wake_ms) * 100 | round / 100)
          }}] | from_entries)
' "$OUT/default.json" "$OUT/plain.json" "$OUT/runsc.json"
