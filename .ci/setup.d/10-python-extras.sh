#!/usr/bin/env bash
# Optional Python extras the tests exercise: the MCP SDK behind `memory-router mcp`
# (tests/daemon/test_mcp_*.py drive it with the SDK's own stdio client). Idempotent: pip skips what
# is already installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[mcp]'
