#!/usr/bin/env bash
# The supervisor's core (crate agenthold-core) does no IO: it must build without tokio, sqlx,
# bollard, axum, hyper, reqwest or tokio-rustls (issue 30). Fails naming what appeared.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$(cargo tree -p agenthold-core -e normal --prefix none --offline 2>/dev/null || cargo tree -p agenthold-core -e normal --prefix none)
found=$(printf '%s\n' "$deps" | awk '{print $1}' | sort -u | grep -xE 'tokio|sqlx|sqlx-core|bollard|axum|hyper|reqwest|tokio-rustls|mio' || true)
if [[ -n $found ]]; then
    echo "agenthold-core depends on crates that do IO: $(echo "$found" | tr '\n' ' ')" >&2
    cargo tree -p agenthold-core -e normal -i "$(echo "$found" | head -1)" >&2 || true
    exit 1
fi
echo "agenthold-core: $(printf '%s\n' "$deps" | awk '{print $1}' | sort -u | wc -l) crates, none doing IO"
