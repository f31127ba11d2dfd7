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
#
# Disk (docs/setup.md, "The engine's disk"): the dockerd this script starts gets a data-root of
# its own, a sparse image file mounted with quotas, so that sandboxes get disk limits (their home
# and writable layer, docs/security.md) and a full engine cannot fill the host's disk (where
# Postgres lives): xfs mounted with pquota (overlay2; homes and writable layers limited) when the
# kernel has XFS quotas, else btrfs with simple quotas (the btrfs storage driver; writable layers
# only; kernel 6.7 or later), else none. Not when /var/lib/docker already is xfs with project
# quotas (dockerd's own data-root then). The engine is labelled
# agenthold.disk-limits=<what it limits> (the tests read it). An engine already running is left
# as it is (stop it and rerun to move it; its images are built again by `make images`).
# Idempotent: the image is mounted again when it is not; it stays mounted when dockerd stops.
#   AGENTHOLD_DOCKER_DISK=auto|xfs|btrfs|off  off: dockerd's default data-root, as before (default auto)
#   AGENTHOLD_DOCKER_DISK_GIB     the image's size when it is made (default 64, at most 80% of
#                                 the free space where it lives, at least 8)
#   AGENTHOLD_DOCKER_DISK_DIR     where the image (disk.img) and its mount (root/) live
#                                 (default /var/lib/agenthold-docker)
#   AGENTHOLD_DOCKERD_SOCKET      start and talk to a dockerd on this unix socket (its own
#                                 exec-root, pid file and log: a second engine beside the usual one)
#   AGENTHOLD_DOCKERD_ARGS        more dockerd arguments (word-split)
#
# Root in a sandbox (docs/security.md, "sudo in a sandbox"): with AGENTHOLD_DOCKER_USERNS=default
# the dockerd this script starts remaps user namespaces (uid 0 in a container is uid 100000+
# outside, `dockremap` in /etc/subuid), so that the server gives sandboxes sudo. Its images live
# apart from an engine's without remapping (`make images` builds them again). The default.
# An engine already running as asked otherwise is left as it is, and this script says so.
#   AGENTHOLD_DOCKER_USERNS=default|off   default (the default): --userns-remap=default (sudo
#                                         on); off: none (sudo off)
#   AGENTHOLD_DOCKER_RUNTIMES=runsc       register gVisor as the runtime `runsc` (installs the
#                                         Debian package runsc when missing), for
#                                         AGENTHOLD_SANDBOX_RUNTIME=runsc
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

DEADLINE=${AGENTHOLD_DOCKER_DEADLINE:-60}
LOGFILE="$DEV_DIR/dockerd.log"
PIDFILE="$DEV_DIR/dockerd.pid"
DISK_MODE=${AGENTHOLD_DOCKER_DISK:-auto}
DISK_DIR=${AGENTHOLD_DOCKER_DISK_DIR:-/var/lib/agenthold-docker}
OWN_SOCKET=${AGENTHOLD_DOCKERD_SOCKET:-}
if [[ -n $OWN_SOCKET ]]; then
    name=$(basename "$OWN_SOCKET" .sock)
    LOGFILE="$DEV_DIR/dockerd-$name.log"
    PIDFILE="$DEV_DIR/dockerd-$name.pid"
    export DOCKER_HOST="unix://$OWN_SOCKET"
fi
case $DISK_MODE in auto|xfs|btrfs|off) ;; *) die "AGENTHOLD_DOCKER_DISK=$DISK_MODE: auto, xfs, btrfs or off" ;; esac
USERNS=${AGENTHOLD_DOCKER_USERNS:-default}
case $USERNS in default|off) ;; *) die "AGENTHOLD_DOCKER_USERNS=$USERNS: default or off" ;; esac
RUNTIMES=${AGENTHOLD_DOCKER_RUNTIMES:-}
case $RUNTIMES in ''|runsc) ;; *) die "AGENTHOLD_DOCKER_RUNTIMES=$RUNTIMES: runsc or nothing" ;; esac

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

# What the running engine says of disk limits (its label, from this script), for the log.
disk_limits_of_engine() {
    local labels
    labels=$(timeout 10 docker info --format '{{json .Labels}}' 2>/dev/null) || return 0
    grep -o 'agenthold.disk-limits=[a-z_,]*' <<<"$labels" | cut -d= -f2 || true
}

