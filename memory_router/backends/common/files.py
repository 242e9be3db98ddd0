"""Reading a file that someone else controls, with bounded cost.

:func:`read_regular_file` is how the router reads router-config.json, backends.json and Total
Recall's memory files: only a regular file is read (a FIFO, a device such as ``/dev/zero``, a
directory or a socket is refused without blocking), and only up to a byte limit. One ``open``
with ``O_NONBLOCK`` (so opening a FIFO returns at once instead of waiting for a writer), one
``fstat`` on the opened descriptor (the check is on what was opened, so a path swapped in between
cannot slip past it), and reads of at most ``limit + 1`` bytes. Symlinks are followed: a
symlinked config or memory file is legitimate, and what it points at is checked.
"""

from __future__ import annotations

import os
import stat

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(Exception):
    """The file exists but is not read: not a regular file, or larger than the limit.
    ``str(exc)`` is the reason, e.g. ``"a FIFO (named pipe), not a regular file"``."""


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole content of the regular file at ``path``, at most ``limit`` bytes.

    Raises :class:`FileRefused` for anything that is not a regular file or is larger than
    ``limit``, and ``OSError`` (``FileNotFoundError``, ``PermissionError``...) when it cannot be
    opened or read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a plain file")
            raise FileRefused(f"{kind}, not a regular file")
        if st.st_size > limit:
            raise FileRefused(f"{st.st_size} bytes, larger than the {limit}-byte limit")
        chunks: list[bytes] = []
        left = limit + 1  # one more than allowed: a file that grew since the fstat is caught
        while left > 0:
            chunk = os.read(fd, min(left, max(st.st_size + 1, 65536)))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise FileRefused(f"more than {limit} bytes (it grew while being read), larger than the limit")
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)
