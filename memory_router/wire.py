"""What the daemon and its clients share on the wire: the protocol version, the socket's name,
and the JSON-lines splitter both transports (stdin and the Unix socket) read requests with.
Standard library only: the thin client imports it on every query.
"""

from __future__ import annotations

PROTOCOL = 1
SOCKET_NAME = "router.sock"
SNIFF_BYTES = 512  # how much of an oversized line is kept, to find its "id"


class Oversized:
    """A line longer than the splitter's ``max_line``: its first bytes and its full length."""

    __slots__ = ("prefix", "length")

    def __init__(self, prefix: bytes, length: int) -> None:
        self.prefix, self.length = prefix, length

    def __repr__(self) -> str:
        return f"Oversized({self.prefix[:20]!r}..., {self.length})"


class LineSplitter:
    """Split a byte stream into lines (without their ``\\n``), never holding more than
    ``max_line`` bytes of one: a longer line becomes an :class:`Oversized` and the rest of it is
    skipped as it arrives. Feed it chunks as they are read, then call :meth:`end` at EOF."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._skipping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines that ``chunk`` completes, in order."""
        out: list[bytes | Oversized] = []
        buf = self._buf
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = nl if nl >= 0 else len(chunk)
            if self._skipping is not None:
                self._skipping.length += end - start
            else:
                buf += chunk[start:end]
                if len(buf) > self.max_line:
                    self._skipping = Oversized(bytes(buf[:SNIFF_BYTES]), len(buf))
                    buf.clear()
            if nl < 0:
                return out
            out.append(self._skipping if self._skipping is not None else bytes(buf))
            self._skipping = None
            buf.clear()
            start = nl + 1

    def end(self) -> list[bytes | Oversized]:
        """At EOF: a last line without a newline is still a line."""
        if self._skipping is not None:
            last: list[bytes | Oversized] = [self._skipping]
        else:
            last = [bytes(self._buf)] if self._buf else []
        self._skipping = None
        self._buf.clear()
        return last
