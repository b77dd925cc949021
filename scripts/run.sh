#!/usr/bin/env bash
# `make run`: build everything, make sure a database is up, then serve the API and the browser app.
# Without DATABASE_URL it starts (or reuses) a private PostgreSQL cluster, fsync on, whose data
# stays in `scripts/pg.sh datadir` between runs. Every step is a no-op when already done.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

scripts/ensure-tools.sh
scripts/build-frontend.sh
cargo build --release -p lachesis-backend
# The embedded model served under /v1 and /generate, unless one is named or it is turned off.
if [[ -z ${LACHESIS_MODEL:-} && -z ${LACHESIS_NO_EMBEDDED_MODEL:-} ]]; then
    LACHESIS_MODEL=$(scripts/ensure-model.sh)
    export LACHESIS_MODEL
fi
BIN=$(lachesis_target_dir)/release/lachesis
# With a model, the spatial, Pay-to-Play and MCP tools environments run in the server: /spatial
# shows the model attempting tasks live, /marketplace its judged episodes, payments and budget,
# /tools its tool calls on real MCP servers, /protein its binder designs (LACHESIS_ENVS names
# other environments instead, `;`-separated).
if [[ -z ${LACHESIS_ENVS:-} && -z ${LACHESIS_NO_EMBEDDED_MODEL:-} ]]; then
    export LACHESIS_ENVS="spatial;pay_to_play;mcp_tools;protein_binder"
fi
# ProteinMPNN's weights, for the protein environment's local services.
LACHESIS_PROTEINMPNN_WEIGHTS=$(scripts/ensure-proteinmpnn.sh)
export LACHESIS_PROTEINMPNN_WEIGHTS
# The reference MCP servers the mcp_tools environment starts per episode.
LACHESIS_MCP_GIT=$(scripts/ensure-mcp-servers.sh)
export LACHESIS_MCP_GIT
export LACHESIS_MCP_BIN=$LACHESIS_REPO/node_modules/.bin

if [[ -z ${DATABASE_URL:-} ]]; then
    PG_PORT=${LACHESIS_PG_PORT:-54329}
    scripts/pg.sh start "$(scripts/pg.sh datadir)" "$PG_PORT"
    scripts/pg.sh createdb "$PG_PORT" lachesis
    export DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/lachesis
fi

echo "Lachesis: http://${LACHESIS_HOST:-127.0.0.1}:${LACHESIS_PORT:-8000}"
# The server applies pending migrations itself at start.
exec "$BIN" serve --static-dir frontend/dist "$@"
