#!/usr/bin/env bash
# Ledger payments/s with 200 concurrent payers against a private PostgreSQL with fsync on (every
# acknowledged payment is durable), then the overspending race on one budget; each run ends with
# a reconcile of every invariant. Extra arguments go to both `lachesis bench ledger` runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url "$bin" bench ledger --payers 200 --payments 50 "$@"
DATABASE_URL=$database_url "$bin" bench ledger --payers 200 --payments 50 --shared-budget "$@"
DATABASE_URL=$database_url "$bin" ledger reconcile
