"""Attempts: walk the plan, calling one backend at a time, until one is good enough.

An attempt is accepted iff its status is ``success`` and its ``normalized_relevance`` reaches the
threshold. Anything else moves on to the next step: an ``error`` logs a FALLBACK line, a call
that outlives ``timeout_ms`` is cancelled (the adapter's cleanup kills whatever it started),
recorded as ``QUERY_TIMEOUT`` and logs a TIMEOUT line. Low relevance and ``empty`` move on
quietly, as the spec says.

Two optional brakes, both off unless asked for (the one-shot CLI uses neither by default):

* an overall deadline (``Policy.deadline_s``): each call gets ``min(timeout, time left)``; when
  the time is up the chain stops with a ``DEADLINE_EXCEEDED`` attempt (the call that was cut, or
  the step that was not started) and the envelope is built from what was answered so far;
* a :class:`~memory_router.cooldown.Cooldown` (the daemon's): a backend (per search mode: qmd's
  ``search`` may work while ``vsearch`` has no model) that keeps failing is skipped with a
  ``COOLDOWN`` attempt instead of being called.

The walk itself (:func:`walk_attempts`) does no I/O: it yields each call to make and is sent
back its outcome. Two drivers make the calls. :func:`run_attempts` awaits each backend's
``search`` under an asyncio timeout (the daemon, ``serve``, MCP). :func:`run_attempts_blocking`
runs a :class:`~memory_router.backends.base.BlockingBackend`'s search in a thread and waits for it
with a timeout, without an event loop: the one-shot CLI, where importing asyncio would be a
sixth of a cold query (docs/benchmarks.md, *Cold start*); a backend that is only async gets a fresh event
loop for its one call. Both drivers build the same attempts from the same outcomes (tested).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, NamedTuple

from memory_router.backends.base import (
    BACKEND_ERROR,
    QUERY_TIMEOUT,
    Backend,
    BackendRequest,
    BackendResponse,
    BlockingBackend,
)

from .cooldown import Cooldown
from .plan import Plan
from .routerlog import RouterLog
from .rules import Step

# Router-side attempt codes (never produced by a backend).
COOLDOWN = "COOLDOWN"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"


class Policy(NamedTuple):
    threshold: float = 0.4
    timeout_s: float = 5.0
    limit: int = 10
    deadline_s: float | None = None  # overall budget for the whole query; None: no deadline
    started: float | None = None  # perf_counter() when the deadline began (None: when the chain starts)

    def deadline_at(self) -> float | None:
        """The ``time.perf_counter()`` by which the query must be done, or ``None``."""
        if self.deadline_s is None:
            return None
        return (self.started if self.started is not None else time.perf_counter()) + self.deadline_s


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


def run_on_new_loop(coro: Coroutine[Any, Any, Any]) -> Any:
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
            threads = sys.modules.get("memory_router.backends._threads")
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


# One call for a driver to make: the backend, the request and the timeout it is given.
Call = tuple[Backend, BackendRequest, float]
# Puts a step's answer on the one relevance scale (memory_router.calibration); pure, no I/O.
Calibrate = Callable[[Step, BackendResponse], BackendResponse]
Walk = Generator[Call, tuple[BackendResponse, int], list[Attempt]]


def walk_attempts(
    query: str,
    plan: Plan,
    backend_for: Callable[[str], Backend],
    policy: Policy,
    log: RouterLog,
    *,
    log_query: str | None = None,
    cooldown: Cooldown | None = None,
    calibrate: Calibrate | None = None,
) -> Walk:
    """The chain walk without I/O: yields each :data:`Call` and is sent back ``(response,
    elapsed ms)``; returns the attempts. An exception thrown in at a call (the caller's own
    cancellation) gives the cooldown slot back and propagates."""
    attempts: list[Attempt] = []
    steps = plan.steps
    shown = log_query if log_query is not None else query
    deadline = policy.deadline_at()
    for index, step in enumerate(steps):
        budget = _budget(policy, deadline)
        refused = _refused(step, query, policy, budget, cooldown)
        if refused is not None:
            attempts.append(refused)
            if budget is None:
                break
            continue
        assert budget is not None  # _refused answers for a spent deadline
        request = _request(query, step, policy, plan, budget[0])
        try:
            response, elapsed = yield (backend_for(step.backend), request, budget[0])
        except BaseException:
            if cooldown is not None:
                cooldown.release(step.health_key)
            raise
        response = _settle(step, response, policy, budget[1], calibrate, cooldown)
        accepted = response.status == "success" and response.normalized_relevance >= policy.threshold
        attempts.append(Attempt(step, response, elapsed, accepted))
        if accepted:
            break
        if response.status == "error" and _log_error(log, shown, steps, index, response, elapsed):
            break
    return attempts


def _refused(
    step: Step, query: str, policy: Policy, budget: tuple[float, bool] | None, cooldown: Cooldown | None
) -> Attempt | None:
    """The attempt of a step that is not called: the query's deadline is spent, or the backend is
    cooling down (its slot is taken otherwise: a call must follow)."""
    if budget is None:
        message = f"not tried: the query's {_ms(policy.deadline_s)} ms deadline was reached"
        return Attempt(step, BackendResponse.failure(step.backend, query, DEADLINE_EXCEEDED, message), 0, False)
    if cooldown is not None and (why := cooldown.admit(step.health_key)) is not None:
        return Attempt(step, BackendResponse.failure(step.backend, query, COOLDOWN, why), 0, False)
    return None


def _request(query: str, step: Step, policy: Policy, plan: Plan, timeout_s: float) -> BackendRequest:
    return BackendRequest(
        query=query, mode=step.mode, limit=policy.limit, timeout_s=timeout_s, signal=plan.match.signal
    )


def _settle(
    step: Step,
    response: BackendResponse,
    policy: Policy,
    cut_by_deadline: bool,
    calibrate: Calibrate | None,
    cooldown: Cooldown | None,
) -> BackendResponse:
    """A call's answer as the router judges it: a deadline's cut named, the relevance calibrated,
    and the outcome counted for the backend's cooldown."""
    if cut_by_deadline:
        response = _deadline_cut(response, policy)
    if calibrate is not None:
        response = calibrate(step, response)
    if cooldown is not None:
        _settle_cooldown(cooldown, step.health_key, response)
    return response


