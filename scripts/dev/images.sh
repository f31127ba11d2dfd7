#!/usr/bin/env bash
# Builds the sandbox images (needs a Docker engine: scripts/dev/docker.sh).
#
# 1. agenthold/debian-base:bookworm, when absent: `docker pull
#    debian:bookworm-slim` if a registry answers (short timeout; skip it with
#    AGENTHOLD_SKIP_PULL=1), else debootstrap --variant=minbase from the host's
#    own Debian mirror + `docker import`.
# 2. agenthold/test:latest from images/test/Dockerfile, rebuilt only when its
#    inputs change (Dockerfile, extra CA certificates, base image id), tracked
#    by the label org.agenthold.build-hash.
#
# Environment:
#   AGENTHOLD_EXTRA_CA_CERTS  space-separated .crt files or directories whose
#                             *.crt go into the image's trust store. Unset:
#                             /usr/local/share/ca-certificates; empty: none.
#   AGENTHOLD_DEBIAN_MIRROR   mirror for debootstrap (default: derived from
#                             /etc/apt/sources.list*, else deb.debian.org).
#   AGENTHOLD_SKIP_PULL=1     don't try the registry at all.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

BASE_IMAGE=agenthold/debian-base:bookworm
TEST_IMAGE=agenthold/test:latest
SUITE=bookworm
DEFAULT_EXTRA_CA=/usr/local/share/ca-certificates
EXTRA_CA=${AGENTHOLD_EXTRA_CA_CERTS-$DEFAULT_EXTRA_CA}

timeout 10 docker info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/dev/docker.sh (make docker) first"

