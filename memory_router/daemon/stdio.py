"""The stdin/stdout transport of ``memory-router serve``: JSON lines in, JSON lines out.

* A reader thread reads standard input with ``os.read`` (pipes, files and terminals alike; no
  buffered object, so a thread still blocked in a read cannot wedge interpreter shutdown) and
  splits lines, never holding more than ``max_line_bytes`` of one line: the rest of an oversized
  line is skipped and the line is answered ``REQUEST_TOO_LARGE``.
* Each line becomes a task; :class:`~.service.Service` bounds how many are routed at once, and a
  semaphore bounds how many lines are read ahead of their responses (backpressure).
* Responses are written as they complete (each carries its request's ``id``), or in input order
  with ``ordered``. Every line read gets exactly one response line, flushed at once.
* Startup, draining and shutdown are :mod:`.lifecycle`'s, shared with the socket transport: EOF
  lets in-flight requests finish, then exit 0; SIGTERM/SIGINT stop reading, lines already read
  but not started are answered ``SHUTTING_DOWN``, in-flight requests get the grace period, then
  are cancelled and answered ``SHUTTING_DOWN``; a second signal cancels at once; SIGHUP re-reads
  both config files.
* Responses go to a private duplicate of stdout, and fd 1 is pointed at stderr while serving, so
  nothing a library prints can corrupt the protocol stream. A writer thread writes them, so a
  slow reader never holds the event loop (requests and signals go on): with a non-blocking
  stdout, ``EAGAIN`` waits for the reader (:func:`~memory_router.output.outwrite.write_all`) for up to
  ``write_timeout_s`` without progress. A reader that is gone (``EPIPE``) or stalled that long
  stops the daemon like a signal (the lifecycle's graceful exit), and it exits 1.
"""

from __future__ import annotations

import asyncio
import os
import queue as thread_queue
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from memory_router.client.wire import LineSplitter, Oversized
from memory_router.daemon.lifecycle import CLEANUP_S, GRACE_S, Lifecycle, shutting_down
from memory_router.daemon.service import Service
from memory_router.output.outwrite import WRITE_TIMEOUT_S, describe, write_all


class _Eof:
    pass


class _ReadError:
    def __init__(self, exc: OSError) -> None:
        self.exc = exc


Item = Any  # bytes | Oversized | _Eof | _ReadError


def read_lines(fd: int, max_line: int, emit: Callable[[Item], bool]) -> None:
    """Read ``fd`` to EOF, calling ``emit`` with each line (bytes, without its newline), an
    :class:`~memory_router.client.wire.Oversized` marker, then :class:`_Eof` (or :class:`_ReadError`).
    Stops early when ``emit`` returns False."""
    splitter = LineSplitter(max_line)
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError as exc:
            emit(_ReadError(exc))
            return
        if not chunk:
            for item in splitter.end():
                emit(item)
            emit(_Eof())
            return
        for item in splitter.feed(chunk):
            if not emit(item):
                return


