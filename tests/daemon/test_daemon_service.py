"""The daemon's Service in-process, over mock backends (backends/mock.py): responses and ids,
explain, stats, the concurrency limit, dead-backend cooldown and the overall deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends.base import BackendRequest, BackendResponse, Result
from memory_router.backends.mock import MockBackend, answer, fail, hang
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import read_json
from memory_router.daemon.service import Service

QUERY = "the middleware issue"  # rule 7 (default): qmd/query -> totalrecall


def write_config(tmp_path: Path, **overrides: Any) -> Path:
    data = read_json(packaged_config())
    # The chain walked one step at a time (the spec's sequential): what the deadline and cooldown
    # tests below count; the packaged "fill" is tested in tests/unit/test_fallback_machine.py.
    data["strategy"] = "sequential"
    # The spec's table: rule 7 is qmd/query -> totalrecall, the two steps these tests give answers
    # to (the packaged table also asks Lossless, before Total Recall: tests/unit/test_rules.py).
    data["table"] = "spec"
    data.update(overrides)
    path = tmp_path / "router-config.json"
    path.write_bytes(orjson.dumps(data))
    return path


class FakeClock:
    """The cooldown's clock, moved by hand: cooldown tests wait for no real time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_service(
    tmp_path: Path,
    backends: Mapping[str, MockBackend],
    *,
    concurrency: int = 8,
    clock: Callable[[], float] = time.monotonic,
    **config: Any,
) -> Service:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "backends.json").write_bytes(
        orjson.dumps({"backends": {n: {"status": "ready"} for n in ("qmd", "totalrecall", "cognee", "lossless")}})
    )
    return Service(
        state_dir=state,
        backends_path=state / "backends.json",
        config_path=write_config(tmp_path, **config),
        backends=backends,
        concurrency=concurrency,
        diagnostics=lambda message: None,
        clock=clock,
    )


def ask(service: Service, request: object) -> dict[str, Any]:
    return asyncio.run(service.handle(request))


