#!/usr/bin/env bash
# A polite caller of the embedded model alone, then beside an abusive one (8 threads asking for
# 2 x 128 tokens at a time, honouring Retry-After, then not), with accounts on and the server's
# default limits: how much of its rate the polite caller keeps. BENCH_PROFILE=debug uses the debug
# binary (its model code is optimised as in release). BENCH_ARGS: seconds per phase (default 30).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

MODEL=$(scripts/ensure-model.sh)
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url "$bin" serve --port 18320 --auth on --model "$MODEL" \
    >"$work/lachesis.log" 2>&1 &
pids+=($!)
wait_for http://127.0.0.1:18320/ 60
python3 scripts/bench-abuse.py http://127.0.0.1:18320 "$@"
