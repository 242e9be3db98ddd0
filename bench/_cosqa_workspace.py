"""The CoSQA corpus laid out as a user's code workspace (for ``bench/cosqa.py``).

Under ``<work>/<name>/``:

* ``workspace/src/<package>/<function>.py`` - one module per corpus function, at the ``path`` the
  data's README gives it (eight neutral package names picked by a hash of the function's index, the
  file named after the function). The module holds the function's code as CoSQA ships it. This is
  how a small utility library looks to an agent: many short modules in a few packages.
* ``workspace/memory/`` - empty: a code workspace has no memory notes, so Total Recall (its root is
  the workspace) answers ``empty``, as it would for this user.
* ``state/lcm.db`` - an empty lossless-claw database (real schema, no conversation): the agent has
  not talked about this code yet.
* ``qmd/`` - a real qmd index of the workspace (collection ``code``, mask ``**/*.{py,md}``),
  embedded with the MiniLM GGUF that ``.ci/setup.d/30-qmd-models.sh`` builds.
* ``bm25.db`` - the plain baseline: an SQLite FTS5 table of the functions, by path.

qmd runs with ``QMD_EMBED_CONTEXT_SIZE=384`` (MiniLM aborts on source files past its 512 positions
otherwise: issue 29) and ``QMD_EMBED_PARALLELISM=2`` (two embedding contexts on two cores).

Everything is rebuilt only when its inputs change: ``manifest.json`` records a key made of the data
files' checksums, the layout's version (``LAYOUT``), the chosen functions and the model's checksum marker. An
interrupted ``qmd embed`` is resumed (qmd embeds only what has no vectors yet).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from _locomo_workspace import tool_env

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.lossless.schema import create_lcm_db
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.transports import CliTransport
from memory_router.core.frozen import Frozen

COLLECTION = "code"
MASK = "**/*.{py,md}"
EMBED_ENV = {"QMD_EMBED_CONTEXT_SIZE": "384", "QMD_EMBED_PARALLELISM": "2"}
EMBED_TIMEOUT_S = 4 * 3600
# Part of the cache key: bump it when the layout written below changes (the key does not hash this
# file, so an edit elsewhere in it does not throw away an index that took half an hour to embed).
LAYOUT = "cosqa-layout-1"


class Function(Frozen):
    idx: int
    code: str
    path: str
    """Relative to the workspace: ``src/<package>/<name>.py``."""


class Query(Frozen):
    qid: str
    query: str
    gold: int
    """The ``idx`` of the one function that answers the query."""


class Workspace(Frozen):
    name: str
    root: Path
    workspace: Path
    lcm_db: Path
    bm25_db: Path
    qmd: dict[str, Any]
    """The qmd backend settings that point at this workspace's index."""
    functions: int
    embedded: bool
    reused: bool


def env() -> dict[str, str]:
    """The environment of every qmd process the bench starts (indexing, embedding, the daemons)."""
    return {**tool_env(), **EMBED_ENV}


def load_corpus(data: Path) -> list[Function]:
    with gzip.open(data / "corpus.jsonl.gz") as handle:
        return [Function(**orjson.loads(line)) for line in handle if line.strip()]


def load_queries(data: Path) -> list[Query]:
    with gzip.open(data / "dev.jsonl.gz") as handle:
        rows = [orjson.loads(line) for line in handle if line.strip()]
    return [Query(qid=r["qid"], query=r["query"], gold=int(r["retrieval_idx"])) for r in rows]


def data_checksum(data: Path) -> str:
    digest = hashlib.sha256()
    for name in ("corpus.jsonl.gz", "dev.jsonl.gz"):
        digest.update((data / name).read_bytes())
    return digest.hexdigest()


def subset(corpus: Sequence[Function], gold: set[int], distractors: int | None) -> list[Function]:
    """Every gold function plus ``distractors`` others (all when None), chosen by a hash of the
    index so the subset is the same on every run and every machine."""
    if distractors is None:
        return list(corpus)
    others = sorted(
        (f for f in corpus if f.idx not in gold), key=lambda f: hashlib.sha256(str(f.idx).encode()).hexdigest()
    )
    keep = gold | {f.idx for f in others[:distractors]}
    return [f for f in corpus if f.idx in keep]


