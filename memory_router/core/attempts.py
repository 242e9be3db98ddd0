"""Attempts: one backend call under the router's timeout, and the two drivers of the fallback.

An :class:`Attempt` is one step of a query's chain and what came of it. :func:`call_backend`
makes one call and never raises for a backend's problem: a call that outlives its timeout is
cancelled (the adapter's cleanup kills whatever it started) and answers ``QUERY_TIMEOUT``; an
adapter that raises or returns something that is not a response answers ``BACKEND_ERROR``; an
answer with more results than the request's limit is cut to it.

Every decision (accept, move on, the deadline, cooldown, router.log) is the sans-IO machine's,
:class:`~memory_router.core.fallback.Fallback`. Two drivers carry out its calls. :func:`drive` awaits
each backend's ``search`` under an asyncio timeout (the daemon, ``serve``, MCP).
:func:`drive_blocking` runs a :class:`~memory_router.backends.base.BlockingBackend`'s search in a
thread and waits for it with a timeout, without an event loop: the one-shot CLI, where importing
asyncio would be a sixth of a cold query (README, *Cold start*); a backend that is only async gets
a fresh event loop for its one call. Both drivers give the machine the same outcomes (tested).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from memory_router.backends.base import (
    BACKEND_ERROR,
    QUERY_TIMEOUT,
    Backend,
    BackendRequest,
    BackendResponse,
    BlockingBackend,
)
from memory_router.core.rules import Step

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    # What the drivers need of the machine they carry out (:class:`~.fallback.Fallback` and its
    # ``Call``), said structurally: fallback builds on this module's values, so importing it here,
    # even for types only, would make the two import each other. Defined for the type checker
    # only, so the one-shot query pays nothing for them.
    class Call(Protocol):
        @property
        def backend(self) -> str: ...
        @property
        def request(self) -> BackendRequest: ...
        @property
        def timeout_s(self) -> float: ...

    class Fallback(Protocol):
        def next_calls(self, now: float) -> Sequence[Call]: ...
        def receive(self, outcomes: list[tuple[BackendResponse, int]]) -> None: ...
        def cancel(self) -> None: ...


_T = TypeVar("_T")

# Router-side attempt codes (never produced by a backend).
COOLDOWN = "COOLDOWN"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"


class Policy(NamedTuple):
    threshold: float = 0.4
    timeout_s: float = 5.0
    limit: int = 10
    deadline_s: float | None = None  # overall budget for the whole query; None: no deadline


class Attempt(NamedTuple):
    step: Step
    response: BackendResponse
    duration_ms: int  # measured by the router, wall clock
    accepted: bool

    @property
    def failed(self) -> bool:
        return self.response.status == "error"

    def as_dict(self) -> dict[str, object]:
        r = self.response
        return {
            "backend": self.step.backend,
            "mode": self.step.mode,
            "status": r.status,
            "error_code": r.error_code,
            "error_message": r.error_message,
            "normalized_relevance": r.normalized_relevance,
            "result_count": r.result_count,
            "duration_ms": self.duration_ms,
            "accepted": self.accepted,
            "query_sent": r.query_sent,
            **({"note": r.note} if r.note else {}),  # what the backend skipped (qmd: expansion)
        }


async def call_backend(backend: Backend, request: BackendRequest, timeout_s: float) -> tuple[BackendResponse, int]:
    """One backend call under the router's timeout; never raises (except our own cancellation)."""
    import asyncio

    started = time.perf_counter()
    scope = getattr(asyncio, "timeout", None)  # Python >= 3.11
    try:
        if scope is not None:
            # A cancel scope in this task: wait_for would create a task per backend call (a third
            # of the router's own cost per query).
            async with scope(timeout_s):
                response = await backend.search(request)
        else:
            response = await asyncio.wait_for(backend.search(request), timeout_s)
    except asyncio.TimeoutError:
        response = _timed_out(backend, request, timeout_s)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # an adapter bug must not take the router down
        response = _raised(backend, request, exc)
    return _settled(backend, request, response, started)


def call_backend_blocking(backend: Backend, request: BackendRequest, timeout_s: float) -> tuple[BackendResponse, int]:
    """:func:`call_backend` without an event loop. A :class:`BlockingBackend` searches in a daemon
    thread while this one waits at most ``timeout_s``; on timeout its ``stop`` event is set and
    the thread is abandoned (it stops at its next check; a one-shot process does not wait for
    it). Any other backend gets a fresh event loop for this one call."""
    if not isinstance(backend, BlockingBackend):
        return run_on_new_loop(call_backend(backend, request, timeout_s))
    started = time.perf_counter()
    stop, done = threading.Event(), threading.Event()
    outcome: list[BackendResponse | BaseException] = []

    def search() -> None:
        try:
            outcome.append(backend.search_blocking(request, stop))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=search, name=f"memory-router-{backend.name}", daemon=True).start()
    if not done.wait(timeout_s):
        stop.set()
        response = _timed_out(backend, request, timeout_s)
    elif isinstance(outcome[0], Exception):  # an adapter bug must not take the router down
        response = _raised(backend, request, outcome[0])
    elif isinstance(outcome[0], BaseException):
        raise outcome[0]
    else:
        response = outcome[0]
    return _settled(backend, request, response, started)


