"""The daemon's one lifecycle (memory_router/daemon/lifecycle.py), in-process.

* :class:`ExitState` directly, table-driven and as a property: what each exit request and signal
  does to ``should_exit``/``force_exit``, the reason and the exit code.
* :class:`Lifecycle` driving each real transport in this process, over a real
  :class:`~memory_router.daemon.service.Service` with mock backends (backends/mock.py): the stdio
  transport over two pipes, the socket transport over a Unix socket in a private temporary
  folder. A signal is delivered by calling the one handler, ``handle_exit``, that the loop's
  SIGTERM/SIGINT handlers call (tests/daemon/test_daemon_serve.py sends real signals to real
  ``serve`` processes).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.mock import Handler, MockBackend, answer, hang
from memory_router.daemon.lifecycle import ExitState, Lifecycle
from memory_router.daemon.service import SHUTTING_DOWN, Service
from memory_router.daemon.socket_server import SocketServer
from memory_router.daemon.stdio import StdioTransport

from .test_daemon_service import make_service

QUERY = "the middleware issue"  # rule 7 (default): qmd/query -> totalrecall

# --------------------------------------------------------------------------- ExitState


def _apply(state: ExitState, event: tuple[str, ...]) -> str:
    if event[0] == "signal":
        return state.on_signal(event[1])
    return state.request_exit(event[1], exit_code=int(event[2]))


@pytest.mark.parametrize(
    ("events", "steps", "should_exit", "force_exit", "reason", "code"),
    [
        ([], [], False, False, "", 0),
        ([("signal", "SIGTERM")], ["stop"], True, False, "SIGTERM", 0),
        ([("signal", "SIGTERM"), ("signal", "SIGINT")], ["stop", "force"], True, True, "SIGTERM", 0),
        ([("signal", "SIGINT")] * 3, ["stop", "force", "none"], True, True, "SIGINT", 0),
        # A signal after `daemon stop` (or idle, or a broken stdout) is the second request: it forces.
        ([("exit", "daemon stop", "0"), ("signal", "SIGTERM")], ["stop", "force"], True, True, "daemon stop", 0),
        ([("exit", "daemon stop", "0"), ("exit", "idle", "0")], ["stop", "none"], True, False, "daemon stop", 0),
        ([("exit", "stdout gone", "1")], ["stop"], True, False, "stdout gone", 1),
        # A broken stdout fails the exit whenever it comes; it never forces.
        ([("signal", "SIGTERM"), ("exit", "stdout gone", "1")], ["stop", "none"], True, False, "SIGTERM", 1),
    ],
)
def test_exit_state_transitions(
    events: list[tuple[str, ...]], steps: list[str], should_exit: bool, force_exit: bool, reason: str, code: int
) -> None:
    state = ExitState()
    assert [_apply(state, event) for event in events] == steps
    assert (state.should_exit, state.force_exit, state.reason, state.exit_code) == (
        should_exit,
        force_exit,
        reason,
        code,
    )


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("signal"), st.sampled_from(["SIGTERM", "SIGINT"])),
        st.tuples(st.just("exit"), st.sampled_from(["daemon stop", "idle"]), st.sampled_from(["0", "1"])),
    ),
    max_size=8,
)


@given(EVENTS)
def test_exit_state_stops_once_forces_once_and_only_on_a_signal(events: list[tuple[str, ...]]) -> None:
    state = ExitState()
    steps = [_apply(state, event) for event in events]
    assert steps.count("stop") == (1 if events else 0) and steps.count("force") <= 1
    assert state.should_exit == bool(events)
    assert not state.force_exit or state.should_exit
    if "force" in steps:  # forced by a signal that came after the first request
        at = steps.index("force")
        assert events[at][0] == "signal" and steps.index("stop") < at
    assert state.exit_code == max((int(e[2]) for e in events if e[0] == "exit"), default=0)


# --------------------------------------------------------------------------- both transports


class ClosingMock(MockBackend):
    """A mock backend that records being closed (the lifecycle closes backends at shutdown)."""

    closed = False

    async def aclose(self) -> None:
        self.closed = True


def backends(qmd: Handler) -> dict[str, MockBackend]:
    return {
        "qmd": ClosingMock("qmd", qmd),
        "totalrecall": ClosingMock("totalrecall", answer(0.9)),
        "cognee": ClosingMock("cognee", answer(0.9)),
        "lossless": ClosingMock("lossless", answer(0.9)),
    }


class Harness:
    """One transport under a :class:`Lifecycle`, with a client that sends lines and collects every
    answer until the daemon closes its side."""

    lifecycle: Lifecycle
    transport: Any
    task: asyncio.Task[int]

    async def start(self, service: Service, grace_s: float) -> None:
        raise NotImplementedError

    async def send(self, request: object) -> None:
        raise NotImplementedError

    async def answers(self) -> list[dict[str, Any]]:
        """Every answer, once the daemon has exited and closed its output."""
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class StdioHarness(Harness):
    async def start(self, service: Service, grace_s: float) -> None:
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        self.out: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.lifecycle = Lifecycle(service, grace_s=grace_s, reload=False)
        self.transport = StdioTransport(service, self.lifecycle, in_fd=self.in_r, out_fd=self.out_w)
        self.task = asyncio.create_task(self.lifecycle.serve(self.transport))

    def _read(self) -> None:
        while chunk := os.read(self.out_r, 1 << 16):
            self.out.append(chunk)

    async def send(self, request: object) -> None:
        os.write(self.in_w, orjson.dumps(request) + b"\n")

    async def answers(self) -> list[dict[str, Any]]:
        await self.task
        os.close(self.out_w)  # serve_stdio's job in the CLI: the transport writes to a duplicate of fd 1
        self.out_w = -1
        await asyncio.to_thread(self.reader.join, 10)
        return [orjson.loads(line) for line in b"".join(self.out).splitlines()]

    def cleanup(self) -> None:
        for fd in (self.in_w, self.out_w, self.out_r):
            if fd >= 0:
                os.close(fd)
        # in_r stays open: the transport's reader thread may still be blocked reading it.


class SocketHarness(Harness):
    async def start(self, service: Service, grace_s: float) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mr-life-"))  # private (0700) and short enough for a socket
        self.lifecycle = Lifecycle(service, grace_s=grace_s, reload=False)
        self.transport = SocketServer(service, self.lifecycle, self.folder / "r.sock")
        self.transport.claim()
        self.task = asyncio.create_task(self.lifecycle.serve(self.transport))
        deadline = time.monotonic() + 10
        while self.transport._inode is None:
            assert time.monotonic() < deadline, "the socket was never bound"
            await asyncio.sleep(0.01)
        self.reader, self.writer = await asyncio.open_unix_connection(str(self.folder / "r.sock"))

    async def send(self, request: object) -> None:
        self.writer.write(orjson.dumps(request) + b"\n")
        await self.writer.drain()

    async def answers(self) -> list[dict[str, Any]]:
        data = await asyncio.wait_for(self.reader.read(), 10)  # to EOF: the daemon closes the connection
        await self.task
        self.writer.close()
        return [orjson.loads(line) for line in data.splitlines()]

    def cleanup(self) -> None:
        self.transport.release()
        shutil.rmtree(self.folder, ignore_errors=True)


TRANSPORTS = {"stdio": StdioHarness, "socket": SocketHarness}


async def in_flight(harness: Harness, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(harness.transport.in_flight) < count:
        assert time.monotonic() < deadline, f"{len(harness.transport.in_flight)} of {count} requests in flight"
        await asyncio.sleep(0.01)


def play(harness: Harness, scenario: Callable[[Harness], Coroutine[Any, Any, None]]) -> Harness:
    """Run ``scenario`` on a fresh event loop over ``harness``, then release the transport; the
    harness is returned for what the test checks afterwards (which backends were closed)."""
    try:
        asyncio.run(scenario(harness))
    finally:
        harness.cleanup()
    return harness


def closed(harness: Harness) -> set[str]:
    return {name for name, b in harness.lifecycle.service.router.instances().items() if getattr(b, "closed", False)}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_first_signal_lets_in_flight_requests_finish_with_their_real_answers(transport: str, tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    async def scenario(h: Harness) -> None:
        await h.start(service, grace_s=30.0)
        for i in range(6):
            await h.send({"id": i, "query": QUERY})
        await in_flight(h, 6)
        started = time.monotonic()
        h.lifecycle.handle_exit(signal.SIGTERM)
        assert h.lifecycle.should_exit and not h.lifecycle.force_exit
        got["answers"] = await h.answers()
        got["elapsed"] = time.monotonic() - started
        got["code"] = h.task.result()

    service = make_service(tmp_path, backends(answer(0.9, delay_s=0.3)), concurrency=8, cooldown=None)
    harness = play(TRANSPORTS[transport](), scenario)
    answers = got["answers"]
    assert sorted(a["id"] for a in answers) == list(range(6))
    assert {(a["status"], a["routed_to"]) for a in answers} == {("success", "qmd")}
    assert got["code"] == 0 and got["elapsed"] < 10  # not the 30 s grace: done when the requests were
    assert closed(harness) == {"qmd", "totalrecall", "cognee", "lossless"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_still_running_after_the_grace_period_are_cancelled_and_answered(
    transport: str, tmp_path: Path
) -> None:
    got: dict[str, Any] = {}

    async def scenario(h: Harness) -> None:
        await h.start(service, grace_s=0.2)
        for i in range(10):
            await h.send({"id": i, "query": QUERY})
        await in_flight(h, 10)
        h.lifecycle.handle_exit(signal.SIGINT)
        got["answers"] = await h.answers()
        got["code"] = h.task.result()

    service = make_service(tmp_path, backends(hang()), concurrency=4, cooldown=None, timeout_ms=60_000)
    harness = play(TRANSPORTS[transport](), scenario)
    answers = got["answers"]
    assert sorted(a["id"] for a in answers) == list(range(10))
    assert {(a["status"], a["error_code"]) for a in answers} == {("error", SHUTTING_DOWN)}
    assert got["code"] == 0
    assert closed(harness) == {"qmd", "totalrecall", "cognee", "lossless"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_second_signal_cancels_at_once_and_still_answers_every_request(transport: str, tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    async def scenario(h: Harness) -> None:
        await h.start(service, grace_s=60.0)
        for i in range(5):
            await h.send({"id": i, "query": QUERY})
        await in_flight(h, 5)
        h.lifecycle.handle_exit(signal.SIGTERM)
        await asyncio.sleep(0.2)
        assert not h.task.done()  # the grace period runs
        started = time.monotonic()
        h.lifecycle.handle_exit(signal.SIGTERM)
        assert h.lifecycle.force_exit
        got["answers"] = await h.answers()
        got["elapsed"] = time.monotonic() - started
        got["code"] = h.task.result()

    service = make_service(tmp_path, backends(hang()), concurrency=4, cooldown=None, timeout_ms=60_000)
    harness = play(TRANSPORTS[transport](), scenario)
    answers = got["answers"]
    assert sorted(a["id"] for a in answers) == list(range(5))
    assert {(a["status"], a["error_code"]) for a in answers} == {("error", SHUTTING_DOWN)}
    assert got["code"] == 0 and got["elapsed"] < 5
    assert closed(harness) == {"qmd", "totalrecall", "cognee", "lossless"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_after_the_first_signal_no_new_request_is_routed(transport: str, tmp_path: Path) -> None:
    """stdin is no longer read; a socket connection's late line is answered SHUTTING_DOWN and no
    new client is accepted. Either way nothing new reaches a backend."""
    got: dict[str, Any] = {}

    async def scenario(h: Harness) -> None:
        await h.start(service, grace_s=30.0)
        await h.send({"id": 0, "query": QUERY})
        await in_flight(h, 1)
        h.lifecycle.handle_exit(signal.SIGTERM)
        await h.send({"id": 1, "query": QUERY})
        if isinstance(h, SocketHarness):
            with pytest.raises(OSError):
                await asyncio.open_unix_connection(str(h.folder / "r.sock"))
        got["answers"] = await h.answers()

    qmd = answer(0.9, delay_s=0.3)
    service = make_service(tmp_path, backends(qmd), concurrency=4, cooldown=None)
    play(TRANSPORTS[transport](), scenario)
    by_id = {a["id"]: a["status"] for a in got["answers"]}
    assert by_id[0] == "success"
    assert by_id.get(1, "unread") == ("error" if transport == "socket" else "unread")
    assert len(service.router.backend("qmd").requests) == 1  # type: ignore[attr-defined]


def test_a_socket_line_waiting_for_its_connections_slot_at_shutdown_is_answered_not_routed(tmp_path: Path) -> None:
    """A connection has at most PER_CONNECTION_IN_FLIGHT requests in flight; a line read beyond
    that waits for a slot. If the daemon starts stopping meanwhile, the line gets SHUTTING_DOWN
    when the slot frees, and never reaches a backend."""
    from memory_router.daemon.socket_server import PER_CONNECTION_IN_FLIGHT

    total = PER_CONNECTION_IN_FLIGHT + 6
    got: dict[str, Any] = {}

    async def scenario(h: Harness) -> None:
        await h.start(service, grace_s=0.2)
        for i in range(total):
            await h.send({"id": i, "query": QUERY})
        await in_flight(h, PER_CONNECTION_IN_FLIGHT)
        await asyncio.sleep(0.1)
        h.lifecycle.handle_exit(signal.SIGTERM)
        got["answers"] = await h.answers()

    service = make_service(tmp_path, backends(hang()), concurrency=4, cooldown=None, timeout_ms=60_000)
    play(SocketHarness(), scenario)
    answers = got["answers"]
    assert sorted(a["id"] for a in answers) == list(range(total))
    assert {a["error_code"] for a in answers} == {SHUTTING_DOWN}
    assert len(service.router.backend("qmd").requests) == 4  # type: ignore[attr-defined]  # the routing slots
