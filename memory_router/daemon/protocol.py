"""The daemon's JSON-lines request format, parsed strictly and without ever raising past
:class:`BadRequest`.

One request per line, UTF-8 JSON::

    {"id": 7, "query": "what did we decide about the schema", "timeout_ms": 2000, "limit": 5}
    {"id": "a", "query": "auth", "explain": true}      # the dry-run plan, no backend called
    "database"                                          # a bare string is a query (id null)
    {"id": 9, "query": "the house", "scope": {"agent": "bob", "session_key": "agent:bob:main"}}
    {"id": 8, "op": "stats"}                            # counters
    {"id": 10, "query": "auth", "min_relevance": 0.3, "max_chars": 2000}  # floor and budget (core/trim.py)
    {"id": 11, "query": "the deploy", "since": "yesterday"}  # a time window (core/window.py)

``id`` may be any JSON value and is echoed untouched (integers beyond 64 bits digit for digit).
Unknown keys are refused (a misspelt ``timout_ms`` would otherwise be silently ignored), as in
router-config.json. ``scope`` (whose memory the query may read: :mod:`memory_router.core.scope`)
is checked here, once: a bad one is refused with ``INVALID_SCOPE``.
"""

from __future__ import annotations

from typing import Any

import orjson
import regex

from memory_router import contract
from memory_router.contract import INVALID_UTF8 as INVALID_UTF8  # the CLI's code for undecodable input too
from memory_router.contract import MAX_CHARS_LIMIT
from memory_router.core.errors import InvalidQuery
from memory_router.core.frozen import Frozen
from memory_router.core.scope import Scope, scope_from_wire
from memory_router.core.window import Window, window_from_wire

# Error codes of protocol-level failures (the line never reached the router; memory_router.contract's rows).
INVALID_REQUEST = contract.INVALID_REQUEST  # valid JSON, wrong shape: no query, unknown key, bad value
INVALID_JSON = contract.INVALID_JSON
REQUEST_TOO_LARGE = contract.REQUEST_TOO_LARGE

OPS = ("query", "stats")
# Keys a request object may carry. A transport that needs more (a protocol version, say) adds
# them here and reads them from the parsed request's ``extra``.
KNOWN_KEYS: set[str] = {
    "id",
    "op",
    "query",
    "timeout_ms",
    "limit",
    "deadline_ms",
    "explain",
    "scope",
    "min_relevance",
    "max_chars",
    "since",
    "until",
}
# The request's own fields; keys a transport adds later to KNOWN_KEYS go to ``extra``.
_CORE_KEYS = frozenset(KNOWN_KEYS)
_INT_LIMITS = {"timeout_ms": 600_000, "limit": 1000, "deadline_ms": 3_600_000, "max_chars": MAX_CHARS_LIMIT}

# For a line too large (or too broken) to parse: recover an id written first, {"id": 12, ...}.
_LEADING_ID = regex.compile(rb'^\s*\{\s*"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\\x00-\x1f]|\\.){0,200}")\s*[,}]')


class Request(Frozen):
    id: Any
    op: str = "query"
    query: str | None = None
    timeout_ms: int | None = None
    limit: int | None = None
    deadline_ms: int | None = None
    explain: bool = False
    extra: dict[str, Any] | None = None
    scope: Scope | None = None
    min_relevance: float | None = None
    max_chars: int | None = None
    window: Window | None = None


