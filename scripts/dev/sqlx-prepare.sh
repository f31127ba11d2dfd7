#!/usr/bin/env bash
# Regenerates .sqlx/ (sqlx's offline query data, committed, so that builds need
# no database: SQLX_OFFLINE=true). `make sqlx-prepare`. Needs no sqlx-cli:
#
#   1. a fresh scratch database next to DATABASE_URL's (the private cluster by
#      default), with migrations/*.sql applied in order by psql;
#   2. stale .sqlx/query-*.json removed;
#   3. agenthold-server recompiled online with SQLX_OFFLINE_DIR=.sqlx, so the
#      sqlx 0.8 macros write one query-<hash>.json per query there.
# shellcheck source=scripts/dev/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT" || exit 1

BASE_URL=$(scripts/dev/postgres.sh)
SCRATCH=agenthold_sqlx_prepare
# Swap the database name, keeping any ?query parameters.
base=${BASE_URL%%\?*}
query=${BASE_URL#"$base"}
SCRATCH_URL=${base%/*}/$SCRATCH$query

PSQL=$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)
PSQL=${PSQL:-$(command -v psql || true)}
[[ -n $PSQL ]] || die "psql not found (apt-get install postgresql-client)"

export PGOPTIONS="-c client_min_messages=warning"
log "fresh scratch database $SCRATCH"
"$PSQL" "$BASE_URL" -v ON_ERROR_STOP=1 -q \
    -c "DROP DATABASE IF EXISTS $SCRATCH WITH (FORCE)" -c "CREATE DATABASE $SCRATCH"

shopt -s nullglob
n=0
for f in $(printf '%s\n' migrations/*.sql | sort -V); do
    [[ $f == *.down.sql ]] && continue
    log "applying $f"
    "$PSQL" "$SCRATCH_URL" -v ON_ERROR_STOP=1 -q --single-transaction -f "$f" >/dev/null
    n=$((n + 1))
done
log "applied $n migration(s)"

mkdir -p .sqlx
rm -f .sqlx/query-*.json

log "recompiling agenthold-server online (SQLX_OFFLINE_DIR=$REPO_ROOT/.sqlx)"
export SQLX_OFFLINE=false SQLX_OFFLINE_DIR=$REPO_ROOT/.sqlx DATABASE_URL=$SCRATCH_URL
touch server/src/lib.rs  # recompiles the crate, so the macros run again
cargo check -p agenthold-server --all-targets

count=$(find .sqlx -name 'query-*.json' | wc -l)
"$PSQL" "$BASE_URL" -q -c "DROP DATABASE IF EXISTS $SCRATCH WITH (FORCE)" || true
log "wrote $count query file(s) to .sqlx/; commit them (git add .sqlx)"
