#!/usr/bin/env bash
# Training tokens/s of our GRPO step against PyTorch on the CPU, same shapes, same work
# (forward, clipped-ratio loss, backward, gradient clipping, AdamW), side by side, as a ratio.
#
# PyTorch comes from PyPI (scripts/ensure-torch-venv.sh). Not run by CI.
#
# Each shape runs ROUNDS times alternately (the machine is shared; the best round of each side is
# kept). BENCH_PROFILE=debug uses the debug binary (its model and training crates are optimised).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

VENV=$(scripts/ensure-torch-venv.sh)
STUBS=$VENV/cuda-stubs
ROUNDS=${ROUNDS:-3}

profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --quiet --release -p lachesis-backend; else cargo build --quiet -p lachesis-backend; fi
bin=$(lachesis_target_dir)/$profile/lachesis
threads=$(nproc)

best() { sort -g | tail -1; }
measure() {
    local name=$1; shift
    local ours=() torch=()
    for _ in $(seq "$ROUNDS"); do
        ours+=("$("$bin" bench train "$@" | sed -E 's/^ours: ([0-9.]+) tokens.*/\1/')")
        torch+=("$(LD_LIBRARY_PATH=$STUBS "$VENV/bin/python" scripts/bench-train/torch_grpo.py --threads "$threads" "$@" |
            sed -E 's/^torch: ([0-9.]+) tokens.*/\1/')")
    done
    local o t
    o=$(printf '%s\n' "${ours[@]}" | best)
    t=$(printf '%s\n' "${torch[@]}" | best)
    printf '%-28s ours %8.0f tokens/s   torch %8.0f tokens/s   ratio %.2fx   (rounds: ours %s; torch %s)\n' \
        "$name" "$o" "$t" "$(echo "$o / $t" | bc -l)" "${ours[*]}" "${torch[*]}"
}

echo "GRPO training step, CPU, $threads threads, best of $ROUNDS rounds"
measure "tiny (h64 L2 v256, 8x64)" --vocab 256 --hidden 64 --intermediate 256 --layers 2 \
    --heads 4 --kv-heads 2 --batch 8 --seq 64 --steps 20
measure "small (h256 L4 v4096, 8x128)" --vocab 4096 --hidden 256 --intermediate 1024 --layers 4 \
    --heads 8 --kv-heads 4 --batch 8 --seq 128 --steps 5
measure "small LoRA r8 q,v" --vocab 4096 --hidden 256 --intermediate 1024 --layers 4 \
    --heads 8 --kv-heads 4 --batch 8 --seq 128 --steps 5 --lora-rank 8
# SmolLM2-135M's own shape (the model `make learn` trains), LoRA r=8 on q and v, 16 x 128.
measure "SmolLM2-135M LoRA r8, 16x128" --vocab 49152 --hidden 576 --intermediate 1536 --layers 30 \
    --heads 9 --kv-heads 3 --batch 16 --seq 128 --steps 2 --lora-rank 8
