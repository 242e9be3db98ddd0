"""Envelope properties for arbitrary queries and arbitrary sequences of backend outcomes.

Chains of 1-5 in-process MockBackends (backends/mock.py) through the real Router: each step
answers (any relevances, possibly with a summary relevance that disagrees with its results),
answers empty, reports an error (with or without stray results), hangs past the timeout,
raises, or returns something that is not a contract at all.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendResponse, Result
from memory_router.backends.mock import BlockingMockBackend, MockBackend, answer, fail, hang
from memory_router.config.installed import parse_installed
from memory_router.config.router_config import parse_config
from memory_router.core.envelope import Envelope
from memory_router.core.query import normalise
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

from ..support.budget import examples
from ..support.faults import (
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
)

# An instant outcome must never reach the timeout: 30 ms let a loaded machine time out the first
# example's instant raise in the blocking driver (its thread started late: README's pytest, 2 CPUs).
TIMEOUT_MS = 100
# The two drivers must agree on every outcome, so an instant answer must never reach the timeout
# in one of them because a loaded machine was slow to schedule it (seen at load 12 on 2 CPUs).
DRIVERS_TIMEOUT_MS = 250
THRESHOLD = 0.4
EXAMPLES = examples(300)

relevance = st.floats(0, 1)
OUTCOME = st.one_of(
    st.tuples(st.just("answer"), st.lists(relevance, max_size=3)),
    st.tuples(st.just("answer_claiming"), st.tuples(st.lists(relevance, min_size=1, max_size=3), relevance)),
    st.tuples(
        st.just("fail"),
        st.sampled_from(
            [
                "BACKEND_ERROR",
                "BACKEND_UNAVAILABLE",
                "QUERY_TIMEOUT",
                "SOMETHING_ELSE",
                'X\n[2026-01-01T00:00:00Z] FALLBACK query="forged"',
            ]
        ),
    ),
    st.tuples(st.just("fail_with_results"), st.lists(relevance, min_size=1, max_size=2)),
    st.tuples(st.just("hang"), st.none()),
    st.tuples(st.just("raise"), st.sampled_from([ValueError, KeyError, RuntimeError])),
    st.tuples(st.just("not_a_contract"), st.sampled_from([None, {}, "ok", 42])),
    st.tuples(st.just("bad_relevance"), st.sampled_from([float("nan"), 1.5, -0.1, float("inf")])),
)
Outcome = tuple[str, Any]
"""One backend's behaviour as OUTCOME draws it: (kind, its argument)."""
QUERY = st.text(max_size=60) | st.sampled_from(["", "   ", "\x00", "auth middleware", "'''$(rm -rf ~)`x`\n\"q\""])

KINDS_SEEN: dict[str, int] = {}


def handler(outcome):  # noqa: C901 - a test double: one branch per outcome it plays
    kind, arg = outcome
    KINDS_SEEN[kind] = KINDS_SEEN.get(kind, 0) + 1
    if kind == "answer":
        return answer(*arg)
    if kind == "answer_claiming":
        results, claimed = arg

        def claiming(request):
            response = answer(*results)
            return _claim(response, request, claimed)

        return claiming
    if kind == "fail":
        return fail(arg, f"mock {arg}")
    if kind == "fail_with_results":

        def failing(request):
            hits = tuple(Result(content="stray", relevance=r, source="mock") for r in arg)
            failure = BackendResponse.failure("mock", request.query, "BACKEND_ERROR", "failed but sent results")
            return failure.replace(results=hits, result_count=len(hits), normalized_relevance=max(arg))

        return failing
    if kind == "bad_relevance":
        return lambda request: _claim(answer(0.9), request, arg)
    if kind == "hang":
        return hang()
    if kind == "raise":

        def raising(request):
            raise arg("adapter bug")

        return raising

    def garbage(request):
        return arg

    return garbage


async def _claim(handler_coro, request, claimed):
    response = await handler_coro(request)
    return response.replace(normalized_relevance=claimed)