# One image build at a time.
exec 9>"$DEV_DIR/images.lock"
flock 9

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# Prints the first http(s) Debian mirror the host's apt uses for $SUITE (or,
# failing that, any URI ending in /debian). Reads both the one-line (.list)
# and the deb822 (.sources) formats.
host_mirror() {
    local files=() f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] && files+=("$f")
    done
    (( ${#files[@]} )) || return 0
    awk -v suite="$SUITE" '
        function consider(uri, suites) {
            if (uri !~ /^https?:\/\//) return
            sub(/\/+$/, "", uri)
            if (uri ~ /security/) return
            if ((" " suites " ") ~ (" " suite " ")) { if (!best) best = uri }
            else if (uri ~ /\/debian$/) { if (!other) other = uri }
        }
        FILENAME ~ /\.sources$/ {
            if ($0 ~ /^[ \t]*$/) { if (uris != "" && types ~ /(^| )deb( |$)/) { n = split(uris, u, " "); for (i = 1; i <= n; i++) consider(u[i], suites) } uris = ""; suites = ""; types = ""; next }
            if ($1 == "Types:")  { $1 = ""; types = $0 }
            if ($1 == "URIs:")   { $1 = ""; uris = $0 }
            if ($1 == "Suites:") { $1 = ""; suites = $0 }
            next
        }
        FNR == 1 && prev ~ /\.sources$/ { if (uris != "" && types ~ /(^| )deb( |$)/) { n = split(uris, u, " "); for (i = 1; i <= n; i++) consider(u[i], suites) } uris = ""; suites = ""; types = "" }
        { prev = FILENAME }
        $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            consider($i, $(i + 1))
        }
        END {
            if (prev ~ /\.sources$/ && uris != "" && types ~ /(^| )deb( |$)/) { n = split(uris, u, " "); for (i = 1; i <= n; i++) consider(u[i], suites) }
            if (best) print best; else if (other) print other
        }
    ' "${files[@]}"
}

umount_under() {
    local dir=$1 m
    # Deepest first.
    awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
}

build_base() {
    if [[ -z "${AGENTHOLD_SKIP_PULL:-}" ]]; then
        log "trying docker pull debian:${SUITE}-slim (15 s at most)"
        if timeout 15 docker pull -q "debian:${SUITE}-slim" >/dev/null 2>&1; then
            docker tag "debian:${SUITE}-slim" "$BASE_IMAGE"
            log "tagged debian:${SUITE}-slim as $BASE_IMAGE"
            return
        fi
        log "no registry reachable; building the base with debootstrap"
    fi
    (( EUID == 0 )) || die "debootstrap needs root"
    ensure_cmd debootstrap debootstrap
    [[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || apt_install debian-archive-keyring

    local mirror=${AGENTHOLD_DEBIAN_MIRROR:-$(host_mirror)}
    mirror=${mirror:-http://deb.debian.org/debian}
    # Inside the image there is no CA bundle yet: apt there must use plain HTTP.
    local image_mirror=${mirror/#https:/http:}

    local root="$DEV_DIR/debootstrap"
    umount_under "$root"
    rm -rf "$root"
    mkdir -p "$root"
    trap 'umount_under "'"$root"'"; rm -rf "'"$root"'"' EXIT

    log "debootstrap --variant=minbase $SUITE from $mirror (about a minute; log: $DEV_DIR/debootstrap.log)"
    local t0=$SECONDS
    if ! debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$DEV_DIR/debootstrap.log" 2>&1; then
        tail -n 20 "$DEV_DIR/debootstrap.log" >&2
        [[ -f $root/debootstrap/debootstrap.log ]] && tail -n 20 "$root/debootstrap/debootstrap.log" >&2
        die "debootstrap failed"
    fi
    umount_under "$root"
    log "debootstrap took $(( SECONDS - t0 )) s"

    printf 'deb %s %s main\ndeb %s %s-updates main\n' "$image_mirror" "$SUITE" "$image_mirror" "$SUITE" >"$root/etc/apt/sources.list"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
    # Fresh containers get their own resolv.conf / hostname from Docker.
    : >"$root/etc/resolv.conf"

    tar --numeric-owner -C "$root" -c . | docker import \
        --change 'CMD ["/bin/bash"]' \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.agenthold.source=debootstrap-minbase-${SUITE}" \
        - "$BASE_IMAGE" >/dev/null
    log "imported $BASE_IMAGE"
    umount_under "$root"
    rm -rf "$root"
    trap - EXIT
}

# Collects the extra CA certificates into $1 (flat, *.crt). Prints how many.
collect_extra_ca() {
    local dest=$1 n=0 src f
    mkdir -p "$dest"
    for src in $EXTRA_CA; do
        if [[ -d $src ]]; then
            while IFS= read -r -d '' f; do
                cp "$f" "$dest/$(printf '%03d' "$n")-$(basename "$f")"; n=$((n + 1))
            done < <(find "$src" -name '*.crt' -type f -print0 | sort -z)
        elif [[ -f $src ]]; then
            cp "$src" "$dest/$(printf '%03d' "$n")-$(basename "${src%.*}").crt"; n=$((n + 1))
        elif [[ -n "${AGENTHOLD_EXTRA_CA_CERTS+set}" ]]; then
            die "extra CA certificates: $src is neither a file nor a directory"
        fi
    done
    echo "$n"
}

build_test() {
    local ctx
    ctx=$(mktemp -d "$DEV_DIR/test-image.XXXXXX")
    trap 'rm -rf "'"$ctx"'"' EXIT
    cp "$REPO_ROOT/images/test/Dockerfile" "$ctx/Dockerfile"
    local ncerts
    ncerts=$(collect_extra_ca "$ctx/extra-ca")

    local base_id hash current
    base_id=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")
    hash=$( { echo "$base_id"; cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
    current=$(docker image inspect -f '{{index .Config.Labels "org.agenthold.build-hash"}}' "$TEST_IMAGE" 2>/dev/null || true)
    if [[ $current == "$hash" ]]; then
        log "$TEST_IMAGE is up to date (build hash $hash)"
    else
        local old_id
        old_id=$(docker image inspect -f '{{.Id}}' "$TEST_IMAGE" 2>/dev/null || true)
        log "building $TEST_IMAGE (build hash $hash, $ncerts extra CA certificate(s))"
        local t0=$SECONDS
        if ! docker build -q --label "org.agenthold.build-hash=$hash" \
            --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$TEST_IMAGE" "$ctx" >"$DEV_DIR/test-image-build.log" 2>&1; then
            tail -n 30 "$DEV_DIR/test-image-build.log" >&2
            die "docker build of $TEST_IMAGE failed (log: $DEV_DIR/test-image-build.log)"
        fi
        log "built $TEST_IMAGE in $(( SECONDS - t0 )) s"
        # Drop the image this one replaced (if nothing uses it), so rebuilds don't pile up.
        if [[ -n $old_id && $old_id != "$(docker image inspect -f '{{.Id}}' "$TEST_IMAGE")" ]]; then
            docker rmi "$old_id" >/dev/null 2>&1 || true
        fi
    fi
    rm -rf "$ctx"
    trap - EXIT
}

if image_exists "$BASE_IMAGE"; then
    log "$BASE_IMAGE exists"
else
    build_base
fi
build_test
