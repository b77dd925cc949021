#!/usr/bin/env bash
# The Berkeley Function Calling Leaderboard's questions, answers and reference AST checker, from
# the `bfcl-eval` wheel on PyPI (Apache-2.0), unpacked in .venv/bfcl. The wheel alone is enough:
# the data are JSON lines and the checker needs only the standard library, so nothing is installed.
# Prints the data directory (for LACHESIS_BFCL_DIR); a fraction of a second once unpacked.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

BFCL_VERSION=2026.3.23
DIR=$LACHESIS_REPO/.venv/bfcl
DATA=$DIR/bfcl_eval/data
STAMP=$DIR/.unpacked-$BFCL_VERSION

if [[ ! -f $STAMP || ! -f $DATA/BFCL_v4_simple_python.json ]]; then
    echo "ensure-bfcl-data: fetching bfcl-eval==$BFCL_VERSION into .venv/bfcl" >&2
    mkdir -p "$DIR"
    # Any pip will do for a download; the atropos venv's avoids touching the system Python.
    PIP=(python3 -m pip)
    if [[ -x $LACHESIS_REPO/.venv/atropos/bin/pip ]]; then
        PIP=("$LACHESIS_REPO/.venv/atropos/bin/pip")
    elif ! python3 -m pip --version >/dev/null 2>&1; then
        python3 -m venv "$DIR/venv"
        PIP=("$DIR/venv/bin/pip")
    fi
    WHEELS=$(mktemp -d)
    trap 'rm -rf "$WHEELS"' EXIT
    "${PIP[@]}" download --quiet --disable-pip-version-check --no-deps \
        "bfcl-eval==$BFCL_VERSION" -d "$WHEELS"
    WHEEL=$(find "$WHEELS" -name 'bfcl_eval-*.whl' | head -n 1)
    [[ -n $WHEEL ]] || { echo "ensure-bfcl-data: no wheel downloaded" >&2; exit 1; }
    rm -rf "$DIR/bfcl_eval"
    python3 -m zipfile -e "$WHEEL" "$DIR"
    rm -f "$DIR"/.unpacked-*
    touch "$STAMP"
fi
echo "$DATA"
