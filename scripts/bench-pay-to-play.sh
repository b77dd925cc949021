#!/usr/bin/env bash
# The card bandit's value per dollar on real judged episodes against an oracle that knows each
# card's true quality, with panels of two and three cards (BENCH_ARGS go to both runs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url "$bin" bench pay-to-play --episodes 300 --panel 2 "$@"
DATABASE_URL=$database_url "$bin" bench pay-to-play --episodes 300 --panel 3 "$@"
DATABASE_URL=$database_url "$bin" ledger reconcile
