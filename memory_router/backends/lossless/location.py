"""Where lossless-claw's database is, and how it is opened: read-only, never created.

``backends.<name>.db_path`` in router-config.json if set (it is then the only candidate: a typo is
reported, not papered over); otherwise the first existing of ``$LCM_DATABASE_PATH``,
``$OPENCLAW_STATE_DIR/lcm.db`` and ``~/.openclaw/lcm.db`` - the plugin's own resolution order.
Environment and home come from the :class:`BackendContext`, never from this process.
"""

from __future__ import annotations

import os
import pwd
import re
import sqlite3
from pathlib import Path
from typing import Any

from memory_router.backends import BackendContext
from memory_router.core.frozen import Frozen


class Location(Frozen):
    path: Path | None  # the database to open; None when no candidate exists
    source: str  # where it came from ("backends.lossless.db_path", "LCM_DATABASE_PATH"...)
    tried: tuple[tuple[str, Path], ...]  # every candidate considered, in order

    def describe_tried(self) -> str:
        return "; ".join(f"{src}: {p}" for src, p in self.tried)


def locate(name: str, db_path: str | None, context: BackendContext) -> Location:
    """The database ``backends.<name>.db_path`` names (``db_path``, ``None`` when not set), else the
    first candidate that exists, in the order of the module docstring. Never creates anything."""
    env = context.environ
    if db_path:
        path = _expand_home(_expand_vars(db_path, env), env)
        if not path.is_absolute():
            path = context.cwd / path
        src = f"backends.{name}.db_path"
        return Location(path if path.is_file() else None, src, ((src, path),))
    candidates: list[tuple[str, Path]] = []
    if env.get("LCM_DATABASE_PATH"):
        candidates.append(("LCM_DATABASE_PATH", _expand_home(env["LCM_DATABASE_PATH"], env)))
    if env.get("OPENCLAW_STATE_DIR"):
        candidates.append(("$OPENCLAW_STATE_DIR/lcm.db", _expand_home(env["OPENCLAW_STATE_DIR"], env) / "lcm.db"))
    candidates.append(("~/.openclaw/lcm.db", _home(env) / ".openclaw" / "lcm.db"))
    candidates = [(src, p if p.is_absolute() else context.cwd / p) for src, p in candidates]
    for src, path in candidates:
        if path.is_file():
            return Location(path, src, tuple(candidates))
    return Location(None, "", tuple(candidates))


def variables_in(db_path: str | None) -> frozenset[str]:
    """The variables a configured ``db_path`` names (``$NAME``/``${NAME}``)."""
    return frozenset(a or b for a, b in _VAR.findall(db_path or ""))


def _home(env: Any) -> Path:
    """``$HOME`` from the context's environment, else the account's home directory."""
    if env.get("HOME"):
        return Path(env["HOME"])
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, AttributeError):  # no passwd entry (or not POSIX)
        return Path("~").expanduser()


_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _expand_vars(raw: str, env: Any) -> str:
    """``$NAME``/``${NAME}`` from the context's environment; unknown names stay as written."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), raw)


def _expand_home(raw: str, env: Any) -> Path:
    if raw == "~" or raw.startswith("~/"):
        return _home(env) / raw[2:]
    return Path(raw)


def connect_readonly(path: Path, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open ``path`` read-only: ``mode=ro`` URI (never creates a file) plus ``query_only``."""
    uri = path.absolute().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only=ON")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    except BaseException:
        conn.close()
        raise
    return conn
