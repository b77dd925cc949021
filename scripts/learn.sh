#!/usr/bin/env bash
# `make learn`: GRPO on the model the running platform (`make run`) serves. LoRA on SmolLM2-135M
# by default; after every step the trainer has the server read the merged weights
# (`--sync reload`), so the environments the server hosts, its pages and its dashboards move to
# them. Extra arguments go to `lachesis train run` (e.g. `make learn LEARN_ARGS="--steps 50"`).
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

API=${LACHESIS_API:-http://${LACHESIS_HOST:-127.0.0.1}:${LACHESIS_PORT:-8000}}
if ! curl -fsS "$API/health" >/dev/null 2>&1; then
    echo "learn: no Lachesis server with a model answers at $API; start one with \`make run\` first" >&2
    exit 1
fi
cargo build --release -p lachesis-backend
MODEL=${LACHESIS_MODEL:-$(scripts/ensure-model.sh)}
echo "learn: training against $API; watch it at $API/runs/default, /spatial and /marketplace"
exec "$(lachesis_target_dir)/release/lachesis" train run \
    --api "$API" --model "$MODEL" --sync reload \
    --lora-rank 8 --lora-alpha 16 --lr 2e-4 \
    --batch-size 16 --micro-batch 4 --max-token-len 1024 \
    --steps "${LEARN_STEPS:-200}" "$@"
