"""Where lossless-claw's database is, and how it is opened: read-only, never created, and kept
open between a daemon's searches (:class:`Connections`).

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
import threading
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


# --------------------------------------------------------------------------- connections kept open

_FileId = tuple[str, int, int]  # path, device, inode


class Connections:
    """At most ``keep`` idle read-only connections to the file a search last opened.

    On a warm daemon, opening the connection cost more than the search it served: a fresh connection
    reads the schema again, FTS5 connects each of its tables again and no prepared statement carries
    over (0.6 ms of the demo's 0.9 ms search of both tables). A long-lived instance (the daemon)
    therefore hands a connection back when its search has ended well, and the next search takes it.

    An idle connection holds no transaction: it is in autocommit mode and every statement is read to
    its end, so it never holds back the plugin's WAL checkpoints, and each search sees what the plugin
    has committed by then (a schema change included: SQLite prepares its statements again). It is
    kept for one file only: when the path names another file (replaced, moved over), the idle ones
    are closed and a new one is opened. A search that failed, timed out or was stopped closes its
    connection, so nothing of a broken one is reused. A one-shot process (``keep=0``) keeps none.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._idle: list[tuple[_FileId, int, sqlite3.Connection]] = []  # (file, busy timeout ms, connection)
        self._out: dict[int, tuple[_FileId, int]] = {}  # id(connection) -> what it was opened on
        self._lock = threading.Lock()
        self._closed = False

    def take(self, path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
        """A connection to ``path`` waiting at most ``busy_timeout_ms`` on a lock: an idle one to
        the same file, else a new one (:func:`connect_readonly`, whose errors it raises)."""
        file = _file_id(path) if self.keep else None
        conn: sqlite3.Connection | None = None
        busy = busy_timeout_ms
        stale: list[sqlite3.Connection] = []
        if file is not None:
            with self._lock:
                while self._idle:
                    idle_file, busy, candidate = self._idle.pop()
                    if idle_file == file:
                        conn = candidate
                        break
                    stale.append(candidate)  # another file now: none of these is of use again
        for old in stale:
            old.close()
        if conn is None:
            conn = connect_readonly(path, busy_timeout_ms=busy_timeout_ms)
        elif busy != busy_timeout_ms:
            try:
                conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            except BaseException:
                conn.close()
                raise
        if file is not None:
            with self._lock:
                self._out[id(conn)] = (file, busy_timeout_ms)
        return conn

    def give_back(self, conn: sqlite3.Connection, *, reusable: bool) -> None:
        """The search on ``conn`` is over: kept for the next one if it ended well (``reusable``)
        and there is room, else closed."""
        conn.set_progress_handler(None, 0)  # the search's stop event and deadline go with it
        with self._lock:
            opened = self._out.pop(id(conn), None)
            if reusable and opened is not None and not self._closed and len(self._idle) < self.keep:
                self._idle.append((*opened, conn))
                return
        conn.close()

    def close(self) -> None:
        """The instance is closed (a reload replaced it, the daemon stops): the idle connections
        close now, the ones in use when their search ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, _, conn in idle:
            conn.close()


def _file_id(path: Path) -> _FileId | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # opening it says what is wrong
    return str(path), st.st_dev, st.st_ino