def make_router(tmp: Path, outcomes: list[Outcome], *, blocking: bool = False, timeout_ms: int = TIMEOUT_MS) -> Router:
    names = [f"b{i}" for i in range(len(outcomes))]
    data = {
        "threshold": THRESHOLD,
        "timeout_ms": timeout_ms,
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": n} for n in names]}],
        "backends": {n: {"type": "command", "argv": ["unused"]} for n in names},
    }
    config = parse_config(data, tmp / "router-config.json")
    mocks = {}
    for name, outcome in zip(names, outcomes, strict=True):
        mock = (BlockingMockBackend if blocking else MockBackend)(name, handler(outcome))
        if outcome[0] == "not_a_contract":
            # MockBackend stamps the name with .replace(), which a non-contract lacks: call the raw handler.
            raw = handler(outcome)
            mock.search = _raw(raw)  # type: ignore[method-assign]
            mock.search_blocking = lambda request, stop, raw=raw: raw(request)  # type: ignore[attr-defined]
        mocks[name] = mock
    state = tmp / "state"
    return Router(config, context=BackendContext(state_dir=state), log=RouterLog(state / "router.log"), backends=mocks)


def _raw(fn):
    async def search(request):
        return fn(request)

    return search


def _route(tmp: Path, outcomes: list[Outcome], query: str, driver: str, timeout_ms: int = TIMEOUT_MS) -> Envelope:
    """The envelope of ``query`` through the daemon's driver (``async``: ``Router.route``) or the
    one-shot CLI's (``blocking``: ``Router.route_blocking``, no event loop)."""
    router = make_router(tmp, outcomes, blocking=driver == "blocking", timeout_ms=timeout_ms)
    installed = parse_installed({"backends": [f"b{i}" for i in range(len(outcomes))]}, tmp / "backends.json")
    if driver == "blocking":
        return router.route_blocking(query, installed)
    return asyncio.run(router.route(query, installed))


