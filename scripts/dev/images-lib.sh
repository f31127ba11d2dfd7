# shellcheck shell=bash
# Shared helpers for the image scripts (images.sh, base-image.sh). Source it after lib.sh;
# don't run it.
#
#   ensure_debian_base SUITE TAG   the Debian base image TAG for SUITE (bookworm, trixie):
#                                  `docker pull debian:SUITE-slim` if a registry answers
#                                  (15 s at most; AGENTHOLD_SKIP_PULL=1 skips it), else
#                                  debootstrap --variant=minbase + `docker import`. Does
#                                  nothing when TAG exists.
#   build_image DIR TAG BASE LOG   builds TAG from the Dockerfile in DIR (every file of DIR but
#                                  README.md and node_modules/ goes into the context, plus
#                                  extra-ca/), unless TAG's label org.agenthold.build-hash
#                                  already matches the hash of that context and BASE's image id.
#                                  AGENTHOLD_IMAGE_REBUILD=1: build anyway, without the layer
#                                  cache (e.g. to pick up Debian's updates).
#
# Environment: AGENTHOLD_EXTRA_CA_CERTS, AGENTHOLD_DEBIAN_MIRROR, AGENTHOLD_SKIP_PULL (see
# images.sh).

DEFAULT_EXTRA_CA=/usr/local/share/ca-certificates
EXTRA_CA=${AGENTHOLD_EXTRA_CA_CERTS-$DEFAULT_EXTRA_CA}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# Prints the first http(s) Debian mirror the host's apt uses for suite $1 (or,
# failing that, any URI ending in /debian). Reads both the one-line (.list)
# and the deb822 (.sources) formats.
host_mirror() {
    local suite=$1 files=() f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] && files+=("$f")
    done
    (( ${#files[@]} )) || return 0
    awk -v suite="$suite" '
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

# ensure_debian_base SUITE TAG
ensure_debian_base() {
    local suite=$1 tag=$2
    if image_exists "$tag"; then
        log "$tag exists"
        return
    fi
    if [[ -z "${AGENTHOLD_SKIP_PULL:-}" ]]; then
        log "trying docker pull debian:${suite}-slim (15 s at most)"
        if timeout 15 docker pull -q "debian:${suite}-slim" >/dev/null 2>&1; then
            docker tag "debian:${suite}-slim" "$tag"
            log "tagged debian:${suite}-slim as $tag"
            return
        fi
        log "no registry reachable; building the base with debootstrap"
    fi
    (( EUID == 0 )) || die "debootstrap needs root"
    ensure_cmd debootstrap debootstrap
    [[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || apt_install debian-archive-keyring
    [[ -e /usr/share/debootstrap/scripts/$suite ]] || die "this debootstrap does not know $suite (upgrade debootstrap)"

    local mirror=${AGENTHOLD_DEBIAN_MIRROR:-$(host_mirror "$suite")}
    mirror=${mirror:-http://deb.debian.org/debian}
    # Inside the image there is no CA bundle yet: apt there must use plain HTTP.
    local image_mirror=${mirror/#https:/http:}

    local root="$DEV_DIR/debootstrap-$suite" logf="$DEV_DIR/debootstrap-$suite.log"
    umount_under "$root"
    rm -rf "$root"
    mkdir -p "$root"
    trap 'umount_under "'"$root"'"; rm -rf "'"$root"'"' EXIT

    log "debootstrap --variant=minbase $suite from $mirror (about a minute; log: $logf)"
    local t0=$SECONDS
    if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$logf" 2>&1; then
        tail -n 20 "$logf" >&2
        [[ -f $root/debootstrap/debootstrap.log ]] && tail -n 20 "$root/debootstrap/debootstrap.log" >&2
        die "debootstrap failed"
    fi
    umount_under "$root"
    log "debootstrap took $(( SECONDS - t0 )) s"

    # One-line sources.list (trixie's debootstrap may write deb822 debian.sources: replace it).
    rm -f "$root"/etc/apt/sources.list.d/*.sources
    printf 'deb %s %s main\ndeb %s %s-updates main\n' "$image_mirror" "$suite" "$image_mirror" "$suite" >"$root/etc/apt/sources.list"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
    # Fresh containers get their own resolv.conf / hostname from Docker.
    : >"$root/etc/resolv.conf"

    tar --numeric-owner -C "$root" -c . | docker import \
        --change 'CMD ["/bin/bash"]' \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.agenthold.source=debootstrap-minbase-${suite}" \
        - "$tag" >/dev/null
    log "imported $tag"
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

# build_image DIR TAG BASE LOG — see the top of this file.
build_image() {
    local dir=$1 tag=$2 base=$3 build_log=$4 ctx
    ctx=$(mktemp -d "$DEV_DIR/image-ctx.XXXXXX")
    trap 'rm -rf "'"$ctx"'"' EXIT
    # Not node_modules/: an `npm install` run by hand in images/base/harnesses must not change the hash.
    tar -C "$dir" --exclude=./README.md --exclude=node_modules -c . | tar -C "$ctx" -x || die "copying $dir into the build context"
    local ncerts
    ncerts=$(collect_extra_ca "$ctx/extra-ca")

    local base_id hash current
    base_id=$(docker image inspect -f '{{.Id}}' "$base")
    hash=$( { echo "$base_id"; cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
    current=$(docker image inspect -f '{{index .Config.Labels "org.agenthold.build-hash"}}' "$tag" 2>/dev/null || true)
    local no_cache=()
    [[ ${AGENTHOLD_IMAGE_REBUILD:-} == 1 ]] && { no_cache=(--no-cache); current=; }
    if [[ $current == "$hash" ]]; then
        log "$tag is up to date (build hash $hash)"
    else
        local old_id
        old_id=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
        log "building $tag (build hash $hash, $ncerts extra CA certificate(s); log: $build_log)"
        local t0=$SECONDS
        if ! docker build "${no_cache[@]}" --label "org.agenthold.build-hash=$hash" \
            --build-arg "BASE_IMAGE=$base" -t "$tag" "$ctx" >"$build_log" 2>&1; then
            tail -n 30 "$build_log" >&2
            die "docker build of $tag failed (log: $build_log)"
        fi
        log "built $tag in $(( SECONDS - t0 )) s"
        # Drop the image this one replaced (if nothing uses it), so rebuilds don't pile up.
        if [[ -n $old_id && $old_id != "$(docker image inspect -f '{{.Id}}' "$tag")" ]]; then
            docker rmi "$old_id" >/dev/null 2>&1 || true
        fi
    fi
    rm -rf "$ctx"
    trap - EXIT
}
