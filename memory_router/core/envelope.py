"""The router envelope: the spec's fields in the spec's order, plus ``rule`` and ``attempts``.

``error_code`` and ``error_message`` are always present (``null`` unless ``status`` is
``error``) so consumers can read them without checking for the key.
"""

from __future__ import annotations

from typing import Any, Literal

from memory_router import contract
from memory_router.backends.base import Result, check_relevance
from memory_router.core.frozen import Frozen
from memory_router.core.plan import Plan
from memory_router.output.jsonout import dumps

Status = Literal["success", "partial", "empty", "error"]

ALL_BACKENDS_FAILED = contract.ALL_BACKENDS_FAILED
ALL_BACKENDS_FAILED_MESSAGE = (
    "All backends in the fallback chain failed. Check ~/.openclaw/state/router.log for details."
)
NO_BACKEND_AVAILABLE = contract.NO_BACKEND_AVAILABLE


STATUSES: tuple[Status, ...] = ("success", "partial", "empty", "error")


class InvalidEnvelope(ValueError):
    """JSON that is not a router envelope; the message names the field and quotes the value."""


# The envelope's fields in the spec's order, each with whether from_dict requires it (the others
# have defaults in Envelope.__init__), kept in the contract with the error envelope the thin
# client prints; Envelope's annotations declare the same fields in the same order (a test holds
# the two equal).
FIELDS = contract.ENVELOPE_FIELDS
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FIELDS)
# Written only when set (a relevance floor or a character budget changed the answer: core/trim.py;
# a time window was asked: core/window.py).
OPTIONAL_FIELDS: tuple[str, ...] = contract.OPTIONAL_ENVELOPE_FIELDS


class Envelope(Frozen):
    """The spec's fields in the spec's order (the JSON keeps it), then ``rule`` and ``attempts``.

    A :class:`~memory_router.core.frozen.Frozen` value (the one idiom for values: see there)
    serialised as orjson writes :meth:`as_dict` (:mod:`memory_router.output.jsonout`, without
    importing orjson on a cold query), not a pydantic model: a cold CLI query would spend more
    time importing pydantic than routing (docs/benchmarks.md, *Cold start*). Immutable
    (change one with :meth:`replace`): the lists of the JSON are tuples here (a list given is
    copied into one); ``rule`` and each attempt stay dicts, the JSON objects they are. Equal by its
    fields and hashed by them (so not while ``rule`` or an attempt is set); built unchecked from
    the router's own values, while :meth:`from_dict` is the strict reader for envelopes that come
    back as JSON (tests, clients)."""

    query_echo: str
    routed_to: str | None
    routed_mode: str | None
    fallback_chain: tuple[str, ...]
    fallbacks_used: int
    results: tuple[Result, ...]
    result_count: int
    normalized_relevance: float
    status: Status
    error_code: str | None
    error_message: str | None
    router_duration_ms: int
    backend_duration_ms: int
    rule: dict[str, Any] | None
    attempts: tuple[dict[str, Any], ...]
    abstained: dict[str, Any] | None
    budget: dict[str, Any] | None
    window: dict[str, Any] | None

    def __init__(
        self,
        query_echo: str,
        routed_to: str | None,
        routed_mode: str | None,
        fallback_chain: tuple[str, ...] | list[str],
        fallbacks_used: int,
        results: tuple[Result, ...] | list[Result],
        result_count: int,
        normalized_relevance: float,
        status: Status,
        error_code: str | None = None,
        error_message: str | None = None,
        router_duration_ms: int = 0,
        backend_duration_ms: int = 0,
        rule: dict[str, Any] | None = None,
        attempts: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
        abstained: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
        window: dict[str, Any] | None = None,
    ) -> None:
        # Slots set directly, not through Frozen._init: every query builds one. The lists the
        # router builds become tuples, so the envelope cannot change under a caller.
        setter = object.__setattr__
        setter(self, "query_echo", query_echo)
        setter(self, "routed_to", routed_to)
        setter(self, "routed_mode", routed_mode)
        setter(self, "fallback_chain", fallback_chain if type(fallback_chain) is tuple else tuple(fallback_chain))
        setter(self, "fallbacks_used", fallbacks_used)
        setter(self, "results", results if type(results) is tuple else tuple(results))
        setter(self, "result_count", result_count)
        setter(self, "normalized_relevance", normalized_relevance)
        setter(self, "status", status)
        setter(self, "error_code", error_code)
        setter(self, "error_message", error_message)
        setter(self, "router_duration_ms", router_duration_ms)
        setter(self, "backend_duration_ms", backend_duration_ms)
        setter(self, "rule", rule)
        setter(self, "attempts", attempts if type(attempts) is tuple else tuple(attempts))
        setter(self, "abstained", abstained)
        setter(self, "budget", budget)
        setter(self, "window", window)

    def as_dict(self) -> dict[str, Any]:
        """The envelope as JSON-ready data, keys in the spec's order, then the optional fields
        that are set."""
        data: dict[str, Any] = {
            "query_echo": self.query_echo,
            "routed_to": self.routed_to,
            "routed_mode": self.routed_mode,
            "fallback_chain": list(self.fallback_chain),
            "fallbacks_used": self.fallbacks_used,
            "results": [r.as_dict() for r in self.results],
            "result_count": self.result_count,
            "normalized_relevance": self.normalized_relevance,
            "status": self.status,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "router_duration_ms": self.router_duration_ms,
            "backend_duration_ms": self.backend_duration_ms,
            "rule": self.rule,
            "attempts": list(self.attempts),
        }
        if self.abstained is not None:
            data["abstained"] = self.abstained
        if self.budget is not None:
            data["budget"] = self.budget
        if self.window is not None:
            data["window"] = self.window
        return data

    def to_json(self, *, pretty: bool = False) -> bytes:
        """orjson's bytes for :meth:`as_dict`, a name that is not UTF-8 written escaped; without
        importing orjson on a cold query (:func:`memory_router.output.jsonout.dumps`)."""
        return dumps(self.as_dict(), pretty=pretty)

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        """Read an envelope back from parsed JSON, checking every field: exactly the envelope's
        keys, their types, counts >= 0, relevances in 0..1, a known status, well-formed results.
        Raises :class:`InvalidEnvelope` naming the first bad field."""
        _check_shape(data)
        try:
            check_relevance("normalized_relevance", data["normalized_relevance"])
            results = [Result.from_dict(r) for r in data["results"]]
        except ValueError as exc:
            raise InvalidEnvelope(f"envelope: {exc}") from None
        return cls(**{**data, "results": results})