def codes(response: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    return [(a["backend"], a["error_code"]) for a in response["attempts"]]


# ------------------------------------------------------------------ requests


def test_query_response_is_the_envelope_plus_id(tmp_path: Path) -> None:
    service = make_service(
        tmp_path, {"qmd": MockBackend("qmd", answer(0.9)), "totalrecall": MockBackend("totalrecall", answer(0.5))}
    )
    response = ask(service, {"id": "q1", "query": QUERY, "limit": 3})
    assert list(response)[:2] == ["id", "query_echo"]
    assert (response["id"], response["status"], response["routed_to"], response["routed_mode"]) == (
        "q1",
        "success",
        "qmd",
        "query",
    )
    qmd = service.router.instances()["qmd"]
    assert isinstance(qmd, MockBackend) and qmd.requests[0].limit == 3


def test_bare_string_is_a_query_with_null_id(tmp_path: Path) -> None:
    service = make_service(tmp_path, {"qmd": MockBackend("qmd", answer(0.9))})
    response = ask(service, QUERY)
    assert response["id"] is None and response["status"] == "success"


def test_handle_line_answers_garbage_with_error_envelopes(tmp_path: Path) -> None:
    service = make_service(tmp_path, {"qmd": MockBackend("qmd", answer(0.9))})

    def line(raw: bytes) -> dict[str, Any]:
        out = asyncio.run(service.handle_line(raw))
        assert b"\n" not in out
        return orjson.loads(out)

    assert line(b'{"id": 1, "query": "auth"}\n')["status"] == "success"
    assert line(b'{"id": 2, "query": "auth"}\r\n')["id"] == 2
    for raw, rid, code in [
        (b"\xff\xfe", None, "INVALID_UTF8"),
        (b'{"id": 3, "query": "\xff"}', 3, "INVALID_UTF8"),
        (b'{"id": 4, "query": ', 4, "INVALID_JSON"),
        (b'{"id": 5, "query": ""}', 5, "EMPTY_QUERY"),
        (b'{"id": 6, "query": "' + b"a" * 5000 + b'"}', 6, "QUERY_TOO_LONG"),
        (b"", None, "INVALID_REQUEST"),
    ]:
        response = line(raw)
        assert (response["id"], response["status"], response["error_code"]) == (rid, "error", code), raw[:30]
        assert response["error_message"] and response["results"] == []


def test_explain_returns_the_plan_without_calling_a_backend(tmp_path: Path) -> None:
    qmd = MockBackend("qmd", answer(0.9))
    service = make_service(tmp_path, {"qmd": qmd})
    response = ask(service, {"id": 9, "query": "find the function parseAuthToken", "explain": True})
    assert response["status"] == "plan" and response["rule"]["id"] == "exact_symbol"
    assert response["chain"] == [{"backend": "qmd", "mode": "search"}, {"backend": "totalrecall", "mode": None}]
    assert qmd.requests == []


def test_stats_count_requests_attempts_and_latency(tmp_path: Path) -> None:
    service = make_service(
        tmp_path,
        {
            "qmd": MockBackend("qmd", fail("BACKEND_ERROR", "boom")),
            "totalrecall": MockBackend("totalrecall", answer(0.8)),
        },
    )

    async def run() -> dict[str, Any]:
        for i in range(4):
            await service.handle({"id": i, "query": QUERY})
        await service.handle_line(b"not json")
        return await service.handle({"id": "s", "op": "stats"})

    stats = asyncio.run(run())["stats"]
    assert stats["requests"] == 6
    assert stats["by_status"] == {"success": 4, "invalid": 1, "stats": 1}
    assert stats["error_codes"] == {"INVALID_JSON": 1}
    # Cooldown (default 3 failures) stops calling the failing qmd after its third failure.
    assert stats["backends"]["qmd"] == {"calls": 3, "error": 3, "cooldown_skips": 1}
    assert stats["backends"]["totalrecall"] == {"calls": 4, "success": 4}
    assert stats["latency_ms"]["window"] == 4 and 0 <= stats["latency_ms"]["p50"] <= stats["latency_ms"]["p99"]
    assert stats["cooldown"]["qmd/query"]["cooling_down"] is True


def test_concurrency_limit_bounds_requests_routed_at_once(tmp_path: Path) -> None:
    running = peak = 0

    async def slow(request: BackendRequest) -> BackendResponse:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return BackendResponse.from_results("qmd", request.query, [Result(content="x", relevance=0.9, source="qmd")])

    service = make_service(tmp_path, {"qmd": MockBackend("qmd", slow)}, concurrency=3)

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(service.handle({"id": i, "query": QUERY}) for i in range(12)))

    responses = asyncio.run(run())
    assert [r["id"] for r in responses] == list(range(12))
    assert all(r["status"] == "success" for r in responses)
    assert peak == 3


# ------------------------------------------------------------------ cooldown


def test_dead_backend_is_skipped_with_cooldown_then_one_trial_decides(tmp_path: Path) -> None:
    healthy = {"ok": False}

    def qmd_handler(request: BackendRequest) -> BackendResponse:
        if healthy["ok"]:
            return BackendResponse.from_results(
                "qmd", request.query, [Result(content="x", relevance=0.9, source="qmd")]
            )
        return BackendResponse.failure("qmd", request.query, "BACKEND_ERROR", "exit 1")

    qmd = MockBackend("qmd", qmd_handler)
    clock = FakeClock()
    service = make_service(
        tmp_path,
        {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer(0.7))},
        clock=clock,
        cooldown={"failures": 2, "seconds": 30},
    )
    first = [ask(service, {"id": i, "query": QUERY}) for i in range(2)]
    assert [codes(r)[0] for r in first] == [("qmd", "BACKEND_ERROR")] * 2
    skipped = ask(service, {"id": 3, "query": QUERY})
    assert codes(skipped) == [("qmd", "COOLDOWN"), ("totalrecall", None)]
    assert skipped["status"] == "success" and skipped["routed_to"] == "totalrecall"
    assert skipped["attempts"][0]["status"] == "error"
    assert "qmd/query failed 2 times in a row (last: BACKEND_ERROR: exit 1)" in skipped["attempts"][0]["error_message"]
    assert len(qmd.requests) == 2  # not called while cooling down

    clock.advance(29.9)
    assert codes(ask(service, {"id": 40, "query": QUERY}))[0] == ("qmd", "COOLDOWN")  # not yet
    clock.advance(0.2)
    trial = ask(service, {"id": 4, "query": QUERY})
    assert codes(trial)[0] == ("qmd", "BACKEND_ERROR") and len(qmd.requests) == 3  # the trial call
    assert codes(ask(service, {"id": 5, "query": QUERY}))[0] == ("qmd", "COOLDOWN")  # failed trial: cooling again

    healthy["ok"] = True
    clock.advance(30.1)
    back = ask(service, {"id": 6, "query": QUERY})
    assert (back["routed_to"], codes(back)) == ("qmd", [("qmd", None)])
    assert codes(ask(service, {"id": 7, "query": QUERY})) == [("qmd", None)]
    log = (tmp_path / "state" / "router.log").read_text()
    assert 'COOLDOWN message="backend qmd/query: 2 consecutive failures (last: BACKEND_ERROR)' in log
    assert 'RECOVERED message="backend qmd/query answered again' in log


