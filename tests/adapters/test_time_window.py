"""A time window reaches every backend that knows dates, and filters before ranking (issue 31):
Lossless by each message's time in a real lcm.db, Total Recall by its dated notes, qmd (real CLI)
by the note date in a file name; then the router keeps only what is dated inside, says what it
left out, and reports the window in the envelope."""

from __future__ import annotations

import asyncio
import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse, Result
from memory_router.backends.common import settings as _settings
from memory_router.backends.lossless import adapter as lossless
from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db
from memory_router.backends.mock import MockBackend
from memory_router.backends.totalrecall import adapter as totalrecall
from memory_router.config.installed import load_installed
from memory_router.config.router_config import load_config
from memory_router.core.window import parse_window
from memory_router.routing.router import Router

from ..support.qmd import needs_qmd

TODAY = date.today()
YESTERDAY = TODAY - timedelta(days=1)
WINDOW = parse_window("yesterday", "yesterday")


def noon(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time()).astimezone().replace(hour=12).astimezone(timezone.utc)


def test_lossless_finds_the_window_s_message_among_many_older_better_matches(tmp_path: Path) -> None:
    conn = create_lcm_db(tmp_path / "lcm.db")
    writer = LcmWriter(conn)
    conversation = writer.conversation("s1", session_key="agent:main:main")
    for i in range(30):  # thirty older messages, each a stronger match than yesterday's
        old = noon(TODAY - timedelta(days=40 + i))
        writer.message(conversation, "user", f"deploy deploy pipeline notes {i}", at=old)
    writer.message(conversation, "user", "yesterday we changed the deploy pipeline to blue-green", at=noon(YESTERDAY))
    conn.close()
    settings = _settings.validate(lossless.Settings, {"db_path": str(tmp_path / "lcm.db")})
    backend = lossless.create("lossless", settings, BackendContext(state_dir=tmp_path))
    everything = asyncio.run(backend.search(BackendRequest("deploy pipeline", limit=5)))
    assert all("blue-green" not in r.content for r in everything.results)  # ranked out of the top 5
    windowed = asyncio.run(backend.search(BackendRequest("deploy pipeline", limit=5, window=WINDOW)))
    assert [r.content for r in windowed.results] == ["yesterday we changed the deploy pipeline to blue-green"]
    empty = asyncio.run(backend.search(BackendRequest("deploy pipeline", limit=5, window=parse_window("today"))))
    assert empty.status == "empty"


def _workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Long-term\n- the deploy pipeline is owned by the platform team\n")
    for days in range(2, 12):
        day = TODAY - timedelta(days=days)
        (root / "memory" / f"{day.isoformat()}.md").write_text(f"# {day}\n- [10:00] deploy pipeline deploy review\n")
    (root / "memory" / f"{YESTERDAY.isoformat()}.md").write_text(
        f"# {YESTERDAY}\n- [16:40] moved the deploy pipeline to blue-green\n"
    )
    return root


def test_total_recall_keeps_only_notes_written_in_the_window(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    backend = totalrecall.create(
        "totalrecall", _settings.validate(totalrecall.Settings, {"root": str(root)}), BackendContext(state_dir=tmp_path)
    )
    found = asyncio.run(backend.search(BackendRequest("deploy pipeline", limit=3, window=WINDOW)))
    assert [r.content for r in found.results] == ["- [16:40] moved the deploy pipeline to blue-green"]
    # MEMORY.md has no date of its own (only its file's mtime, which a copy resets): never in a window.
    assert all(r.path != "MEMORY.md" for r in found.results)
    anytime = asyncio.run(backend.search(BackendRequest("deploy pipeline", limit=20)))
    assert any(r.path == "MEMORY.md" for r in anytime.results) and len(anytime.results) > 3


def test_the_router_reports_the_window_and_drops_what_a_backend_could_not_date(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws")
    config = {
        "strategy": "sequential",
        "rules": [{"number": 7, "id": "default", "chain": [{"backend": "undated"}, {"backend": "totalrecall"}]}],
        "backends": {
            "undated": {"type": "command", "argv": ["unused"]},  # replaced by the MockBackend below
            "totalrecall": {"type": "totalrecall", "root": str(root)},
        },
    }
    (tmp_path / "router-config.json").write_text(json.dumps(config))
    (tmp_path / "backends.json").write_text(json.dumps({"backends": ["undated", "totalrecall"]}))
    undated = MockBackend(
        "undated",
        lambda request: BackendResponse.from_results(
            "undated", request.query, [Result("a deploy fact with no date", 0.9, "undated")]
        ),
    )
    router = Router(
        load_config(tmp_path / "router-config.json"),
        context=BackendContext(state_dir=tmp_path, cwd=tmp_path),
        backends={"undated": undated},
    )
    installed = load_installed(tmp_path / "backends.json")
    envelope = router.route_blocking("deploy pipeline", installed, window=WINDOW)
    assert WINDOW is not None and envelope.as_dict()["window"] == WINDOW.as_dict()
    first, second = envelope.attempts
    assert first["status"] == "empty" and "1 undated left out" in first["note"]
    assert envelope.routed_to == "totalrecall"
    assert [r.content for r in envelope.results] == ["- [16:40] moved the deploy pipeline to blue-green"]
    assert "window" not in router.route_blocking("deploy pipeline", installed).as_dict()


@needs_qmd
@pytest.mark.slow
def test_qmd_hits_are_dated_by_the_note_date_in_their_file_name(tmp_path: Path) -> None:
    from memory_router.backends.qmd import adapter as qmd
    from memory_router.backends.qmd.backend import QmdBackend
    from memory_router.backends.qmd.indexing import build_collection

    root = _workspace(tmp_path / "ws")
    settings = {
        "index_path": str(tmp_path / "idx" / "index.sqlite"),
        "config_dir": str(tmp_path / "idx" / "cfg"),
        "collections": ["memory"],
    }
    backend = QmdBackend("qmd", _settings.validate(qmd.Settings, settings), BackendContext(state_dir=tmp_path))
    build_collection(backend.transport(), root, "memory", "**/*.md", tmp_path / "idx" / "lock")
    found = asyncio.run(backend.search(BackendRequest("deploy pipeline", mode="search", limit=2, window=WINDOW)))
    assert [r.path for r in found.results] == [f"memory/{YESTERDAY.isoformat()}.md"]
    assert found.note is not None and "undated (no date in the file name) left out" in found.note
    assert isinstance(found.results[0], Result)
