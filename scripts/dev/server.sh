#!/usr/bin/env bash
# Runs the agenthold server of this checkout against the dev stack.
#
#   scripts/dev/server.sh start   (re)start it in the background, wait for
#                                 /readyz, write .dev/env            [make up]
#   scripts/dev/server.sh fg      run it in the foreground; prints URL and
#                                 admin token once it is ready       [make dev]
#   scripts/dev/server.sh stop    SIGTERM, SIGKILL after a deadline  [make down]
#
# With the Docker driver the egress proxy (agenthold-proxy) runs beside the
# server, on 0.0.0.0:$AGENTHOLD_PROXY_PORT (default 3128), following the
# configuration file the server writes; sandboxes reach it at
# host.docker.internal (AGENTHOLD_PROXY_ADDR). AGENTHOLD_DEV_PROXY=0 leaves it
# out. State: .dev/proxy.pid, .dev/proxy.log. The registries' addresses as this host resolves
# them are AGENTHOLD_PROXY_ALLOW_ADDRS unless it is set (a mirror on a private address).
#
# Expects the binaries to be built (make build) and Postgres, Docker and the
# images to be ready (make postgres docker images); `make up`/`make dev` do all
# that first. State: .dev/server.pid, .dev/server.log, .dev/data/, .dev/env.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

ACTION=${1:-start}
TARGET=${CARGO_TARGET_DIR:-$REPO_ROOT/target}
[[ $TARGET == /* ]] || TARGET=$REPO_ROOT/$TARGET
BIN=${AGENTHOLD_BIN:-$TARGET/debug/agenthold}
PROXY_BIN=${AGENTHOLD_PROXY_BIN:-$TARGET/debug/agenthold-proxy}
PROXY_PORT=${AGENTHOLD_PROXY_PORT:-3128}
PROXY_PIDFILE=$DEV_DIR/proxy.pid
PROXY_LOGFILE=$DEV_DIR/proxy.log
PORT=${AGENTHOLD_PORT:-7700}
TUNNEL_PORT=${AGENTHOLD_TUNNEL_PORT:-7701}
URL=http://127.0.0.1:$PORT
PIDFILE=$DEV_DIR/server.pid
LOGFILE=$DEV_DIR/server.log
DATA_DIR=$DEV_DIR/data
ENVFILE=$DEV_DIR/env
READY_DEADLINE=${AGENTHOLD_READY_DEADLINE:-60}
STOP_DEADLINE=${AGENTHOLD_STOP_DEADLINE:-20}

# Whether process $1 runs a program named like $2 (the kernel appends " (deleted)" to the path
# of a binary rebuilt since it started).
same_program() {
    local exe
    exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
    exe=${exe% (deleted)}
    [[ ${exe##*/} == "${2##*/}" ]]
}

our_pid() {
    [[ -s $PIDFILE ]] || return 1
    local pid
    pid=$(cat "$PIDFILE")
    kill -0 "$pid" 2>/dev/null || return 1
    # Guard against a recycled pid: it must be running the server's binary. By name, not path:
    # a `stop` from a shell with another CARGO_TARGET_DIR still finds the server it started.
    same_program "$pid" "$BIN" || return 1
    echo "$pid"
}

stop_server() {
    local pid
    if ! pid=$(our_pid); then
        rm -f "$PIDFILE"
        log "server not running"
        return 0
    fi
    log "stopping the server (pid $pid): SIGTERM"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_until "$STOP_DEADLINE" "the server to exit" bash -c "! kill -0 $pid"; then
        log "server still runs after ${STOP_DEADLINE}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_until 5 "the server to die" bash -c "! kill -0 $pid" || true
    fi
    rm -f "$PIDFILE"
}

proxy_pid() {
    [[ -s $PROXY_PIDFILE ]] || return 1
    local pid
    pid=$(cat "$PROXY_PIDFILE")
    kill -0 "$pid" 2>/dev/null || return 1
    same_program "$pid" "$PROXY_BIN" || return 1
    echo "$pid"
}

stop_proxy() {
    local pid
    if pid=$(proxy_pid); then
        log "stopping the egress proxy (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        wait_until 10 "the proxy to exit" bash -c "! kill -0 $pid" || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$PROXY_PIDFILE"
}