def _timed_out(backend: Backend, request: BackendRequest, timeout_s: float) -> BackendResponse:
    return BackendResponse.failure(
        backend.name, request.query, QUERY_TIMEOUT, f"no answer within {int(timeout_s * 1000)} ms"
    )


def _raised(backend: Backend, request: BackendRequest, exc: Exception) -> BackendResponse:
    return BackendResponse.failure(
        backend.name, request.query, BACKEND_ERROR, f"adapter raised {type(exc).__name__}: {exc}"
    )


def _settled(
    backend: Backend, request: BackendRequest, response: object, started: float
) -> tuple[BackendResponse, int]:
    elapsed = int((time.perf_counter() - started) * 1000)
    checked = _capped(_sane(backend.name, request.query, response), request.limit)
    if checked.status == "success" and not checked.results:
        checked = checked.replace(status="empty", normalized_relevance=0.0)
    return checked, elapsed


def run_on_new_loop(coro: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run`` minus its final wait for the default executor: a worker thread the router
    abandoned at its timeout (SQLite waiting on a lock, a slow file scan) must not hold the answer
    back. Subprocess backends are already killed by then; threads cannot be, so they are left."""
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the default executor down without waiting
            threads = sys.modules.get("memory_router.backends.common.threads")
            if threads is not None:  # adapters' own worker pools (Total Recall, Lossless): the same
                threads.release_all()


def _sane(name: str, query: str, response: object) -> BackendResponse:
    """Hold in-process adapters to the contract, as the command adapter holds programs: a value
    that is not a response is an adapter bug (BACKEND_ERROR), and an ``error`` response carries no
    results (so a failed call can never be returned as ``partial``). A relevance outside 0..1
    cannot get this far: :class:`BackendResponse` refuses it when built, inside the adapter's call."""
    if not isinstance(response, BackendResponse):
        return BackendResponse.failure(
            name, query, BACKEND_ERROR, f"adapter returned {type(response).__name__}, not a BackendResponse"
        )
    if response.status == "error" and response.results:
        return response.replace(results=(), result_count=0, normalized_relevance=0.0)
    return response


def _capped(response: BackendResponse, limit: int) -> BackendResponse:
    """At most ``limit`` results, whatever the backend sent (a command backend's program may
    ignore ``{limit}``): the ``limit`` most relevant, in the backend's order (a tie keeps the
    earlier one). ``result_count`` counts what is kept; ``normalized_relevance`` is unchanged:
    it is the best result's (the best is always kept) or the backend's own figure."""
    results = response.results
    if len(results) <= limit and response.result_count <= limit:
        return response
    best = sorted(range(len(results)), key=lambda i: -results[i].relevance)[:limit]
    kept = tuple(results[i] for i in sorted(best))
    return response.replace(results=kept, result_count=len(kept))


async def drive(machine: Fallback, backend_for: Callable[[str], Backend]) -> None:
    """Carry out a :class:`~.fallback.Fallback`'s calls on the running event loop, each awaited
    under its timeout with :func:`call_backend` (a batch concurrently): the daemon, ``serve``, MCP."""
    while calls := machine.next_calls(time.perf_counter()):
        try:
            outcomes = await _calls(calls, backend_for)
        except BaseException:
            machine.cancel()  # our own cancellation: the calls out give their cooldown slots back
            raise
        machine.receive(outcomes)


async def _calls(calls: Sequence[Call], backend_for: Callable[[str], Backend]) -> list[tuple[BackendResponse, int]]:
    if len(calls) == 1:
        call = calls[0]
        return [await call_backend(backend_for(call.backend), call.request, call.timeout_s)]
    import asyncio

    return list(await asyncio.gather(*(call_backend(backend_for(c.backend), c.request, c.timeout_s) for c in calls)))


def drive_blocking(machine: Fallback, backend_for: Callable[[str], Backend]) -> None:
    """:func:`drive` without an event loop (the one-shot CLI): one call at a time with
    :func:`call_backend_blocking`; a batch (the fused strategy) on an event loop of its own."""
    while calls := machine.next_calls(time.perf_counter()):
        try:
            if len(calls) == 1:
                call = calls[0]
                outcomes = [call_backend_blocking(backend_for(call.backend), call.request, call.timeout_s)]
            else:
                outcomes = run_on_new_loop(_calls(calls, backend_for))
        except BaseException:
            machine.cancel()
            raise
        machine.receive(outcomes)
