#!/usr/bin/env bash
# Ensures a Docker engine answers `docker info`.
#
# - If one already answers (the local socket, or DOCKER_HOST), nothing happens.
# - Otherwise (root only): installs docker.io if `dockerd` is missing, starts
#   dockerd in the background (log .dev/dockerd.log, pid .dev/dockerd.pid) and
#   waits for it. dockerd keeps running after this script; `make down` leaves it.
#
# Storage driver: AGENTHOLD_DOCKER_STORAGE_DRIVER if set; else dockerd's own
# choice (overlay2 on ext4/xfs) unless /var/lib/docker sits on an overlay
# filesystem (nested containers), where overlay2 can't work: then
# fuse-overlayfs if /dev/fuse exists, else vfs. If dockerd with its own choice
# does not come up, it is retried once with vfs (slow, but works everywhere).
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

DEADLINE=${AGENTHOLD_DOCKER_DEADLINE:-60}
LOGFILE="$DEV_DIR/dockerd.log"
PIDFILE="$DEV_DIR/dockerd.pid"

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

# Bridges of agenthold's networks (`ah` + 13 hex digits) left in the kernel that no network of
# this engine owns (an engine stopped while making or removing one): their routes shadow live
# networks' subnets, and a sandbox on such a subnet cannot reach the server. Only for a local
# engine, as root, and only bridges with no port attached.
remove_orphan_bridges() {
    [[ -z "${DOCKER_HOST:-}" ]] && (( EUID == 0 )) && command -v ip >/dev/null 2>&1 || return 0
    local owned bridge
    owned=$(docker network ls -q | xargs -r docker network inspect \
        --format '{{index .Options "com.docker.network.bridge.name"}}' 2>/dev/null) || return 0
    for bridge in $(ip -o link show type bridge | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E '^ah[0-9a-f]{13}$'); do
        grep -qxF "$bridge" <<<"$owned" && continue
        [[ -z "$(ls -A "/sys/class/net/$bridge/brif" 2>/dev/null)" ]] || continue
        log "removing the bridge $bridge: no Docker network owns it (left by an engine stopped mid-way)"
        ip link del "$bridge" 2>/dev/null || true
    done
}
trap 'rc=$?; (( rc == 0 )) && remove_orphan_bridges; exit $rc' EXIT

command -v docker >/dev/null 2>&1 || apt_install docker.io

if engine_answers; then
    log "Docker engine answers ($(timeout 10 docker info --format '{{.ServerVersion}}, storage driver {{.Driver}}' 2>/dev/null))"
    exit 0
fi

if [[ -n "${DOCKER_HOST:-}" ]]; then
    die "DOCKER_HOST=${DOCKER_HOST} does not answer; not starting a local engine in its place"
fi
(( EUID == 0 )) || die "no Docker engine answers and only root can start dockerd; start it (or add yourself to the docker group) and rerun"

command -v dockerd >/dev/null 2>&1 || apt_install docker.io
# The docker.io package may have started the engine itself.
if engine_answers; then log "Docker engine answers"; exit 0; fi

# A dockerd that is still starting (or hung): wait for it instead of racing it.
for pf in /var/run/docker.pid "$PIDFILE"; do
    if [[ -s $pf ]] && kill -0 "$(cat "$pf")" 2>/dev/null \
        && [[ "$(cat "/proc/$(cat "$pf")/comm" 2>/dev/null)" == dockerd ]]; then
        log "dockerd (pid $(cat "$pf")) runs but does not answer yet; waiting"
        wait_until "$DEADLINE" "docker info" engine_answers && exit 0
        die "dockerd (pid $(cat "$pf")) does not answer; see its log ($LOGFILE) and stop it"
    fi
done

fs_type_of() {
    local d=$1
    while [[ ! -e $d ]]; do d=$(dirname "$d"); done
    stat -f -c %T "$d"
}

choose_driver() {
    if [[ -n "${AGENTHOLD_DOCKER_STORAGE_DRIVER:-}" ]]; then
        echo "$AGENTHOLD_DOCKER_STORAGE_DRIVER"; return
    fi
    local root_fs
    root_fs=$(fs_type_of /var/lib/docker)
    if [[ $root_fs == overlayfs || $root_fs == overlay ]]; then
        if [[ -e /dev/fuse ]] && { command -v fuse-overlayfs >/dev/null 2>&1 || apt_install fuse-overlayfs; }; then
            echo fuse-overlayfs
        else
            echo vfs
        fi
        return
    fi
    echo ""   # dockerd's own choice
}

start_dockerd() {
    local driver=$1 args=()
    [[ -n $driver ]] && args+=(--storage-driver "$driver")
    # Every agent has a network of its own: Docker's default pools hold ~30 networks, so give it
    # room for 256 (/24 each) in a range chosen not to collide with the host's.
    args+=(--default-address-pool "base=${AGENTHOLD_DOCKER_ADDRESS_POOL:-10.213.0.0/16},size=24")
    local desc=${driver:-default}
    log "starting dockerd (storage driver: ${desc}); log: $LOGFILE"
    echo "=== $(date -u +%FT%TZ) dockerd ${args[*]}" >>"$LOGFILE"
    setsid nohup dockerd "${args[@]}" </dev/null >>"$LOGFILE" 2>&1 &
    local pid=$!
    echo "$pid" >"$PIDFILE"
    local deadline=$(( SECONDS + DEADLINE ))
    until engine_answers; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "dockerd exited; last lines of $LOGFILE:"; tail -n 15 "$LOGFILE" >&2
            return 1
        fi
        if (( SECONDS >= deadline )); then
            log "dockerd did not answer within ${DEADLINE}s; stopping it"
            kill "$pid" 2>/dev/null || true
            wait_until 20 "dockerd to exit" bash -c "! kill -0 $pid" || kill -9 "$pid" 2>/dev/null || true
            return 1
        fi
        sleep 0.5
    done
    log "Docker engine answers ($(docker info --format '{{.ServerVersion}}, storage driver {{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))"
}

driver=$(choose_driver)
if ! start_dockerd "$driver"; then
    if [[ -z $driver && -z "${AGENTHOLD_DOCKER_STORAGE_DRIVER:-}" ]]; then
        log "retrying with --storage-driver vfs"
        start_dockerd vfs || die "dockerd does not start; see $LOGFILE"
    else
        die "dockerd does not start; see $LOGFILE"
    fi
fi
