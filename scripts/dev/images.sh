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
# 3. agenthold/test-sudo:latest from images/test-sudo/Dockerfile (agenthold/test
#    with sudo), the same way.
#
# The full harness image is scripts/dev/base-image.sh (make base-image).
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
# shellcheck source=scripts/dev/images-lib.sh
source "$(dirname "$0")/images-lib.sh"

BASE_IMAGE=agenthold/debian-base:bookworm
TEST_IMAGE=agenthold/test:latest
SUDO_TEST_IMAGE=agenthold/test-sudo:latest

timeout 10 docker info >/dev/null 2>&1 || die "no Docker engine answers; run scripts/dev/docker.sh (make docker) first"

# One image build at a time.
exec 9>"$DEV_DIR/images.lock"
flock 9

ensure_debian_base bookworm "$BASE_IMAGE"
build_image "$REPO_ROOT/images/test" "$TEST_IMAGE" "$BASE_IMAGE" "$DEV_DIR/test-image-build.log"
# agenthold/test-sudo:latest: the test image with sudo (the tests of sudo in a sandbox).
build_image "$REPO_ROOT/images/test-sudo" "$SUDO_TEST_IMAGE" "$TEST_IMAGE" "$DEV_DIR/test-sudo-image-build.log"
