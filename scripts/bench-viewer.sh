#!/usr/bin/env bash
# The spatial viewer's frame rate in headless Chromium (WebGL2 through SwiftShader, as in the
# browser test): /spatial/bench?objects=N redraws every frame while the camera turns; the page's
# own frames-per-second counter is read after a warm-up. Not run by CI.
#   BENCH_OBJECTS ("500 50"), BENCH_SECONDS (8), BENCH_PROFILE (release|debug)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

scripts/build-frontend.sh
# shellcheck source=scripts/bench-setup.sh
source scripts/bench-setup.sh
server_port=${BENCH_PORT:-18320}
DATABASE_URL=$database_url "$bin" serve --port "$server_port" --no-embedded-model \
    --static-dir frontend/dist >"$work/lachesis.log" 2>&1 &
pids+=("$!")
url=http://127.0.0.1:$server_port
wait_for "$url/"
for n in ${BENCH_OBJECTS:-500 50}; do
    BASE_URL=$url OBJECTS=$n SECONDS_TO_RUN=${BENCH_SECONDS:-8} node scripts/bench-viewer.mjs
done
