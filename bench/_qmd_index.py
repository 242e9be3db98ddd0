"""A qmd index embedded with the all-MiniLM-L6-v2 GGUF that ``.ci/setup.d/30-qmd-models.sh``
builds, for the benchmarks of qmd's semantic modes (qmd_engine.py, warm_start.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _common import REPO

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection

MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
ENV = {k: v for k, v in os.environ.items() if k != "CI"}  # qmd refuses model work under CI


def qmd_backend(base: Path, settings: dict[str, Any], *, long_lived: bool = False) -> QmdBackend:
    """The router's qmd adapter on ``settings``, its state in ``base/state``: a qmd process per
    call, or with ``long_lived`` (as in ``serve``) the warm engine."""
    context = BackendContext(state_dir=base / "state", environ=ENV, long_lived=long_lived)
    return QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context)


def embedded_index(base: Path, notes: Iterable[str], **settings: object) -> dict[str, Any]:
    """``notes`` written to ``base/notes`` (note-000.md, ...), indexed as the collection ``notes``
    and embedded with MODEL; returns the qmd settings for that index (plus ``settings``)."""
    source = base / "notes"
    source.mkdir()
    for i, text in enumerate(notes):
        (source / f"note-{i:03d}.md").write_text(text)
    settings = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),
        "collections": ["notes"],
        **settings,
    }
    cli = qmd_backend(base, settings).transport()
    cli.env["QMD_EMBED_MODEL"] = str(MODEL)  # written into index.yml's models block by this first run
    cli.env["QMD_EMBED_CONTEXT_SIZE"] = "512"
    build_collection(cli, source, "notes", "**/*.md", base / "idx" / "lock")
    done = subprocess.run(cli.argv("embed", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"qmd embed failed: {done.stderr.decode()[-400:]}")
    return settings
