#!/usr/bin/env bash
# The supervisor's core (agenthold-core) does no IO, and that is a build fact: this fails when its
# normal dependency tree holds an async runtime, a database driver, a container engine client or
# an HTTP stack — tokio, sqlx, bollard, axum, hyper, reqwest, tokio-rustls (and their companion
# crates: tokio-*, sqlx-*, hyper-*, axum-*). Dev-dependencies (proptest) are not counted.
# `make lint` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
FORBIDDEN='^(tokio|sqlx|bollard|axum|hyper|reqwest)(-[a-z0-9_-]+)? v'

tree=$("$CARGO" tree -p agenthold-core -e normal --prefix none)
found=$(grep -E "$FORBIDDEN" <<<"$tree" | sort -u || true)
if [[ -n $found ]]; then
    echo "agenthold-core must not depend on IO crates; it does on:" >&2
    echo "$found" | sed 's/^/  /' >&2
    for crate in $(awk '{print $1}' <<<"$found" | sort -u); do
        echo "why $crate:" >&2
        "$CARGO" tree -p agenthold-core -e normal -i "$crate" 2>&1 | sed 's/^/  /' >&2 || true
    done
    exit 1
fi
echo "agenthold-core depends on no IO crate ($(grep -c . <<<"$tree") entries in its tree)"