# The egress proxy, following the file the server writes (it denies everything until the
# server has written it).
start_proxy() {
    [[ -x $PROXY_BIN ]] || die "$PROXY_BIN not found; run make build (or set CARGO_TARGET_DIR)"
    port_taken "$PROXY_PORT" && die "port $PROXY_PORT is taken by another process; stop it or set AGENTHOLD_PROXY_PORT"
    [[ -f $PROXY_LOGFILE ]] && mv -f "$PROXY_LOGFILE" "$PROXY_LOGFILE.1"
    log "starting the egress proxy on 0.0.0.0:$PROXY_PORT (log: $PROXY_LOGFILE)"
    ( close_inherited_fds; exec setsid nohup "$PROXY_BIN" --listen "0.0.0.0:$PROXY_PORT" --config "$DATA_DIR/proxy.json" \
        </dev/null >>"$PROXY_LOGFILE" 2>&1 ) &
    echo $! >"$PROXY_PIDFILE"
    export AGENTHOLD_PROXY_ADDR=${AGENTHOLD_PROXY_ADDR:-host.docker.internal:$PROXY_PORT}
    # Where this host's DNS points the package registries of the egress presets at a mirror on
    # a private or reserved address, the proxy may dial those addresses (for those allowed hosts
    # only; docs/proxy.md, "Mirrors on private addresses"). Set AGENTHOLD_PROXY_ALLOW_ADDRS to
    # choose yourself (empty: none). Public addresses in the list change nothing.
    if [[ -z ${AGENTHOLD_PROXY_ALLOW_ADDRS+set} ]]; then
        local hosts="registry.npmjs.org pypi.org files.pythonhosted.org deb.debian.org security.debian.org crates.io index.crates.io static.crates.io proxy.golang.org sum.golang.org"
        AGENTHOLD_PROXY_ALLOW_ADDRS=$(for h in $hosts; do getent ahosts "$h" 2>/dev/null || true; done | awk '{ print $1 }' | sort -u | paste -sd, -)
        export AGENTHOLD_PROXY_ALLOW_ADDRS
        [[ -n $AGENTHOLD_PROXY_ALLOW_ADDRS ]] && log "the proxy may dial the registries' addresses: $AGENTHOLD_PROXY_ALLOW_ADDRS"
    fi
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ready() { [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$URL/readyz")" == 200 ]]; }

admin_token() {
    if [[ -n "${AGENTHOLD_ADMIN_TOKEN:-}" ]]; then
        printf '%s' "$AGENTHOLD_ADMIN_TOKEN"
    elif [[ -s $DATA_DIR/admin-token ]]; then
        tr -d '\n' <"$DATA_DIR/admin-token"
    else
        return 1
    fi
}

write_env() {
    local token
    wait_until 10 "$DATA_DIR/admin-token" admin_token || log "warning: no admin token (no $DATA_DIR/admin-token, AGENTHOLD_ADMIN_TOKEN unset)"
    token=$(admin_token || true)
    # shellcheck disable=SC2016
    ( umask 077; printf '# Written by scripts/dev/server.sh; `set -a; . .dev/env; set +a`\nAGENTHOLD_URL=%s\nAGENTHOLD_TOKEN=%s\n' "$URL" "$token" >"$ENVFILE.tmp" )
    mv "$ENVFILE.tmp" "$ENVFILE"
}

