"""The drivers of the fallback machine: each backend call made under the router's timeout.

:func:`call_backend` makes one call and never raises for a backend's problem: a call that outlives
its timeout is cancelled (the adapter's cleanup kills whatever it started) and answers
``QUERY_TIMEOUT``; an adapter that raises or returns something that is not a response answers
``BACKEND_ERROR``; an answer with more results than the request's limit is cut to it. Both
drivers' calls end in the same two functions: :func:`_failed` (what was raised, onto the
contract) and :func:`_settled` (what was returned, held to it).

Every decision (accept, move on, the deadline, cooldown, calibration, router.log) is the sans-IO
machine's, :class:`~memory_router.core.fallback.Fallback`. Two drivers carry out its calls.
:func:`drive` awaits each backend's ``search`` under an asyncio timeout (the daemon, ``serve``,
MCP). :func:`drive_blocking` runs a :class:`~memory_router.backends.base.BlockingBackend`'s search
in a thread and waits for it with a timeout, without an event loop: the one-shot CLI, where
importing asyncio would be a sixth of a cold query (README, *Cold start*); a backend that is only
async gets a fresh event loop for its one call. Both hand the machine the same
:class:`~memory_router.core.fallback.Outcome` for each call (tested): the answer, its time, the
query's time window applied (:func:`windowed`), and the calibration key the backend names for
the call's mode (:func:`~memory_router.backends.base.calibration_key`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memory_router.backends.base import (
    BACKEND_ERROR,
    QUERY_TIMEOUT,
    Backend,
    BackendRequest,
    BackendResponse,
    BlockingBackend,
    calibration_key,
)
from memory_router.core.fallback import Call, Fallback, Outcome

if TYPE_CHECKING:
    from memory_router.core.scope import Scope
    from memory_router.core.window import Window


_T = TypeVar("_T")


async def call_backend(backend: Backend, request: BackendRequest, timeout_s: float) -> tuple[BackendResponse, int]:
    """One backend call under the router's timeout; never raises (except our own cancellation)."""
    import asyncio

    started = time.perf_counter()
    scope = getattr(asyncio, "timeout", None)  # Python >= 3.11
    response: object
    try:
        if scope is not None:
            # A cancel scope in this task: wait_for would create a task per backend call (a third
            # of the router's own cost per query).
            async with scope(timeout_s):
                response = await backend.search(request)
        else:
            response = await asyncio.wait_for(backend.search(request), timeout_s)
    except asyncio.TimeoutError:  # Python 3.10's is not yet the built-in TimeoutError
        response = _failed(backend, request, timeout_s, TimeoutError())
    except Exception as exc:
        response = _failed(backend, request, timeout_s, exc)
    return _settled(backend, request, response, started)


def call_backend_blocking(backend: Backend, request: BackendRequest, timeout_s: float) -> tuple[BackendResponse, int]:
    """:func:`call_backend` without an event loop. A :class:`BlockingBackend` searches in a daemon
    thread while this one waits at most ``timeout_s``; on timeout its ``stop`` event is set and
    the thread is abandoned (it stops at its next check; a one-shot process does not wait for
    it). Any other backend gets a fresh event loop for this one call."""
    if not isinstance(backend, BlockingBackend):
        return run_on_new_loop(call_backend(backend, request, timeout_s))
    return _Search(backend, request).outcome(timeout_s)


class _Search:
    """One :class:`BlockingBackend` search started in a daemon thread; :meth:`outcome` waits for
    it. Apart so that a batch (``fill``, ``fuse``) starts every search first and then waits for
    each within its own timeout, still without an event loop."""

    def __init__(self, backend: Backend, request: BackendRequest) -> None:  # a BlockingBackend too
        self.backend, self.request = backend, request
        self.started = time.perf_counter()
        self.stop, self.done = threading.Event(), threading.Event()
        self.answered: list[object] = []
        self.raised: list[BaseException] = []
        threading.Thread(target=self._search, name=f"memory-router-{backend.name}", daemon=True).start()

    def _search(self) -> None:
        try:
            self.answered.append(cast(BlockingBackend, self.backend).search_blocking(self.request, self.stop))
        except BaseException as exc:  # handed to the waiting thread
            self.raised.append(exc)
        finally:
            self.done.set()

    def outcome(self, timeout_s: float) -> tuple[BackendResponse, int]:
        backend, request = self.backend, self.request
        response: object
        if not self.done.wait(max(0.0, timeout_s - (time.perf_counter() - self.started))):
            self.stop.set()
            response = _failed(backend, request, timeout_s, TimeoutError())
        elif self.raised:
            response = _failed(backend, request, timeout_s, self.raised[0])
        else:
            response = self.answered[0]
        return _settled(backend, request, response, self.started)


def _calls_blocking(
    calls: Sequence[Call], backend_for: Callable[[str], Backend], scope: Scope | None, window: Window | None = None
) -> list[tuple[BackendResponse, int]]:
    """A batch without an event loop when every backend in it can search blocking (the one-shot
    CLI's ``fill`` over Total Recall and Lossless imports no asyncio): each search starts in its
    thread, then each is waited for within its own timeout. Else one event loop for the batch."""
    backends = [backend_for(c.backend) for c in calls]
    if not all(isinstance(b, BlockingBackend) for b in backends):
        return run_on_new_loop(_calls(calls, backend_for, scope, window))
    searches = [_Search(b, _scoped(c.request, scope, window)) for b, c in zip(backends, calls, strict=True)]
    try:
        return [search.outcome(c.timeout_s) for search, c in zip(searches, calls, strict=True)]
    except BaseException:
        for search in searches:
            search.stop.set()  # our own interruption: every search stops at its next check
        raise


