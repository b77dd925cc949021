#!/usr/bin/env bash
# `make sqlx-prepare`: regenerates backend/.sqlx, the schema facts the compile-time checked queries
# (`sqlx::query!`) are built from, against a throwaway PostgreSQL migrated from migrations/.
# Run it after changing a checked query or a migration; commit what it writes.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

PG_TMP=$(mktemp -d /var/tmp/lachesis-sqlx.XXXXXX)
cleanup() {
    scripts/pg.sh stop "$PG_TMP/pg" || true
    rm -rf "$PG_TMP"
}
trap cleanup EXIT
PG_PORT=$(scripts/pg.sh freeport)
scripts/pg.sh start "$PG_TMP/pg" "$PG_PORT" --fsync off
URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres
for migration in migrations/*.sql; do
    psql "$URL" -q -v ON_ERROR_STOP=1 --single-transaction -f "$migration" >/dev/null
done

OUT=$LACHESIS_REPO/backend/.sqlx
mkdir -p "$OUT"
rm -f "$OUT"/query-*.json
# The macros write their facts only when they expand, so the crate is compiled afresh.
touch backend/src/lib.rs
SQLX_OFFLINE=false DATABASE_URL=$URL SQLX_OFFLINE_DIR=$OUT \
    cargo check -p lachesis-backend --lib --quiet
echo "sqlx-prepare: $(find "$OUT" -name 'query-*.json' | wc -l) queries in backend/.sqlx"
