#!/usr/bin/env bash
# Measures the trajectory API side by side with atroposlib's own `run-api`, in one run:
# ingest throughput (groups/s, durability on: Postgres with fsync and synchronous commit) and
# /batch latency with a deep queue. Extra arguments go to `lachesis bench api`
# (e.g. --groups 4000 --clients 16 --queue 10000).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

scripts/ensure-atropos-venv.sh
cargo build --release -p lachesis-backend
bin="$(lachesis_target_dir)/release/lachesis"

work=$(mktemp -d /var/tmp/lachesis-bench.XXXXXX)
chmod 755 "$work"
port=$(scripts/pg.sh freeport)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Durability on: fsync and synchronous_commit stay at their defaults.
scripts/pg.sh start "$work/pg" "$port" >/dev/null
scripts/pg.sh createdb "$port" bench >/dev/null
DATABASE_URL="postgres://postgres@127.0.0.1:$port/bench" "$bin" serve --port 18300 >"$work/lachesis.log" 2>&1 &
pids+=($!)
(cd "$work" && exec "$LACHESIS_REPO/.venv/atropos/bin/run-api" --host 127.0.0.1 --port 18301) >"$work/atropos.log" 2>&1 &
pids+=($!)
for url in http://127.0.0.1:18300/ http://127.0.0.1:18301/; do
    for _ in $(seq 1 100); do curl -sf "$url" >/dev/null && break; sleep 0.2; done
    curl -sf "$url" >/dev/null || { echo "no server answers at $url" >&2; exit 1; }
done

"$bin" bench api --target lachesis=http://127.0.0.1:18300 --target atroposlib=http://127.0.0.1:18301 "$@"
