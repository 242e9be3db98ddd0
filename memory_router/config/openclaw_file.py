"""OpenClaw's ``openclaw.json``, read safely (standard library only: :mod:`.paths` reads it too).

memory-router reads two things there: ``agents.defaults.workspace`` (Total Recall's root when no
other is given: :func:`memory_router.config.paths.openclaw_workspace`) and, for a query scoped to
an agent (:mod:`memory_router.core.scope`), that agent's workspace from the agent roster
(``agents.entries``, or ``agents.list[]``), resolved as OpenClaw 2026.9 resolves it
(:func:`memory_router.config.openclaw.agent_workspace`).

**Reading it.** The file is opened ``O_NONBLOCK`` and must be a regular file (checked on the open
descriptor): a FIFO, a device or a directory at that path is refused at once with
:class:`OpenClawConfigInvalid` (``open()`` on a FIFO would wait for a writer forever, outside any
timeout). At most 1 MiB is read. A document nested deeper than the JSON5 reader's limit or holding
a number of thousands of digits is refused the same way (:class:`~.json5.JSON5Limit`), naming the
file: ``query`` exits 2 (``CONFIG_INVALID``) with its envelope, the daemon answers the error per
query and keeps serving. A missing or unreadable file, or one with a JSON5 syntax error, counts as
absent, as before (OpenClaw itself reports those).

Parsed documents are cached by the file's identity and times (device, inode, size, mtime, ctime),
so a long-lived daemon re-reads the file only when it changed, and follows it when it does (a
moved workspace is seen by the next query, SIGHUP or not).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Mapping
from typing import Any

from memory_router.contract import CONFIG_INVALID
from memory_router.core.errors import RouterError

MAX_BYTES = 1 << 20
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class OpenClawConfigInvalid(RouterError):
    """openclaw.json exists but cannot be used (not a regular file, beyond the reader's limits)."""

    error_code = CONFIG_INVALID

    def __init__(self, path: str, problem: str = "cannot be used") -> None:
        self.path, self.problem = path, problem
        super().__init__(
            f"{path}: {problem}. memory-router reads OpenClaw's config (agents.defaults.workspace, "
            "the agent roster) from this file; fix or replace it, or point OPENCLAW_CONFIG_PATH at the real one."
        )


_cache: dict[str, tuple[tuple[int, ...], dict[str, Any] | None]] = {}
_lock = threading.Lock()


def read(path: str) -> dict[str, Any] | None:
    """The parsed openclaw.json at ``path`` (its top-level object), ``None`` when it is missing,
    unreadable, not an object or not valid JSON5; raises :class:`OpenClawConfigInvalid`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return None  # unreadable (EACCES, ELOOP...): absent, as OpenClaw reports it itself
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise OpenClawConfigInvalid(path, f"is {kind}, not a regular file; not reading it")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with _lock:
            cached = _cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        chunks: list[bytes] = []
        left = MAX_BYTES
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = _parse(path, b"".join(chunks))
    with _lock:
        _cache[path] = (key, data)
    return data


def _parse(path: str, raw: bytes) -> dict[str, Any] | None:
    from memory_router.config.json5 import JSON5Error, JSON5Limit, loads

    try:
        data = loads(raw.decode("utf-8", "replace"))
    except JSON5Error:
        return None
    except JSON5Limit as exc:
        raise OpenClawConfigInvalid(path, f"cannot be read: {exc}") from None
    except RecursionError:  # a limit of this reader's own that JSON5Limit missed: the same answer
        raise OpenClawConfigInvalid(path, "cannot be read: nested too deep") from None
    return data if isinstance(data, dict) else None


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def default_workspace_setting(data: Mapping[str, Any] | None) -> str | None:
    """``agents.defaults.workspace``, stripped (``None``: unset)."""
    return _text(_dict(_dict(_dict(data).get("agents")).get("defaults")).get("workspace"))
