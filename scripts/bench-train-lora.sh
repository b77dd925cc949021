#!/usr/bin/env bash
# GRPO with LoRA on SmolLM2-135M-Instruct, end to end on this machine: a private Postgres, the
# trajectory API served inside `lachesis train run`, the `arithmetic` environment answered by the
# embedded engine, LoRA r=8 on q_proj and v_proj, weights swapped into the engine after each step.
# Prints one line per step; "mean score" is the mean reward of the batch's rollouts (the reward
# curve). STEPS (default 20) and BENCH_PROFILE=debug as in the other bench scripts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

MODEL=$(scripts/ensure-model.sh)
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

DATABASE_URL=$database_url RUST_LOG=${RUST_LOG:-warn} "$bin" train run \
    --model "$MODEL" --run smollm2-lora --steps "${STEPS:-20}" \
    --lora-rank 8 --lora-alpha 16 --lora-targets q_proj,v_proj \
    --lr 2e-4 --batch-size 16 --micro-batch 4 --max-token-len 512 \
    --env 'arithmetic:{"group_size": 8, "max_tokens": 64, "seed": 1}' \
    --sync embedded "$@"