def build(
    functions: Sequence[Function],
    root: Path,
    *,
    checksum: str,
    embed: bool,
    model: Path,
    log: Callable[[str], None] = print,
) -> Workspace:
    """The workspace of ``functions`` under ``root``, reused when its key is unchanged."""
    key = _key(functions, checksum, embed, model)
    manifest_path = root / "manifest.json"
    manifest: dict[str, Any] = {}
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError:
            manifest = {}
        if manifest.get("key") == key and manifest.get("complete"):
            return _from_manifest(root, manifest, reused=True)
    if manifest.get("key") != key:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        log(f"laying out {len(functions)} functions in {root / 'workspace'}")
        _write_files(functions, root / "workspace")
        (root / "state").mkdir()
        create_lcm_db(root / "state" / "lcm.db", "current").close()
        _write_bm25(functions, root / "bm25.db")
        manifest = {"key": key, "complete": False, "functions": len(functions), "embedded": embed}
        manifest["qmd"] = _index_qmd(root, embed, model)
        manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    else:
        log(f"resuming the qmd embedding in {root / 'qmd'}")
    if embed:
        _embed(root, manifest["qmd"], log)
    manifest["complete"] = True
    # Marked complete last: a build that failed half-way is resumed (same key) next time.
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return _from_manifest(root, manifest, reused=False)


def _key(functions: Sequence[Function], checksum: str, embed: bool, model: Path) -> str:
    marker = Path(str(model) + ".sha256")
    parts = [
        checksum,
        LAYOUT,
        ",".join(str(f.idx) for f in functions),
        str(embed),
        marker.read_text(encoding="utf-8") if embed and marker.is_file() else "",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _from_manifest(root: Path, manifest: dict[str, Any], *, reused: bool) -> Workspace:
    return Workspace(
        name=root.name,
        root=root,
        workspace=root / "workspace",
        lcm_db=root / "state" / "lcm.db",
        bm25_db=root / "bm25.db",
        qmd=manifest["qmd"],
        functions=int(manifest["functions"]),
        embedded=bool(manifest["embedded"]),
        reused=reused,
    )


def _write_files(functions: Sequence[Function], workspace: Path) -> None:
    for f in functions:
        target = workspace / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f.code.rstrip() + "\n", encoding="utf-8")
    (workspace / "memory").mkdir(parents=True, exist_ok=True)


def _write_bm25(functions: Sequence[Function], path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIRTUAL TABLE functions USING fts5(content, path UNINDEXED, tokenize='porter unicode61')")
        conn.executemany("INSERT INTO functions (content, path) VALUES (?, ?)", [(f.code, f.path) for f in functions])
        conn.commit()
    finally:
        conn.close()


def _transport(root: Path, settings: dict[str, Any]) -> CliTransport:
    context = BackendContext(state_dir=root / "qmd-build", environ=env())
    return QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context).transport()


def _index_qmd(root: Path, embed: bool, model: Path) -> dict[str, Any]:
    home = root / "qmd"
    settings: dict[str, Any] = {
        "index_path": str(home / "index.sqlite"),
        "config_dir": str(home / "config"),
        "cache_dir": str(home / "cache"),
        "collections": [COLLECTION],
    }
    cli = _transport(root, settings)
    if embed:
        # qmd writes the embedding model into index.yml's models block on this first run, so every
        # later qmd process (the daemons' engines too) embeds queries with the same model.
        cli.env["QMD_EMBED_MODEL"] = str(model)
    build_collection(cli, root / "workspace", COLLECTION, MASK, home / "index.lock", timeout_s=900)
    return settings


def _embed(root: Path, settings: dict[str, Any], log: Callable[[str], None]) -> None:
    cli = _transport(root, settings)
    log(f"qmd embed in {root / 'qmd'} ({', '.join(f'{k}={v}' for k, v in EMBED_ENV.items())}); output in embed.log")
    with open(root / "embed.log", "ab") as out:
        done = subprocess.run(
            cli.argv("embed", []),
            cwd=cli.cwd,
            env=cli.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=EMBED_TIMEOUT_S,
            start_new_session=True,
            check=False,
        )
    if done.returncode != 0:
        tail = (root / "embed.log").read_text(encoding="utf-8", errors="replace")[-600:]
        raise RuntimeError(f"qmd embed failed in {root / 'qmd'}: {tail}")
