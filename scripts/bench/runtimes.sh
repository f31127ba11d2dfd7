#!/usr/bin/env bash
# make bench's runtimes part (docs/benchmarks.md, "What root containment costs"): how a sandbox
# starts and wakes under each way this machine can run one, beside the default, in the same run.
#
#   runc         runc on an engine without user-namespace remapping (no sudo in sandboxes)
#   runc_userns  runc on an engine that remaps user namespaces (root inside is not root on the
#                host, so sandboxes get sudo: docs/security.md, "sudo in a sandbox")
#   runsc        gVisor, when the default engine has the runtime registered
#                (AGENTHOLD_DOCKER_RUNTIMES=runsc) — else said as skipped with the reason
#
# The default engine (the one scripts/dev/docker.sh started) is one of the first two; the other
# is a second dockerd started here on a socket, data-root, network pool, default bridge and agent
# subnets of its own, stopped again at the end, with the test image copied in from the default
# engine (`docker save | docker load`, once per build of it). Each is
# `BENCH_ONLY=startup scripts/bench/run.sh` (docker run, cold start, pooled start, wake, then one
# flood) against a bench server of its own. Prints ONE JSON object as the last line of stdout:
# {"runtimes": {"runc": {...}, "runc_userns": {...}}, "runtimes_default": "runc",
#  "runtimes_skipped": {...}, "runtime_<name>_vs_default": {"docker_run": r, "cold_start": r,
#  "wake": r, "flood": r}}; everything else goes to stderr. Needs the release binaries (run.sh builds them).
#   BENCH_RUNTIMES_OTHER_ROOT  the second engine's data-root (default /var/lib/agenthold-docker-other)
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/../dev/lib.sh"
cd "$REPO_ROOT"

OUT=$DEV_DIR/bench/runtimes
mkdir -p "$OUT"
OTHER_SOCKET=/run/agenthold-bench-other.sock
OTHER_ROOT=${BENCH_RUNTIMES_OTHER_ROOT:-/var/lib/agenthold-docker-other}
OTHER_PIDFILE=$DEV_DIR/dockerd-agenthold-bench-other.pid
OTHER_BRIDGE=ahbenchother0
log() { printf '[bench-runtimes] %s\n' "$*" >&2; }

# startup NAME [env…] — one startup run, its figures into $OUT/NAME.json.
startup() {
    local name=$1
    shift
    log "$name: BENCH_ONLY=startup"
    if env "$@" BENCH_DIR="$OUT/$name" BENCH_ONLY=startup BENCH_SKIP_BUILD=1 BENCH_RUNTIMES=0 \
        bash scripts/bench/run.sh >"$OUT/$name.out"; then
        tail -n 1 "$OUT/$name.out" | jq -c '{docker_run_ms, cold_start_ms, pooled_start_ms, wake_ms, flood_events_per_s}' >"$OUT/$name.json"
    else
        log "$name: the startup benchmark failed"
        skipped "$name" "its startup benchmark failed (see $OUT/$name.out and $OUT/$name/server.log)"
    fi
}

skipped() { jq -cn --arg why "$2" '{skipped: $why}' >"$OUT/$1.json"; }

# copy_image IMAGE — the default engine's IMAGE into the other engine, unless it has that very one.
copy_image() {
    local id
    id=$(docker image inspect --format '{{.Id}}' "$1") || return 1
    [[ $(DOCKER_HOST=unix://$OTHER_SOCKET docker image inspect --format '{{.Id}}' "$1" 2>/dev/null) == "$id" ]] && return 0
    log "copying $1 from the default engine"
    docker save "$1" | DOCKER_HOST=unix://$OTHER_SOCKET docker load -q >&2
}

stop_other() {
    [[ -f $OTHER_PIDFILE ]] || return 0
    local pid
    pid=$(cat "$OTHER_PIDFILE")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    rm -f "$OTHER_PIDFILE"
}
trap stop_other EXIT

rm -f "$OUT"/*.json
if docker info --format '{{json .SecurityOptions}}' 2>/dev/null | grep -q 'name=userns'; then
    default=runc_userns other=runc other_userns=off
else
    default=runc other=runc_userns other_userns=default
fi
startup "$default"

# The other engine: an address pool, a default bridge and agent subnets apart from the default
# engine's (`--bridge none` would not do: a dockerd without a bridge of its own removes docker0,
# the other engine's; two engines' bridges on one subnet take each other's routes, and each
# server checks only its own engine's networks). No disk image: the default data-root's.
if ! ip link show "$OTHER_BRIDGE" >/dev/null 2>&1; then
    ip link add "$OTHER_BRIDGE" type bridge && ip addr add 10.217.0.1/24 dev "$OTHER_BRIDGE" \
        && ip link set "$OTHER_BRIDGE" up || log "could not make the bridge $OTHER_BRIDGE"
fi
log "$other: a second dockerd (AGENTHOLD_DOCKER_USERNS=$other_userns) on $OTHER_SOCKET (data-root $OTHER_ROOT)"
if AGENTHOLD_DOCKERD_SOCKET=$OTHER_SOCKET AGENTHOLD_DOCKER_USERNS=$other_userns AGENTHOLD_DOCKER_DISK=off \
    AGENTHOLD_DOCKER_ADDRESS_POOL=10.215.0.0/16 \
    AGENTHOLD_DOCKERD_ARGS="--data-root $OTHER_ROOT --bridge $OTHER_BRIDGE" scripts/dev/docker.sh >&2 \
    && copy_image agenthold/test:latest; then
    startup "$other" DOCKER_HOST="unix://$OTHER_SOCKET" BENCH_SKIP_IMAGES=1 AGENTHOLD_SANDBOX_SUBNET_POOL=10.216.0.0/16
else
    skipped "$other" "the second engine or its image did not come up (see .dev/dockerd-agenthold-bench-other.log)"
fi
stop_other

if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    startup runsc AGENTHOLD_SANDBOX_RUNTIME=runsc
else
    skipped runsc "the engine has no runtime runsc (AGENTHOLD_DOCKER_RUNTIMES=runsc scripts/dev/docker.sh registers Debian's; docs/security.md says why it does not run sandboxes on this kernel)"
fi

# One object: each runtime's figures, the skipped ones with their reason, the ratios to the default.
jq -cs --arg default "$default" '
    {runc: .[0], runc_userns: .[1], runsc: .[2]} as $all
    | $all[$default] as $d
    | {runtimes: ($all | with_entries(select(.value.skipped == null))),
       runtimes_default: $default,
       runtimes_skipped: ($all | with_entries(select(.value.skipped != null) | .value = .value.skipped))}
    | . + ([.runtimes | to_entries[] | select(.key != $default and $d.skipped == null) | {
          key: "runtime_\(.key)_vs_default",
          value: {
            docker_run: ((.value.docker_run_ms / $d.docker_run_ms) * 100 | round / 100),
            cold_start: ((.value.cold_start_ms / $d.cold_start_ms) * 100 | round / 100),
            wake: ((.value.wake_ms / $d.wake_ms) * 100 | round / 100),
            flood: ((.value.flood_events_per_s / $d.flood_events_per_s) * 100 | round / 100)
          }}] | from_entries)
' "$OUT/runc.json" "$OUT/runc_userns.json" "$OUT/runsc.json"