def test_cooldown_stops_a_hanging_backend_from_costing_its_timeout(tmp_path: Path) -> None:
    service = make_service(
        tmp_path,
        {"qmd": MockBackend("qmd", hang()), "totalrecall": MockBackend("totalrecall", answer(0.7))},
        timeout_ms=200,
        cooldown={"failures": 2, "seconds": 60},
    )
    slow = [ask(service, {"id": i, "query": QUERY}) for i in range(2)]
    assert all(codes(r)[0] == ("qmd", "QUERY_TIMEOUT") and r["router_duration_ms"] >= 200 for r in slow)
    started = time.perf_counter()
    fast = [ask(service, {"id": i, "query": QUERY}) for i in range(5)]
    assert all(codes(r)[0] == ("qmd", "COOLDOWN") and r["status"] == "success" for r in fast)
    assert time.perf_counter() - started < 0.5


def test_only_one_trial_call_while_others_keep_skipping(tmp_path: Path) -> None:
    calls = 0

    async def flaky(request: BackendRequest) -> BackendResponse:
        nonlocal calls
        calls += 1
        if calls <= 1:
            return BackendResponse.failure("qmd", request.query, "BACKEND_ERROR", "down")
        await asyncio.sleep(0.2)  # the trial is slow: concurrent queries must not pile onto it
        return BackendResponse.from_results("qmd", request.query, [Result(content="x", relevance=0.9, source="qmd")])

    clock = FakeClock()
    service = make_service(
        tmp_path,
        {"qmd": MockBackend("qmd", flaky), "totalrecall": MockBackend("totalrecall", answer(0.7))},
        clock=clock,
        cooldown={"failures": 1, "seconds": 30},
    )
    ask(service, {"id": 0, "query": QUERY})
    clock.advance(31)

    async def burst() -> list[dict[str, Any]]:
        return await asyncio.gather(*(service.handle({"id": i, "query": QUERY}) for i in range(6)))

    responses = asyncio.run(burst())
    assert calls == 2
    first_codes = sorted(codes(r)[0][1] or "called" for r in responses)
    assert first_codes == ["COOLDOWN"] * 5 + ["called"]
    assert any(
        "trial call to it is in progress" in r["attempts"][0]["error_message"] for r in responses if codes(r)[0][1]
    )


def test_cooldown_can_be_switched_off(tmp_path: Path) -> None:
    for setting in (None, {"enabled": False}):
        qmd = MockBackend("qmd", fail())
        service = make_service(
            tmp_path, {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer(0.7))}, cooldown=setting
        )
        responses = [ask(service, {"id": i, "query": QUERY}) for i in range(6)]
        assert all(codes(r)[0] == ("qmd", "BACKEND_ERROR") for r in responses)
        assert len(qmd.requests) == 6


# ------------------------------------------------------------------ deadline


