"""One Router, both drivers: ``route`` and ``route_blocking`` (and ``plan``/``plan_blocking``) are
one path written once, so the same Router gives the same envelope and writes the same router.log
lines through either, for every kind of outcome.

The property test in tests/faults/test_faults_properties.py compares the drivers over generated
chains, each driver on its own Router; here each outcome kind is named, and both drivers run on
the *same* Router and the same backend instances. The backends are in-process test doubles
(``backends/mock.py``): ``BlockingMockBackend`` (a ``BlockingAdapter``: its async ``search`` is the
seam's, over its ``search_blocking``) and the async-only ``MockBackend`` (which the blocking driver
runs on an event loop of its own).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.mock import BlockingMockBackend, Handler, MockBackend, answer, fail, hang
from memory_router.config.installed import Installed, parse_installed
from memory_router.config.router_config import parse_config
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import Envelope
from memory_router.core.errors import InvalidQuery
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

# Instant outcomes answer far inside the config's timeout, even on a loaded machine (at 100 ms a
# blocking adapter's raise in its first pool thread was once timed out); a hang is cut at HANG_MS.
TIMEOUT_MS = 2000
HANG_MS = 100
QUERY = "where is the auth middleware"


def raising(request: BackendRequest) -> BackendResponse:
    raise KeyError("adapter bug")


def timing_out(request: BackendRequest) -> BackendResponse:
    raise TimeoutError("the adapter's own client timed out")  # a timeout, whichever driver sees it


class NotAContract:
    """What a buggy adapter might return: no BackendResponse (``replace`` only so that the mock
    can stamp its name on it as on any answer)."""

    def replace(self, **changes: Any) -> NotAContract:
        return self


def not_a_contract(request: BackendRequest) -> Any:
    return NotAContract()


# name: (the two backends' handlers, route options, expected status, the first attempt's
# error_code, expected router.log line kinds)
OUTCOMES: dict[str, tuple[tuple[Handler, Handler], dict[str, int], str, str | None, list[str]]] = {
    "success": ((answer(0.9), answer(0.8)), {}, "success", None, []),
    "fallback after an error": (
        (fail("BACKEND_ERROR", "exit 1"), answer(0.8)),
        {},
        "success",
        "BACKEND_ERROR",
        ["FALLBACK"],
    ),
    "fallback after a timeout": (
        (hang(), answer(0.8)),
        {"timeout_ms": HANG_MS},
        "success",
        "QUERY_TIMEOUT",
        ["TIMEOUT"],
    ),
    "adapter raises": ((raising, answer(0.8)), {}, "success", "BACKEND_ERROR", ["FALLBACK"]),
    "adapter raises TimeoutError": ((timing_out, answer(0.8)), {}, "success", "QUERY_TIMEOUT", ["TIMEOUT"]),
    "not a contract": ((not_a_contract, answer(0.8)), {}, "success", "BACKEND_ERROR", ["FALLBACK"]),
    "partial": ((answer(0.2), answer(0.3, 0.1)), {}, "partial", None, []),
    "empty": ((answer(), answer()), {}, "empty", None, []),
    "all failed": ((fail("BACKEND_UNAVAILABLE", "gone"), fail()), {}, "error", "BACKEND_UNAVAILABLE", ["FALLBACK"] * 2),
    "deadline exceeded": ((hang(), answer(0.9)), {"deadline_ms": 60}, "error", "DEADLINE_EXCEEDED", ["TIMEOUT"]),
}

KINDS: dict[str, Callable[[str, Handler], MockBackend]] = {
    "blocking adapter": lambda name, handler: BlockingMockBackend(name, handler),
    "async only": lambda name, handler: MockBackend(name, handler),
}


def make_router(tmp_path: Path, backends: dict[str, MockBackend]) -> tuple[Router, Installed]:
    data = {
        "timeout_ms": TIMEOUT_MS,
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": n} for n in backends]}],
        "backends": {n: {"type": "command", "argv": ["unused"]} for n in backends},
    }
    config = parse_config(data, tmp_path / "router-config.json")
    state = tmp_path / "state"
    router = Router(
        config, context=BackendContext(state_dir=state), log=RouterLog(state / "router.log"), backends=backends
    )
    return router, parse_installed({"backends": list(backends)}, tmp_path / "backends.json")


def both_ways(
    router: Router,
    installed: Installed,
    query: str,
    *,
    timeout_ms: int | None = None,
    limit: int | None = None,
    deadline_ms: int | None = None,
) -> dict[str, tuple[dict, list[str]]]:
    """The envelope (minus durations) and the router.log lines (minus time stamp and duration) of
    ``query`` through each driver of the same Router."""
    log = router.log.path
    assert log is not None
    seen = {}
    for driver in ("async", "blocking"):
        log.unlink(missing_ok=True)
        if driver == "async":
            envelope = asyncio.run(
                router.route(query, installed, timeout_ms=timeout_ms, limit=limit, deadline_ms=deadline_ms)
            )
        else:
            envelope = router.route_blocking(
                query, installed, timeout_ms=timeout_ms, limit=limit, deadline_ms=deadline_ms
            )
        text = log.read_text() if log.exists() else ""
        lines = [re.sub(r"duration_ms=\d+", "duration_ms=N", ln.split("] ", 1)[1]) for ln in text.splitlines()]
        seen[driver] = (_timeless(envelope), lines)
    return seen


def _timeless(envelope: Envelope) -> dict:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("duration_ms")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(envelope.as_dict())


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_both_routes_of_one_router_answer_alike(tmp_path: Path, outcome: str, kind: str) -> None:
    (first, second), options, status, first_error, log_kinds = OUTCOMES[outcome]
    make = KINDS[kind]
    router, installed = make_router(tmp_path, {"first": make("first", first), "second": make("second", second)})
    seen = both_ways(router, installed, QUERY, **options)
    (envelope, lines) = seen["async"]
    assert envelope["status"] == status, envelope
    assert envelope["attempts"][0]["error_code"] == first_error
    if outcome == "not a contract":
        assert envelope["attempts"][0]["error_message"] == "adapter returned NotAContract, not a BackendResponse"
    assert [ln.split(" ", 1)[0] for ln in lines] == log_kinds
    assert seen["blocking"] == seen["async"]


def test_a_backend_cooling_down_is_skipped_alike(tmp_path: Path) -> None:
    backends: dict[str, MockBackend] = {"first": BlockingMockBackend("first", answer(0.9))}
    backends["second"] = MockBackend("second", answer(0.8))
    router, installed = make_router(tmp_path, backends)
    envelopes = {}
    for driver in ("async", "blocking"):
        router.cooldown = Cooldown(failures=1, seconds=30, clock=lambda: 0.0)  # each driver: the same state
        router.cooldown.record("first", True, "BACKEND_ERROR", "down")
        if driver == "async":
            envelopes[driver] = _timeless(asyncio.run(router.route(QUERY, installed)))
        else:
            envelopes[driver] = _timeless(router.route_blocking(QUERY, installed))
    assert [a["error_code"] for a in envelopes["async"]["attempts"]] == ["COOLDOWN", None]
    assert envelopes["blocking"] == envelopes["async"]
    assert not backends["first"].requests  # skipped both times, never called


@pytest.mark.parametrize(
    ("query", "installed_names", "error_code"),
    [("   ", ["first", "second"], "EMPTY_QUERY"), (QUERY, [], "NO_BACKEND_AVAILABLE")],
)
def test_a_query_that_calls_no_backend_is_answered_alike(
    tmp_path: Path, query: str, installed_names: list[str], error_code: str
) -> None:
    backends: dict[str, MockBackend] = {n: BlockingMockBackend(n, answer(0.9)) for n in ("first", "second")}
    router, _ = make_router(tmp_path, backends)
    installed = parse_installed({"backends": installed_names}, tmp_path / "backends.json")
    seen = both_ways(router, installed, query)
    assert seen["async"][0]["error_code"] == error_code and seen["async"][1] == []
    assert seen["blocking"] == seen["async"]
    assert not any(b.requests for b in backends.values())


def test_plan_and_plan_blocking_give_the_same_plan_and_the_same_refusal(tmp_path: Path) -> None:
    backends: dict[str, MockBackend] = {n: MockBackend(n, answer(0.9)) for n in ("first", "second")}
    router, installed = make_router(tmp_path, backends)
    planned = asyncio.run(router.plan(QUERY, installed))
    assert planned.as_dict() == router.plan_blocking(QUERY, installed).as_dict()
    assert [s.backend for s in planned.steps] == ["first", "second"]
    refusals = []
    for run in (lambda: asyncio.run(router.plan("", installed)), lambda: router.plan_blocking("", installed)):
        with pytest.raises(InvalidQuery) as caught:
            run()
        refusals.append((caught.value.error_code, str(caught.value)))
    assert refusals[0] == refusals[1] and refusals[0][0] == "EMPTY_QUERY"