async def run_attempts(walk: Walk) -> list[Attempt]:
    """Drive a :func:`walk_attempts`, each call awaited with :func:`call_backend`."""
    try:
        call = next(walk)
        while True:
            try:
                outcome = await call_backend(*call)
            except BaseException as exc:
                walk.throw(exc)  # the walk releases its cooldown slot and re-raises
                raise  # pragma: no cover - throw() re-raised already
            call = walk.send(outcome)
    except StopIteration as done:
        return done.value


def run_attempts_blocking(walk: Walk) -> list[Attempt]:
    """Drive a :func:`walk_attempts`, each call made with :func:`call_backend_blocking`."""
    try:
        call = next(walk)
        while True:
            try:
                outcome = call_backend_blocking(*call)
            except BaseException as exc:
                walk.throw(exc)
                raise  # pragma: no cover - throw() re-raised already
            call = walk.send(outcome)
    except StopIteration as done:
        return done.value


def _budget(policy: Policy, deadline: float | None) -> tuple[float, bool] | None:
    """This attempt's timeout and whether the query's deadline cut it; ``None``: no time left."""
    if deadline is None:
        return policy.timeout_s, False
    left = deadline - time.perf_counter()
    if left <= 0:
        return None
    if left < policy.timeout_s:
        return left, True
    return policy.timeout_s, False


def _deadline_cut(response: BackendResponse, policy: Policy) -> BackendResponse:
    """A timeout that the query's deadline (not the backend's own timeout) imposed says so."""
    if response.error_code != QUERY_TIMEOUT:
        return response
    return response.replace(
        error_code=DEADLINE_EXCEEDED,
        error_message=f"cut short: the query's {_ms(policy.deadline_s)} ms deadline was reached",
    )


def _settle_cooldown(cooldown: Cooldown, health_key: str, response: BackendResponse) -> None:
    """Count the attempt's outcome for its backend (a deadline cut says nothing about its health)."""
    if response.error_code == DEADLINE_EXCEEDED:
        cooldown.release(health_key)
    else:
        cooldown.record(
            health_key, response.status == "error", response.error_code or BACKEND_ERROR, response.error_message or ""
        )


def _log_error(
    log: RouterLog, shown: str, steps: tuple[Step, ...], index: int, response: BackendResponse, elapsed: int
) -> bool:
    """Write the router.log line of the failed attempt ``steps[index]``; ``True``: the chain stops here
    (the query's deadline is spent)."""
    step = steps[index]
    if response.error_code == DEADLINE_EXCEEDED:
        log.timeout(shown, step.backend, elapsed, None)
        return True
    next_backend = steps[index + 1].backend if index + 1 < len(steps) else None
    if response.error_code == QUERY_TIMEOUT:
        log.timeout(shown, step.backend, elapsed, next_backend)
    else:
        log.fallback(
            shown, step.backend, response.error_code or BACKEND_ERROR, response.error_message or "", next_backend
        )
    return False


def _ms(seconds: float | None) -> int:
    return int(round((seconds or 0) * 1000))


async def fuse_attempts(
    query: str,
    plan: Plan,
    backend_for: Callable[[str], Backend],
    policy: Policy,
    log: RouterLog,
    *,
    log_query: str | None = None,
    cooldown: Cooldown | None = None,
    calibrate: Calibrate | None = None,
) -> list[Attempt]:
    """The fused strategy's calls (:mod:`.fuse`): every step at once, each under its timeout and
    the deadline, with the same cooldown, calibration and router.log lines as the walk. An
    attempt is ``accepted`` when it answered with results (it then takes part in the merge)."""
    import asyncio

    steps = plan.steps
    shown = log_query if log_query is not None else query
    budget = _budget(policy, policy.deadline_at())
    slots: list[Attempt | None] = [_refused(step, query, policy, budget, cooldown) for step in steps]
    calls = {
        index: call_backend(backend_for(step.backend), _request(query, step, policy, plan, budget[0]), budget[0])
        for index, step in enumerate(steps)
        if slots[index] is None and budget is not None
    }
    try:
        outcomes = await asyncio.gather(*calls.values())
    except BaseException:
        if cooldown is not None:
            for index in calls:
                cooldown.release(steps[index].health_key)
        raise
    for index, (response, elapsed) in zip(calls, outcomes, strict=True):
        step = steps[index]
        response = _settle(step, response, policy, budget is not None and budget[1], calibrate, cooldown)
        slots[index] = Attempt(step, response, elapsed, response.status == "success")
        if response.status == "error":
            _log_error(log, shown, steps, index, response, elapsed)
    return [attempt for attempt in slots if attempt is not None]