class BadRequest(Exception):
    """A line that cannot be served; ``id`` is the request's id when it could be read."""

    def __init__(self, code: str, message: str, id: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.id = code, message, id


def sniff_id(prefix: bytes) -> Any:
    """The id of a request whose line cannot be parsed, if it is the object's first key."""
    m = _LEADING_ID.match(prefix[:512])
    if not m:
        return None
    try:
        return orjson.loads(m.group(1))
    except orjson.JSONDecodeError:
        return None


def parse_line(line: bytes, max_bytes: int) -> Request:
    """One line (without its newline) -> :class:`Request`, or raise :class:`BadRequest`."""
    if len(line) > max_bytes:
        raise BadRequest(
            REQUEST_TOO_LARGE,
            f"the request line is {len(line)} bytes; the limit is {max_bytes} (serve --max-line-bytes)",
            sniff_id(line),
        )
    if not line.strip():
        raise BadRequest(INVALID_REQUEST, 'empty line; send {"id": ..., "query": "..."} or a JSON string')
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise BadRequest(
                INVALID_UTF8,
                f"the request is not valid UTF-8 (byte {bad.start}); send UTF-8 JSON",
                _id_despite_bad_utf8(line),
            ) from None
        raise BadRequest(
            INVALID_JSON, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", sniff_id(line)
        ) from None
    if isinstance(data, dict) and _has_float(data.get("id")):
        data["id"] = _exact_id(line, data["id"])
    return parse_request(data)


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False


def _exact_id(line: bytes, parsed: Any) -> Any:
    """The id with its integers exactly as written. orjson reads an integer beyond 64 bits as a
    float (and cannot write such an int back), so those are kept as the request's own digits
    (an ``orjson.Fragment``, written out verbatim). Rare: only ids holding a number with a
    fraction, an exponent or more than 64 bits get here."""
    import json

    def integer(digits: str) -> Any:
        value = int(digits)
        return value if -(1 << 63) <= value < (1 << 64) else orjson.Fragment(digits)

    try:
        data = json.loads(line, parse_int=integer)
    except ValueError:  # e.g. more digits than int() accepts: keep what orjson read
        return parsed
    return data.get("id", parsed) if isinstance(data, dict) else parsed


def _id_despite_bad_utf8(line: bytes) -> Any:
    try:
        data = orjson.loads(line.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        return sniff_id(line)
    return data.get("id") if isinstance(data, dict) else None


def parse_request(data: object) -> Request:  # noqa: C901 - one check per request field, each with its own error
    """A parsed JSON value -> :class:`Request`, or raise :class:`BadRequest`."""
    if isinstance(data, str):
        return Request(id=None, query=data)
    if not isinstance(data, dict):
        raise BadRequest(
            INVALID_REQUEST,
            f'a request is a JSON object {{"id": ..., "query": "..."}} or a JSON string, got {_json_type(data)}',
        )
    rid = data.get("id")
    unknown = sorted(k for k in data if k not in KNOWN_KEYS)
    if unknown:
        raise BadRequest(INVALID_REQUEST, f"unknown key {unknown[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})", rid)
    op = data.get("op", "query")
    if op not in OPS:
        raise BadRequest(INVALID_REQUEST, f"unknown op {op!r}; use one of: {', '.join(OPS)}", rid)
    if op == "stats":
        return Request(id=rid, op="stats")
    query = data.get("query")
    if query is None:
        raise BadRequest(INVALID_REQUEST, 'no "query": send {"id": ..., "query": "what to search for"}', rid)
    if not isinstance(query, str):
        raise BadRequest(INVALID_REQUEST, f'"query" must be a string, got {_json_type(query)}', rid)
    ints: dict[str, int | None] = {}
    for key, high in _INT_LIMITS.items():
        value = data.get(key)
        if value is not None and (type(value) is not int or not 1 <= value <= high):
            raise BadRequest(INVALID_REQUEST, f'"{key}" must be an integer from 1 to {high}, got {_short(value)}', rid)
        ints[key] = value
    floor = data.get("min_relevance")
    if floor is not None and (type(floor) not in (int, float) or not 0 <= floor <= 1):
        raise BadRequest(INVALID_REQUEST, f'"min_relevance" must be a number from 0 to 1, got {_short(floor)}', rid)
    explain = data.get("explain", False)
    if type(explain) is not bool:
        raise BadRequest(INVALID_REQUEST, f'"explain" must be true or false, got {_short(explain)}', rid)
    try:
        scope = scope_from_wire(data.get("scope"))
        window = window_from_wire(data.get("since"), data.get("until"))
    except InvalidQuery as exc:
        raise BadRequest(exc.error_code, str(exc), rid) from None
    extra = {k: v for k, v in data.items() if k not in _CORE_KEYS} or None
    return Request(
        id=rid,
        op="query",
        query=query,
        explain=explain,
        extra=extra,
        scope=scope,
        window=window,
        min_relevance=None if floor is None else float(floor),
        **ints,
    )


def _json_type(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _short(value: object) -> str:
    return orjson.dumps(value).decode()[:60]
