#!/usr/bin/env bash
# End-to-end check of the real codex harness (make up, make base-image first):
#   set -a; . .dev/env; set +a; bash scripts/e2e/codex.sh
# See scripts/e2e/harness.sh for what it shows.
exec bash "$(dirname "$0")/harness.sh" codex
