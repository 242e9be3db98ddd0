"""``memory-router init``: the explicit installer step that writes backends.json.

It asks each configured backend's adapter whether it can run here (``probe()``, which sends no
query) and records the answer: ``ready`` or ``unavailable``, with the probe's reason beside it.
It never runs implicitly: the router only ever reads backends.json, so nothing changes until a
user (or an installer) runs this. An existing backends.json is never replaced without
``--force``, and the file is written whole (a temporary file linked or renamed into place), so a
running daemon's hot reload never reads half of it.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from memory_router import __version__, contract
from memory_router.config import statedir
from memory_router.config.readiness import Readiness

EXISTS = contract.BACKENDS_JSON_EXISTS


class AlreadyThere(Exception):
    """backends.json exists and ``--force`` was not given."""


def document(ready: dict[str, Readiness]) -> dict[str, Any]:
    """backends.json's content: the stack's own shape (``{"backends": {name: {"status": ...}}}``)
    plus each probe's reason and who wrote it when."""
    return {
        "written_by": f"memory-router init {__version__}",
        "written_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "backends": {
            name: {"status": "ready" if r.runs_here else "unavailable", "type": r.type, "reason": r.detail}
            for name, r in ready.items()
        },
    }


def write(path: Path, content: dict[str, Any], *, force: bool) -> None:
    """Write ``content`` to ``path`` in one step; raise :class:`AlreadyThere` rather than replace
    an existing file unless ``force``. Creates a missing state directory ``0700``."""
    if not force and os.path.lexists(path):
        raise AlreadyThere(str(path))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if reason := statedir.problem(str(path.parent), what="the folder of backends.json"):
        raise OSError(reason)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = statedir.open_private(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(content, option=orjson.OPT_INDENT_2) + b"\n")
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # atomic, and refuses a file created meanwhile
            except FileExistsError:
                raise AlreadyThere(str(path)) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def skill_folder() -> Path:
    """The folder ``openclaw skills install`` takes: the checkout's ``skills/memory-router``, or
    the installed package's copy (``memory_router/skill``)."""
    from memory_router.config.installation import checkout_root

    root = checkout_root()
    return root / "skills" / "memory-router" if root else Path(__file__).parent.parent / "skill"
