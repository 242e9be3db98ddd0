"""Faults of the warm qmd engine, through a long-lived router (what `serve` and `mcp` run), with
a healthy command backend to fall back to: the real engine killed mid-query, hung (SIGSTOP),
replaced by a FAKE node that prints garbage or dies at start, a missing index, an index without
embeddings. Each row: the fallback, the router.log line, the recovery (a restart where that makes
sense) and no Node process left once the router closes. The corrupt-model fault needs the real
MiniLM model and is in test_qmd_engine_models.py."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.engine import QmdEngine
from memory_router.backends.qmd.indexing import build_collection
from memory_router.config.installed import load_installed
from memory_router.config.router_config import load_config
from memory_router.routing.router import Router

from ..adapters.test_qmd_engine import alive, fake_node, wait_gone
from ..support.faults import (
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    log_lines,
    report,
    write_setup,
)
from ..support.qmd import needs_qmd, qmd_backend, warm_engine

pytestmark = [pytest.mark.slow, needs_qmd]
TIMEOUT_MS = 1500
QUERY = "leader election"
ENV = {k: v for k, v in os.environ.items() if k != "CI"}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("enginefaults")
    (base / "notes").mkdir()
    (base / "notes" / "raft.md").write_text("# Raft\n\nLeader election uses randomized timeouts.\n")
    settings = {"index_path": str(base / "index.sqlite"), "config_dir": str(base / "cfg"), "collections": ["kb"]}
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base))
    build_collection(backend.transport(), base / "notes", "kb", "**/*.md", base / "lock")
    return settings


def router(tmp_path: Path, spec: dict[str, Any], mode: str = "search") -> tuple[Router, Any, Path]:
    good = command_backend("ok", env={"FAULT_MODE": ""})
    state, config = write_setup(
        tmp_path, {"adapter": {"type": "qmd", **spec}, "good": good}, ["adapter", "good"], timeout_ms=TIMEOUT_MS
    )
    cfg = orjson.loads(config.read_bytes())
    cfg["rules"][0]["chain"][0]["mode"] = mode
    config.write_bytes(orjson.dumps(cfg))
    context = BackendContext(state_dir=state, environ=ENV, long_lived=True)
    return Router(load_config(config), context=context), load_installed(state / "backends.json"), state


def engine_of(r: Router) -> QmdEngine:
    return warm_engine(r.backend("adapter"))


def engine_pid(r: Router) -> int:
    """The warm engine's process id (it has a process once it has answered)."""
    proc = engine_of(r)._proc
    assert proc is not None, "the engine has no process"
    return proc.pid


def check(key: str, fault: str, envelope: Any, state: Path, code: str, fragment: str, recovery: str) -> None:
    data = envelope.as_dict()
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == ("success", "good", 1), data["attempts"]
    attempt = data["attempts"][0]
    assert attempt["error_code"] == code and fragment in attempt["error_message"], attempt
    kind = "TIMEOUT" if code == "QUERY_TIMEOUT" else "FALLBACK"
    line = log_lines(state)[-1]
    assert f'] {kind} query="{QUERY}" backend=adapter ' in line and line.endswith(" next=good"), line
    report(
        "engine",
        key,
        fault=fault,
        status="success (fallback)",
        log=f"{kind} {code}",
        faulty_ms=attempt["duration_ms"],
        recovery=recovery,
        leftovers=0,
        message=attempt["error_message"][:110],
    )


async def route(r: Router, installed: Any) -> Any:
    return await r.route(QUERY, installed)


def test_engine_killed_mid_query(index: dict, tmp_path: Path) -> None:
    r, installed, state = router(tmp_path, index)

    async def main() -> None:
        assert (await route(r, installed)).routed_to == "adapter"
        engine = engine_of(r)
        pid = engine_pid(r)
        os.kill(pid, signal.SIGSTOP)
        task = asyncio.create_task(route(r, installed))
        await asyncio.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        envelope = await task
        check(
            "killed",
            "engine SIGKILLed mid-query",
            envelope,
            state,
            "BACKEND_ERROR",
            "exited with code -9",
            "restarted by the next call, which qmd answers",
        )
        again = await route(r, installed)
        assert again.routed_to == "adapter" and engine.starts == 2
        new_pid = engine_pid(r)
        await qmd_backend(r.backend("adapter")).aclose()
        assert wait_gone(new_pid) and wait_gone(pid)

    asyncio.run(main())


def test_engine_hung(index: dict, tmp_path: Path) -> None:
    r, installed, state = router(tmp_path, index)

    async def main() -> None:
        assert (await route(r, installed)).routed_to == "adapter"
        hung = engine_pid(r)
        os.kill(hung, signal.SIGSTOP)
        envelope = await route(r, installed)
        check(
            "hung",
            "engine hung (SIGSTOP)",
            envelope,
            state,
            "QUERY_TIMEOUT",
            f"no answer within {TIMEOUT_MS} ms",
            "next call: health check (a third of its timeout) fails, engine killed and replaced",
        )
        started = time.monotonic()
        again = await route(r, installed)
        assert again.routed_to == "adapter" and time.monotonic() - started < TIMEOUT_MS / 1000
        assert wait_gone(hung)
        await qmd_backend(r.backend("adapter")).aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("mode", "fragment", "recovery"),
    [
        ("garbage-after-ready", "not a protocol line", "killed; restarted by the next call"),
        ("crash", "exited with code 3", "restarted once; a second crash in a row: down for 30 s"),
    ],
)
def test_fake_engine_faults(index: dict, tmp_path: Path, mode: str, fragment: str, recovery: str) -> None:
    r, installed, state = router(tmp_path, {**index, "node": str(fake_node(tmp_path, mode))})

    async def main() -> None:
        envelope = await route(r, installed)
        fault = "FAKE node: garbage on stdout" if mode.startswith("garbage") else "FAKE node: dies at start (exit 3)"
        check(f"fake-{mode}", fault, envelope, state, "BACKEND_ERROR", fragment, recovery)
        proc = engine_of(r)._proc
        await qmd_backend(r.backend("adapter")).aclose()
        assert proc is None or not alive(proc.pid)

    asyncio.run(main())


def test_missing_index(index: dict, tmp_path: Path) -> None:
    r, installed, state = router(tmp_path, {**index, "index_path": str(tmp_path / "no-such-index.sqlite")})

    async def main() -> None:
        envelope = await route(r, installed)
        check(
            "missing-index",
            "index file missing",
            envelope,
            state,
            "BACKEND_UNAVAILABLE",
            "qmd collection add",
            "answered again once the index exists; no empty index is created",
        )
        assert not (tmp_path / "no-such-index.sqlite").exists()

    asyncio.run(main())


def test_index_without_embeddings(index: dict, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "qmd" / "models").mkdir(parents=True)
    (cache / "qmd" / "models" / "embeddinggemma-300M-Q8_0.gguf").write_bytes(b"GGUF")  # passes the pre-check
    r, installed, state = router(tmp_path, {**index, "cache_dir": str(cache)}, mode="vsearch")

    async def main() -> None:
        envelope = await route(r, installed)
        check(
            "no-embeddings",
            "vsearch on an index without embeddings",
            envelope,
            state,
            "BACKEND_UNAVAILABLE",
            "qmd embed",
            "engine keeps serving search",
        )
        await qmd_backend(r.backend("adapter")).aclose()

    asyncio.run(main())
