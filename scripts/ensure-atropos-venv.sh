#!/usr/bin/env bash
# The Atropos reference (atroposlib from PyPI: its `run-api` server, client code and tools), which
# the compatibility tests and the benchmark run against, in .venv/atropos. Installed only when the
# venv lacks it or has another version; otherwise a fraction of a second.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

ATROPOS_VERSION=0.4.0
VENV=$LACHESIS_REPO/.venv/atropos
if ! "$VENV/bin/python" -c "import atroposlib, importlib.metadata as m; \
assert m.version('atroposlib') == '$ATROPOS_VERSION'" 2>/dev/null; then
    echo "ensure-atropos-venv: installing atroposlib==$ATROPOS_VERSION into .venv/atropos" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "atroposlib==$ATROPOS_VERSION"
fi
