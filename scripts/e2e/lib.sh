# What the end-to-end scripts share: `ok` and `fail` reporting, and `api` calls. Source it after
# setting ROOT (the checkout) and WORK (a scratch directory), and opening fd 3 on the script's
# stdout (`exec 3>&1`).

# ok MESSAGE — one passed check.
ok() { printf 'ok - %s\n' "$*" >&3; }

# fail MESSAGE [FILE…] — says what went wrong, shows the end of each FILE (events, output) and of
# the server's and the proxy's logs, and exits 1.
fail() {
    local message=$1 file
    shift
    printf 'not ok - %s\n' "$message" >&3
    for file in "$@"; do
        [[ -e $file ]] || continue
        printf -- '--- %s (last 40 lines)\n' "$(basename "$file")" >&2
        tail -n 40 "$file" >&2
    done
    for file in "$ROOT/.dev/server.log" "$ROOT/.dev/proxy.log"; do
        [[ -f $file ]] || continue
        printf -- '--- %s (last 30 lines)\n' "${file#"$ROOT/"}" >&2
        tail -n 30 "$file" | sed $'s/\x1b\[[0-9;]*m//g' >&2
    done
    exit 1
}

# api METHOD PATH [BODY] — a call with $AGENTHOLD_TOKEN: the answer's body on stdout, its status
# in $WORK/status (`status` prints it).
api() {
    local method=$1 path=$2 body=${3:-}
    curl -sS -o "$WORK/answer.json" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $AGENTHOLD_TOKEN" \
        -H 'Content-Type: application/json' ${body:+-d "$body"} "$AGENTHOLD_URL$path" >"$WORK/status"
    cat "$WORK/answer.json"
}
status() { cat "$WORK/status"; }

# sandbox_dump CONTAINER FILE — what a process in the sandbox could read, into FILE: every
# process's environment and command line and the files under /home /tmp /etc /root /run
# /var/tmp /opt, read once as `agent` (the harness's user: the sandbox's root lacks the
# capabilities to read another user's /proc entries or private home) and once as root.
sandbox_dump() {
    local container=$1 file=$2 user
    : >"$file"
    for user in agent root; do
        docker exec -u "$user" "$container" sh -c \
            'cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; tar -cf - /home /tmp /etc /root /run /var/tmp /opt 2>/dev/null' \
            >>"$file" 2>/dev/null || true
    done
}

# sandbox_container AGENT — the id of the agent's running sandbox container (not its network
# holder, the other container labelled for the agent, whose namespace the sandbox joins); empty
# when the sandbox does not run.
sandbox_container() {
    docker ps --filter "label=agenthold.agent=$1" --format '{{.ID}} {{.Label "agenthold.role"}}' \
        | awk '$2 == "" { print $1; exit }'
}
