#!/usr/bin/env bash
# `make drills`: the fault drills of tests/tests/drills.rs in their long version. Each drill runs
# for about LACHESIS_DRILL_SECONDS (default 120) with its fault repeated, and prints what it
# injected, what it verified and its figures. Extra arguments go to the test binary (a drill's
# name runs only that drill, e.g. `scripts/drills.sh c_postgres_restart`).
#
# Unlike scripts/test.sh no shared PostgreSQL is started: every drill initdb's and starts a
# throwaway cluster of its own under /var/tmp (it has to stop and restart it), on a free port,
# and removes it when done.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

# The server binary the drills start three of, then the drills themselves.
cargo build -p lachesis-backend
cargo build -p lachesis-tests --test drills
TARGET_DIR=$(lachesis_target_dir)

export LACHESIS_BIN=$TARGET_DIR/debug/lachesis
export LACHESIS_DRILL_SECONDS=${LACHESIS_DRILL_SECONDS:-120}
# One drill at a time (they also serialise themselves): each measures its own recovery.
cargo test -p lachesis-tests --test drills -- --nocapture --test-threads 1 "$@"
