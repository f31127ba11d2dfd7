#!/usr/bin/env bash
# Makes sure the Chromium the UI's browser checks drive is installed (web/e2e/tests with
# @playwright/test, web/e2e/bench.mjs with playwright-core; both launch it by its path): Debian's
# package, /usr/bin/chromium (CHROMIUM overrides). As root it installs the package when missing;
# otherwise it says how. Playwright's own browser download is not used.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [[ -x $CHROMIUM ]]; then
    exit 0
fi
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing chromium (Debian's package) for the UI's browser checks"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2 \
        || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2; }
    [[ -x $CHROMIUM ]] && exit 0
fi
die "$CHROMIUM not found: apt-get install -y chromium (or set CHROMIUM to a Chromium binary)"