def test_deadline_stops_the_chain_with_deadline_exceeded(tmp_path: Path) -> None:
    totalrecall = MockBackend("totalrecall", answer(0.9))
    service = make_service(
        tmp_path,
        {"qmd": MockBackend("qmd", hang()), "totalrecall": totalrecall},
        deadline_ms=150,
        cooldown=None,
    )
    started = time.perf_counter()
    response = ask(service, {"id": 1, "query": QUERY})
    elapsed = time.perf_counter() - started
    assert 0.14 < elapsed < 1.0  # the 5 s per-backend timeout did not apply
    assert (response["status"], response["error_code"]) == ("error", "DEADLINE_EXCEEDED")
    assert codes(response) == [("qmd", "DEADLINE_EXCEEDED")]
    assert "150 ms deadline" in response["error_message"]
    assert totalrecall.requests == []
    assert 'TIMEOUT query="the middleware issue" backend=qmd' in (tmp_path / "state" / "router.log").read_text()


def test_deadline_returns_the_best_result_so_far_as_partial(tmp_path: Path) -> None:
    service = make_service(
        tmp_path,
        {"qmd": MockBackend("qmd", answer(0.2)), "totalrecall": MockBackend("totalrecall", hang())},
        cooldown=None,
    )
    response = ask(service, {"id": 1, "query": QUERY, "deadline_ms": 100})  # per-request deadline
    assert (response["status"], response["routed_to"], response["error_code"]) == ("partial", "qmd", None)
    assert codes(response) == [("qmd", None), ("totalrecall", "DEADLINE_EXCEEDED")]


def test_a_call_cut_by_the_deadline_stops_the_chain_and_does_not_count_toward_cooldown(tmp_path: Path) -> None:
    async def slow_empty(request: BackendRequest) -> BackendResponse:
        await asyncio.sleep(0.12)
        return BackendResponse.from_results("qmd", request.query, [])

    totalrecall = MockBackend("totalrecall", answer(0.9))
    service = make_service(
        tmp_path, {"qmd": MockBackend("qmd", slow_empty), "totalrecall": totalrecall}, deadline_ms=100
    )
    # qmd's own timeout is min(5 s, deadline left) = 100 ms: it is cut, so the chain stops there.
    response = ask(service, {"id": 1, "query": QUERY})
    assert codes(response) == [("qmd", "DEADLINE_EXCEEDED")] and totalrecall.requests == []
    # A deadline does not count against the backend's health: no cooldown.
    assert service.stats_snapshot()["cooldown"] == {}


def test_per_request_timeout_applies_to_each_backend(tmp_path: Path) -> None:
    service = make_service(
        tmp_path, {"qmd": MockBackend("qmd", hang()), "totalrecall": MockBackend("totalrecall", answer(0.9))}
    )
    response = ask(service, {"id": 1, "query": QUERY, "timeout_ms": 50})
    assert codes(response) == [("qmd", "QUERY_TIMEOUT"), ("totalrecall", None)]
    assert response["attempts"][0]["duration_ms"] < 1000


def test_invalid_cooldown_and_deadline_settings_are_refused(tmp_path: Path) -> None:
    from memory_router.config.router_config import load_config
    from memory_router.core.errors import InvalidConfig

    with pytest.raises(InvalidConfig, match=r"cooldown\.failures"):
        load_config(write_config(tmp_path, cooldown={"failures": 0}))
    with pytest.raises(InvalidConfig, match=r"cooldown\.secs: unknown key"):
        load_config(write_config(tmp_path, cooldown={"secs": 3}))
    with pytest.raises(InvalidConfig, match=r"deadline_ms"):
        load_config(write_config(tmp_path, deadline_ms=-5))


