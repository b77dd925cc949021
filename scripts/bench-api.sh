#!/usr/bin/env bash
# Measures the trajectory API side by side with atroposlib's own `run-api`, in one run:
# ingest throughput (groups/s, durability on: Postgres with fsync and synchronous commit) and
# /batch latency with a deep queue. Extra arguments go to `lachesis bench api`
# (e.g. --groups 4000 --clients 16 --queue 10000).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

scripts/ensure-atropos-venv.sh
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url "$bin" serve --port 18300 >"$work/lachesis.log" 2>&1 &
pids+=($!)
(cd "$work" && exec "$LACHESIS_REPO/.venv/atropos/bin/run-api" --host 127.0.0.1 --port 18301) >"$work/atropos.log" 2>&1 &
pids+=($!)
wait_for http://127.0.0.1:18300/
wait_for http://127.0.0.1:18301/

"$bin" bench api --target lachesis=http://127.0.0.1:18300 --target atroposlib=http://127.0.0.1:18301 "$@"
