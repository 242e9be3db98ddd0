#!/usr/bin/env bash
# The OpenClaw plugin's development tools, from its own package-lock.json: `npm ci` in
# openclaw-plugin/ (typescript and @types/node, its only dependencies, dev ones; the plugin itself
# has none). `.ci/plugin` runs tsc and `node --test` with them. Idempotent: skipped while
# node_modules was installed from the same lock file.
set -euo pipefail
cd "$(dirname "$0")/../.."
source .ci/lib/node.sh
NODE="$(plugin_node)" || { echo "60-plugin-dev: no Node >= 22 (.ci/setup.d/20-qmd.sh or 50-openclaw.sh installs one); skipping" >&2; exit 0; }
PLUGIN=openclaw-plugin
marker="$PLUGIN/node_modules/.installed-from"
lock="$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$PLUGIN/package-lock.json")"
if [ "$(cat "$marker" 2>/dev/null)" = "$lock" ]; then
  echo "60-plugin-dev: $PLUGIN/node_modules is installed from this package-lock.json" >&2
  exit 0
fi
start=$(date +%s)
# npm runs under this Node (engines), the registry is its only source.
(cd "$PLUGIN" && PATH="$(dirname "$NODE"):$PATH" npm ci --no-audit --no-fund --loglevel=error)
echo "$lock" > "$marker"
echo "60-plugin-dev: npm ci in $PLUGIN with node $("$NODE" --version) ($(( $(date +%s) - start )) s)" >&2
