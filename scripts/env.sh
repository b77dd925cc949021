# Sourced by the other scripts: the environment every build and test step shares.
# shellcheck shell=bash

LACHESIS_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export LACHESIS_REPO

# CI clones afresh each run; a target dir outside the clone keeps compiled crates between runs.
if [[ ${CI:-} == true && -z ${CARGO_TARGET_DIR:-} ]]; then
    export CARGO_TARGET_DIR=$HOME/.cache/lachesis/target
fi

# wasm-opt from npm first (Debian's binaryen is too old), then cargo-installed tools.
export PATH="$LACHESIS_REPO/node_modules/.bin:${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export TRUNK_SKIP_VERSION_CHECK=true

# Cargo's target dir for this workspace (honours CARGO_TARGET_DIR and .cargo/config).
lachesis_target_dir() {
    cargo metadata --format-version 1 --no-deps --manifest-path "$LACHESIS_REPO/Cargo.toml" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}
