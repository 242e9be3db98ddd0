"""The qmd index refresh's pieces, in-process: the debounce machine (a fake clock), qmd's glob, the
scan of a collection's folder, the pending count, index.yml's collections, the record and the lock.
The daemon running the real qmd is tests/adapters/test_qmd_refresh.py."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.collection_scan import (
    CollectionSpec,
    collection_specs,
    mask_regex,
    pending_files,
    scan,
)
from memory_router.backends.qmd.refresh import (
    Schedule,
    freshness,
    index_lock_path,
    lock_held,
    record_path,
    try_lock,
    unlock,
    write_record,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def machine(debounce: float = 1.5, max_wait: float = 15.0) -> tuple[Schedule, Clock]:
    clock = Clock()
    return Schedule(debounce, max_wait, clock), clock


def test_nothing_is_due_until_a_change() -> None:
    schedule, _ = machine()
    assert schedule.delay() is None and not schedule.dirty


def test_an_update_is_due_one_debounce_after_the_last_change() -> None:
    schedule, clock = machine()
    schedule.changed()
    assert schedule.delay() == pytest.approx(1.5)
    clock.now += 1.0
    schedule.changed()  # a burst of writes: the quiet period starts again
    assert schedule.delay() == pytest.approx(1.5)
    clock.now += 1.5
    assert schedule.delay() == 0.0


def test_a_folder_that_never_goes_quiet_is_updated_after_max_wait() -> None:
    schedule, clock = machine(debounce=1.5, max_wait=5.0)
    schedule.changed()
    for _ in range(5):
        clock.now += 1.0
        schedule.changed()
    assert schedule.delay() == 0.0  # 5 s after the first change, though the last was just now


def test_a_run_takes_the_changes_and_nothing_is_due_while_it_runs() -> None:
    schedule, clock = machine()
    schedule.changed()
    clock.now += 2
    schedule.begin(clock())
    assert schedule.running and not schedule.dirty
    schedule.changed()  # a write during the run
    assert schedule.delay() is None  # asked again when the run ends
    with pytest.raises(RuntimeError):
        schedule.begin()
    schedule.end(None)
    assert schedule.last_ok is True and schedule.runs == 1
    assert schedule.delay() == pytest.approx(1.5)  # the write during the run gets its own update


def test_a_change_after_the_files_were_looked_at_is_not_taken_by_the_run() -> None:
    schedule, clock = machine()
    schedule.changed()
    clock.now += 2
    looked = clock()
    clock.now += 0.1
    schedule.changed()  # seen by the watcher after the snapshot: the run may have missed it
    schedule.begin(looked)
    schedule.end(None)
    assert schedule.dirty and schedule.delay() == pytest.approx(1.5)  # from that change


def test_a_failed_run_is_reported_and_retried_on_the_next_change_only() -> None:
    schedule, clock = machine()
    schedule.changed()
    clock.now += 2
    schedule.begin(clock())
    schedule.end("qmd update exited with code 1")
    assert schedule.last_ok is False and schedule.failures == 1
    assert schedule.last_error == "qmd update exited with code 1"
    clock.now += 60
    assert schedule.delay() is None  # no retry loop against a broken qmd
    schedule.changed()
    clock.now += 1.5
    assert schedule.delay() == 0.0
    schedule.begin(clock())
    schedule.end(None)
    assert schedule.last_ok is True and schedule.last_error is None


def test_settle_forgets_a_change_outside_the_files() -> None:
    schedule, clock = machine()
    schedule.changed()
    clock.now += 2
    schedule.settle(clock())
    assert schedule.delay() is None and schedule.runs == 0


@pytest.mark.parametrize(
    ("mask", "yes", "no"),
    [
        ("**/*.md", ["a.md", "memory/2026-01-02.md", "x/y/z.md"], ["a.txt", "a.md.bak"]),
        ("*.md", ["MEMORY.md"], ["memory/2026-01-02.md"]),
        ("**/*.{md,ts}", ["a.md", "src/b.ts"], ["c.py"]),
        ("notes/*.md,*.txt", ["notes/a.md", "b.txt"], ["a.md", "x/b.txt"]),
        ("memory/[0-9]*.md", ["memory/2026.md"], ["memory/x.md"]),
    ],
)
def test_mask_regex_matches_qmds_globs(mask: str, yes: list[str], no: list[str]) -> None:
    regex = mask_regex(mask)
    assert all(regex.match(p) for p in yes), [p for p in yes if not regex.match(p)]
    assert not any(regex.match(p) for p in no), [p for p in no if regex.match(p)]


def test_scan_lists_what_qmd_indexes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for rel in ["MEMORY.md", "memory/a.md", "memory/.hidden.md", ".git/x.md", "node_modules/y.md", "b.txt"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "big.md").write_text("x")
    (root / "linked").symlink_to(outside)  # qmd does not follow symlinked directories
    assert sorted(scan(CollectionSpec("kb", root, "**/*.md"))) == ["MEMORY.md", "memory/a.md"]


def test_pending_counts_added_changed_and_removed_files() -> None:
    baseline = {"a.md": [1, 10], "b.md": [2, 20], "gone.md": [3, 30]}
    current = {"a.md": (1, 10), "b.md": (5, 21), "new.md": (6, 1)}
    assert pending_files(current, baseline) == 3
    assert pending_files(baseline, baseline) == 0


def test_collection_specs_read_index_yml(tmp_path: Path) -> None:
    yml = tmp_path / "index.yml"
    yml.write_text(
        'collections:\n  kb:\n    path: /data/kb\n    pattern: "**/*.md"\n'
        "  alice-memory:\n    path: ~/ws\n    pattern: '*.md'\nmodels:\n  embed: x\n"
    )
    specs = collection_specs(yml)
    assert specs["kb"] == CollectionSpec("kb", Path("/data/kb"), "**/*.md")
    assert specs["alice-memory"].root == Path(os.path.expanduser("~/ws")) and specs["alice-memory"].pattern == "*.md"
    assert collection_specs(tmp_path / "missing.yml") == {}


def test_freshness_says_pending_files_against_the_record(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.md").write_text("one")
    yml = tmp_path / "index.yml"
    yml.write_text(f"collections:\n  kb:\n    path: {root}\n    pattern: '**/*.md'\n")
    index = tmp_path / "index.sqlite"
    before = freshness(index, yml, ["kb", "nope"])
    assert before["collections"]["kb"]["pending"] is None  # memory-router never updated this index
    assert before["collections"]["nope"]["error"] == "not in index.yml"
    files = scan(CollectionSpec("kb", root, "**/*.md"))
    write_record(
        record_path(index),
        {
            "collections": {
                "kb": {"updated_at": "2026-12-04T22:00:00Z", "files": {k: list(v) for k, v in files.items()}}
            }
        },
    )
    assert freshness(index, yml, ["kb"])["collections"]["kb"]["pending"] == 0
    (root / "b.md").write_text("two")
    after = freshness(index, yml, ["kb"])
    assert after["collections"]["kb"] == {
        "folder": str(root),
        "pattern": "**/*.md",
        "files": 2,
        "pending": 1,
        "last_updated": "2026-12-04T22:00:00Z",
    }
    assert after["failed"] is False and after["locked"] is False


def test_the_index_lock_is_exclusive_and_shared_with_the_demo_lock(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite"
    lock = index_lock_path(index)
    assert lock == tmp_path / "index.lock"  # what demo_setup and the benches take
    assert not lock_held(lock)
    fd = try_lock(lock)
    assert fd is not None
    try:
        assert try_lock(lock) is None and lock_held(lock)
        with open(lock, "a+b") as other:  # indexing.index_lock's way of taking it
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        unlock(fd)
    assert not lock_held(lock)


def test_refresh_settings_are_validated_like_the_others() -> None:
    ok = _settings.validate(qmd_adapter.Settings, {"refresh": {"debounce_ms": 500, "embed": False}})
    assert ok.refresh.debounce_ms == 500 and ok.refresh.embed is False and ok.refresh.enabled is True
    assert qmd_adapter.Settings().refresh.enabled is True
    for bad in ({"debounce": 500}, {"debounce_ms": -1}, {"enabled": "yes"}, {"timeout_s": 0}):
        with pytest.raises(Exception, match="refresh"):
            _settings.validate(qmd_adapter.Settings, {"refresh": bad})


def test_a_one_shot_router_never_refreshes(tmp_path: Path) -> None:
    from memory_router.backends import BackendContext

    one_shot = QmdBackend("qmd", qmd_adapter.Settings(), BackendContext(state_dir=tmp_path))
    assert one_shot.refresher() is None and one_shot.watch_paths() == []
    off = QmdBackend(
        "qmd",
        _settings.validate(qmd_adapter.Settings, {"refresh": {"enabled": False}}),
        BackendContext(state_dir=tmp_path, long_lived=True),
    )
    assert off.refresher() is None


def test_watched_collections_are_every_collection_the_backend_searches() -> None:
    settings = _settings.validate(
        qmd_adapter.Settings,
        {"collections": ["kb"], "shared_collections": ["team"], "agent_collections": {"alice": ["alice-mem", "kb"]}},
    )
    backend = QmdBackend("qmd", settings, _context())
    assert backend.watched_collections() == ("kb", "team", "alice-mem")


def _context():  # noqa: ANN202 - a test helper
    from memory_router.backends import BackendContext

    return BackendContext(state_dir=Path("/nonexistent"))