# Every container of a remapping engine runs as the same unprivileged host uid (dockremap's
# range), and each takes a session keyring under that uid's key quota: kernel.keys.maxkeys
# (200 by default) stops the 200th container ("unable to join session keyring: disk quota
# exceeded"). Raised to root's own quota, as for an engine of containers sharing one uid.
raise_key_quota() {
    local keys bytes
    keys=$(sysctl -n kernel.keys.maxkeys 2>/dev/null) || return 0
    bytes=$(sysctl -n kernel.keys.maxbytes 2>/dev/null) || return 0
    (( keys >= 1000000 && bytes >= 25000000 )) && return 0
    if sysctl -q -w kernel.keys.maxkeys=1000000 kernel.keys.maxbytes=25000000 2>/dev/null; then
        log "raised kernel.keys.maxkeys/maxbytes to 1000000/25000000 (were $keys/$bytes): the remapped uid holds one key per container"
    else
        log "kernel.keys.maxkeys is $keys: a remapping engine cannot run more than about $keys containers; raise it (sysctl kernel.keys.maxkeys=1000000 kernel.keys.maxbytes=25000000)"
    fi
}

# What root in a sandbox of the running engine is (docs/security.md, "sudo in a sandbox"), and
# what to do when it is not what the settings ask for.
report_root_containment() {
    local options runtimes
    options=$(timeout 10 docker info --format '{{json .SecurityOptions}}' 2>/dev/null) || return 0
    runtimes=$(timeout 10 docker info --format '{{json .Runtimes}}' 2>/dev/null) || true
    if grep -q 'name=userns' <<<"$options"; then
        log "it remaps user namespaces: sandboxes get sudo (root inside is not root on the host)"
        raise_key_quota
    elif [[ $USERNS != off ]]; then
        log "it does not remap user namespaces: sandboxes get no sudo (unless AGENTHOLD_SANDBOX_RUNTIME=runsc). To give them sudo, stop this engine (it was not started with --userns-remap) and rerun this script with AGENTHOLD_DOCKER_USERNS=default"
    fi
    if [[ -n $RUNTIMES ]] && ! grep -q "\"$RUNTIMES\"" <<<"$runtimes"; then
        log "it has no runtime $RUNTIMES: stop it and rerun this script to register it"
    fi
}

# Full btrfs qgroups (AGENTHOLD_DOCKER_DISK=btrfs on an older kernel) that went inconsistent limit
# nothing until a rescan: a sandbox's writable layer could fill the engine's disk. They can go so
# at mount, and also while the engine runs (thousands of containers made and removed; dockerd logs
# "Failed to delete btrfs qgroup"), so an engine already running is checked too. Only root, only
# this script's own disk.
rescan_inconsistent_qgroups() {
    local root=$1 shown
    (( EUID == 0 )) && mountpoint -q "$root" 2>/dev/null && command -v btrfs >/dev/null 2>&1 || return 0
    [[ "$(findmnt -no FSTYPE "$root" | head -n 1)" == btrfs ]] || return 0
    shown=$(btrfs qgroup show "$root" 2>&1) || return 0
    [[ $shown == *inconsistent* ]] || return 0
    log "rescanning the btrfs quotas of $root (inconsistent ones limit nothing)"
    btrfs quota rescan -w "$root" >/dev/null
}

if engine_answers; then
    log "Docker engine answers ($(timeout 10 docker info --format '{{.ServerVersion}}, storage driver {{.Driver}}, data-root {{.DockerRootDir}}' 2>/dev/null))"
    [[ -n $OWN_SOCKET ]] || rescan_inconsistent_qgroups "$DISK_DIR/root"
    limits=$(disk_limits_of_engine)
    if [[ -n $limits ]]; then
        log "its disk limits: $limits"
    elif [[ $DISK_MODE != off ]]; then
        log "it was not started on a data-root with quotas: sandboxes get no disk limits (docs/setup.md, \"The engine's disk\"; stop it and rerun this script to move it)"
    fi
    report_root_containment
    exit 0
fi

if [[ -n "${DOCKER_HOST:-}" && -z $OWN_SOCKET ]]; then
    die "DOCKER_HOST=${DOCKER_HOST} does not answer; not starting a local engine in its place"
fi
(( EUID == 0 )) || die "no Docker engine answers and only root can start dockerd; start it (or add yourself to the docker group) and rerun"

command -v dockerd >/dev/null 2>&1 || apt_install docker.io
# The docker.io package may have started the engine itself.
if engine_answers; then log "Docker engine answers"; exit 0; fi

# A dockerd that is still starting (or hung): wait for it instead of racing it.
pidfiles=("$PIDFILE")
[[ -n $OWN_SOCKET ]] || pidfiles+=(/var/run/docker.pid)
for pf in "${pidfiles[@]}"; do
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

# The engine's disk (see the top). Sets DATA_ROOT (empty: dockerd's default), DISK_FS and
# DISK_LIMITS (what the engine will limit: its label).
DATA_ROOT= DISK_FS= DISK_LIMITS=

has_project_quota() {  # has_project_quota DIR — DIR's filesystem is xfs mounted with project quotas
    local d=$1
    while [[ ! -e $d ]]; do d=$(dirname "$d"); done
    [[ "$(findmnt -no FSTYPE -T "$d" 2>/dev/null)" == xfs ]] \
        && findmnt -no OPTIONS -T "$d" 2>/dev/null | grep -qE '(^|,)(prjquota|pquota|pqnoenforce)(,|$)'
}

