#!/usr/bin/env bash
# MCP tool-call round trips: our client (rmcp) against the official Python SDK's client (`mcp`,
# from the git server's venv) on @modelcontextprotocol/server-everything, over stdio and streamable
# HTTP, in one run: p50/p99/mean per call and calls/s, with ours/Python ratios.
# No database is needed, so bench-setup.sh (which starts PostgreSQL) is not used.
# BENCH_PROFILE=debug uses the debug binary. Extra arguments go to `lachesis bench mcp`
# (e.g. --calls 5000, --episodes 50 for the scripted solver's episodes/s).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

# server-everything comes from npm with the other tools; install them only when it is missing.
if [[ ! -x node_modules/.bin/mcp-server-everything ]]; then
    scripts/ensure-tools.sh
fi
# The venv of mcp-server-git carries the Python MCP SDK (and --episodes needs the git server).
scripts/ensure-mcp-servers.sh >/dev/null

profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend; else cargo build -p lachesis-backend; fi
bin="$(lachesis_target_dir)/$profile/lachesis"

LACHESIS_BENCH_PYTHON=$LACHESIS_REPO/.venv/mcp-git/bin/python "$bin" bench mcp \
    --client-script "$LACHESIS_REPO/scripts/bench_mcp_client.py" "$@"
