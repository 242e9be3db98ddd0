"""Sequential fallback, statuses, fallbacks_used, timeouts and router.log (the spec's Fallback Logic)."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.mock import MockBackend, answer, fail, hang
from memory_router.core.envelope import Envelope
from memory_router.routing.routerlog import quote

from ..conftest import STARTER, installed, make_router
from ..support.budget import examples

DEFAULT_QUERY = "database"  # rule 7: qmd/query -> totalrecall
LOG_LINE = re.compile(
    r'^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] (FALLBACK|TIMEOUT) query="(?:[^"\\]|\\.)*" backend=\w+ .* next=\w+$'
)


def route(config, tmp_path, qmd, totalrecall, query=DEFAULT_QUERY, **kw):
    router = make_router(
        config, tmp_path, {"qmd": MockBackend("qmd", qmd), "totalrecall": MockBackend("totalrecall", totalrecall)}
    )
    return asyncio.run(router.route(query, installed(*STARTER), **kw)), router


def log_lines(tmp_path):
    path = tmp_path / "state" / "router.log"
    return path.read_text().splitlines() if path.exists() else []


def test_primary_accepted(config, tmp_path):
    env, router = route(config, tmp_path, answer(0.82, 0.5), answer(0.9))
    assert (env.status, env.routed_to, env.routed_mode, env.fallbacks_used) == ("success", "qmd", "query", 0)
    assert env.result_count == 2 and env.normalized_relevance == 0.82
    assert env.fallback_chain == ("qmd", "totalrecall")
    assert router.backend("totalrecall").requests == []  # never called
    assert log_lines(tmp_path) == []


def test_low_relevance_falls_back_quietly(config, tmp_path):
    env, _ = route(config, tmp_path, answer(0.39), answer(0.4))
    assert (env.status, env.routed_to, env.fallbacks_used, env.normalized_relevance) == (
        "success",
        "totalrecall",
        1,
        0.4,
    )
    assert log_lines(tmp_path) == []  # low relevance is not an error


def test_exhausted_chain_returns_best_as_partial(config, tmp_path):
    env, _ = route(config, tmp_path, answer(0.3), answer(0.1))
    assert (env.status, env.routed_to, env.routed_mode, env.fallbacks_used) == ("partial", "qmd", "query", 2)
    assert env.normalized_relevance == 0.3


def test_all_empty_is_empty_not_error(config, tmp_path):
    env, _ = route(config, tmp_path, answer(), answer())
    assert (env.status, env.routed_to, env.result_count, env.fallbacks_used, env.error_code) == (
        "empty",
        None,
        0,
        2,
        None,
    )


def test_error_then_empty_is_empty(config, tmp_path):
    env, _ = route(config, tmp_path, fail(), answer())
    assert env.status == "empty"


def test_error_then_weak_result_is_partial(config, tmp_path):
    env, _ = route(config, tmp_path, fail(), answer(0.2))
    assert (env.status, env.routed_to, env.fallbacks_used) == ("partial", "totalrecall", 2)


def test_every_backend_fails(config, tmp_path):
    env, _ = route(
        config,
        tmp_path,
        fail("BACKEND_ERROR", "Python process exited with code 1"),
        fail("BACKEND_UNAVAILABLE", "no root"),
    )
    assert env.status == "error" and env.error_code == "ALL_BACKENDS_FAILED"
    assert (
        env.error_message.startswith("All backends in the fallback chain failed. Check ")
        and "router.log" in env.error_message
    )
    assert (env.routed_to, env.results, env.fallbacks_used, env.backend_duration_ms) == (None, (), 2, 0)
    first, second = log_lines(tmp_path)
    assert first.endswith(
        'FALLBACK query="database" backend=qmd error_code=BACKEND_ERROR '
        'error_message="Python process exited with code 1" next=totalrecall'
    )
    assert second.endswith('backend=totalrecall error_code=BACKEND_UNAVAILABLE error_message="no root" next=none')
    assert all(LOG_LINE.match(line) for line in (first, second))


def test_hanging_backend_is_abandoned_at_the_timeout_and_the_next_answers(config, tmp_path):
    started = time.perf_counter()
    env, _ = route(config, tmp_path, hang(), answer(0.7), timeout_ms=300)
    elapsed = time.perf_counter() - started
    assert 0.3 <= elapsed < 0.4  # timeout + at most 100 ms
    assert (env.status, env.routed_to, env.fallbacks_used) == ("success", "totalrecall", 1)
    attempt = env.attempts[0]
    assert (attempt["error_code"], attempt["status"]) == ("QUERY_TIMEOUT", "error")
    assert 300 <= attempt["duration_ms"] < 400
    (line,) = log_lines(tmp_path)
    assert re.search(r'TIMEOUT query="database" backend=qmd duration_ms=3\d\d next=totalrecall$', line)


def test_adapter_exception_is_a_backend_error_not_a_crash(config, tmp_path):
    def boom(request: BackendRequest) -> BackendResponse:
        raise RuntimeError("bug in adapter")

    env, _ = route(config, tmp_path, boom, answer(0.9))
    assert env.routed_to == "totalrecall"
    assert env.attempts[0]["error_message"] == "adapter raised RuntimeError: bug in adapter"


def test_success_without_results_counts_as_empty(config, tmp_path):
    def liar(request):
        return BackendResponse(query_echo=request.query, status="success", backend="qmd", normalized_relevance=0.9)

    env, _ = route(config, tmp_path, liar, answer())
    assert env.attempts[0]["status"] == "empty" and env.status == "empty"


def test_backends_receive_the_normalised_query_and_the_echo_is_unchanged(config, tmp_path):
    env, router = route(config, tmp_path, answer(0.9), answer(), query="  auth\x00\nmiddleware\t")
    assert env.query_echo == "  auth\x00\nmiddleware\t"
    assert router.backend("qmd").requests[0].query == "auth middleware"


def test_no_usable_backend_in_chain(config, tmp_path):
    router = make_router(config, tmp_path, {})
    env = asyncio.run(router.route("how does auth relate to sessions", installed("lossless")))
    assert env.status == "error" and env.error_code == "NO_BACKEND_AVAILABLE"
    assert env.error_message is not None
    assert "cognee: not listed in backends.json" in env.error_message and env.fallback_chain == ()


@pytest.mark.parametrize(
    ("query", "code"), [("", "EMPTY_QUERY"), (" \n\t ", "EMPTY_QUERY"), ("x" * 5000, "QUERY_TOO_LONG")]
)
def test_bad_queries_get_error_envelopes(config, tmp_path, query, code):
    env, router = route(config, tmp_path, answer(0.9), answer(0.9), query=query)
    assert (env.status, env.error_code) == ("error", code)
    assert router.backend("qmd").requests == []


def test_log_escapes_quotes_and_newlines_so_one_event_is_one_line(config, tmp_path):
    query = 'say "hi"\n[2026-01-01T00:00:00Z] FALLBACK forged \\ line'
    route(config, tmp_path, fail("BACKEND_ERROR", 'bad "output"\nTraceback'), answer(0.9), query=query)
    (line,) = log_lines(tmp_path)
    assert 'query="say \\"hi\\"\\n[2026-01-01T00:00:00Z] FALLBACK forged \\\\ line"' in line
    assert 'error_message="bad \\"output\\"\\nTraceback"' in line


def test_log_file_is_private_and_its_directory_created(config, tmp_path):
    route(config, tmp_path, fail(), answer(0.9))
    path = tmp_path / "state" / "router.log"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_unwritable_log_warns_but_answers(config, tmp_path, capsys):
    (tmp_path / "state").write_text("a file where the state dir should be")
    env, _ = route(config, tmp_path, fail(), answer(0.9))
    assert env.status == "success"
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["plain", 'q"uote', "back\\slash", "new\nline", "nul\x00", "\u2028sep", "é ü"])
def test_quote_round_trips_to_a_single_line(value):
    quoted = quote(value)
    assert "\n" not in quoted and "\r" not in quoted and "\u2028" not in quoted
    assert quoted.startswith('"') and quoted.endswith('"') and re.fullmatch(r'"(?:[^"\\]|\\.)*"', quoted)


# ------------------------------------------------------------------ properties

OUTCOMES = st.one_of(
    st.tuples(st.just("answer"), st.lists(st.floats(0, 1), max_size=3)),
    st.tuples(st.just("fail"), st.sampled_from(["BACKEND_ERROR", "BACKEND_UNAVAILABLE"])),
)


def handler_for(outcome):
    kind, arg = outcome
    return answer(*arg) if kind == "answer" else fail(arg)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(OUTCOMES, min_size=3, max_size=3), st.text(min_size=1, max_size=40).filter(lambda s: s.strip()))
def test_envelope_invariants(config, tmp_path_factory, outcomes, query):
    tmp = tmp_path_factory.mktemp("p")
    # rule 4 has three steps: qmd/vsearch, qmd/query, totalrecall; use qmd twice with a sequence.
    seq = iter(outcomes[:2])
    qmd = MockBackend("qmd", lambda req: handler_for(next(seq))(req))
    router = make_router(config, tmp, {"qmd": qmd, "totalrecall": MockBackend("totalrecall", handler_for(outcomes[2]))})
    env = asyncio.run(router.route("explain " + query, installed(*STARTER)))
    Envelope.from_dict(env.as_dict())  # validates: ranges, types, status literal
    attempts = env.attempts
    accepted = [a for a in attempts if a["accepted"]]
    assert len(accepted) <= 1 and (not accepted or attempts[-1] is accepted[0])
    assert env.fallbacks_used == len(attempts) - len(accepted)
    assert (env.status == "success") == bool(accepted)
    assert (env.status == "partial") == (not accepted and any(a["result_count"] for a in attempts))
    assert (env.status == "error") == all(a["status"] == "error" for a in attempts)
    assert env.router_duration_ms >= env.backend_duration_ms
    assert env.result_count == len(env.results)
    if env.routed_to is None:
        assert env.results == () and env.status in ("empty", "error")
    else:
        winner = (
            accepted[0]
            if accepted
            else max((a for a in attempts if a["result_count"]), key=lambda a: a["normalized_relevance"])
        )
        assert (env.routed_to, env.normalized_relevance) == (winner["backend"], winner["normalized_relevance"])
        if env.status == "success":
            assert env.normalized_relevance >= config.threshold
        else:
            assert env.normalized_relevance < config.threshold
