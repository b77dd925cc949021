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
profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend; else cargo build -p lachesis-backend; fi
bin="$(lachesis_target_dir)/$profile/lachesis"

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

scripts/pg.sh start "$work/pg" "$port" >/dev/null
scripts/pg.sh createdb "$port" bench >/dev/null
DATABASE_URL="postgres://postgres@127.0.0.1:$port/bench" "$bin" serve --port 18310 --model "$MODEL" \
    >"$work/lachesis.log" 2>&1 &
pids+=($!)
threads=$(nproc)
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port 18311 \
    --n_threads "$threads" --n_ctx 2048 >"$work/llamacpp.log" 2>&1 &
pids+=($!)
for url in http://127.0.0.1:18310/v1/models http://127.0.0.1:18311/v1/models; do
    for _ in $(seq 1 300); do curl -sf "$url" >/dev/null && break; sleep 0.2; done
    curl -sf "$url" >/dev/null || { echo "no server answers at $url" >&2; cat "$work"/*.log >&2; exit 1; }
done

"$bin" bench generate --target lachesis=http://127.0.0.1:18310 --target llama.cpp=http://127.0.0.1:18311 "$@"
