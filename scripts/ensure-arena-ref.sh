#!/usr/bin/env bash
# The arena ratings' reference: scikit-learn's LogisticRegression, which the Bradley–Terry fitter in
# backend/src/arena/ratings.rs is checked against, in .venv/arena-ref. Installed only when the venv
# lacks it or has another version; otherwise a fraction of a second. Prints the venv's python, for
# LACHESIS_ARENA_PYTHON.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

SKLEARN_VERSION=1.9.1
VENV=$LACHESIS_REPO/.venv/arena-ref
if ! "$VENV/bin/python" -c "import sklearn, importlib.metadata as m; \
assert m.version('scikit-learn') == '$SKLEARN_VERSION'" 2>/dev/null; then
    echo "ensure-arena-ref: installing scikit-learn==$SKLEARN_VERSION into .venv/arena-ref" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "scikit-learn==$SKLEARN_VERSION" >&2
fi
echo "$VENV/bin/python"
