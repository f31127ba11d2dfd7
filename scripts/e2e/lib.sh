# What the end-to-end scripts share: `ok` and `fail` reporting. Source it after setting ROOT (the
# checkout) and opening fd 3 on the script's stdout (`exec 3>&1`).

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
