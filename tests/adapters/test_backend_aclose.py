"""In-process backends give their worker threads back when closed (a reload replaced them)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import Backend, BackendRequest, ClosableBackend
from memory_router.backends.lossless.adapter import Settings as LosslessSettings
from memory_router.backends.lossless.adapter import create as create_lossless
from memory_router.backends.totalrecall.adapter import Settings as TotalRecallSettings
from memory_router.backends.totalrecall.adapter import create as create_totalrecall

from ..support.lcm_fixtures import build_small_db


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"memory-router-{name}")]


def _backend(kind: str, tmp_path: Path) -> Backend:
    context = BackendContext(state_dir=tmp_path / "state", environ={}, cwd=tmp_path)
    if kind == "totalrecall":
        (tmp_path / "CLAUDE.local.md").write_text("- The schema decision: UUID v7 keys.\n")
        return create_totalrecall("tr-close", TotalRecallSettings(root=str(tmp_path)), context)
    db = tmp_path / "lcm.db"
    build_small_db(db)
    return create_lossless("lcm-close", LosslessSettings(db_path=str(db)), context)


@pytest.mark.parametrize("kind", ["totalrecall", "lossless"])
def test_aclose_lets_the_worker_threads_exit(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _backend(kind, tmp_path)
    assert isinstance(backend, ClosableBackend)  # so the daemon's reload closes a replaced one
    # A search that cannot be answered on the event loop (a lock, a big memory) runs on the threads.
    monkeypatch.setattr(backend, "search_now", lambda request: None)

    async def run() -> None:
        response = await backend.search(BackendRequest("schema decision"))
        assert response.status in ("success", "empty"), response
        assert _threads(backend.name), "the search ran on the backend's own threads"
        await backend.aclose()

    asyncio.run(run())
    deadline = time.monotonic() + 5
    while _threads(backend.name) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _threads(backend.name)