disk_size_gib() {
    local free want=${AGENTHOLD_DOCKER_DISK_GIB:-64} cap
    free=$(df --output=avail -BG "$DISK_DIR" | tail -n 1 | tr -dc 0-9)
    cap=$(( free * 8 / 10 ))
    if [[ -n ${AGENTHOLD_DOCKER_DISK_GIB:-} ]] && (( want > free )); then
        die "AGENTHOLD_DOCKER_DISK_GIB=$want: only ${free} GiB free in $DISK_DIR"
    fi
    [[ -n ${AGENTHOLD_DOCKER_DISK_GIB:-} ]] || (( want <= cap )) || want=$cap
    echo "$want"
}

# Enables btrfs simple quotas on the filesystem mounted at $1 (kernel 6.7 or later): an extent
# counts against the subvolume that wrote it, so a container's size counts its own writes (not
# its image's files), and making or removing a container stays cheap — with full qgroups both
# took 1-14 s instead of 0.2-0.3 s on a CI machine. btrfs-progs before 6.7 cannot enable them:
# the ioctl itself (BTRFS_IOC_QUOTA_CTL, BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA).
enable_simple_quota() {
    perl -e 'sysopen(my $fh, $ARGV[0], 0) or die "$!\n"; my $args = pack("QQ", 4, 0);
             ioctl($fh, 0xC0109428, $args) or die "$!\n";' "$1"
}

# The btrfs quota mode of the filesystem mounted at $1: squota, qgroup or nothing (none).
btrfs_quota_mode() {
    local uuid
    uuid=$(findmnt -no UUID "$1")
    cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null || true
}

# mount_disk FS — mounts the image (made already) at its mount point, with quotas; false (and
# unmounted) when the kernel cannot.
mount_disk() {
    local fs=$1 image=$DISK_DIR/disk.img root=$DISK_DIR/root
    mkdir -p "$root"
    case $fs in
        xfs) mount -o loop,pquota "$image" "$root" ;;
        btrfs)
            mount -o loop "$image" "$root" || return 1
            case $(btrfs_quota_mode "$root") in
                squota) ;;
                qgroup)
                    rescan_inconsistent_qgroups "$root"
                    log "its btrfs quotas are full qgroups, which make every container's creation and removal several times slower (docs/setup.md, \"The engine's disk\", says how to move it to simple quotas)"
                    ;;
                *)
                    # Before anything is written: enabled later, quotas miss what is there.
                    if ! enable_simple_quota "$root" 2>>"$LOGFILE"; then
                        if [[ $DISK_MODE != btrfs ]]; then
                            log "this kernel has no btrfs simple quotas (6.7 or later)"
                            umount "$root"
                            return 1
                        fi
                        log "this kernel has no btrfs simple quotas (6.7 or later): full qgroups, which make every container's creation and removal several times slower"
                        btrfs quota enable "$root"
                    fi
                    ;;
            esac
            ;;
        *) return 1 ;;
    esac
}

# make_disk FS — makes a sparse image of FS and mounts it; false (nothing left) when the kernel
# cannot mount it with quotas.
make_disk() {
    local fs=$1 image=$DISK_DIR/disk.img gib
    gib=$(disk_size_gib)
    (( gib >= 8 )) || { log "only room for a ${gib} GiB engine disk in $DISK_DIR (8 at least): none made"; return 1; }
    case $fs in
        xfs) ensure_cmd mkfs.xfs xfsprogs ;;
        btrfs) ensure_cmd mkfs.btrfs btrfs-progs ;;
    esac
    rm -f "$image"
    truncate -s "${gib}G" "$image"
    case $fs in
        xfs) mkfs.xfs -q "$image" ;;
        btrfs) mkfs.btrfs -q "$image" >/dev/null ;;
    esac
    if ! mount_disk "$fs" 2>>"$LOGFILE"; then
        log "the kernel cannot mount $fs with quotas ($(dmesg 2>/dev/null | tail -n 1 | sed 's/^\[[^]]*\] //'))"
        rm -f "$image"
        return 1
    fi
    log "made the engine's disk: a sparse ${gib} GiB $fs image, $image, mounted at $DISK_DIR/root"
}

