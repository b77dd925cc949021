#!/usr/bin/env bash
# `make bench-learn`: does a real model learn here? GRPO with LoRA (r=8 on q and v) on
# SmolLM2-135M-Instruct against the `arithmetic` environment, in one process: a private
# PostgreSQL, the trajectory API served inside `lachesis train run`, rollouts from the embedded
# engine that the trainer swaps its weights into after every step. Before the first step and
# every EVAL_INTERVAL steps the run answers arithmetic's held-out set (EVAL_SIZE fixed problems,
# never drawn for training, sampled at the training temperature 1.0, so the figure is the
# policy's expected reward, the quantity GRPO raises) and prints
# `eval step S arithmetic: ... eval/mean_score X`. The same figures are charted on the run's
# dashboard (`arithmetic:eval/mean_score`).
#
# One run per seed in SEEDS (default "1 2 3"), STEPS steps each (default 50, about 44 minutes on
# 2 cores: rollouts and training share them); at the end, the held-out mean score by step for
# each seed and their mean. ENV_SETTINGS overrides the task (default: one worked example, so the
# model starts knowing the answer format most of the time). LR, BATCH_SIZE (sequences a step,
# groups of 8), MAX_TOKENS and RATIO_BASE (`trainer`, the default, or `inference`: what each
# token's importance ratio is taken against, see `lachesis train run --help`) override the rest.
# Not run by CI.
#
# The anchor (ANCHOR=trl, the default; ANCHOR=none skips it): after each seed, the same task with
# PyTorch and Hugging Face TRL from PyPI (scripts/bench-learn/trl_grpo.py): the same GGUF model,
# LoRA, loss, batch and learning rate, the same held-out problems (written by `lachesis env
# evaluate`, whose scores also check the anchor's reward), and the minutes that seed took as its
# budget, so it doubles the run's time. Both curves are printed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

MODEL=$(scripts/ensure-model.sh)
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh

SEEDS=${SEEDS:-"1 2 3"}
STEPS=${STEPS:-50}
EVAL_INTERVAL=${EVAL_INTERVAL:-10}
EVAL_SIZE=${EVAL_SIZE:-128}
ENV_SETTINGS=${ENV_SETTINGS:-'"examples": 1, "eval_temperature": 1.0'}
LR=${LR:-5e-4}
BATCH_SIZE=${BATCH_SIZE:-32}
MAX_TOKENS=${MAX_TOKENS:-64}
RATIO_BASE=${RATIO_BASE:-trainer}
ANCHOR=${ANCHOR:-trl}
[[ $ANCHOR == trl ]] && venv=$(scripts/ensure-torch-venv.sh --trl)
# ENV_SETTINGS as `--set KEY=VALUE` arguments, for `lachesis env evaluate`.
mapfile -t env_sets < <(python3 -c 'import json, sys
for k, v in json.loads("{" + sys.argv[1] + "}").items(): print(f"--set={k}={json.dumps(v)}")' "$ENV_SETTINGS")

for seed in $SEEDS; do
    echo "== seed $seed: $STEPS steps, held-out evaluation every $EVAL_INTERVAL"
    started=$(date +%s)
    DATABASE_URL=$database_url RUST_LOG=${RUST_LOG:-warn} "$bin" train run \
        --model "$MODEL" --run "learn-seed-$seed" --steps "$STEPS" \
        --lora-rank 8 --lora-alpha 16 --lora-targets q_proj,v_proj \
        --lr "$LR" --batch-size "$BATCH_SIZE" --micro-batch 8 --max-token-len 512 \
        --ratio-base "$RATIO_BASE" \
        --env "arithmetic:{\"group_size\": 8, \"max_tokens\": $MAX_TOKENS, \"seed\": $seed, \"settings\": {\"eval_size\": $EVAL_SIZE, $ENV_SETTINGS}}" \
        --eval-interval "$EVAL_INTERVAL" --sync embedded |
        while IFS= read -r line; do
            # Each evaluation carries the minutes since the run started.
            [[ $line == "eval step"* ]] && line="$line (at $(( ($(date +%s) - started) / 60 )) min)"
            echo "$line"
        done | tee "$work/seed-$seed.log"
    budget=$(( $(date +%s) - started ))
    echo "seed $seed took $(( budget / 60 )) min"
    [[ $ANCHOR == trl ]] || continue

    echo "== seed $seed with TRL: the same task, at most $STEPS steps or $(( budget / 60 )) minutes"
    RUST_LOG=${RUST_LOG:-warn} "$bin" env evaluate arithmetic --policy embedded --model "$MODEL" \
        --seed "$seed" --max-tokens "$MAX_TOKENS" --set "eval_size=$EVAL_SIZE" "${env_sets[@]}" \
        --out "$work/eval-$seed" >/dev/null
    LD_LIBRARY_PATH=$venv/cuda-stubs "$venv/bin/python" scripts/bench-learn/trl_grpo.py \
        --model "$MODEL" --eval-file "$work/eval-$seed/samples.jsonl" --out "$work/trl-$seed" \
        --seed "$seed" --steps "$STEPS" --eval-interval "$EVAL_INTERVAL" --lr "$LR" \
        --batch-size "$BATCH_SIZE" --group-size 8 --micro-batch 8 --max-tokens "$MAX_TOKENS" \
        --settings "{$ENV_SETTINGS}" --minutes "$(echo "$budget / 60" | bc -l)" --threads "$(nproc)" \
        2>"$work/trl-$seed.err" | grep --line-buffered -v '^{' | tee "$work/trl-seed-$seed.log" ||
        { tail -20 "$work/trl-$seed.err" >&2; exit 1; }
done

echo
echo "held-out mean score (arithmetic, $EVAL_SIZE problems, sampled at 1.0) by step"
python3 - "$work" "$ANCHOR" $SEEDS <<'PY'
import os, re, sys
work, anchor, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
systems = [("lachesis", "seed")] + ([("trl", "trl-seed")] if anchor == "trl" else [])
for system, prefix in systems:
    curves = {}
    for seed in seeds:
        path = f"{work}/{prefix}-{seed}.log"
        for line in open(path) if os.path.exists(path) else []:
            m = re.match(r"eval step +(\d+) arithmetic: .*eval/mean_score ([0-9.]+).*\(at (\d+) min\)", line)
            if m:
                curves.setdefault(int(m.group(1)), {})[seed] = (float(m.group(2)), int(m.group(3)))
    if not curves:
        print(f"{system}: no evaluations")
        continue
    print(f"{system}\nstep  " + "  ".join(f"seed {s:>3} (min)" for s in seeds) + "     mean")
    for step in sorted(curves):
        row = curves[step]
        cells = "  ".join(f"{row[s][0]:8.3f} ({row[s][1]:3d})" if s in row else "       -      " for s in seeds)
        mean = sum(score for score, _ in row.values()) / len(row)
        print(f"{step:4d}  {cells}  {mean:7.3f}")
    first, last = min(curves), max(curves)
    def mean_at(step):
        return sum(score for score, _ in curves[step].values()) / len(curves[step])
    print(f"{system}: mean held-out score {first} -> {last}: {mean_at(last) - mean_at(first):+.3f}\n")
PY
