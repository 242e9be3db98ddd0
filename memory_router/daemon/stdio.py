"""The stdin/stdout transport of ``memory-router serve``: JSON lines in, JSON lines out.

* A reader thread reads standard input with ``os.read`` (pipes, files and terminals alike; no
  buffered object, so a thread still blocked in a read cannot wedge interpreter shutdown) and
  splits lines, never holding more than ``max_line_bytes`` of one line: the rest of an oversized
  line is skipped and the line is answered ``REQUEST_TOO_LARGE``.
* Each line becomes a task; :class:`~.service.Service` bounds how many are routed at once, and a
  semaphore bounds how many lines are read ahead of their responses (backpressure).
* Responses are written as they complete (each carries its request's ``id``), or in input order
  with ``ordered``. Every line read gets exactly one response line, flushed at once.
* EOF: in-flight requests finish, then exit 0. SIGTERM/SIGINT: stop reading; lines already read
  but not started are answered ``SHUTTING_DOWN``; in-flight requests get ``grace_s`` to finish,
  then are cancelled (adapters kill their process groups on cancellation) and answered
  ``SHUTTING_DOWN``; exit 0. A second signal cancels at once. SIGHUP re-reads both config files.
* Responses go to a private duplicate of stdout, and fd 1 is pointed at stderr while serving, so
  nothing a library prints can corrupt the protocol stream. A writer thread writes them, so a
  slow reader never holds the event loop (requests and signals go on): with a non-blocking
  stdout, ``EAGAIN`` waits for the reader (:func:`~memory_router.output.outwrite.write_all`) for up to
  ``write_timeout_s`` without progress. A reader that is gone (``EPIPE``) or stalled that long
  stops the daemon like a signal: nothing more is read, in-flight requests are cancelled after
  ``grace_s``, the backends' helpers (qmd's engine) are closed, and it exits 1.
"""

from __future__ import annotations

import asyncio
import os
import queue as thread_queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from memory_router.client.wire import LineSplitter, Oversized
from memory_router.daemon.service import SHUTTING_DOWN, Service
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