prepare() {
    [[ -x $BIN ]] || die "$BIN not found; run make build (or set CARGO_TARGET_DIR)"
    ensure_cmd curl curl
    stop_server
    local p
    for p in "$PORT" "$TUNNEL_PORT"; do
        port_taken "$p" && die "port $p is taken by another process; stop it or set AGENTHOLD_PORT / AGENTHOLD_TUNNEL_PORT"
    done
    DATABASE_URL=$("$(dirname "$0")/postgres.sh")
    mkdir -p "$DATA_DIR"
    export DATABASE_URL
    export AGENTHOLD_LISTEN=127.0.0.1:$PORT
    export AGENTHOLD_TUNNEL_LISTEN=0.0.0.0:$TUNNEL_PORT
    export AGENTHOLD_DATA_DIR=$DATA_DIR
    export AGENTHOLD_DRIVER=${AGENTHOLD_DRIVER:-docker}
    export AGENTHOLD_IMAGE=${AGENTHOLD_IMAGE:-agenthold/test:latest}
    # Dev mode: the master key that encrypts secrets lives in the data dir (made once, 0600).
    export AGENTHOLD_MODE=${AGENTHOLD_MODE:-dev}
    if [[ -z ${AGENTHOLD_MASTER_KEY:-} && -z ${AGENTHOLD_MASTER_KEY_FILE:-} ]]; then
        if [[ ! -s $DATA_DIR/master.key ]]; then
            log "making a dev master key in $DATA_DIR/master.key"
            ( umask 077; head -c 32 /dev/urandom | base64 >"$DATA_DIR/master.key.tmp" )
            mv "$DATA_DIR/master.key.tmp" "$DATA_DIR/master.key"
        fi
        export AGENTHOLD_MASTER_KEY_FILE=$DATA_DIR/master.key
    fi
    [[ -f $LOGFILE ]] && mv -f "$LOGFILE" "$LOGFILE.1"
    rm -f "$ENVFILE"
    stop_proxy
    if [[ $AGENTHOLD_DRIVER == docker && ${AGENTHOLD_DEV_PROXY:-1} != 0 ]]; then
        start_proxy
    fi
}

banner() {
    local token password
    token=$(admin_token || echo '(none: see .dev/data/admin-token)')
    if [[ -n ${AGENTHOLD_BOOTSTRAP_ADMIN_PASSWORD:-} ]]; then
        password='(AGENTHOLD_BOOTSTRAP_ADMIN_PASSWORD)'
    elif [[ -s $DATA_DIR/admin-password ]]; then
        password=$(tr -d '\n' <"$DATA_DIR/admin-password")
    else
        password='(set when the admin user was created)'
    fi
    cat >&2 <<EOF

  agenthold is up
    URL          $URL
    admin login  ${AGENTHOLD_BOOTSTRAP_ADMIN_USER:-admin} / $password
    admin token  $token
    env file     $ENVFILE   (set -a; . .dev/env; set +a)
    log          ${1:-stderr}
    egress proxy ${AGENTHOLD_PROXY_ADDR:-(none)}${AGENTHOLD_PROXY_ADDR:+ for sandboxes (log: $PROXY_LOGFILE)}

EOF
}

case $ACTION in
    stop) stop_server; stop_proxy ;;
    start)
        prepare
        log "starting $BIN (log: $LOGFILE)"
        ( close_inherited_fds; exec setsid nohup "$BIN" </dev/null >>"$LOGFILE" 2>&1 ) &
        pid=$!
        echo "$pid" >"$PIDFILE"
        deadline=$(( SECONDS + READY_DEADLINE ))
        until ready; do
            if ! kill -0 "$pid" 2>/dev/null; then
                rm -f "$PIDFILE"
                log "the server exited; last lines of $LOGFILE:"; tail -n 30 "$LOGFILE" >&2
                exit 1
            fi
            if (( SECONDS >= deadline )); then
                log "no 200 from $URL/readyz within ${READY_DEADLINE}s; last lines of $LOGFILE:"
                tail -n 30 "$LOGFILE" >&2
                stop_server
                exit 1
            fi
            sleep 0.5
        done
        write_env
        banner "$LOGFILE"
        ;;
    fg)
        prepare
        # Print the banner once the server answers; the server itself runs in
        # the foreground (Ctrl-C stops it).
        (
            if wait_until "$READY_DEADLINE" "$URL/readyz" ready; then
                write_env
                banner
            fi
        ) &
        log "running $BIN in the foreground (Ctrl-C stops it)"
        # Not exec, so that the proxy stops with the server: Ctrl-C (or a TERM) is passed on to
        # the server, and once it has exited the proxy is stopped.
        "$BIN" &
        pid=$!
        echo "$pid" >"$PIDFILE"
        trap 'kill -TERM "$pid" 2>/dev/null' INT TERM
        rc=0
        while kill -0 "$pid" 2>/dev/null; do wait "$pid" && rc=0 || rc=$?; done
        stop_proxy
        exit "$rc"
        ;;
    *) die "usage: $0 start|fg|stop" ;;
esac
