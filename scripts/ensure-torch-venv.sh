#!/usr/bin/env bash
# PyTorch for the CPU, in .venv/torch-cpu, for the benchmarks that measure us against it
# (scripts/bench-train.sh; with `--trl`, Hugging Face TRL too, for scripts/bench-learn.sh). Prints
# the venv's directory. Run python there with LD_LIBRARY_PATH=<venv>/cuda-stubs. A no-op when
# installed.
#
# PyPI's Linux torch wheel is built with CUDA and depends on about 12 NVIDIA packages (several GB).
# Only the wheel itself is installed (`--no-deps`, about 540 MB), and
# scripts/bench-train/cuda_stubs.py writes empty stand-ins for the CUDA libraries it links, so it
# imports and runs its CPU kernels. TRL, transformers, peft and accelerate depend on torch, so
# they are installed by exact version without dependencies, with their own listed beside them.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

VENV=$LACHESIS_REPO/.venv/torch-cpu
STUBS=$VENV/cuda-stubs
pip() { "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "$@" >&2; }

if ! LD_LIBRARY_PATH=$STUBS "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "ensure-torch-venv: installing torch (CPU use only) into .venv/torch-cpu" >&2
    python3 -m venv "$VENV"
    wheels=$(mktemp -d)
    trap 'rm -rf "$wheels"' EXIT
    "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$wheels" torch >&2
    pip --no-deps "$wheels"/torch-*.whl
    pip filelock typing-extensions sympy networkx jinja2 fsspec numpy
    rm -rf "$wheels"
    torch_lib=$("$VENV/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib"))')
    "$VENV/bin/python" scripts/bench-train/cuda_stubs.py "$torch_lib" "$STUBS" >&2
fi

if [[ ${1:-} == --trl ]] && ! LD_LIBRARY_PATH=$STUBS "$VENV/bin/python" -c \
    "import importlib.metadata as m; assert m.version('trl') == '1.16.0'" 2>/dev/null; then
    echo "ensure-torch-venv: installing trl 1.16.0, transformers, peft into .venv/torch-cpu" >&2
    pip --no-deps trl==1.16.0 transformers==5.24.0 peft==0.21.2 accelerate==1.16.0 datasets==5.2.0 \
        gguf==0.19.0 huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 \
        PyYAML Pygments annotated-doc annotated-types anyio certifi charset-normalizer click dill \
        h11 hf-xet httpcore2 httpx2 idna markdown-it-py mdurl multiprocess packaging pandas psutil \
        pyarrow pydantic pydantic_core python-dateutil regex requests rich shellingham tqdm \
        truststore typer typing-inspection tzdata urllib3 xxhash
fi
echo "$VENV"