class StdioServer:
    def __init__(
        self,
        service: Service,
        *,
        ordered: bool = False,
        grace_s: float = 5.0,
        max_pending: int | None = None,
        in_fd: int = 0,
        out_fd: int = 1,
        write_timeout_s: float = WRITE_TIMEOUT_S,
    ) -> None:
        self.service = service
        self.ordered = ordered
        self.grace_s = grace_s
        # Lines read ahead of their responses: enough to keep every routing slot busy.
        self.max_pending = max_pending or max(64, 4 * service.concurrency)
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._pending: set[asyncio.Task[None]] = set()
        self._slots = threading.Semaphore(self.max_pending)
        self._closed = threading.Event()  # the reader must stop handing over lines
        self._stopping = asyncio.Event()
        self._signals = 0
        self._next_seq = 0
        self._next_out = 0
        self._done: dict[int, bytes] = {}
        self._broken = False
        self.write_timeout_s = write_timeout_s
        # Responses on their way to stdout, written by the writer thread in this order; None ends it.
        self._out: thread_queue.SimpleQueue[bytes | None] = thread_queue.SimpleQueue()
        self._last_progress = time.monotonic()
        self.writer: threading.Thread | None = None

    async def run(self) -> int:  # noqa: C901 - the transport's lifecycle (start, read, drain, stop) in order
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Item] = asyncio.Queue()

        def emit(item: Item) -> bool:
            if not isinstance(item, (_Eof, _ReadError)):
                self._slots.acquire()
            if self._closed.is_set():
                return False
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone
                return False
            return True

        reader = threading.Thread(
            target=read_lines,
            args=(self.in_fd, self.service.max_line_bytes, emit),
            name="memory-router-stdin",
            daemon=True,
        )
        self._install_signals(loop, queue)
        self.writer = threading.Thread(
            target=self._write_responses, args=(loop, queue), name="memory-router-stdout", daemon=True
        )
        self.writer.start()
        reader.start()
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _ReadError):
                    self.service.say(f"error reading standard input: {item.exc}; shutting down")
                if isinstance(item, (_Eof, _ReadError)):
                    break
                if self._stopping.is_set():
                    self._respond(self._take_seq(), self._shutting_down(item))
                    break
                self._dispatch(item)
            self._closed.set()
            # Lines already read but not started: answered, not dropped.
            while not queue.empty():
                item = queue.get_nowait()
                if isinstance(item, (bytes, Oversized)):
                    seq = self._take_seq()
                    self._respond(seq, self._shutting_down(item))
            await self._drain()
            await self._flush()
        finally:
            self._closed.set()
            self._out.put(None)
            self._remove_signals(loop)
            await self.service.aclose()
        return 1 if self._broken else 0

    def _take_seq(self) -> int:
        seq, self._next_seq = self._next_seq, self._next_seq + 1
        return seq

    def _dispatch(self, item: Item) -> None:
        seq = self._take_seq()
        if isinstance(item, Oversized):
            self._respond(seq, self.service.oversized_line(item.prefix, item.length))
            return
        task = asyncio.create_task(self._one(seq, item))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _one(self, seq: int, line: bytes) -> None:
        try:
            response = await self.service.handle_line(line)
        except asyncio.CancelledError:
            response = self._shutting_down(line)
        self._respond(seq, response)

    def _shutting_down(self, item: bytes | Oversized) -> bytes:
        if isinstance(item, Oversized):
            return self.service.oversized_line(item.prefix, item.length)
        rid = None
        try:
            data = orjson.loads(item)
            rid = data.get("id") if isinstance(data, dict) else None
        except orjson.JSONDecodeError:
            pass
        self.service.stats.request("error", SHUTTING_DOWN)
        return self.service.dumps(
            self.service.error_response(
                rid, SHUTTING_DOWN, "the daemon is shutting down (SIGTERM/SIGINT); the request was not completed"
            )
        )

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

    def _write_responses(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Item]) -> None:
        """The writer thread: each response written whole, in order. After a failure the rest are
        dropped (their slots still freed) and the loop is told to stop."""
        while (data := self._out.get()) is not None:
            if not self._broken:
                try:
                    write_all(self.out_fd, data, stall_s=self.write_timeout_s, progress=self._progressed)
                except OSError as exc:
                    self._broken = True
                    try:
                        loop.call_soon_threadsafe(self._write_failed, exc, queue)
                    except RuntimeError:  # the loop is gone: nothing left to stop
                        pass
            self._slots.release()

    def _write_failed(self, exc: OSError, queue: asyncio.Queue[Item]) -> None:
        # Like a signal: stop reading and wake the main loop, which may be waiting for a line.
        self._stop()
        queue.put_nowait(_Eof())
        self.service.say(f"cannot write to standard output: {describe(exc)}; shutting down")

    async def _flush(self) -> None:
        """Wait until the writer has written every response, while it makes progress (a blocking
        stdout blocks the writer thread, not this loop); give up after ``write_timeout_s``
        without progress, or at a second signal."""
        self._out.put(None)
        self._last_progress = time.monotonic()
        writer = self.writer
        while writer is not None and writer.is_alive() and self._signals < 2:
            if time.monotonic() - self._last_progress > self.write_timeout_s:
                self._broken = True
                self.service.say(
                    f"cannot write to standard output: its reader took no data for {self.write_timeout_s:g} s"
                )
                return
            await asyncio.sleep(0.02)

    async def _drain(self) -> None:
        stop_wait = asyncio.create_task(self._stopping.wait())
        try:
            while self._pending and not self._stopping.is_set():
                await asyncio.wait({*self._pending, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
        if not self._pending:
            return
        if self._signals < 2:
            _, late = await asyncio.wait(set(self._pending), timeout=self.grace_s)
        else:
            late = set(self._pending)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=10.0)  # cancellation runs the adapters' cleanup

    def _stop(self) -> None:
        self._stopping.set()
        self._closed.set()

    def _install_signals(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Item]) -> None:
        def on_signal(signum: int) -> None:
            self._signals += 1
            # Stop first, say why after: a diagnostic that cannot be written must not swallow the signal.
            self._stop()
            queue.put_nowait(_Eof())  # wake the main loop if it waits for a line
            name = signal.Signals(signum).name
            if self._signals == 1:
                self.service.say(
                    f"{name}: stopping; {len(self._pending)} request(s) in flight get {self.grace_s:g} s to finish"
                )
            else:
                self.service.say(f"{name} again: cancelling {len(self._pending)} request(s) now")
                for task in list(self._pending):
                    task.cancel()

        def on_hup() -> None:
            outcome = self.service.reload()
            self.service.say(f"SIGHUP: {outcome or 'no change on disk'}")

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        if hasattr(signal, "SIGHUP"):
            loop.add_signal_handler(signal.SIGHUP, on_hup)

    def _remove_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for name in ("SIGTERM", "SIGINT", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None:
                loop.remove_signal_handler(sig)


def serve_stdio(
    service: Service,
    *,
    ordered: bool = False,
    grace_s: float = 5.0,
    reload: bool = True,
    write_timeout_s: float = WRITE_TIMEOUT_S,
) -> int:
    """Run the stdin/stdout daemon until EOF or a signal; returns the exit code (0, or 1 when its
    stdout could not be written)."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (ours, a library's, a child's) land on stderr
    sys.stdout = sys.stderr
    servers: list[StdioServer] = []

    async def main() -> int:
        if reload:
            await service.start()
        service.warm_up()  # qmd's engine and models load in the background; queries are read at once
        service.say(
            f"ready: pid {os.getpid()}, config {service.config_path}, backends.json {service.backends_path}, "
            f"concurrency {service.concurrency}{', ordered' if ordered else ''}"
            f"{', watching both for changes' if reload else ''}"
        )
        server = StdioServer(service, ordered=ordered, grace_s=grace_s, out_fd=out_fd, write_timeout_s=write_timeout_s)
        servers.append(server)
        return await server.run()

    try:
        return asyncio.run(main())
    finally:
        # A writer thread still blocked in write() (a stalled blocking stdout) keeps its fd: closing
        # it under the thread could hand the number to another file.
        if not servers or servers[0].writer is None or not servers[0].writer.is_alive():
            os.close(out_fd)
