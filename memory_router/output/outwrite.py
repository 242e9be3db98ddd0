"""Writing a whole answer to standard output, whatever kind of file it is.

A caller may hand us a non-blocking stdout (``O_NONBLOCK`` on a pipe: Node's ``child_process``
does, and so can any shell). ``write()`` then takes as much as the pipe holds (64 KiB) and says
``EAGAIN`` for the rest: that is a slow reader, not a reader that is gone. :func:`write_all`
waits for room (``poll``) and goes on, and gives up only when the reader takes no byte for
``stall_s`` seconds (:data:`WRITE_TIMEOUT_S` by default) or is gone (``EPIPE``): then it raises,
and the caller exits non-zero with a message instead of leaving truncated JSON behind an exit 0.

Standard library only (``os``, ``time``; ``select`` and ``errno`` once a reader is slow or gone):
the thin client and the one-shot CLI use it.
"""

import os
import time

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

WRITE_TIMEOUT_S = 30.0
"""How long a reader of our stdout may take no byte at all before we give up on it."""

_CHUNK = 64 * 1024  # progress is seen per chunk, also on a blocking pipe


class WriteStalled(OSError):
    """The reader took no byte for ``stall_s`` seconds."""


def write_all(
    fd: int, data: bytes, *, stall_s: float = WRITE_TIMEOUT_S, progress: "Callable[[], None] | None" = None
) -> None:
    """Write all of ``data`` to ``fd``, waiting for a slow reader. Raises :class:`WriteStalled`
    after ``stall_s`` seconds without progress, or the ``OSError`` of the write (``EPIPE``: the
    reader is gone). ``progress`` is called after each chunk written."""
    view = memoryview(data)
    stalled_at: float | None = None
    total = len(view)
    while view:
        try:
            written = os.write(fd, view[:_CHUNK])
        except BlockingIOError:
            written = 0
        if written:
            view = view[written:]
            stalled_at = None
            if progress is not None:
                progress()
            continue
        now = time.monotonic()
        if stalled_at is None:
            stalled_at = now
        left = stall_s - (now - stalled_at)
        if left <= 0:
            import errno  # only now, as select below: not on every answer's path

            raise WriteStalled(
                errno.ETIMEDOUT,
                f"its reader took no data for {stall_s:g} s ({total - len(view)} of {total} bytes written)",
            )
        import select  # only once the reader is slow: not on every answer's path

        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        poller.poll(max(1, int(left * 1000)))  # POLLERR/POLLHUP too: the next write says EPIPE


def describe(exc: OSError) -> str:
    """``exc`` in words, for the stderr line that explains a non-zero exit."""
    if isinstance(exc, WriteStalled):
        return str(exc.strerror)
    import errno

    if exc.errno == errno.EPIPE:
        return "its reader is gone (broken pipe)"
    return exc.strerror or str(exc)


def emit(data: bytes) -> None:
    """Write ``data`` to standard output, whole, for a command that answers once (``query``,
    the thin client). When it cannot be written, say why on stderr and exit 1 at once: a caller
    must never get a truncated answer with exit 0."""
    import sys

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced by a test harness: not a file
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        sys.stdout.flush()  # whatever was printed before goes first
        write_all(fd, data, stall_s=WRITE_TIMEOUT_S)
    except OSError as exc:
        from memory_router.contract import say  # only now: a warm query never loads the contract's tables

        try:
            say(f"cannot write the answer to standard output: {describe(exc)}")
        except (OSError, ValueError):
            pass
        os._exit(1)


def leave(code: int) -> "NoReturn":
    """Exit as soon as the answer is out, without the interpreter's teardown: flush what the
    caller reads, then ``os._exit``.

    A one-shot ``query`` (the thin client's answer from a daemon, and the in-process route) has
    nothing left to finalise once its envelope is written, and the teardown is not free:
    finalising the modules a cold query imported costs 20-30 ms, a fifth of it, and even the
    thin client's teardown costs ~8M instructions, a fifth of ``python -c pass``
    (docs/benchmarks.md, *Cold start*). Nothing a query leaves behind needs it: router.log is
    written with ``os.write``, the config cache is renamed into place before routing, SQLite is
    opened read-only, subprocess backends are reaped or killed by the time the envelope exists,
    the daemon's socket is closed by then; abandoned backend threads are not joined either (the
    caller waits for our exit, not for work the router has given up on)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