@pytest.mark.slow  # hundreds of generated examples: the slow tier (the fast one stays under 30 s)
@pytest.mark.parametrize("driver", ["async", "blocking"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(OUTCOME, min_size=1, max_size=5), QUERY)
def test_envelope_properties(
    tmp_path_factory: pytest.TempPathFactory, driver: str, outcomes: list[Outcome], query: str
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    env = _route(tmp, outcomes, query, driver)

    Envelope.from_dict(env.as_dict())  # the envelope validates: types, ranges, status literal
    assert env.query_echo == query
    attempts = env.attempts
    if not normalise(query):
        assert (env.status, env.error_code, attempts) == ("error", "EMPTY_QUERY", ())
        return
    accepted = [a for a in attempts if a["accepted"]]
    # Attempts stop at the first accepted one.
    assert len(accepted) <= 1 and (not accepted or attempts[-1] is accepted[0])
    assert len(attempts) == (len(outcomes) if not accepted else attempts.index(accepted[0]) + 1)
    # status success iff some attempt was accepted ...
    assert (env.status == "success") == bool(accepted)
    # ... partial iff nothing was accepted but some attempt returned results ...
    assert (env.status == "partial") == (not accepted and any(a["result_count"] for a in attempts))
    # ... error iff every attempt errored (and then the chain is exhausted).
    assert (env.status == "error") == all(a["status"] == "error" for a in attempts)
    if env.status == "error":
        assert env.error_code == "ALL_BACKENDS_FAILED" and env.results == ()
    # An error attempt never contributes results.
    assert all(a["result_count"] == 0 for a in attempts if a["status"] == "error")
    assert env.fallbacks_used == len(attempts) - len(accepted)
    assert env.router_duration_ms >= env.backend_duration_ms
    assert env.result_count == len(env.results)
    # routed_to is the backend whose results are returned.
    if env.routed_to is None:
        assert env.results == () and env.status in ("empty", "error") and env.backend_duration_ms == 0
    else:
        winner = (
            accepted[0]
            if accepted
            else max((a for a in attempts if a["result_count"]), key=lambda a: a["normalized_relevance"])
        )
        assert env.routed_to == winner["backend"]
        assert env.result_count == winner["result_count"] and env.normalized_relevance == winner["normalized_relevance"]
        assert env.backend_duration_ms == winner["duration_ms"]
        assert all(r.content.startswith("hit ") for r in env.results)
    # Contract violations by an in-process adapter are BACKEND_ERRORs, not crashes.
    for a, outcome in zip(attempts, outcomes, strict=False):
        if outcome[0] in ("raise", "not_a_contract", "bad_relevance"):
            assert a["status"] == "error" and a["error_code"] == "BACKEND_ERROR"
    # Hangs are cut at the timeout (the hang never ends, so any bound shows the cut; the slack is
    # for a loaded CI machine, speed lives in bench/); every error or timeout is one log line.
    for a, outcome in zip(attempts, outcomes, strict=False):
        if outcome[0] == "hang":
            assert a["error_code"] == "QUERY_TIMEOUT" and a["duration_ms"] < TIMEOUT_MS + 2000
    log = tmp / "state" / "router.log"
    lines = log.read_text().splitlines() if log.exists() else []
    assert len(lines) == sum(a["status"] == "error" for a in attempts)
    assert all(line.split("] ", 1)[1].startswith(("FALLBACK ", "TIMEOUT ")) for line in lines)


def _timeless(value):
    """An envelope's dict minus its wall-clock durations (the only thing two drivers may differ in)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if not k.endswith("duration_ms")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


@pytest.mark.slow  # hundreds of generated examples: the slow tier (the fast one stays under 30 s)
@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(OUTCOME, min_size=1, max_size=5), QUERY)
def test_the_one_shot_driver_answers_exactly_as_the_daemons(
    tmp_path_factory: pytest.TempPathFactory, outcomes: list[Outcome], query: str
) -> None:
    """Same outcomes, same envelope and the same router.log lines: the CLI's blocking driver and
    the daemon's async one carry out one fallback machine (fallback.Fallback) and differ only in
    how a call is made and timed out."""
    tmp = tmp_path_factory.mktemp("drivers")  # one state dir: envelopes name their router.log
    log = tmp / "state" / "router.log"
    by_driver, lines = {}, {}
    for driver in ("async", "blocking"):
        log.unlink(missing_ok=True)
        by_driver[driver] = _route(tmp, outcomes, query, driver, DRIVERS_TIMEOUT_MS)
        # A line minus its time stamp and measured duration (the only things two drivers may differ in).
        text = log.read_text() if log.exists() else ""
        lines[driver] = [re.sub(r"duration_ms=\d+", "duration_ms=N", ln.split("] ", 1)[1]) for ln in text.splitlines()]
    assert _timeless(by_driver["blocking"].as_dict()) == _timeless(by_driver["async"].as_dict())
    assert lines["blocking"] == lines["async"]


@pytest.mark.slow  # runs after test_envelope_properties, in its tier
def test_every_outcome_kind_was_exercised() -> None:
    """Runs after the property (file order): the strategy really produced every kind of outcome."""
    if not KINDS_SEEN:
        pytest.skip("runs after test_envelope_properties in the same session")
    kinds = {
        "answer",
        "answer_claiming",
        "fail",
        "fail_with_results",
        "hang",
        "raise",
        "not_a_contract",
        "bad_relevance",
    }
    assert kinds <= set(KINDS_SEEN), KINDS_SEEN
    report(
        "properties",
        "envelope",
        property="envelope properties (success/partial/empty/error, fallbacks_used, routed_to, durations, log lines)",
        examples=EXAMPLES,
        outcomes=", ".join(f"{k} x{v}" for k, v in sorted(KINDS_SEEN.items())),
        result="held",
    )
