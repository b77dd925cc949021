#!/usr/bin/env bash
# Live hub fan-out: N WebSocket clients watch one run while a trainer reports metrics at 30 Hz
# (POST /runs/{run}/trainer-metrics -> Postgres NOTIFY -> bridge -> hub -> every socket).
# Reports per-delivery latency (p50/p99/max) and the server's resident memory, for 100 and 1000
# clients by default. A private Postgres and a release server are started and stopped here.
# BENCH_PROFILE=debug uses the debug binary. Extra arguments go to `lachesis bench fanout`
# (e.g. --clients 100 --clients 1000 --clients 2000 --seconds 20 --via notify).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

# Each client is a socket here and one in the server: raise the descriptor limit for both.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh
server_port=${BENCH_PORT:-18310}
# No embedded model: its weights would dominate the resident memory being measured.
DATABASE_URL=$database_url "$bin" serve --port "$server_port" --no-embedded-model >"$work/lachesis.log" 2>&1 &
server=$!
pids+=("$server")
url=http://127.0.0.1:$server_port
wait_for "$url/"

DATABASE_URL=$database_url "$bin" bench fanout --url "$url" --server-pid "$server" "$@"
