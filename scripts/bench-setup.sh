# Sourced by the bench-*.sh scripts (after env.sh and `cd "$LACHESIS_REPO"`): builds the server
# (release, or debug with BENCH_PROFILE=debug), starts a private PostgreSQL with fsync on and an
# empty database, and stops everything on exit. Sets:
#   bin           the lachesis binary
#   work          a scratch directory, removed on exit
#   database_url  the private database
#   pids          background processes to kill on exit (append yours)
# and provides `wait_for URL [SECONDS]` (default 20; exits with the logs if nothing answers).

profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend; else cargo build -p lachesis-backend; fi
bin="$(lachesis_target_dir)/$profile/lachesis"

work=$(mktemp -d /var/tmp/lachesis-bench.XXXXXX)
chmod 755 "$work"
pg_port=$(scripts/pg.sh freeport)
pids=()
bench_cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    scripts/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap bench_cleanup EXIT

# Durability as in production: every acknowledged write is fsynced.
scripts/pg.sh start "$work/pg" "$pg_port" >/dev/null
scripts/pg.sh createdb "$pg_port" bench >/dev/null
database_url="postgres://postgres@127.0.0.1:$pg_port/bench"

wait_for() {
    for _ in $(seq 1 $((${2:-20} * 5))); do curl -sf "$1" >/dev/null && return 0; sleep 0.2; done
    echo "no server answers at $1" >&2
    cat "$work"/*.log >&2 2>/dev/null || true
    exit 1
}
