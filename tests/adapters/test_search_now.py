"""In the daemon, a small in-process search is answered at once on the event loop, the same answer
its worker threads give; a search that would walk a tree, wait on a lock or take long keeps its
threads (``BlockingAdapter.search_now``: Total Recall's watched index, Lossless's SQLite)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.base import ON_LOOP_S, BackendRequest, BackendResponse, BlockingAdapter
from memory_router.backends.lossless import adapter as lossless
from memory_router.backends.totalrecall import adapter as totalrecall
from memory_router.core.scope import parse_scope

from ..support.budget import examples
from ..support.lcm_fixtures import build_small_db

# Words of the fixtures' memory and others: queries that find much, little and nothing.
WORDS = ["schema", "decision", "uuid", "keys", "queue", "redis", "payments", "cache", "billing", "export", "zebra"]
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


def _answer(response: BackendResponse | None) -> dict[str, Any]:
    """A response as the router reads it, its timing aside."""
    assert response is not None, "search_now declined"
    data = response.as_dict()
    data.pop("backend_duration_ms", None)
    return data


def _worker_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"memory-router-{name}")]


# ------------------------------------------------------------------------------ Total Recall


def _memory(root: Path) -> Path:
    (root / "memory" / "registers").mkdir(parents=True)
    (root / "CLAUDE.local.md").write_text("# Focus\n- Shipping the billing export this week.\n")
    (root / "memory" / "registers" / "decisions.md").write_text(
        "# Decisions\n\n## Schema\n- **claim**: The schema uses UUID v7 keys.\n\n"
        "## Queue\n- **claim**: We use Redis streams for the payments queue.\n"
    )
    (root / "memory" / "2026-11-30.md").write_text("- [09:10] Cache invalidation decision postponed.\n")
    return root


def _watched_total_recall(root: Path) -> totalrecall.TotalRecallBackend:
    """A daemon's Total Recall: its tree watched, walked once by a first search."""
    backend = totalrecall.TotalRecallBackend("totalrecall", _memory(root), long_lived=True)
    backend.set_watched(True)
    backend.search_blocking(BackendRequest("schema"), threading.Event())
    return backend


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries, limit=st.integers(1, 10))
def test_total_recall_answers_now_what_its_threads_answer(
    tmp_path_factory: pytest.TempPathFactory, query: str, limit: int
) -> None:
    backend = _watched_total_recall(tmp_path_factory.mktemp("tr"))
    request = BackendRequest(query, limit=limit)
    assert _answer(backend.search_now(request)) == _answer(backend.search_blocking(request, threading.Event()))


def test_total_recall_searches_on_its_threads_whenever_it_would_walk_or_wait(tmp_path: Path) -> None:
    backend = totalrecall.TotalRecallBackend("totalrecall", _memory(tmp_path), long_lived=True)
    request = BackendRequest("schema")
    assert backend.search_now(request) is None  # not watched: every query walks the tree
    backend.set_watched(True)
    assert backend.search_now(request) is None  # watched, never walked
    backend.search_blocking(request, threading.Event())
    assert backend.search_now(request) is not None  # watched and current

    backend.invalidate()  # a change under the root: the next query walks
    assert backend.search_now(request) is None
    backend.search_blocking(request, threading.Event())
    assert backend.search_now(request) is not None

    scoped = BackendRequest("schema", scope=parse_scope("main", None))
    assert backend.search_now(scoped) is None  # an agent's workspace is looked up in openclaw.json

    state = backend._state(backend.root)
    with state.lock:  # another search is reading the tree
        assert backend.search_now(request) is None
    state.rank_s = ON_LOOP_S  # the last ranking took half the event loop's allowance
    assert backend.search_now(request) is None
    state.rank_s = 0.0
    assert backend.search_now(request) is not None


def test_a_root_removed_before_its_watcher_reports_it_is_searched_on_the_threads(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    backend = _watched_total_recall(root)
    request = BackendRequest("schema")
    assert backend.search_now(request) is not None
    shutil.rmtree(root)  # no invalidate(): the watcher's event has not come yet
    assert backend.search_now(request) is None
    answered = backend.search_blocking(request, threading.Event())
    assert answered.status == "error" and "does not exist" in (answered.error_message or "")


def test_a_daemon_search_of_a_current_index_starts_no_worker_thread(tmp_path: Path) -> None:
    backend = _watched_total_recall(tmp_path)
    response = asyncio.run(backend.search(BackendRequest("redis queue")))
    assert response.status == "success" and "Redis streams" in response.results[0].content
    assert not _worker_threads(backend.name)


# ------------------------------------------------------------------------------ Lossless


def _lossless(db: Path) -> lossless.LosslessBackend:
    context = BackendContext(state_dir=db.parent, environ={}, cwd=db.parent, long_lived=True)
    return lossless.create("lossless", lossless.Settings(db_path=str(db)), context)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries, limit=st.integers(1, 10))
def test_lossless_answers_now_what_its_threads_answer(
    tmp_path_factory: pytest.TempPathFactory, query: str, limit: int
) -> None:
    backend = _lossless(build_small_db(tmp_path_factory.mktemp("lcm") / "lcm.db"))
    request = BackendRequest(query, limit=limit)
    assert _answer(backend.search_now(request)) == _answer(backend.search_blocking(request, threading.Event()))


def test_lossless_never_waits_on_a_lock_on_the_event_loop(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db", wal=False)  # a rollback journal: a writer's lock blocks readers
    backend = _lossless(db)
    request = BackendRequest("schema decision")
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")  # lossless-claw migrating or checkpointing
        assert backend.search_now(request) is None  # the threads wait for it, within the busy timeout
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    answered = backend.search_now(request)
    assert answered is not None and answered.status == "success"


def test_lossless_keeps_its_threads_for_a_while_after_a_long_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _lossless(build_small_db(tmp_path / "lcm.db"))
    request = BackendRequest("schema decision")
    assert backend.search_now(request) is not None
    monkeypatch.setattr(lossless, "ON_LOOP_S", 0.0)  # every search now takes longer than the loop may spend
    backend.search_blocking(request, threading.Event())
    monkeypatch.setattr(lossless, "ON_LOOP_S", 5.0)
    assert backend.search_now(request) is None  # a big database: its searches keep their threads
    monkeypatch.setattr(lossless, "THREADS_AFTER_SLOW_S", 0.0)  # ... until the while has passed
    monkeypatch.setattr(lossless, "ON_LOOP_S", 0.0)
    backend.search_blocking(request, threading.Event())
    monkeypatch.setattr(lossless, "ON_LOOP_S", 5.0)
    assert backend.search_now(request) is not None


def test_an_adapter_without_search_now_searches_on_its_threads() -> None:
    class Plain(BlockingAdapter):
        name = "plain"

        def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
            return BackendResponse.from_results(self.name, request.query, [], note=threading.current_thread().name)

    response = asyncio.run(Plain().search(BackendRequest("x")))
    assert response.note is not None and response.note.startswith("memory-router-plain")
