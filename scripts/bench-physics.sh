#!/usr/bin/env bash
# rapier3d (through `lachesis spatial bench`, release build) against PyBullet from PyPI on the same
# 200-body scene, in one run: steps per second of each and the ratio. Not run by CI.
#   BENCH_BODIES (200), BENCH_STEPS (600), BENCH_PROFILE (release|debug)
# 600 steps are 10 simulated seconds: the bodies fall, collide and pile up, kept awake. Beyond
# about 650 steps rapier3d 0.36.1 lets a few of the 200 awake bodies drop through the ground (not
# diagnosed; bodies allowed to sleep, as in the environment, do not): `below_ground` shows it.
# PyBullet goes into .venv/pybullet (created once). It runs twice: with its default 50 solver
# iterations, and with 4, rapier's default, so the ratio can be read both ways.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

bodies=${BENCH_BODIES:-200}
steps=${BENCH_STEPS:-600}
profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend --bin lachesis; else cargo build -p lachesis-backend --bin lachesis; fi
bin="$(lachesis_target_dir)/$profile/lachesis"

venv=.venv/pybullet
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import numpy, pybullet' 2>/dev/null; then
    python3 -m venv "$venv"
    # PyBullet's wheel imports numpy (it is built against it) without declaring it.
    "$venv/bin/pip" install --quiet 'pybullet==3.2.7' numpy
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rapier=$("$bin" spatial bench --bodies "$bodies" --steps "$steps" --scene-out "$work/scene.json")
bullet_default=$("$venv/bin/python" scripts/bench_physics.py "$work/scene.json" "$steps")
bullet_matched=$("$venv/bin/python" scripts/bench_physics.py "$work/scene.json" "$steps" 4)
python3 - "$rapier" "$bullet_default" "$bullet_matched" <<'PY'
import json, sys
rapier, *bullets = (json.loads(a) for a in sys.argv[1:])
for r in (rapier, *bullets):
    print(f"{r['engine']:<45} {r['steps_per_second']:9.1f} steps/s  "
          f"({r['bodies']} bodies, {r['steps']} steps, mean final height {r['mean_final_height']:.3f} m, "
          f"{r['below_ground']} below the ground)")
for b in bullets:
    print(f"rapier3d / {b['engine']}: {rapier['steps_per_second'] / b['steps_per_second']:.2f}x")
PY
