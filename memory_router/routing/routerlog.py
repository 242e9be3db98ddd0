"""router.log: one line per backend error or timeout, in the spec's format::

    [2026-03-17T14:30:00Z] FALLBACK query="auth" backend=cognee error_code=BACKEND_ERROR error_message="..." next=qmd
    [2026-03-17T14:30:01Z] TIMEOUT query="auth" backend=qmd duration_ms=5230 next=totalrecall

Quoted values escape backslash, quote, every control character, the bidirectional controls
(written as ``\\u202e``), ``$`` and backtick, so a query or a backend's message can never add or
forge a line, make one read otherwise, nor run as shell code if the log is ever pasted into or
sourced by a shell. Each line is written with a single ``write`` on an ``O_APPEND`` descriptor, so
concurrent router processes never interleave inside a line. The file is created 0600 in a 0700
state directory, and opened with ``O_NOFOLLOW`` (:func:`memory_router.config.statedir.open_private`): a
symlink, FIFO, another user's file or a hard link there is never written through. A log that
cannot be written is a warning on stderr, never a failed query.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from memory_router.config.statedir import describe_open_error, open_private
from memory_router.contract import say
from memory_router.core.timefmt import now_iso_z

if TYPE_CHECKING:
    from memory_router.core.fallback import LogEvent

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "$": "\\x24", "`": "\\x60"}


# Line and paragraph separators, and the bidirectional controls (U+202E and friends), which
# make a terminal or an editor show a line's text in another order than it was written.
_ALSO_ESCAPED = frozenset("\u2028\u2029\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def quote(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in _ALSO_ESCAPED:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_BARE = (
    r"[A-Za-z0-9_.:/-]+"  # compiled on first use (re's cache keeps it): only a fallback or a timeout is logged with one
)


def token(value: str) -> str:
    """A value written unquoted (backend names, error codes) when it is a plain token, else
    quoted: an error code comes from the backend, and a backend program is not trusted to keep
    it to one word (a newline in it would otherwise forge a log line)."""
    return value if re.fullmatch(_BARE, value) else quote(value)


def _now() -> str:
    return now_iso_z()


class RouterLog:
    def __init__(self, path: Path | None) -> None:
        """``path=None`` disables logging (dry runs)."""
        self.path = path
        self._warned = False
        self._lock = threading.Lock()

    def fallback(self, query: str, backend: str, error_code: str, error_message: str, next_backend: str | None) -> None:
        self.write(
            f"FALLBACK query={quote(query)} backend={token(backend)} error_code={token(error_code)} "
            f"error_message={quote(error_message)} next={token(next_backend or 'none')}"
        )

    def timeout(self, query: str, backend: str, duration_ms: int, next_backend: str | None) -> None:
        self.write(
            f"TIMEOUT query={quote(query)} backend={token(backend)} duration_ms={duration_ms} "
            f"next={token(next_backend or 'none')}"
        )

    def record(self, event: LogEvent, query: str) -> None:
        """A line the fallback machine asks for (:class:`~memory_router.core.fallback.LogEvent`)."""
        if event.kind == "timeout":
            self.timeout(query, event.backend, event.duration_ms, event.next)
        else:
            self.fallback(query, event.backend, event.error_code, event.message, event.next)

    def event(self, kind: str, message: str) -> None:
        """Other events (the daemon's config reloads): ``[time] KIND message="..."``."""
        self.write(f"{kind} message={quote(message)}")

    def write(self, body: str) -> None:
        if self.path is None:
            return
        line = f"[{_now()}] {body}\n".encode("utf-8", "replace")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = open_private(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            with self._lock:
                if not self._warned:
                    self._warned = True
                    say(
                        f"warning: {describe_open_error(str(self.path), exc)}; "
                        "queries still work, but errors are not logged"
                    )
