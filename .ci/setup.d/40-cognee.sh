#!/usr/bin/env bash
# Cognee 1.6.5 in its own venv, .tools/cognee-venv (~1.6 GB, ~60 s on an idle machine). The tests
# run a real Cognee API server from it (tests/support/cognee/server.py). The router never imports
# cognee - it talks to the server over HTTP - so the router's own install stays light.
# Idempotent: a venv whose marker names this version is kept; a partial one is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.tools/cognee-venv
VERSION=1.6.5
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.cognee-version" 2>/dev/null)" = "$VERSION" ]; then
  echo "cognee $VERSION: already installed in $VENV" >&2
  exit 0
fi
start=$(date +%s)
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "cognee==$VERSION" 2>&1 \
  | grep -v "^WARNING: Location '.*' is ignored" >&2 || true
"$VENV/bin/python" - "$VERSION" <<'PY'
import importlib.metadata, sys
found = importlib.metadata.version("cognee")
sys.exit(0 if found == sys.argv[1] else f"cognee {found} installed, wanted {sys.argv[1]}")
PY
echo "$VERSION" > "$VENV/.cognee-version"
echo "cognee $VERSION: installed in $VENV in $(( $(date +%s) - start )) s" >&2