def _failed(backend: Backend, request: BackendRequest, timeout_s: float, exc: BaseException) -> BackendResponse:
    """What a call that raised answers, for both drivers: the one mapping from exception to
    contract. A timeout (the driver's, or a ``TimeoutError`` of the adapter's own) is
    ``QUERY_TIMEOUT``; any other ``Exception`` is an adapter bug, ``BACKEND_ERROR``, which must
    not take the router down. A ``BaseException`` (our own cancellation, ``KeyboardInterrupt``)
    is not the backend's answer: it is raised again."""
    if isinstance(exc, TimeoutError):
        message = f"no answer within {int(timeout_s * 1000)} ms"
        return BackendResponse.failure(backend.name, request.query, QUERY_TIMEOUT, message)
    if isinstance(exc, Exception):
        message = f"adapter raised {type(exc).__name__}: {exc}"
        return BackendResponse.failure(backend.name, request.query, BACKEND_ERROR, message)
    raise exc


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
            from memory_router.backends.common.threads import release_all

            release_all()  # adapters' own worker pools (Total Recall, Lossless): the same


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


async def drive(
    machine: Fallback,
    backend_for: Callable[[str], Backend],
    scope: Scope | None = None,
    window: Window | None = None,
) -> None:
    """Carry out a :class:`~memory_router.core.fallback.Fallback`'s calls on the running event
    loop, each awaited under its timeout with :func:`call_backend` (a batch concurrently): the
    daemon, ``serve``, MCP. ``scope``: the query's :class:`~memory_router.core.scope.Scope`, put on
    every call's request; ``window``: its :class:`~memory_router.core.window.Window`, put there too
    and applied to every answer before the machine sees it (:func:`outcomes`)."""
    while calls := machine.next_calls(time.perf_counter()):
        try:
            answered = outcomes(machine, calls, await _calls(calls, backend_for, scope, window), backend_for, window)
        except BaseException:
            machine.cancel()  # our own cancellation: the calls out give their cooldown slots back
            raise
        machine.receive(answered)


def _scoped(request: BackendRequest, scope: Scope | None, window: Window | None = None) -> BackendRequest:
    """The machine's request with the query's scope and window: the machine decides what to call
    and when, the scope and the window are the query's own and the same for every call, so the
    driver adds them."""
    if scope is None and window is None:
        return request
    return request.replace(scope=scope, window=window)


def outcomes(
    machine: Fallback,
    calls: Sequence[Call],
    answers: list[tuple[BackendResponse, int]],
    backend_for: Callable[[str], Backend],
    window: Window | None,
) -> list[Outcome]:
    """What the machine receives for a batch, from both drivers: each answer and its time, with
    the query's time window applied (:func:`windowed`) and, while the machine calibrates, the
    calibration key the call's backend names for its mode (the machine applies the map)."""
    keyed = machine.calibrating
    return [
        Outcome(response, elapsed, calibration_key(backend_for(call.backend), call.request.mode) if keyed else None)
        for call, (response, elapsed) in zip(calls, windowed(answers, window), strict=True)
    ]


def windowed(outcomes: list[tuple[BackendResponse, int]], window: Window | None) -> list[tuple[BackendResponse, int]]:
    """Each answer with only its results dated inside ``window`` (a backend that filtered before
    ranking has none to lose here), ``empty`` when none is left; the attempt's note says how many
    were dated outside the window and how many had no date."""
    if window is None:
        return outcomes
    from memory_router.core.window import in_window

    out = []
    for response, ms in outcomes:
        if response.status != "success":
            out.append((response, ms))
            continue
        kept, outside, undated = in_window(window, response.results)
        if outside or undated:
            said = f"time window: {outside} result(s) dated outside it and {undated} undated left out"
            response = response.replace(
                results=kept,
                result_count=len(kept),
                status="success" if kept else "empty",
                normalized_relevance=max((r.relevance for r in kept), default=0.0),
                note=f"{response.note}; {said}" if response.note else said,
            )
        out.append((response, ms))
    return out


async def _calls(
    calls: Sequence[Call],
    backend_for: Callable[[str], Backend],
    scope: Scope | None = None,
    window: Window | None = None,
) -> list[tuple[BackendResponse, int]]:
    if len(calls) == 1:
        call = calls[0]
        return [await call_backend(backend_for(call.backend), _scoped(call.request, scope, window), call.timeout_s)]
    import asyncio

    return list(
        await asyncio.gather(
            *(call_backend(backend_for(c.backend), _scoped(c.request, scope, window), c.timeout_s) for c in calls)
        )
    )


def drive_blocking(
    machine: Fallback,
    backend_for: Callable[[str], Backend],
    scope: Scope | None = None,
    window: Window | None = None,
) -> None:
    """:func:`drive` without an event loop (the one-shot CLI): one call at a time with
    :func:`call_backend_blocking`; a batch (``fill``, ``fuse``) in threads too when every backend
    in it can search blocking, else on an event loop of its own."""
    while calls := machine.next_calls(time.perf_counter()):
        try:
            if len(calls) == 1:
                call = calls[0]
                request = _scoped(call.request, scope, window)
                answers = [call_backend_blocking(backend_for(call.backend), request, call.timeout_s)]
            else:
                answers = _calls_blocking(calls, backend_for, scope, window)
            answered = outcomes(machine, calls, answers, backend_for, window)
        except BaseException:
            machine.cancel()
            raise
        machine.receive(answered)
