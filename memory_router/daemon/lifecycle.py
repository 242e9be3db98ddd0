"""One lifecycle for both transports of ``memory-router serve`` (stdin/stdout and ``--socket``),
in the shape of uvicorn's ``Server``: startup, serve, shutdown, two flags and one signal handler.

* **startup**: SIGTERM/SIGINT/SIGHUP handled from the first moment; the transport opens (the
  socket is bound, or the stdin reader and stdout writer threads start); the config files'
  watchers start; backends begin their warm-up in the background; one readiness line on stderr.
* **serve**: the transport reads lines and starts one task per request, until its input ends
  (stdin's EOF) or an exit is requested.
* **shutdown**: the transport stops accepting (lines it already read but had not started are
  answered ``SHUTTING_DOWN``); in-flight requests finish (after EOF: however long they take;
  after an exit request: within the grace period), the rest are cancelled, which kills their
  backend process groups, and answered ``SHUTTING_DOWN``; the transport writes what is left and
  closes; the backends' helpers (qmd's engine) are closed; any backend process group still alive
  is killed.

Exit requests, held by the sans-IO :class:`ExitState` (no clock, no loop, tested directly):
the first SIGTERM/SIGINT, ``daemon stop`` (``{"op": "shutdown"}``), ``--idle-exit`` or a stdout
that cannot be written sets ``should_exit`` (graceful); a SIGTERM/SIGINT after that sets
``force_exit``: in-flight requests are cancelled at once, and the rest of the shutdown waits no
longer than :data:`CLEANUP_S` for anything. SIGHUP re-reads both config files (router-config.json,
and the calibration file it names, even when unchanged) and does not stop.
The exit code is 0, or 1 when stdout could not be written (docs/daemon.md).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Literal, Protocol

import orjson

from memory_router.backends.common import groups
from memory_router.client.wire import Oversized
from memory_router.daemon.service import SHUTTING_DOWN, Service

GRACE_S = 5.0
"""How long in-flight requests may still finish after a graceful exit request (``serve
--grace-ms``'s default). 5 s is the spec's default backend ``timeout_ms``: a request that is
waiting on a backend has, in the common case, a full backend call's time to come back with a real
answer, while a supervisor's stop (systemd's default is 90 s before SIGKILL, docker's 10 s) still
returns well inside its own patience. docs/daemon.md (*Lifecycle and shutdown*) says the same."""

CLEANUP_S = 2.0
"""After cancelling, how long cancelled requests get to run their cleanup (kill and reap their
backend process groups, which takes milliseconds) and how long the transport gets to write the
last answers and close, before the daemon goes on without them. It bounds a forced exit too."""

ExitAction = Literal["stop", "force", "none"]


class ExitState:
    """Whether, why and how hard the daemon is asked to exit (sans-IO: no clock, loop or signal).
    Mutable state, so a plain class (values are ``Frozen``: memory_router/core/frozen.py)."""

    __slots__ = ("exit_code", "force_exit", "reason", "should_exit")

    def __init__(self) -> None:
        self.should_exit = False
        self.force_exit = False
        self.reason = ""
        self.exit_code = 0

    def __repr__(self) -> str:
        return (
            f"ExitState(should_exit={self.should_exit!r}, force_exit={self.force_exit!r}, "
            f"reason={self.reason!r}, exit_code={self.exit_code!r})"
        )

    def request_exit(self, reason: str, *, exit_code: int = 0) -> ExitAction:
        """A graceful exit (a signal, ``daemon stop``, idle, a broken stdout). Only the first sets
        the reason; a failure's exit code counts whenever it comes."""
        self.exit_code = max(self.exit_code, exit_code)
        if self.should_exit:
            return "none"
        self.should_exit, self.reason = True, reason
        return "stop"

    def on_signal(self, name: str) -> ExitAction:
        """SIGTERM/SIGINT: the first asks for a graceful exit, the next one forces it."""
        if not self.should_exit:
            return self.request_exit(name)
        if self.force_exit:
            return "none"
        self.force_exit = True
        return "force"


class DaemonTransport(Protocol):
    """What a transport fills in; :class:`Lifecycle` drives it."""

    in_flight: set[asyncio.Task[None]]
    """Requests started and not yet answered (each task removes itself when done)."""

    async def open(self) -> None:
        """Start taking input (bind the socket, start the reader and writer threads)."""

    def ready_message(self) -> str:
        """The readiness line for stderr, once the daemon is fully up."""
        ...

    async def serve(self) -> None:
        """Read and dispatch lines; return at the end of input or once ``should_exit`` is set."""

    def stop_accepting(self) -> None:
        """Read no more requests; answer lines already read but not started ``SHUTTING_DOWN``.
        Called in the loop, at once, when an exit is requested, and again at shutdown."""

    async def close(self) -> None:
        """Write what is left (within ``CLEANUP_S`` after a forced exit) and stop."""


class Lifecycle:
    """Startup, serve and shutdown of one transport over one :class:`Service`."""

    def __init__(self, service: Service, *, grace_s: float = GRACE_S, reload: bool = True) -> None:
        self.service = service
        self.grace_s = grace_s
        self.reload = reload
        self.state = ExitState()
        self.exiting = asyncio.Event()  # should_exit, for transports that wait on it
        self._forced = asyncio.Event()
        self._transport: DaemonTransport | None = None

    @property
    def should_exit(self) -> bool:
        return self.state.should_exit

    @property
    def force_exit(self) -> bool:
        return self.state.force_exit

    async def serve(self, transport: DaemonTransport) -> int:
        """The whole life of ``transport``; returns the exit code."""
        self._transport = transport
        loop = asyncio.get_running_loop()
        self._install_signals(loop)
        try:
            try:
                await self.startup()
                if not self.should_exit:
                    await transport.serve()
            finally:
                await self.shutdown()
        finally:
            self._remove_signals(loop)
        return self.state.exit_code

    async def startup(self) -> None:
        assert self._transport is not None
        await self._transport.open()
        if self.reload:
            await self.service.start()
        self.service.warm_up()  # qmd's engine and models load in the background; requests are read at once
        self.service.say(self._transport.ready_message())

    async def shutdown(self) -> None:
        transport = self._transport
        assert transport is not None
        try:
            transport.stop_accepting()
            await self._drain(transport.in_flight)
            transport.stop_accepting()  # lines handed over while draining: answered, not dropped
            await transport.close()
        finally:
            try:  # a forced exit waits for no backend's goodbye longer than CLEANUP_S
                await asyncio.wait_for(self.service.aclose(), CLEANUP_S if self.force_exit else None)
            except asyncio.TimeoutError:
                self.service.say(f"backends not closed within {CLEANUP_S:g} s; killing their processes")
            # A cancelled request whose cleanup did not finish within CLEANUP_S (or a program
            # started meanwhile) leaves no process group behind.
            groups.kill_all()

    async def _drain(self, in_flight: set[asyncio.Task[None]]) -> None:
        loop = asyncio.get_running_loop()
        exiting = asyncio.ensure_future(self.exiting.wait())
        forced = asyncio.ensure_future(self._forced.wait())
        try:
            # End of input, no exit requested: every request finishes, however long it takes.
            while in_flight and not self.should_exit:
                await asyncio.wait({*in_flight, exiting}, return_when=asyncio.FIRST_COMPLETED)
            deadline = loop.time() + self.grace_s
            while in_flight and not self.force_exit and (left := deadline - loop.time()) > 0:
                await asyncio.wait({*in_flight, forced}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exiting.cancel()
            forced.cancel()
        late = set(in_flight)
        for task in late:
            task.cancel()
        if late:  # cancellation runs the adapters' cleanup: their process groups are killed
            await asyncio.wait(late, timeout=CLEANUP_S)

    # ------------------------------------------------------------------ exit requests

    def request_exit(self, reason: str, *, exit_code: int = 0, announce: bool = True) -> None:
        """Ask for a graceful exit (``daemon stop``, idle, a broken stdout)."""
        if self.state.request_exit(reason, exit_code=exit_code) == "stop":
            self._begin_exit()
            if announce:
                self.service.say(f"stopping ({reason}); {self._in_flight_words()}")

    def handle_exit(self, signum: int) -> None:
        """The one SIGTERM/SIGINT handler: stop first, say why after (a diagnostic that cannot
        be written must not swallow the signal)."""
        name = signal.Signals(signum).name
        step = self.state.on_signal(name)
        if step == "stop":
            self._begin_exit()
            self.service.say(f"{name}: stopping; {self._in_flight_words()}")
        elif step == "force":
            self._forced.set()
            in_flight = self._transport.in_flight if self._transport is not None else set()
            for task in list(in_flight):
                task.cancel()
            self.service.say(f"{name} again: cancelling {len(in_flight)} request(s) now")

    def handle_hup(self) -> None:
        # An explicit request: re-read router-config.json and what it names (the calibration
        # file) even when the config file itself did not change.
        outcome = self.service.reload(force=True)
        self.service.say(f"SIGHUP: {outcome or 'no change on disk'}")

    def _begin_exit(self) -> None:
        self.exiting.set()
        if self._transport is not None:
            self._transport.stop_accepting()

    def _in_flight_words(self) -> str:
        count = len(self._transport.in_flight) if self._transport is not None else 0
        return f"{count} request(s) in flight get {self.grace_s:g} s to finish"

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.handle_exit, sig)
        loop.add_signal_handler(signal.SIGHUP, self.handle_hup)

    def _remove_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)


def shutting_down(service: Service, item: bytes | Oversized) -> bytes:
    """The answer to a line read but not completed because the daemon is stopping: its id if
    the line has one (an oversized line gets its ``REQUEST_TOO_LARGE``, as always)."""
    if isinstance(item, Oversized):
        return service.oversized_line(item.prefix, item.length)
    rid = None
    try:
        data = orjson.loads(item)
        rid = data.get("id") if isinstance(data, dict) else None
    except orjson.JSONDecodeError:
        pass
    service.stats.request("error", SHUTTING_DOWN)
    return service.dumps(
        service.error_response(rid, SHUTTING_DOWN, "the daemon is shutting down; the request was not completed")
    )
