#!/usr/bin/env bash
# Builds the Leptos frontend with Trunk (offline, release, wasm-opt -Oz) into frontend/dist.
# A no-op when the last release build in frontend/dist is newer than every input file.
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$LACHESIS_REPO"

scripts/ensure-tools.sh

# Written only after a release build. Trunk replaces the whole dist dir on every build, so a
# `trunk serve` (debug, with its live-reload script) removes it and forces a rebuild here.
STAMP=frontend/dist/.release-build
if [[ -f $STAMP ]] && [[ -z $(find frontend shared Trunk.toml \
    -path frontend/dist -prune -o -type f -newer "$STAMP" -print -quit) ]]; then
    echo "build-frontend: frontend/dist is up to date" >&2
    exit 0
fi

# Trunk runs cargo with --offline (Trunk.toml): fetch the crates first (instant when cached).
cargo fetch
trunk build --release
touch "$STAMP"