def _check_shape(data: Any) -> None:
    """Keys, JSON types, counts and the status of an envelope read back (not its results)."""
    if not isinstance(data, dict):
        raise InvalidEnvelope(f"an envelope is a JSON object, got {type(data).__name__}")
    unknown = [k for k in data if k not in _FIELD_TYPES]
    missing = [name for name, required in FIELDS if required and name not in data]
    if unknown or missing:
        raise InvalidEnvelope(f"envelope keys: unknown {unknown}, missing {missing}")
    for name, kinds in _FIELD_TYPES.items():
        if name in data and not _is(data[name], kinds):
            raise InvalidEnvelope(f"envelope field {name!r} has the wrong type: {data[name]!r}")
    for name in ("fallbacks_used", "result_count", "router_duration_ms", "backend_duration_ms"):
        if data.get(name, 0) < 0:
            raise InvalidEnvelope(f"envelope field {name!r} must be >= 0, got {data[name]!r}")
    if data["status"] not in STATUSES:
        raise InvalidEnvelope(f"envelope status must be one of {', '.join(STATUSES)}, got {data['status']!r}")
    if not all(isinstance(b, str) for b in data["fallback_chain"]):
        raise InvalidEnvelope(f"fallback_chain must list backend names, got {data['fallback_chain']!r}")
    if not all(isinstance(a, dict) for a in data.get("attempts", [])):
        raise InvalidEnvelope(f"attempts must be objects, got {data['attempts']!r}")


_NUMBER = (int, float)
# The JSON types of every Envelope field, in FIELDS' order then OPTIONAL_FIELDS' (a test holds them equal).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "query_echo": (str,),
    "routed_to": (str, type(None)),
    "routed_mode": (str, type(None)),
    "fallback_chain": (list,),
    "fallbacks_used": (int,),
    "results": (list,),
    "result_count": (int,),
    "normalized_relevance": _NUMBER,
    "status": (str,),
    "error_code": (str, type(None)),
    "error_message": (str, type(None)),
    "router_duration_ms": (int,),
    "backend_duration_ms": (int,),
    "rule": (dict, type(None)),
    "attempts": (list,),
    "abstained": (dict, type(None)),
    "budget": (dict, type(None)),
    "window": (dict, type(None)),
}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)


def error_envelope(
    query: str,
    code: str,
    message: str,
    *,
    plan: Plan | None = None,
    router_ms: int = 0,
) -> Envelope:
    """An envelope for a query the router could not dispatch at all (bad input, no backends)."""
    fields = contract.error_fields(
        query,
        code,
        message,
        fallback_chain=plan.fallback_chain if plan else None,
        rule=plan.match.as_dict() if plan else None,
        router_ms=router_ms,
    )
    return Envelope(**fields)
