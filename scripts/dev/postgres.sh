#!/usr/bin/env bash
# Private PostgreSQL cluster for development and tests.
#
#   scripts/dev/postgres.sh          ensure it runs; print DATABASE_URL on stdout
#   scripts/dev/postgres.sh stop     stop it (if it runs)
#   scripts/dev/postgres.sh status   exit 0 if it runs
#
# With DATABASE_URL already set, nothing is started: the script prints it.
#
# The cluster lives in .dev/pg (data in .dev/pg/data, unix socket in
# .dev/pg/run, log in .dev/pg/postgres.log), listens on 127.0.0.1 port
# ${AGENTHOLD_PG_PORT:-55432}, trusts loopback connections (a private dev
# cluster: no password), and keeps fsync on. It runs as the `postgres` user
# when started by root (Postgres refuses to run as root), as the caller
# otherwise. If `postgres` cannot reach the repository's .dev directory (a
# clone under /root, say), the cluster goes to /var/lib/agenthold-dev/<hash>
# and .dev/pg becomes a symlink to it.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

ACTION=${1:-start}
PORT=${AGENTHOLD_PG_PORT:-55432}
DB=agenthold
DEADLINE=${AGENTHOLD_PG_DEADLINE:-60}

if [[ -n "${DATABASE_URL:-}" ]]; then
    case $ACTION in
        start) log "DATABASE_URL is set; using it, no private cluster"; echo "$DATABASE_URL" ;;
        *) log "DATABASE_URL is set; no private cluster to $ACTION" ;;
    esac
    exit 0
fi

find_pgbin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | while read -r b; do [[ -x $b/initdb ]] && echo "$b"; done | sort -V | tail -n 1)
    [[ -n $d ]] && echo "$d"
}

PGBIN=$(find_pgbin || true)
if [[ -z $PGBIN ]]; then
    [[ $ACTION == start ]] || { log "PostgreSQL is not installed; nothing to $ACTION"; exit 0; }
    apt_install postgresql
    PGBIN=$(find_pgbin) || die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb found"
fi
PSQL=$PGBIN/psql; [[ -x $PSQL ]] || PSQL=$(command -v psql) || { apt_install postgresql-client; PSQL=$(command -v psql); }

# Who runs the server: `postgres` for root, else the caller.
if (( EUID == 0 )); then
    id postgres >/dev/null 2>&1 || die "no 'postgres' user (installing the postgresql package creates it)"
    as_pg() { (cd / && runuser -u postgres -- "$@"); }
    PG_OWNER=postgres
else
    as_pg() { "$@"; }
    PG_OWNER=$(id -un)
fi

# Where the cluster lives: .dev/pg, unless its owner can't reach .dev.
resolve_pgdir() {
    local link="$DEV_DIR/pg"
    if [[ -L $link ]]; then readlink -f "$link"; return; fi
    if [[ -d $link ]] || as_pg test -x "$DEV_DIR"; then echo "$link"; return; fi
    [[ $ACTION == start ]] || { echo "$link"; return; }
    local alt
    alt=/var/lib/agenthold-dev/$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)
    mkdir -p "$alt"
    ln -sfn "$alt" "$link"
    log "the $PG_OWNER user cannot reach $DEV_DIR; the cluster lives in $alt (.dev/pg links to it)"
    echo "$alt"
}

PGDIR=$(resolve_pgdir)
DATA=$PGDIR/data
RUNDIR=$PGDIR/run
LOGFILE=$PGDIR/postgres.log
# Unix socket paths are limited to ~107 bytes; a deep clone path falls back to /tmp.
if (( ${#RUNDIR} + 20 > 100 )); then
    RUNDIR=/tmp/agenthold-pg-$(printf '%s' "$PGDIR" | sha256sum | cut -c1-12)
fi

is_running() { [[ -f $DATA/postmaster.pid ]] && as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }
accepts() { "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres; }

case $ACTION in
    status) is_running; exit ;;
    stop)
        if is_running; then
            log "stopping the private cluster ($DATA)"
            as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t "$DEADLINE" stop >&2
        else
            log "private cluster not running"
        fi
        exit 0 ;;
    start) ;;
    *) die "usage: $0 [start|stop|status]" ;;
esac

mkdir -p "$PGDIR" "$RUNDIR"
if (( EUID == 0 )); then chown postgres: "$PGDIR" "$RUNDIR"; fi
chmod 0700 "$RUNDIR"

if [[ ! -f $DATA/PG_VERSION ]]; then
    log "initdb $DATA ($("$PGBIN/postgres" --version))"
    rm -rf "$DATA"
    as_pg "$PGBIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=trust >"$PGDIR/initdb.log" 2>&1 \
        || { cat "$PGDIR/initdb.log" >&2; die "initdb failed"; }
    echo "include_if_exists = 'agenthold.conf'" | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
fi

# Rewritten on every start, so a changed port takes effect on the next start.
as_pg tee "$DATA/agenthold.conf" >/dev/null <<EOF
# Written by scripts/dev/postgres.sh on every start; edits are lost.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$RUNDIR'
max_connections = 300
fsync = on
synchronous_commit = on
full_page_writes = on
log_min_messages = warning
EOF

if is_running; then
    if ! accepts; then
        # Running, maybe on another port (AGENTHOLD_PG_PORT changed): restart.
        log "cluster runs but does not answer on 127.0.0.1:$PORT; restarting it"
        as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t "$DEADLINE" restart -l "$LOGFILE" >&2
    fi
else
    log "starting the private cluster on 127.0.0.1:$PORT (log: $LOGFILE)"
    if ! as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w -t "$DEADLINE" start >/dev/null 2>&1; then
        tail -n 20 "$LOGFILE" >&2 || true
        die "postgres did not start (is port $PORT taken? set AGENTHOLD_PG_PORT)"
    fi
fi
wait_until "$DEADLINE" "postgres to accept connections on 127.0.0.1:$PORT" accepts \
    || die "postgres does not accept connections; see $LOGFILE"

if [[ -z $("$PSQL" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'") ]]; then
    "$PSQL" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qc "CREATE DATABASE $DB" >&2
    log "created database $DB"
fi

echo "postgres://postgres@127.0.0.1:$PORT/$DB"