prepare_disk() {
    [[ $DISK_MODE == off ]] && return 0
    if [[ -z $OWN_SOCKET ]] && has_project_quota /var/lib/docker; then
        log "/var/lib/docker is on xfs with project quotas: the engine's own data-root limits disks"
        DISK_FS=xfs DISK_LIMITS=home,writable_layer
        return 0
    fi
    (( EUID == 0 )) || { log "only root can make the engine's disk: none (sandboxes get no disk limits)"; return 0; }
    local image=$DISK_DIR/disk.img root=$DISK_DIR/root fs
    mkdir -p "$DISK_DIR"
    if mountpoint -q "$root"; then
        fs=$(findmnt -no FSTYPE "$root")
    elif [[ -f $image ]]; then
        fs=$(blkid -o value -s TYPE "$image" 2>/dev/null || true)
        mount_disk "$fs" || die "mounting $image ($fs) at $root failed; remove it to make a new one, or set AGENTHOLD_DOCKER_DISK=off"
        log "mounted the engine's disk $image ($fs) at $root"
    else
        case $DISK_MODE in
            auto) make_disk xfs || make_disk btrfs || true ;;
            *) make_disk "$DISK_MODE" || die "cannot make the engine's disk with $DISK_MODE (AGENTHOLD_DOCKER_DISK)" ;;
        esac
        if ! mountpoint -q "$root"; then
            log "no engine disk with quotas on this machine: sandboxes get no disk limits"
            return 0
        fi
        fs=$(findmnt -no FSTYPE "$root")
    fi
    case $fs in
        xfs)
            has_project_quota "$root" || die "$root is xfs without project quotas; unmount it (it is mounted again with pquota)"
            DISK_LIMITS=home,writable_layer
            ;;
        btrfs) DISK_LIMITS=writable_layer ;;
        *) die "$root holds $fs, not xfs or btrfs; unmount it, or set AGENTHOLD_DOCKER_DISK=off" ;;
    esac
    DATA_ROOT=$root DISK_FS=$fs
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

# gVisor as Debian ships it (runsc 0.0~20221219) takes every network namespace for the host's on
# kernels that namespace net.core.rmem_default (6.x: "cannot run with network enabled in root
# network namespace"), so it runs with --network=host: the sandbox's sockets are the host
# kernel's, in the container's own network namespace (its firewall rules still hold). A wrapper,
# because `dockerd --add-runtime` takes a path only.
runsc_wrapper() {
    local wrapper=$DEV_DIR/runsc
    printf '#!/bin/sh\nexec %s --network=host "$@"\n' "$(command -v runsc)" >"$wrapper"
    chmod 755 "$wrapper"
    echo "$wrapper"
}

start_dockerd() {
    local driver=$1 data_root=$2 limits=$3 args=()
    [[ -n $driver ]] && args+=(--storage-driver "$driver")
    [[ -n $data_root ]] && args+=(--data-root "$data_root")
    [[ -n $limits ]] && args+=(--label "agenthold.disk-limits=$limits")
    if [[ -n $OWN_SOCKET ]]; then
        local run_dir=/var/run/agenthold-docker-$(basename "$OWN_SOCKET" .sock)
        args+=(-H "unix://$OWN_SOCKET" --exec-root "$run_dir" --pidfile "$run_dir.pid")
    fi
    [[ $USERNS == default ]] && args+=(--userns-remap default)
    if [[ $RUNTIMES == runsc ]]; then
        command -v runsc >/dev/null 2>&1 || apt_install runsc
        args+=(--add-runtime "runsc=$(runsc_wrapper)")
    fi
    # shellcheck disable=SC2206 # word-split on purpose
    [[ -n ${AGENTHOLD_DOCKERD_ARGS:-} ]] && args+=($AGENTHOLD_DOCKERD_ARGS)
    # Every agent has a network of its own: Docker's default pools hold ~30 networks, so give it
    # room for 256 (/24 each) in a range chosen not to collide with the host's.
    args+=(--default-address-pool "base=${AGENTHOLD_DOCKER_ADDRESS_POOL:-10.213.0.0/16},size=24")
    local desc=${driver:-default}
    log "starting dockerd (storage driver: ${desc}, data-root: ${data_root:-default}, disk limits: ${limits:-none}); log: $LOGFILE"
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
    report_root_containment
}

prepare_disk
if [[ -n $DATA_ROOT ]]; then
    driver=${AGENTHOLD_DOCKER_STORAGE_DRIVER:-}
    [[ -z $driver && $DISK_FS == btrfs ]] && driver=btrfs
    start_dockerd "$driver" "$DATA_ROOT" "$DISK_LIMITS" && exit 0
    log "dockerd does not start on the engine's disk $DATA_ROOT; starting it as before (no disk limits)"
    DISK_LIMITS=
fi
driver=$(choose_driver)
if ! start_dockerd "$driver" "" "$DISK_LIMITS"; then
    if [[ -z $driver && -z "${AGENTHOLD_DOCKER_STORAGE_DRIVER:-}" ]]; then
        log "retrying with --storage-driver vfs"
        start_dockerd vfs "" "" || die "dockerd does not start; see $LOGFILE"
    else
        die "dockerd does not start; see $LOGFILE"
    fi
fi