def test_missing_backends_json_is_answered_per_query_until_it_appears(tmp_path: Path) -> None:
    said: list[str] = []
    state = tmp_path / "state"
    state.mkdir()
    service = Service(
        state_dir=state,
        backends_path=state / "backends.json",
        config_path=write_config(tmp_path),
        backends={"qmd": MockBackend("qmd", answer(0.9))},
        diagnostics=said.append,
    )
    assert "does not exist" in said[0]
    response = ask(service, {"id": 1, "query": QUERY})
    assert (response["id"], response["status"], response["error_code"]) == (1, "error", "BACKENDS_JSON_MISSING")
    assert ask(service, {"id": 2, "query": QUERY, "explain": True})["error_code"] == "BACKENDS_JSON_MISSING"

    (state / "backends.json").write_bytes(orjson.dumps({"backends": ["qmd", "totalrecall"]}))
    assert service.reload() == {"backends.json": "reloaded"}
    assert ask(service, {"id": 3, "query": QUERY})["status"] == "success"
    assert service.reload() == {}  # nothing changed on disk: nothing re-read


def test_cooldown_is_per_search_mode(tmp_path: Path) -> None:
    def qmd_handler(request: BackendRequest) -> BackendResponse:
        if request.mode == "vsearch":  # e.g. its embedding model is missing; BM25 search still works
            return BackendResponse.failure("qmd", request.query, "BACKEND_UNAVAILABLE", "model missing: run qmd pull")
        return BackendResponse.from_results("qmd", request.query, [Result(content="x", relevance=0.9, source="qmd")])

    qmd = MockBackend("qmd", qmd_handler)
    service = make_service(
        tmp_path,
        {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer(0.7))},
        cooldown={"failures": 1, "seconds": 60},
    )
    concept = "explain the caching strategy"  # rule 4: qmd/vsearch -> qmd/query -> totalrecall
    first = ask(service, {"id": 1, "query": concept})
    assert codes(first)[:2] == [("qmd", "BACKEND_UNAVAILABLE"), ("qmd", None)]
    second = ask(service, {"id": 2, "query": concept})
    assert codes(second)[:2] == [("qmd", "COOLDOWN"), ("qmd", None)] and second["routed_mode"] == "query"
    assert "model missing: run qmd pull" in second["attempts"][0]["error_message"]  # the fix stays visible
    symbol = ask(service, {"id": 3, "query": "find the function parseAuthToken"})  # qmd/search
    assert (symbol["routed_to"], symbol["routed_mode"], codes(symbol)) == ("qmd", "search", [("qmd", None)])
    plan = ask(service, {"id": 4, "query": concept, "explain": True})
    assert list(plan["cooldown"]) == ["qmd/vsearch"] and plan["cooldown"]["qmd/vsearch"]["cooling_down"]


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")  # as editors save: a new inode renamed over the old
    tmp.write_bytes(data)
    tmp.replace(path)


def test_a_reload_swaps_in_a_new_snapshot_whole_and_never_edits_the_one_a_request_holds(tmp_path: Path) -> None:
    qmd = MockBackend("qmd", answer(0.9))
    service = make_service(tmp_path, {"qmd": qmd}, threshold=0.4)
    try:
        first = service.snapshot
        assert first.config.threshold == 0.4 and first.installed is not None and "cognee" in first.installed.usable

        _replace(service.backends_path, orjson.dumps({"backends": {"qmd": {"status": "ready"}}}))
        assert service.reload() == {"backends.json": "reloaded"}
        second = service.snapshot
        assert second is not first and second.router is first.router  # backends.json alone: same router
        assert second.installed is not None and second.installed.usable == ["qmd"]
        assert first.installed is not None and "cognee" in first.installed.usable  # the old one untouched

        config = read_json(service.config_path)
        _replace(service.config_path, orjson.dumps({**config, "threshold": 0.7}))
        assert service.reload() == {"router-config.json": "reloaded"}
        third = service.snapshot
        assert third.config.threshold == 0.7 and second.config.threshold == 0.4
        assert third.installed is second.installed
        assert third.router.backend("qmd") is qmd  # the caller's instance survives the new router

        _replace(service.config_path, b"{ not json")
        assert service.reload() == {"router-config.json": "failed"}
        assert service.snapshot is third  # the last good version keeps serving, as it was
        assert service.stats.snapshot()["reloads"] == {"ok": 2, "failed": 1}
        with pytest.raises(AttributeError, match="immutable"):
            third.router = first.router  # type: ignore[misc]
    finally:
        service.match_pool.shutdown()


