#!/usr/bin/env python3
"""The reference side of `lachesis bench arena`: FastChat's Chatbot Arena ratings on a battles file.

Follows FastChat's `compute_mle_elo` (fastchat/serve/monitor/elo_analysis.py): every battle is
duplicated; row i has +ln(BASE) in model_a's column and -ln(BASE) in model_b's; a win gives two
rows won by the winner, a tie or "tie (bothbad)" one row won by each side; an unpenalised
LogisticRegression without intercept is fitted and the ratings are SCALE * coef + INIT_RATING.
The bootstrap follows FastChat's `get_bootstrap_result`: resample the battles with replacement
(as many as there are) and refit from scratch, design matrix included.

FastChat builds the matrix through pandas; numpy builds the same matrix here so that only numpy and
scikit-learn are needed. Reading the file is not timed. `penalty=None` is spelled `C=np.inf`
(scikit-learn 1.8 deprecated the former; the fit is the same).

Prints one JSON object: models, ratings (point fit, FastChat's scale, not re-centred),
fit_seconds, round_seconds (one per bootstrap round), versions.
"""

import argparse
import json
import math
import platform
import sys
import time

import numpy as np
import sklearn
from sklearn.linear_model import LogisticRegression

SCALE, BASE, INIT_RATING = 400, 10, 1000
WINNERS = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 2}


def read_battles(path):
    """Model indices of each side and the winner code (0: a, 1: b, 2: tie), in numpy arrays."""
    models, index, a, b, w = [], {}, [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            battle = json.loads(line)
            if battle.get("void") is True:
                continue
            for side, out in (("model_a", a), ("model_b", b)):
                name = battle[side]
                if name not in index:
                    index[name] = len(models)
                    models.append(name)
                out.append(index[name])
            w.append(WINNERS[battle["winner"]])
    return models, np.array(a), np.array(b), np.array(w)


def compute_mle_elo(a, b, w, p):
    """FastChat's compute_mle_elo on index arrays: the duplicated design, then the fit."""
    a, b, w = np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([w, w])
    n = len(a)
    x = np.zeros([n, p])
    x[np.arange(n), a] = +math.log(BASE)
    x[np.arange(n), b] = -math.log(BASE)
    y = np.zeros(n)
    y[w == 0] = 1.0
    # One tie is one win for a (its first copy) and one for b (the second copy keeps y = 0).
    tie = w == 2
    tie[n // 2 :] = False
    y[tie] = 1.0
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6)
    lr.fit(x, y)
    return SCALE * lr.coef_[0] + INIT_RATING


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("battles")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    models, a, b, w = read_battles(args.battles)
    p = len(models)
    started = time.perf_counter()
    ratings = compute_mle_elo(a, b, w, p)
    fit_seconds = time.perf_counter() - started

    rng = np.random.default_rng(args.seed)
    round_seconds = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        pick = rng.integers(0, len(a), len(a))
        compute_mle_elo(a[pick], b[pick], w[pick], p)
        round_seconds.append(time.perf_counter() - started)

    json.dump(
        {
            "models": models,
            "ratings": ratings.tolist(),
            "fit_seconds": fit_seconds,
            "round_seconds": round_seconds,
            "versions": f"Python {platform.python_version()}, numpy {np.__version__}, "
            f"scikit-learn {sklearn.__version__}",
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
