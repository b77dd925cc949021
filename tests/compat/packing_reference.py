"""What atroposlib 0.4.0's own batching functions decide, for cases given as JSON.

    python packing_reference.py CASES.json ANSWERS.json

CASES.json:
    {"batch_cases": [{"queue": [{"id": 7, "env_id": 0, "n": 4}, ...],   # env_id may be null
                      "batch_size": 8,
                      "envs": [{"registered_id": 0, "connected": true,
                                "min_batch_allocation": 0.25}, ...]}, ...],   # allocation may be null
     "buffer_cases": [{"sizes": [1, 2, 3], "target": 4}, ...]}

ANSWERS.json (same order):
    {"batch_cases": [{"batches": [[ids of batch 1 in batch order], ...], "remaining": [ids]}, ...],
     "buffer_cases": [{"indices": [...]}, ...]}

Batches come from the loop `get_batch` in `atroposlib/api/server.py` runs on one call: grab batches
until none can be formed, with `grab_batch_with_minimum_allocations` when any registered env (connected
or not) has a `min_batch_allocation`, else with `grab_exact_from_heterogeneous_queue`. Buffers come
from `find_groups_summing_to_target`. The functions are imported from atroposlib, not copied.
"""

import json
import sys

from atroposlib.api.utils import (
    find_groups_summing_to_target,
    grab_batch_with_minimum_allocations,
    grab_exact_from_heterogeneous_queue,
)

MAX_BATCHES = 100_000  # atroposlib's loop has no bound; a runaway here is reported, not waited on


def queue_item(group):
    n = group["n"]
    return {
        "id": group["id"],
        "env_id": group["env_id"],
        "tokens": [[group["id"], i] for i in range(n)],
        "masks": [[-100, i] for i in range(n)],
        "scores": [float(i) for i in range(n)],
    }


def env_config(env):
    # The dict atroposlib's /register-env keeps per env; only these fields matter for batching.
    return {
        "registered_id": env["registered_id"],
        "connected": env["connected"],
        "min_batch_allocation": env["min_batch_allocation"],
        "group_size": env.get("group_size", 1),
        "weight": 1.0,
        "max_context_len": 2048,
    }


def form_batches(case):
    queue = [queue_item(g) for g in case["queue"]]
    batch_size = case["batch_size"]
    envs = [env_config(e) for e in case["envs"]]
    # server.py, get_batch:
    has_min_allocations = any(env.get("min_batch_allocation") is not None for env in envs)

    def grab(queue):
        if has_min_allocations:
            return grab_batch_with_minimum_allocations(queue, batch_size, envs)
        return grab_exact_from_heterogeneous_queue(queue, batch_size)

    batches = []
    batch, queue = grab(queue)
    while batch is not None:
        batches.append([g["id"] for g in batch])
        if len(batches) > MAX_BATCHES:
            raise RuntimeError(f"atroposlib kept forming batches (>{MAX_BATCHES}) for case {case}")
        batch, queue = grab(queue)
    return {"batches": batches, "remaining": [g["id"] for g in queue]}


def buffer_indices(case):
    buffer = [{"tokens": [[0]] * size} for size in case["sizes"]]
    return {"indices": find_groups_summing_to_target(buffer, case["target"])}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: packing_reference.py CASES.json ANSWERS.json")
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    answers = {
        "batch_cases": [form_batches(c) for c in cases.get("batch_cases", [])],
        "buffer_cases": [buffer_indices(c) for c in cases.get("buffer_cases", [])],
    }
    with open(sys.argv[2], "w") as f:
        json.dump(answers, f)


if __name__ == "__main__":
    main()
