"""Attempts: the values the fallback machine (:mod:`.fallback`) decides with and records.

A :class:`Policy` is how one query walks its chain (the threshold an answer must reach, each
call's timeout, how many results, the deadline of the whole query); an :class:`Attempt` is one
step of the chain and what came of it, as the envelope's ``attempts`` shows it. ``COOLDOWN`` and
``DEADLINE_EXCEEDED`` are the router's own attempt codes: a step the machine did not call (its
backend cooling down, the deadline spent) or whose call the deadline cut short; no backend
answers them. Values only: the calls are made by the drivers in
:mod:`memory_router.routing.drivers`.
"""

from __future__ import annotations

from memory_router import contract
from memory_router.backends.base import BackendResponse
from memory_router.core.frozen import Frozen
from memory_router.core.rules import ChainStep

# Router-side attempt codes (never produced by a backend; rows in memory_router.contract.ERROR_CODES).
COOLDOWN = contract.COOLDOWN
DEADLINE_EXCEEDED = contract.DEADLINE_EXCEEDED


class Policy(Frozen):
    threshold: float
    timeout_s: float
    limit: int
    deadline_s: float | None  # overall budget for the whole query; None: no deadline

    def __init__(
        self, threshold: float = 0.4, timeout_s: float = 5.0, limit: int = 10, deadline_s: float | None = None
    ) -> None:
        # Slots set directly, not through the generic constructor: every query builds one, by
        # keyword, which the generic one binds ~3x slower than a written-out signature.
        setter = object.__setattr__
        setter(self, "threshold", threshold)
        setter(self, "timeout_s", timeout_s)
        setter(self, "limit", limit)
        setter(self, "deadline_s", deadline_s)


class Attempt(Frozen):
    step: ChainStep
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
