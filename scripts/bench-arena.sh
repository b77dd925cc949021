#!/usr/bin/env bash
# Arena leaderboard: our Bradley–Terry fit plus bootstrap against a FastChat-style reference
# (scikit-learn's LogisticRegression, scripts/bench_arena.py) on the same simulated battles, in one
# run: seconds for the fit and the bootstrap rounds, Python/ours, and the largest rating difference.
# No database is needed, so bench-setup.sh (which starts PostgreSQL) is not used.
# BENCH_PROFILE=debug uses the debug binary. Extra arguments go to `lachesis bench arena`
# (e.g. --votes 20000 --rounds 50 --python-rounds 5).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

# The venv with scikit-learn, installed only when missing or at another version.
python=$(scripts/ensure-arena-ref.sh)

profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend; else cargo build -p lachesis-backend; fi
bin="$(lachesis_target_dir)/$profile/lachesis"

LACHESIS_ARENA_PYTHON=$python "$bin" bench arena \
    --script "$LACHESIS_REPO/scripts/bench_arena.py" "$@"
