# shellcheck shell=bash
# Shared helpers for scripts/dev/*.sh. Source it; don't run it.
#
# Conventions: progress goes to stderr (so a script's stdout can carry a single
# value, e.g. postgres.sh prints the DATABASE_URL), every wait has a deadline,
# and every step is idempotent.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEV_DIR="${REPO_ROOT}/.dev"
mkdir -p "$DEV_DIR"

log() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# In a subshell about to exec a daemon: closes every inherited descriptor above 2 (a pipe a
# caller reads until EOF, such as `make up | tail`, would otherwise stay open as long as the
# daemon runs).
close_inherited_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if (( fd > 2 )); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
}

# wait_until SECONDS DESCRIPTION CMD...  — polls CMD every 0.5 s until it
# succeeds or the deadline passes (then returns 1).
wait_until() {
    local deadline=$(( SECONDS + $1 )) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        if (( SECONDS >= deadline )); then
            log "gave up waiting for ${what}"
            return 1
        fi
        sleep 0.5
    done
}

# apt_install PKG...  — installs Debian packages that are missing. Runs
# `apt-get update` first (once per script run). Needs root.
_APT_UPDATED=0
apt_install() {
    local missing=() p
    for p in "$@"; do
        [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == "install ok installed" ]] || missing+=("$p")
    done
    (( ${#missing[@]} == 0 )) && return 0
    (( EUID == 0 )) || die "need the Debian packages: ${missing[*]} — install them (as root: apt-get install ${missing[*]}) and rerun"
    command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
    export DEBIAN_FRONTEND=noninteractive
    if (( _APT_UPDATED == 0 )); then
        log "apt-get update"
        apt-get update -qq >&2
        _APT_UPDATED=1
    fi
    log "apt-get install ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# ensure_cmd CMD PKG  — installs PKG if CMD is not on PATH.
ensure_cmd() {
    command -v "$1" >/dev/null 2>&1 || apt_install "$2"
}
