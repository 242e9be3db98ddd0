"""The repository of ``bench/code_memory.py``, laid out and indexed once (cached under ``--work``).

The repository is **anyio 4.16.0** (MIT; Alex Grönholm and contributors): the package as the
installed wheel ships it, copied from site-packages after every file is checked against the
wheel's ``RECORD`` hashes (so the copy is exactly that release, whatever else is installed).
Under ``<work>/<name>/``:

* ``repo/`` - ``anyio/**/*.py`` plus the wheel's ``LICENSE`` and a ``SOURCE.md`` saying what it is;
* ``qmd/`` - a real qmd index of ``repo/**/*.py`` (collection ``code``), embedded with the MiniLM
  GGUF that ``.ci/setup.d/30-qmd-models.sh`` builds. MiniLM needs ``QMD_EMBED_CONTEXT_SIZE=384``
  on source files (qmd trims a chunk to 508 tokens, code re-tokenises past MiniLM's 512
  positions and ``qmd embed`` aborts with ``GGML_ASSERT(i01 < ne01)``), and
  ``QMD_EMBED_PARALLELISM=2`` embeds ~4x faster on two cores: :func:`qmd_env` sets both for every
  qmd call the bench makes, the daemons' included;
* ``fts.db`` - the plain baseline: SQLite FTS5 over 40-line windows (step 20) of every file.

``manifest.json`` holds a key of the copied files' hashes, this module's source and the model's
checksum marker; an unchanged key reuses everything.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from _locomo_workspace import tool_env

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.core.frozen import Frozen

PACKAGE = "anyio"
COLLECTION = "code"
WINDOW, STEP = 40, 20
EMBED_ENV = {"QMD_EMBED_CONTEXT_SIZE": "384", "QMD_EMBED_PARALLELISM": "2"}


class CodeWorkspace(Frozen):
    name: str
    """``anyio-4.16.0``: the repository and its version."""
    root: Path
    repo: Path
    fts_db: Path
    qmd: dict[str, Any]
    embedded: bool
    reused: bool


def qmd_env() -> dict[str, str]:
    """The environment of every qmd call and daemon of this bench (see the module docstring)."""
    return {**tool_env(), **EMBED_ENV}


def distribution() -> tuple[str, list[tuple[str, str]]]:
    """(version, [(path in the wheel, its RECORD hash)]) of the package's .py files and licence."""
    dist = importlib.metadata.distribution(PACKAGE)
    record = dist.read_text("RECORD") or ""
    files = [
        (row[0], row[1])
        for row in csv.reader(record.splitlines())
        if row
        and row[1]
        and ((row[0].startswith(f"{PACKAGE}/") and row[0].endswith(".py")) or row[0].endswith("licenses/LICENSE"))
    ]
    return dist.version, sorted(files)


def build(work: Path, *, embed: bool, model: Path, log: Any = print) -> CodeWorkspace:
    version, files = distribution()
    name = f"{PACKAGE}-{version}"
    root = work / name
    key = _key(files, embed, model)
    manifest_path = root / "manifest.json"
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            manifest = {}
        if manifest.get("key") == key:
            return _workspace(name, root, manifest, reused=True)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    log(f"copying {name} ({len(files)} files) into {root} and indexing it (embed {embed})")
    _copy(files, version, root / "repo")
    _write_fts(root / "repo", root / "fts.db")
    settings = _index_qmd(root, embed, model)
    manifest = {"key": key, "name": name, "embedded": embed, "qmd": settings}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")  # last: a half build is redone
    return _workspace(name, root, manifest, reused=False)


def _key(files: list[tuple[str, str]], embed: bool, model: Path) -> str:
    marker = Path(str(model) + ".sha256")
    parts = [
        json.dumps(files),
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        str(embed),
        marker.read_text(encoding="utf-8") if embed and marker.is_file() else "",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _workspace(name: str, root: Path, manifest: dict[str, Any], *, reused: bool) -> CodeWorkspace:
    return CodeWorkspace(
        name=name,
        root=root,
        repo=root / "repo",
        fts_db=root / "fts.db",
        qmd=manifest["qmd"],
        embedded=bool(manifest["embedded"]),
        reused=reused,
    )


def _copy(files: list[tuple[str, str]], version: str, repo: Path) -> None:
    """The wheel's files into ``repo``, each checked against its RECORD hash first."""
    dist = importlib.metadata.distribution(PACKAGE)
    for rel, recorded in files:
        source = Path(str(dist.locate_file(rel)))
        data = source.read_bytes()
        algo, _, want = recorded.partition("=")
        got = base64.urlsafe_b64encode(hashlib.new(algo, data).digest()).rstrip(b"=").decode()
        if got != want:
            raise RuntimeError(f"{source} differs from the {PACKAGE} {version} wheel's RECORD; reinstall it")
        target = repo / ("LICENSE" if rel.endswith("LICENSE") else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (repo / "SOURCE.md").write_text(
        f"# Source\n\n{PACKAGE} {version} (https://github.com/agronholm/anyio), the `{PACKAGE}/` package exactly as "
        f"its PyPI wheel ships it (files checked against the wheel's RECORD). Licence: MIT, see LICENSE "
        f"(copyright Alex Grönholm). Used by memory-router's bench/code_memory.py as a code memory.\n",
        encoding="utf-8",
    )


def source_files(repo: Path) -> list[Path]:
    return sorted(repo.rglob("*.py"))


def _write_fts(repo: Path, path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE windows USING fts5(content, path UNINDEXED, line UNINDEXED, "
            "tokenize='porter unicode61')"
        )
        rows = []
        for file in source_files(repo):
            lines = file.read_text(encoding="utf-8").split("\n")
            rel = file.relative_to(repo).as_posix()
            for start in range(0, max(1, len(lines) - WINDOW + STEP), STEP):
                rows.append(("\n".join(lines[start : start + WINDOW]), rel, start + 1))
        conn.executemany("INSERT INTO windows (content, path, line) VALUES (?, ?, ?)", rows)
        conn.commit()
    finally:
        conn.close()


def _index_qmd(root: Path, embed: bool, model: Path) -> dict[str, Any]:
    home = root / "qmd"
    settings: dict[str, Any] = {
        "index_path": str(home / "index.sqlite"),
        "config_dir": str(home / "config"),
        "cache_dir": str(home / "cache"),
        "collections": [COLLECTION],
    }
    context = BackendContext(state_dir=root / "qmd-build", environ=qmd_env())
    cli = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context).transport()
    if embed:
        # Written into index.yml's models block by this first run: every later qmd process (the
        # daemons' engines too) embeds queries with the same model.
        cli.env["QMD_EMBED_MODEL"] = str(model)
    build_collection(cli, root / "repo", COLLECTION, "**/*.py", home / "index.lock")
    if embed:
        done = subprocess.run(
            cli.argv("embed", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=3600, start_new_session=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"qmd embed failed in {home}: {done.stderr.decode('utf-8', 'replace')[-600:]}")
    return settings
