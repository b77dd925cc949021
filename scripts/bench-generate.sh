#!/usr/bin/env bash
# Generation speed of the embedded model against llama.cpp's server (llama-cpp-python from PyPI,
# built from source by pip the first time, 5-10 minutes) on the same SmolLM2 GGUF, in one run:
# tokens/s for 1 and 8 concurrent clients, and one request for a group of 8 answers.
# BENCH_PROFILE=debug uses the debug binary (its model code is optimised as in release).
# Extra arguments go to `lachesis bench generate`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

MODEL=$(scripts/ensure-model.sh)
VENV=$LACHESIS_REPO/.venv/llamacpp
# x86 SIMD up to AVX-512, as our build gets from target-cpu=native, but no AMX: a native build
# emits AMX tile instructions that virtual machines often do not enable (a crash at the first token).
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX_VNNI=ON"
if ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    python3 -m venv "$VENV"
    CMAKE_ARGS=$LLAMA_CMAKE_ARGS "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
        "llama-cpp-python[server]==0.3.36"
fi

# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url "$bin" serve --port 18310 --model "$MODEL" \
    >"$work/lachesis.log" 2>&1 &
pids+=($!)
threads=$(nproc)
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port 18311 \
    --n_threads "$threads" --n_ctx 2048 >"$work/llamacpp.log" 2>&1 &
pids+=($!)
# Loading the model takes a while.
wait_for http://127.0.0.1:18310/v1/models 60
wait_for http://127.0.0.1:18311/v1/models 60

"$bin" bench generate --target lachesis=http://127.0.0.1:18310 --target llama.cpp=http://127.0.0.1:18311 "$@"
