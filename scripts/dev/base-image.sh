#!/usr/bin/env bash
# Builds agenthold/base:latest, the image real agents run in (images/base; docs/images.md).
#
# 1. agenthold/debian-base:trixie, when absent: `docker pull debian:trixie-slim` if a registry
#    answers (15 s at most; AGENTHOLD_SKIP_PULL=1 skips it), else debootstrap --variant=minbase
#    from the host's Debian mirror + `docker import` (as images.sh does for bookworm).
# 2. agenthold/base:latest from images/base/, rebuilt only when its inputs change (the files in
#    images/base/ but README.md, the extra CA certificates, the trixie base's image id), tracked
#    by the label org.agenthold.build-hash. The first build takes minutes (Chromium, npm).
#
# `base-image.sh check` builds nothing: it runs scripts/dev/base-image-check.sh on the image.
#
# Environment: AGENTHOLD_EXTRA_CA_CERTS, AGENTHOLD_DEBIAN_MIRROR, AGENTHOLD_SKIP_PULL as for
# images.sh (docs/setup.md).
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=scripts/dev/images-lib.sh
source "$(dirname "$0")/images-lib.sh"

DEBIAN_IMAGE=agenthold/debian-base:trixie
BASE_IMAGE=agenthold/base:latest

if [[ ${1:-} == check ]]; then
    exec bash "$(dirname "$0")/base-image-check.sh" "$BASE_IMAGE"
fi
[[ $# -eq 0 ]] || die "usage: $0 [check]"

timeout 10 docker info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/dev/docker.sh (make docker) first"

# One build of this image at a time (its own lock: a long build here does not hold up images.sh).
exec 9>"$DEV_DIR/base-image.lock"
flock 9

ensure_debian_base trixie "$DEBIAN_IMAGE"
build_image "$REPO_ROOT/images/base" "$BASE_IMAGE" "$DEBIAN_IMAGE" "$DEV_DIR/base-image-build.log"
