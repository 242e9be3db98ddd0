"""Attempts: walk the plan, calling one backend at a time, until one is good enough.

An attempt is accepted iff its status is ``success`` and its ``normalized_relevance`` reaches the
threshold. Anything else moves on to the next step: an ``error`` logs a FALLBACK line, a call
that outlives ``timeout_ms`` is cancelled (the adapter's cleanup kills whatever it started),
recorded as ``QUERY_TIMEOUT`` and logs a TIMEOUT line. Low relevance and ``empty`` move on
quietly, as the spec says.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from memory_router.backends.base import (
    BACKEND_ERROR,
    QUERY_TIMEOUT,
    Backend,
    BackendRequest,
    BackendResponse,
)

from .plan import Plan
from .routerlog import RouterLog
from .rules import Step


@dataclass(frozen=True, slots=True)
class Policy:
    threshold: float = 0.4
    timeout_s: float = 5.0
    limit: int = 10


@dataclass(frozen=True, slots=True)
class Attempt:
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
        }


async def call_backend(backend: Backend, request: BackendRequest, timeout_s: float) -> tuple[BackendResponse, int]:
    """One backend call under the router's timeout; never raises (except our own cancellation)."""
    started = time.perf_counter()
    try:
        response = await asyncio.wait_for(backend.search(request), timeout_s)
    except asyncio.TimeoutError:
        response = BackendResponse.failure(
            backend.name, request.query, QUERY_TIMEOUT, f"no answer within {int(timeout_s * 1000)} ms"
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # an adapter bug must not take the router down
        response = BackendResponse.failure(
            backend.name, request.query, BACKEND_ERROR, f"adapter raised {type(exc).__name__}: {exc}"
        )
    elapsed = int((time.perf_counter() - started) * 1000)
    response = _sane(backend.name, request.query, response)
    if response.status == "success" and not response.results:
        response = response.model_copy(update={"status": "empty", "normalized_relevance": 0.0})
    return response, elapsed


def _sane(name: str, query: str, response: object) -> BackendResponse:
    """Hold in-process adapters to the contract, as the command adapter holds programs: a value
    that is not a response, or a relevance outside 0..1, is an adapter bug (BACKEND_ERROR), and an
    ``error`` response carries no results (so a failed call can never be returned as ``partial``)."""
    if not isinstance(response, BackendResponse):
        return BackendResponse.failure(
            name, query, BACKEND_ERROR, f"adapter returned {type(response).__name__}, not a BackendResponse")
    if not 0.0 <= response.normalized_relevance <= 1.0:  # also catches NaN
        return BackendResponse.failure(
            name, query, BACKEND_ERROR, f"adapter returned normalized_relevance {response.normalized_relevance!r}, outside 0..1")
    if response.status == "error" and response.results:
        return response.model_copy(update={"results": (), "result_count": 0, "normalized_relevance": 0.0})
    return response


async def run_attempts(
    query: str,
    plan: Plan,
    backend_for: Callable[[str], Backend],
    policy: Policy,
    log: RouterLog,
    *,
    log_query: str | None = None,
) -> list[Attempt]:
    attempts: list[Attempt] = []
    steps = plan.steps
    for index, step in enumerate(steps):
        request = BackendRequest(query=query, mode=step.mode, limit=policy.limit, timeout_s=policy.timeout_s,
                                 signal=plan.match.signal)
        response, elapsed = await call_backend(backend_for(step.backend), request, policy.timeout_s)
        accepted = response.status == "success" and response.normalized_relevance >= policy.threshold
        attempts.append(Attempt(step, response, elapsed, accepted))
        if accepted:
            break
        if response.status == "error":
            next_backend = steps[index + 1].backend if index + 1 < len(steps) else None
            shown = log_query if log_query is not None else query
            if response.error_code == QUERY_TIMEOUT:
                log.timeout(shown, step.backend, elapsed, next_backend)
            else:
                log.fallback(shown, step.backend, response.error_code or BACKEND_ERROR,
                             response.error_message or "", next_backend)
    return attempts