def test_the_handshake_publishes_the_names_a_reloaded_config_adds(tmp_path: Path) -> None:
    """The socket daemon works out its hello's context once per configuration: a reload whose
    Lossless db_path names $MY_DB_DIR publishes that variable from the next hello on, so a client
    with another value routes in-process."""
    from memory_router.daemon.socket_server import SocketServer

    service = make_service(tmp_path, {"qmd": MockBackend("qmd", answer(0.9))})
    try:
        server = SocketServer(service, lifecycle=None, path=service.state_dir / "router.sock")  # type: ignore[arg-type]
        before = server.context
        assert "MY_DB_DIR" not in before["env"] and server.context == before
        config = read_json(service.config_path)
        config["backends"]["lossless"]["db_path"] = "$MY_DB_DIR/lcm.db"
        _replace(service.config_path, orjson.dumps(config))
        assert service.reload() == {"router-config.json": "reloaded"}
        after = server.context
        assert "MY_DB_DIR" in after["env"] and after["env_salt"] == before["env_salt"]
    finally:
        service.match_pool.shutdown()


def test_a_query_sent_with_its_clients_context_is_routed_only_if_it_is_the_daemons(tmp_path: Path) -> None:
    """The thin client sends its hello and its query in one write, the query carrying its own
    context hashed with its own salt: the socket daemon answers it exactly as the same query without
    that key when the contexts are the same, and answers CONTEXT_MISMATCH without asking any
    backend when they are not (a cwd, a variable, or a variable its config adds that the client
    did not send)."""
    from memory_router.client.wire import context
    from memory_router.daemon.socket_server import SocketServer

    qmd = MockBackend("qmd", answer(0.9))
    service = make_service(tmp_path, {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer(0.5))})
    try:
        server = SocketServer(service, lifecycle=None, path=service.state_dir / "router.sock")  # type: ignore[arg-type]
        environ = dict(service.context.environ)

        def client(cwd: Path = service.context.cwd, **env: str) -> dict[str, Any]:
            return context(
                cwd=str(cwd),
                environ={**environ, **env},
                state_dir=str(service.state_dir),
                backends_json=str(service.backends_path),
                config=str(service.config_path),
                salt="a-salt-of-the-clients",
            )

        def respond(request: dict[str, Any]) -> dict[str, Any]:
            out: dict[str, Any] = orjson.loads(asyncio.run(server.respond(orjson.dumps(request))))
            return out

        plain = respond({"query": QUERY, "limit": 3})
        guarded = respond({"query": QUERY, "limit": 3, "context": client()})
        for timed in ("router_duration_ms", "backend_duration_ms"):
            plain.pop(timed), guarded.pop(timed)
        assert guarded == plain and guarded["status"] == "success"
        asked = len(qmd.requests)
        for other, differs in (
            (client(cwd=tmp_path / "elsewhere"), "cwd"),
            (client(OPENCLAW_REPO_ROOT="/somewhere/else"), "env.OPENCLAW_REPO_ROOT"),
            ("not a context", "context"),
        ):
            refused = respond({"query": QUERY, "context": other})
            assert (refused["status"], refused["error_code"]) == ("error", "CONTEXT_MISMATCH")
            assert differs in refused["error_message"] and refused["query_echo"] == QUERY
        assert len(qmd.requests) == asked, "a query of another context reached a backend"
        assert service.stats.snapshot()["error_codes"] == {"CONTEXT_MISMATCH": 3}

        config = read_json(service.config_path)
        config["backends"]["lossless"]["db_path"] = "$MY_DB_DIR/lcm.db"
        _replace(service.config_path, orjson.dumps(config))
        assert service.reload() == {"router-config.json": "reloaded"}
        unsent = respond({"query": QUERY, "context": client()})  # the client cannot know MY_DB_DIR yet
        assert unsent["error_code"] == "CONTEXT_MISMATCH" and "env.MY_DB_DIR" in unsent["error_message"]
    finally:
        service.match_pool.shutdown()
