#!/usr/bin/env bash
# A private PostgreSQL cluster without systemd, for `make run` and `make test`.
#
#   scripts/pg.sh datadir                      print the default data dir for `make run`
#   scripts/pg.sh start DATA_DIR PORT [--fsync off]
#                                              initdb once (empty/missing DATA_DIR), then start it on
#                                              127.0.0.1:PORT (socket in /tmp); no-op if already running
#   scripts/pg.sh stop DATA_DIR                fast shutdown; no-op if not running
#   scripts/pg.sh status DATA_DIR              exit 0 when running
#   scripts/pg.sh createdb PORT NAME           create database NAME unless it exists
#   scripts/pg.sh freeport                     print a free TCP port (tries 55432 upwards)
#
# Server binaries come from the newest /usr/lib/postgresql/*/bin (override with PG_BINDIR).
# Authentication is `trust` for the superuser `postgres`, and only on 127.0.0.1: a development
# cluster, not a production one.
# As root, the server tools run as the `postgres` OS user (initdb refuses root), which then must be
# able to reach DATA_DIR: the parent of DATA_DIR is handed to `postgres` (so pass a directory of its
# own, such as `scripts/pg.sh datadir` prints). The file can also be sourced for its functions.

PG_DEFAULT_PORT=54329

pg_die() {
    printf 'pg.sh: %s\n' "$*" >&2
    exit 1
}

pg_bindir() {
    if [[ -n ${PG_BINDIR:-} ]]; then
        printf '%s\n' "$PG_BINDIR"
        return
    fi
    local dir
    dir=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n1)
    [[ -n $dir && -x $dir/pg_ctl ]] ||
        pg_die "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
    printf '%s\n' "$dir"
}

# Runs a server tool as the postgres OS user when we are root, else as ourselves.
# (From /, since the caller's working directory may be closed to that user; paths are absolute.)
pg_as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

pg_repo() { (cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); }

# The data dir `make run` keeps: inside the checkout when the server's user can get there,
# otherwise under /var/tmp, keyed by the checkout's path.
pg_datadir() {
    local repo
    repo=$(pg_repo)
    if [[ $(id -u) -ne 0 ]] || runuser -u postgres -- test -x "$repo" 2>/dev/null; then
        printf '%s\n' "$repo/.data/pg"
    else
        printf '/var/tmp/lachesis-%s/pg\n' "$(printf '%s' "$repo" | sha256sum | cut -c1-10)"
    fi
}

pg_abspath() {
    if [[ $1 == /* ]]; then printf '%s\n' "$1"; else printf '%s\n' "$PWD/$1"; fi
}

pg_running() {
    local data
    data=$(pg_abspath "$1")
    [[ -f $data/postmaster.pid ]] && pg_as_owner "$(pg_bindir)/pg_ctl" -D "$data" status >/dev/null 2>&1
}

pg_start() {
    local data=${1:?usage: pg.sh start DATA_DIR PORT [--fsync off]} port=${2:-$PG_DEFAULT_PORT}
    shift 2 || shift $#
    local fsync=on
    while (($#)); do
        case $1 in
            --fsync)
                fsync=${2:?--fsync needs on or off}
                shift 2
                ;;
            --fsync=*)
                fsync=${1#--fsync=}
                shift
                ;;
            *) pg_die "unknown option $1" ;;
        esac
    done
    [[ $fsync == on || $fsync == off ]] || pg_die "--fsync takes on or off, not $fsync"
    [[ $port =~ ^[0-9]+$ ]] || pg_die "bad port $port"
    data=$(pg_abspath "$data")

    local bin
    bin=$(pg_bindir)

    if pg_running "$data"; then
        local running_port
        running_port=$(sed -n 4p "$data/postmaster.pid")
        [[ $running_port == "$port" ]] ||
            pg_die "$data is already running on port $running_port, not $port"
        printf 'pg.sh: already running: %s on 127.0.0.1:%s\n' "$data" "$port" >&2
        return 0
    fi

    local parent
    parent=$(dirname "$data")
    mkdir -p "$parent"
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || pg_die "no 'postgres' OS user to run the server as"
        # A shared sticky directory (/tmp, /var/tmp) stays as it is; a dedicated one is handed over.
        [[ -k $parent ]] || chown postgres:postgres "$parent"
        if [[ -d $data ]]; then chown postgres:postgres "$data"; fi
        runuser -u postgres -- test -w "$parent" -o -w "$data" 2>/dev/null ||
            pg_die "the postgres OS user cannot reach $data (a parent dir is closed to it);" \
                "use a data dir under /var/tmp, e.g. $(pg_datadir)"
    fi

    if [[ ! -f $data/PG_VERSION ]]; then
        if [[ -d $data && -n $(ls -A "$data") ]]; then
            pg_die "$data is neither empty nor a PostgreSQL data dir"
        fi
        local nosync=()
        [[ $fsync == off ]] && nosync=(--no-sync)
        printf 'pg.sh: initdb %s\n' "$data" >&2
        pg_as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C \
            "${nosync[@]}" >/dev/null
    fi

    local log=$data.log opts
    opts="-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=$fsync"
    # Rollout payloads are large: room for them in shared buffers and between checkpoints keeps
    # backends from evicting dirty pages themselves. Durability settings are untouched.
    opts+=" -c shared_buffers=256MB -c wal_buffers=16MB -c max_wal_size=4GB"
    if [[ $fsync == off ]]; then
        opts+=" -c synchronous_commit=off -c full_page_writes=off"
    fi
    if ! pg_as_owner "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 -o "$opts" start >/dev/null; then
        tail -n 20 "$log" >&2 || true
        pg_die "could not start PostgreSQL on port $port (log: $log)"
    fi
    printf 'pg.sh: started %s on 127.0.0.1:%s (fsync %s)\n' "$data" "$port" "$fsync" >&2
}

pg_stop() {
    local data
    data=$(pg_abspath "${1:?usage: pg.sh stop DATA_DIR}")
    if pg_running "$data"; then
        pg_as_owner "$(pg_bindir)/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
        printf 'pg.sh: stopped %s\n' "$data" >&2
    fi
}

pg_createdb() {
    local port=${1:?usage: pg.sh createdb PORT NAME} name=${2:?usage: pg.sh createdb PORT NAME}
    local bin exists
    bin=$(pg_bindir)
    exists=$("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -XAtq -v ON_ERROR_STOP=1 \
        -v name="$name" <<<"SELECT 1 FROM pg_database WHERE datname = :'name'")
    if [[ $exists != 1 ]]; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$name"
        printf 'pg.sh: created database %s\n' "$name" >&2
    fi
}

# A TCP port nobody listens on (and whose /tmp socket name is free), from 55432 upwards.
pg_freeport() {
    python3 - <<'PY'
import os, socket
for port in range(55432, 56432):
    if os.path.exists(f"/tmp/.s.PGSQL.{port}"):
        continue
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("pg.sh: no free port in 55432..56431")
PY
}

pg_main() {
    set -euo pipefail
    local cmd=${1:-}
    shift || true
    case $cmd in
        datadir) pg_datadir ;;
        start) pg_start "$@" ;;
        stop) pg_stop "$@" ;;
        status) pg_running "${1:?usage: pg.sh status DATA_DIR}" ;;
        createdb) pg_createdb "$@" ;;
        freeport) pg_freeport ;;
        bindir) pg_bindir ;;
        *) pg_die "usage: pg.sh {datadir|start DATA_DIR PORT [--fsync off]|stop DATA_DIR|status DATA_DIR|createdb PORT NAME|freeport}" ;;
    esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    pg_main "$@"
fi
