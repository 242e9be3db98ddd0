"""The router envelope: the spec's fields in the spec's order, plus ``rule`` and ``attempts``.

``error_code`` and ``error_message`` are always present (``null`` unless ``status`` is
``error``) so consumers can read them without checking for the key.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from memory_router.backends.base import Result

from .attempts import DEADLINE_EXCEEDED, Attempt
from .plan import Plan

Status = Literal["success", "partial", "empty", "error"]

ALL_BACKENDS_FAILED = "ALL_BACKENDS_FAILED"
ALL_BACKENDS_FAILED_MESSAGE = (
    "All backends in the fallback chain failed. Check ~/.openclaw/state/router.log for details."
)
NO_BACKEND_AVAILABLE = "NO_BACKEND_AVAILABLE"


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True)

    query_echo: str
    routed_to: str | None
    routed_mode: str | None
    fallback_chain: list[str]
    fallbacks_used: int = Field(ge=0)
    results: list[Result]
    result_count: int = Field(ge=0)
    normalized_relevance: float = Field(ge=0.0, le=1.0)
    status: Status
    error_code: str | None = None
    error_message: str | None = None
    router_duration_ms: int = Field(ge=0)
    backend_duration_ms: int = Field(ge=0)
    rule: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = []

    def to_json(self, *, pretty: bool = False) -> bytes:
        option = orjson.OPT_INDENT_2 if pretty else 0
        return orjson.dumps(self.model_dump(mode="json"), option=option)


def from_attempts(
    query: str, plan: Plan, attempts: list[Attempt], router_ms: int, log_hint: str | None = None
) -> Envelope:
    """Decide the outcome of a routed query (the spec's Fallback Logic, steps 2-5)."""
    winner = next((a for a in attempts if a.accepted), None)
    if winner is not None:
        status: Status = "success"
    else:
        with_results = [a for a in attempts if a.response.results]
        if with_results:
            # Best across all attempts; the earliest wins a tie (it was planned first).
            winner = max(with_results, key=lambda a: a.response.normalized_relevance)
            status = "partial"
        elif attempts and all(a.failed for a in attempts):
            status = "error"
        else:
            status = "empty"
    rejected = sum(1 for a in attempts if not a.accepted)
    error_code = error_message = None
    if status == "error" and attempts[-1].response.error_code == DEADLINE_EXCEEDED:
        # The chain was stopped by the overall deadline, not exhausted: say so.
        error_code = DEADLINE_EXCEEDED
        error_message = (
            f"No backend answered before the query's deadline ({attempts[-1].response.error_message}). "
            "Raise deadline_ms, or see attempts for where the time went."
        )
    elif status == "error":
        error_code = ALL_BACKENDS_FAILED
        error_message = (
            ALL_BACKENDS_FAILED_MESSAGE
            if log_hint is None
            else (f"All backends in the fallback chain failed. Check {log_hint} for details.")
        )
    response = winner.response if winner else None
    return Envelope.model_construct(
        query_echo=query,
        routed_to=winner.step.backend if winner else None,
        routed_mode=winner.step.mode if winner else None,
        fallback_chain=plan.fallback_chain,
        fallbacks_used=rejected,
        results=list(response.results) if response else [],
        result_count=response.result_count if response else 0,
        normalized_relevance=response.normalized_relevance if response else 0.0,
        status=status,
        error_code=error_code,
        error_message=error_message,
        router_duration_ms=max(router_ms, winner.duration_ms if winner else 0),
        backend_duration_ms=winner.duration_ms if winner else 0,
        rule=plan.match.as_dict(),
        attempts=[a.as_dict() for a in attempts],
    )


def error_envelope(
    query: str,
    code: str,
    message: str,
    *,
    plan: Plan | None = None,
    router_ms: int = 0,
) -> Envelope:
    """An envelope for a query the router could not dispatch at all (bad input, no backends)."""
    return Envelope.model_construct(
        query_echo=query,
        routed_to=None,
        routed_mode=None,
        fallback_chain=plan.fallback_chain if plan else [],
        fallbacks_used=0,
        results=[],
        result_count=0,
        normalized_relevance=0.0,
        status="error",
        error_code=code,
        error_message=message,
        router_duration_ms=router_ms,
        backend_duration_ms=0,
        rule=plan.match.as_dict() if plan else None,
        attempts=[],
    )
