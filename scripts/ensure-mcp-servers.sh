#!/usr/bin/env bash
# The reference MCP servers the mcp_tools environment and its tests talk to: server-everything,
# server-filesystem and server-memory come from npm with the other tools (scripts/ensure-tools.sh);
# mcp-server-git comes from PyPI into .venv/mcp-git. Installed only when missing or at another
# version; otherwise a fraction of a second. Prints the git server's executable.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MCP_GIT_VERSION=2026.10.19
VENV=$LACHESIS_REPO/.venv/mcp-git
if ! "$VENV/bin/python" -c "import importlib.metadata as m; \
assert m.version('mcp-server-git') == '$MCP_GIT_VERSION'" 2>/dev/null; then
    echo "ensure-mcp-servers: installing mcp-server-git==$MCP_GIT_VERSION into .venv/mcp-git" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "mcp-server-git==$MCP_GIT_VERSION"
fi
echo "$VENV/bin/mcp-server-git"
