"""The one-shot CLI's driver (Router.route_blocking): no event loop, the same answers.

The property test in tests/faults/test_faults_properties.py holds the two drivers equal over
arbitrary mock outcomes; here: the real adapters on the demo data, a backend that ignores its
timeout, the fresh event loop an async-only backend gets, and what a cold query imports.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import Backend, BackendRequest, BackendResponse, BlockingBackend, Probe, Result
from memory_router.backends.lossless import adapter as lossless
from memory_router.backends.mock import BlockingMockBackend, MockBackend, answer
from memory_router.backends.totalrecall import adapter as totalrecall
from memory_router.config.installed import Installed, load_installed, parse_installed
from memory_router.config.router_config import load_config, parse_config
from memory_router.demo import SPEC_EXAMPLES, materialize
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

from ..support.client import assert_same_answer


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return materialize(tmp_path_factory.mktemp("demo") / "ws", log=lambda m: None)


def test_the_in_process_adapters_are_blocking_backends(tmp_path):
    context = BackendContext(state_dir=tmp_path)
    assert isinstance(totalrecall.create("totalrecall", totalrecall.Settings(), context), BlockingBackend)
    assert isinstance(lossless.create("lossless", lossless.Settings(), context), BlockingBackend)
    assert not isinstance(MockBackend("m", answer(0.9)), BlockingBackend)


@pytest.mark.slow
def test_blocking_and_async_routes_answer_the_15_spec_queries_alike(demo):
    config = load_config(demo.config_path)
    installed = load_installed(demo.backends_path)

    def router() -> Router:  # each driver gets fresh adapter instances: nothing warm is shared
        return Router(config, context=BackendContext(state_dir=demo.state_dir, cwd=demo.root))

    blocking_router, async_router = router(), router()

    async def run_async() -> list[dict]:
        return [orjson.loads((await async_router.route(ex.query, installed)).to_json()) for ex in SPEC_EXAMPLES]

    by_async = asyncio.run(run_async())
    by_blocking = [orjson.loads(blocking_router.route_blocking(ex.query, installed).to_json()) for ex in SPEC_EXAMPLES]
    for example, a, b in zip(SPEC_EXAMPLES, by_blocking, by_async, strict=True):
        assert_same_answer(a, b, f"example {example.number}: blocking vs async driver")
    assert sum(e["status"] == "success" for e in by_blocking) >= 12


class Stubborn:
    """A blocking backend that answers only when told to stop, and records that it was."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stopped = threading.Event()

    async def search(self, request: BackendRequest) -> BackendResponse:  # pragma: no cover - not this driver's
        raise AssertionError("the blocking driver must call search_blocking")

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        stop.wait(30)
        self.stopped.set()
        return BackendResponse.from_results(self.name, request.query, [Result("late", 1.0, self.name)])

    def probe(self) -> Probe:
        return Probe(True, "stubborn")


def _two_step_router(tmp_path: Path, first: Backend, second: Backend) -> tuple[Router, Installed]:
    data = {
        "timeout_ms": 200,
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "slow"}, {"backend": "next"}]}],
        "backends": {n: {"type": "command", "argv": ["unused"]} for n in ("slow", "next")},
    }
    config = parse_config(data, tmp_path / "router-config.json")
    state = tmp_path / "state"
    router = Router(
        config,
        context=BackendContext(state_dir=state),
        log=RouterLog(state / "router.log"),
        backends={"slow": first, "next": second},
    )
    return router, parse_installed({"backends": ["slow", "next"]}, tmp_path / "backends.json")


def test_a_blocking_backend_past_its_timeout_is_told_to_stop_and_the_chain_falls_back(tmp_path):
    slow = Stubborn("slow")
    router, installed = _two_step_router(tmp_path, slow, BlockingMockBackend("next", answer(0.9)))
    started = time.perf_counter()
    env = router.route_blocking("anything at all", installed)
    elapsed = time.perf_counter() - started
    assert env.status == "success" and env.routed_to == "next"
    first = env.attempts[0]
    assert (first["backend"], first["error_code"], first["error_message"]) == (
        "slow",
        "QUERY_TIMEOUT",
        "no answer within 200 ms",
    )
    assert slow.stopped.wait(5)  # its stop event was set: the thread ended instead of running on
    assert elapsed < 10  # not the 30 s the backend would have waited unstopped
    log = (tmp_path / "state" / "router.log").read_text()
    assert "TIMEOUT" in log and "slow" in log


def test_an_async_only_backend_gets_a_loop_of_its_own(tmp_path):
    seen: list[bool] = []

    async def handler(request: BackendRequest) -> BackendResponse:
        seen.append(asyncio.get_running_loop().is_running())
        await asyncio.sleep(0)
        return BackendResponse.from_results("m", request.query, [Result("hit", 0.8, "m")])

    router, installed = _two_step_router(tmp_path, MockBackend("slow", handler), MockBackend("next", answer(0.9)))
    env = router.route_blocking("anything at all", installed)
    assert (env.status, env.routed_to, seen) == ("success", "slow", [True])


def test_a_blocking_backend_that_raises_is_a_backend_error(tmp_path):
    class Broken(Stubborn):
        def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
            raise KeyError("bug")

    router, installed = _two_step_router(tmp_path, Broken("slow"), BlockingMockBackend("next", answer(0.9)))
    env = router.route_blocking("anything at all", installed)
    assert env.routed_to == "next"
    assert (env.attempts[0]["error_code"], env.attempts[0]["error_message"]) == (
        "BACKEND_ERROR",
        "adapter raised KeyError: 'bug'",
    )


@pytest.mark.slow
def test_a_cold_query_imports_no_asyncio(demo, tmp_path):
    """The demo's chains reach only Total Recall and Lossless: no event loop, no thread pool."""
    backends = tmp_path / "backends.json"
    backends.write_bytes(orjson.dumps({"backends": ["totalrecall", "lossless"]}))
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "off"}
    # A first run compiles the config cache (a cache miss validates every adapter's settings,
    # which imports them all); what is measured is every query after it.
    warm = [sys.executable, "-m", "memory_router", "route", "x", "--state-dir", str(demo.state_dir)]
    subprocess.run([*warm, "--config", str(demo.config_path)], capture_output=True, env=env, check=True, timeout=60)
    for example in SPEC_EXAMPLES:
        argv = [sys.executable, "-X", "importtime", "-m", "memory_router", "query", example.query]
        argv += ["--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
        argv += ["--backends-json", str(backends)]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=demo.root, timeout=60)
        assert proc.returncode in (0, 1), proc.stderr
        assert orjson.loads(proc.stdout)["query_echo"] == example.query
        imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
        assert not imported & {"asyncio", "concurrent.futures", "ssl"}, example.query
