"""Warm adapter caches in the daemon: Total Recall's index is kept between queries, the memory
tree is watched, and a warm query neither re-reads nor even walks the tree until something under
it changes."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends.base import BackendRequest
from memory_router.backends.totalrecall import adapter as totalrecall
from memory_router.backends.totalrecall import index as totalrecall_index
from memory_router.backends.totalrecall.scan import scan_tree
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import read_json
from memory_router.daemon.service import Service


def memory_tree(root: Path) -> Path:
    (root / "memory" / "registers").mkdir(parents=True)
    (root / "CLAUDE.local.md").write_text("- The auth middleware reads the session cookie.\n")
    register = root / "memory" / "registers" / "decisions.md"
    register.write_text("# Decisions\n\n- We chose Postgres for the orders service.\n")
    return register


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every walk of a memory tree (Total Recall's MemoryIndex.refresh lists files through scan_tree)."""
    seen: list[Path] = []

    def counting(root: Path) -> list[tuple[str, str, os.stat_result]]:
        seen.append(root)
        return scan_tree(root)  # the real one

    monkeypatch.setattr(totalrecall_index, "scan_tree", counting)  # where MemoryIndex looks it up
    return seen


def test_watched_backend_walks_only_when_invalidated(
    tmp_path: Path, walks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_tree(tmp_path)
    backend = totalrecall.TotalRecallBackend("totalrecall", tmp_path)
    request = BackendRequest(query="postgres orders")
    assert backend.watch_paths() == [(tmp_path, False), (tmp_path / "memory", True)]

    backend.search_blocking(request, threading.Event())
    backend.search_blocking(request, threading.Event())
    assert len(walks) == 2  # not watched (the CLI): every query checks the tree

    backend.set_watched(True)
    for _ in range(3):
        assert backend.search_blocking(request, threading.Event()).status == "success"
    assert len(walks) == 3  # one walk after being watched, then none

    backend.invalidate()
    backend.search_blocking(request, threading.Event())
    backend.search_blocking(request, threading.Event())
    assert len(walks) == 4

    monkeypatch.setattr(totalrecall, "WATCHED_RESCAN_S", 0.0)  # the safety net for missed events
    time.sleep(0.01)
    backend.search_blocking(request, threading.Event())
    assert len(walks) == 5


def test_no_memory_folder_means_no_watch(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.local.md").write_text("- a note\n")
    assert totalrecall.TotalRecallBackend("totalrecall", tmp_path).watch_paths() == []
    assert totalrecall.TotalRecallBackend("totalrecall", None).watch_paths() == []


def make_service(tmp_path: Path) -> Service:
    state = tmp_path / "state"
    state.mkdir()
    config = read_json(packaged_config())
    config["backends"]["totalrecall"]["root"] = str(tmp_path)
    (state / "router-config.json").write_bytes(orjson.dumps(config))
    (state / "backends.json").write_bytes(orjson.dumps({"backends": ["totalrecall"]}))
    return Service(
        state_dir=state,
        backends_path=state / "backends.json",
        config_path=state / "router-config.json",
        diagnostics=lambda message: None,
    )


def test_daemon_watches_the_memory_tree_and_sees_edits(tmp_path: Path, walks: list[Path]) -> None:
    register = memory_tree(tmp_path)
    service = make_service(tmp_path)
    query = {"id": 1, "query": "which database for the orders service"}

    async def run() -> None:
        await service.start()
        try:
            first: dict[str, Any] = await service.handle(query)
            assert first["status"] == "success" and "Postgres" in first["results"][0]["content"]
            before = len(walks)
            for _ in range(20):
                await service.handle(query)
            assert len(walks) <= before + 1  # warm: the tree is not walked per query

            register.write_text("# Decisions\n\n- We chose SQLite for the orders service.\n")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                answer = await service.handle(query)
                if "SQLite" in answer["results"][0]["content"]:
                    break
                await asyncio.sleep(0.02)
            assert "SQLite" in answer["results"][0]["content"]
        finally:
            await service.aclose()
        instance = service.router.instances()["totalrecall"]
        assert isinstance(instance, totalrecall.TotalRecallBackend)
        assert instance._watched is False  # closing the service stops relying on the watcher

    asyncio.run(run())