class StdioTransport:
    """The stdin/stdout transport, driven by :class:`~.lifecycle.Lifecycle`."""

    def __init__(
        self,
        service: Service,
        lifecycle: Lifecycle,
        *,
        ordered: bool = False,
        max_pending: int | None = None,
        in_fd: int = 0,
        out_fd: int = 1,
        write_timeout_s: float = WRITE_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.lifecycle = lifecycle
        self.ordered = ordered
        # Lines read ahead of their responses: enough to keep every routing slot busy.
        self.max_pending = max_pending or max(64, 4 * service.concurrency)
        self.in_fd = in_fd
        self.out_fd = out_fd
        self.in_flight: set[asyncio.Task[None]] = set()
        self._slots = threading.Semaphore(self.max_pending)
        # The reader must stop handing over lines. Set under the lock, so that once it is set no
        # line is still on its way to the queue except those already scheduled there.
        self._closed = threading.Event()
        self._handover = threading.Lock()
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._next_seq = 0
        self._next_out = 0
        self._done: dict[int, bytes] = {}
        self._broken = False
        self.write_timeout_s = write_timeout_s
        # Responses on their way to stdout, written by the writer thread in this order; None ends it.
        self._out: thread_queue.SimpleQueue[bytes | None] = thread_queue.SimpleQueue()
        self._last_progress = time.monotonic()
        self.writer: threading.Thread | None = None

    def ready_message(self) -> str:
        service = self.service
        return (
            f"ready: pid {os.getpid()}, config {service.config_path}, backends.json {service.backends_path}, "
            f"concurrency {service.concurrency}{', ordered' if self.ordered else ''}"
            f"{', watching both for changes' if self.lifecycle.reload else ''}"
        )

    async def open(self) -> None:
        loop = asyncio.get_running_loop()

        def emit(item: Item) -> bool:
            if not isinstance(item, (_Eof, _ReadError)):
                self._slots.acquire()
            with self._handover:
                if self._closed.is_set():
                    return False
                try:
                    loop.call_soon_threadsafe(self._queue.put_nowait, item)
                except RuntimeError:  # the loop is gone
                    return False
            return True

        self.writer = threading.Thread(
            target=self._write_responses, args=(loop,), name="memory-router-stdout", daemon=True
        )
        self.writer.start()
        threading.Thread(
            target=read_lines,
            args=(self.in_fd, self.service.max_line_bytes, emit),
            name="memory-router-stdin",
            daemon=True,
        ).start()

    async def serve(self) -> None:
        while not self.lifecycle.should_exit:
            item = await self._queue.get()
            if isinstance(item, _ReadError):
                self.service.say(f"error reading standard input: {item.exc}; shutting down")
            if isinstance(item, (_Eof, _ReadError)):
                return
            if self.lifecycle.should_exit:  # woken by the exit request itself, or a line read before it
                self._respond(self._take_seq(), shutting_down(self.service, item))
                return
            self._dispatch(item)

    def stop_accepting(self) -> None:
        with self._handover:
            self._closed.set()
        # Lines already read but not started: answered, not dropped.
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, (bytes, Oversized)):
                self._respond(self._take_seq(), shutting_down(self.service, item))
        self._queue.put_nowait(_Eof())  # wake serve() if it waits for a line

    async def close(self) -> None:
        try:
            await self._flush()
        finally:
            self._out.put(None)
        if self._broken:  # the writer may fail after the last chance the loop had to hear of it
            self.lifecycle.request_exit("standard output cannot be written", exit_code=1, announce=False)

    def _take_seq(self) -> int:
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        return seq

    def _dispatch(self, item: Item) -> None:
        seq = self._take_seq()
        if isinstance(item, Oversized):
            self._respond(seq, self.service.oversized_line(item.prefix, item.length))
            return
        task = asyncio.create_task(self._one(seq, item))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def _one(self, seq: int, line: bytes) -> None:
        try:
            response = await self.service.handle_line(line)
        except asyncio.CancelledError:
            response = shutting_down(self.service, line)
        self._respond(seq, response)

    def _respond(self, seq: int, response: bytes) -> None:
        if not self.ordered:
            self._write(response)
            return
        self._done[seq] = response
        while self._next_out in self._done:
            self._write(self._done.pop(self._next_out))
            self._next_out += 1

    def _write(self, response: bytes) -> None:
        """Hand one response line to the writer thread (which frees its read-ahead slot)."""
        self._out.put(response + b"\n")

    def _progressed(self) -> None:
        self._last_progress = time.monotonic()

    def _write_responses(self, loop: asyncio.AbstractEventLoop) -> None:
        """The writer thread: each response written whole, in order. After a failure the rest are
        dropped (their slots still freed) and the loop is told to stop."""
        while (data := self._out.get()) is not None:
            if not self._broken:
                try:
                    write_all(self.out_fd, data, stall_s=self.write_timeout_s, progress=self._progressed)
                except OSError as exc:
                    self._broken = True
                    try:
                        loop.call_soon_threadsafe(self._write_failed, exc)
                    except RuntimeError:  # the loop is gone: nothing left to stop
                        pass
            self._slots.release()

    def _write_failed(self, exc: OSError) -> None:
        # Stop first, say why after: a diagnostic that cannot be written must not hide the stop.
        self.lifecycle.request_exit("standard output cannot be written", exit_code=1, announce=False)
        self.service.say(f"cannot write to standard output: {describe(exc)}; shutting down")

    async def _flush(self) -> None:
        """Wait until the writer has written every response, while it makes progress (a blocking
        stdout blocks the writer thread, not this loop); give up after ``write_timeout_s``
        without progress, or ``CLEANUP_S`` after a forced exit."""
        self._out.put(None)
        self._last_progress = time.monotonic()
        writer = self.writer
        forced_at: float | None = None
        while writer is not None and writer.is_alive():
            now = time.monotonic()
            if self.lifecycle.force_exit:
                forced_at = forced_at or now
                if now - forced_at > CLEANUP_S:
                    return
            if now - self._last_progress > self.write_timeout_s:
                self._broken = True
                self.lifecycle.request_exit("standard output cannot be written", exit_code=1, announce=False)
                self.service.say(
                    f"cannot write to standard output: its reader took no data for {self.write_timeout_s:g} s"
                )
                return
            await asyncio.sleep(0.02)


def serve_stdio(
    service: Service,
    *,
    ordered: bool = False,
    grace_s: float = GRACE_S,
    reload: bool = True,
    write_timeout_s: float = WRITE_TIMEOUT_S,
) -> int:
    """Run the stdin/stdout daemon until EOF or a signal; returns the exit code (0, or 1 when its
    stdout could not be written)."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (ours, a library's, a child's) land on stderr
    sys.stdout = sys.stderr
    transports: list[StdioTransport] = []

    async def main() -> int:
        lifecycle = Lifecycle(service, grace_s=grace_s, reload=reload)
        transport = StdioTransport(service, lifecycle, ordered=ordered, out_fd=out_fd, write_timeout_s=write_timeout_s)
        transports.append(transport)
        return await lifecycle.serve(transport)

    try:
        return asyncio.run(main())
    finally:
        # A writer thread still blocked in write() (a stalled blocking stdout) keeps its fd: closing
        # it under the thread could hand the number to another file.
        if not transports or transports[0].writer is None or not transports[0].writer.is_alive():
            os.close(out_fd)
