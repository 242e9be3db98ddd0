"""The Total Recall hot-path optimisations (bench issue) change speed, not answers.

``reference_memory_files`` and ``reference_score`` are the adapter's original, straightforward
implementations (pathlib glob + stat; score every candidate, sort everything), kept here verbatim
as the specification. The optimised ``scan_tree``/``memory_files`` and the pruned ``score`` must
return exactly the same files and the same ranked entries (ties included) for any memory and
any query.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends.common.words import identifier_parts, stem
from memory_router.backends.totalrecall import score as totalrecall_score
from memory_router.backends.totalrecall.index import MemoryIndex
from memory_router.backends.totalrecall.parse import _WORD, QUOTED, Entry, index_terms, query_terms
from memory_router.backends.totalrecall.scan import memory_files
from memory_router.backends.totalrecall.score import (
    NO_TERMS_RELEVANCE,
    SUPERSEDED_FACTOR,
    TIER_WEIGHTS,
    _phrase_bonus,
    _recency,
    score,
)

from ..support.budget import examples


def reference_index_terms(text: str) -> list[str]:
    terms: list[str] = []
    for word in _WORD.findall(text):
        lower = word.lower()
        terms.append(stem(lower))
        parts = identifier_parts(word)
        if len(parts) > 1:
            terms.extend(stem(p) for p in parts)
    return terms


words = st.one_of(
    st.sampled_from(
        [
            "parseAuthToken",
            "user_service",
            "HTTPServer",
            "v2Api",
            "caféteria",
            "Straße",
            "İstanbul",
            "decisions",
            "tokens",
            "__init__",
            "x1_y2",
            "ALLCAPS",
            "snake_Case_Mixed",
            "ß",
            "ǅemal",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
)


@settings(max_examples=examples(500), deadline=None)
@given(text=st.lists(words, max_size=10).map(" ".join))
def test_index_terms_equals_reference(text: str) -> None:
    assert index_terms(text) == reference_index_terms(text)
    assert index_terms(text) == reference_index_terms(text)  # and again, from the cache


def reference_memory_files(root: Path) -> Iterator[tuple[str, Path]]:  # noqa: C901 - the specification, written out plainly
    found: list[tuple[str, Path]] = []
    working = root / "CLAUDE.local.md"
    if working.is_file():
        found.append(("working", working))
    for tier, folder, recursive in (
        ("registers", root / "memory" / "registers", False),
        ("daily", root / "memory" / "daily", False),
        ("archive", root / "memory" / "archive", True),
    ):
        if not folder.is_dir():
            continue
        paths = folder.rglob("*.md") if recursive else folder.glob("*.md")
        for path in sorted(paths):
            if path.name != "_index.md" and path.is_file():
                found.append((tier, path))
    # OpenClaw's memory-core set: MEMORY.md, memory.md, then every other memory/**/*.md
    for name in ("MEMORY.md", "memory.md"):
        if (root / name).is_file():
            found.append(("longterm", root / name))
    memory = root / "memory"
    if memory.is_dir():
        for path in sorted(memory.rglob("*.md")):
            rel = path.relative_to(memory).parts
            if rel[0] in ("registers", "daily", "archive") and len(rel) > 1 or path.name == "_index.md":
                continue
            if not path.is_file():
                continue
            dated = len(rel) == 1 and re.match(r"^\d{4}-\d{2}-\d{2}(-.*)?\.md$", path.name)
            found.append(("daily" if dated else "notes", path))
    # one file, one entry: the path that is not a symlink, else the first
    by_file: dict[tuple[int, int], tuple[str, Path]] = {}
    for tier, path in found:
        st = path.stat()
        key = (st.st_dev, st.st_ino)
        if key not in by_file or (by_file[key][1].is_symlink() and not path.is_symlink()):
            by_file[key] = (tier, path)
    kept = set(by_file.values())
    yield from (item for item in found if item in kept)


def reference_score(index: MemoryIndex, query: str, limit: int, now: datetime) -> list[tuple[float, Entry]]:
    terms = query_terms(query)
    if not terms:
        recent = sorted(  # written dates before mtimes (1b3bc74), then newest first
            index.entries,
            key=lambda e: (e.dated, e.timestamp or datetime.min.replace(tzinfo=timezone.utc)),
            reverse=True,
        )[:limit]
        return [(round(NO_TERMS_RELEVANCE * _recency(e.timestamp, now), 4), e) for e in recent]
    weights = {t: index.idf_of(t) for t in terms}
    total = sum(weights.values())
    candidates: set[int] = set()
    for term in terms:
        candidates.update(index.postings.get(term, ()))
    quoted = [a or b for a, b in QUOTED.findall(query)]
    scored: list[tuple[float, Entry]] = []
    for i in candidates:
        entry = index.entries[i]
        present = set(entry.terms)
        coverage = sum(w for t, w in weights.items() if t in present) / total
        bonus = _phrase_bonus(terms, entry.terms)
        if quoted and any(q.lower() in entry.text.lower() for q in quoted):
            bonus += 0.2
        relevance = min(1.0, coverage + bonus)
        relevance *= TIER_WEIGHTS[entry.tier] * _recency(entry.timestamp, now)
        if entry.superseded:
            relevance *= SUPERSEDED_FACTOR
        scored.append((round(relevance, 4), entry))
    stamp = datetime.min.replace(tzinfo=timezone.utc)
    scored.sort(key=lambda se: (se[0], se[1].timestamp or stamp), reverse=True)
    return scored[:limit]


def test_scan_selects_and_orders_files_like_pathlib_glob(tmp_path: Path) -> None:
    root = tmp_path
    (root / "CLAUDE.local.md").write_text("- working\n")
    reg = root / "memory" / "registers"
    reg.mkdir(parents=True)
    for name in ("b.md", "a.md", "_index.md", "notes.txt", ".hidden.md", ".md", "UPPER.MD"):
        (reg / name).write_text("- x\n")
    (reg / "dir.md").mkdir()  # a directory named like a memory file is not one
    (reg / "link.md").symlink_to(reg / "a.md")  # a symlinked file is a file
    (reg / "dangling.md").symlink_to(reg / "missing.md")
    daily = root / "memory" / "daily"
    daily.mkdir()
    (daily / "2026-11-02.md").write_text("- [09:00] y\n")
    (daily / "2026-11-01.md").write_text("- [09:00] y\n")
    arch = root / "memory" / "archive"
    for rel in ("a/x.md", "a-b/x.md", "a/b/c.md", "a.b/z.md", ".hid/h.md", "top.md", "a/_index.md"):
        (arch / rel).parent.mkdir(parents=True, exist_ok=True)
        (arch / rel).write_text("old\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "o.md").write_text("outside\n")
    (arch / "linked-dir").symlink_to(outside, target_is_directory=True)  # not descended into

    # OpenClaw's files beside them; memory/daily/ links to its daily notes are read once
    (root / "MEMORY.md").write_text("- long-term\n")
    (root / "memory" / "2026-11-03.md").write_text("- note\n")
    (root / "memory" / "2026-11-03-standup.md").write_text("- session note\n")
    (daily / "2026-11-03.md").symlink_to(root / "memory" / "2026-11-03.md")
    (root / "memory" / "people" / "team").mkdir(parents=True)
    (root / "memory" / "people" / "team" / "ana.md").write_text("- Ana\n")
    (root / "memory" / "topics.md").write_text("- topics\n")
    (root / "memory" / "people" / "_index.md").write_text("- index\n")

    got = list(memory_files(root))
    assert got == list(reference_memory_files(root))
    # a symlinked file is a file, listed once: reg/link.md is reg/a.md
    assert ("registers", reg / "a.md") in got and all(p != reg / "link.md" for _, p in got)
    assert ("registers", reg / "dir.md") not in got
    assert [
        (t, p.relative_to(root).as_posix())
        for t, p in got
        if t in ("longterm", "notes") or p.name.startswith("2026-11-03")
    ] == [
        ("longterm", "MEMORY.md"),
        ("daily", "memory/2026-11-03-standup.md"),
        ("daily", "memory/2026-11-03.md"),
        ("notes", "memory/people/team/ana.md"),
        ("notes", "memory/topics.md"),
    ]


def test_scan_without_memory_folders(tmp_path: Path) -> None:
    assert list(memory_files(tmp_path)) == list(reference_memory_files(tmp_path)) == []
    (tmp_path / "CLAUDE.local.md").mkdir()  # not a file
    assert list(memory_files(tmp_path)) == []


# A small vocabulary, so entries share terms, tie on scores and hit the pruning bounds.
VOCAB = [
    "database",
    "schema",
    "cache",
    "redis",
    "auth",
    "token",
    "session",
    "queue",
    "retry",
    "webhook",
    "deploy",
    "parseAuthToken",
    "user_service",
    "decided",
    "decision",
    "tokens",
]


def build_memory(root: Path, rng: random.Random, files: int) -> None:
    today = datetime(2026, 12, 1, tzinfo=timezone.utc)
    (root / "memory" / "registers").mkdir(parents=True)
    (root / "memory" / "daily").mkdir()
    (root / "memory" / "archive" / "2025").mkdir(parents=True)

    def words() -> str:
        return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 6)))

    (root / "CLAUDE.local.md").write_text("# Working\n" + "".join(f"- {words()}\n" for _ in range(4)))
    for f in range(files):
        kind = f % 3
        if kind == 0:
            body = (
                f"# Register {f}\n## [superseded: old] {words()}\n- **claim**: {words()}\n"
                f"## Now\n- **claim**: {words()}\n"
            )
            (root / "memory" / "registers" / f"r{f}.md").write_text(body)
        elif kind == 1:
            day = (today - timedelta(days=f)).date().isoformat()
            body = "".join(f"- [{h:02d}:00] {words()}\n" for h in range(8, 8 + rng.randint(1, 5)))
            (root / "memory" / "daily" / f"{day}.md").write_text(body)
        else:
            body = "\n\n".join(words() for _ in range(rng.randint(1, 4)))
            (root / "memory" / "archive" / "2025" / f"a{f}.md").write_text(body + "\n")
    # Undated files take their mtime as time: make those older than the daily logs.
    old = (today - timedelta(days=400)).timestamp()
    for path in [root / "CLAUDE.local.md", *(root / "memory").rglob("*.md")]:
        if "daily" not in path.parts:
            os.utime(path, (old, old))


@pytest.fixture(scope="module")
def memory_index(tmp_path_factory: pytest.TempPathFactory) -> MemoryIndex:
    root = tmp_path_factory.mktemp("tr-equivalence")
    build_memory(root, random.Random(5), 60)
    index = MemoryIndex()
    index.refresh(root)
    assert len(index.entries) > 100
    return index


query_text = st.lists(
    st.one_of(
        st.sampled_from(VOCAB),
        st.sampled_from(["the", "what", "did", "we", "about", "recently"]),
        st.sampled_from(VOCAB).map(lambda w: f'"{w}"'),
        st.sampled_from(["zebra", "x"]),
    ),
    min_size=0,
    max_size=6,
).map(" ".join)


@pytest.mark.parametrize(
    "all_candidates_limit", [totalrecall_score.ALL_CANDIDATES_LIMIT, 0], ids=["as-configured", "always-best-first"]
)
@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=query_text,
    limit=st.sampled_from([1, 2, 3, 5, 10, 40, 1000]),
    now=st.sampled_from(
        [
            datetime(2026, 12, 1, 12, tzinfo=timezone.utc),  # after every entry
            datetime(2026, 11, 20, tzinfo=timezone.utc),  # some entries in the future
            datetime(2031, 1, 1, tzinfo=timezone.utc),
        ]
    ),
)  # everything old: ties
def test_pruned_score_equals_scoring_every_candidate(
    memory_index: MemoryIndex, all_candidates_limit: int, query: str, limit: int, now: datetime
) -> None:
    """Both paths: few candidates are all scored; many are scored best-first (forced here with
    a limit of 0, so this small memory exercises the pruning and its tie handling)."""
    saved = totalrecall_score.ALL_CANDIDATES_LIMIT
    totalrecall_score.ALL_CANDIDATES_LIMIT = all_candidates_limit
    try:
        got = score(memory_index, query, limit, now)
    finally:
        totalrecall_score.ALL_CANDIDATES_LIMIT = saved
    want = reference_score(memory_index, query, limit, now)
    assert [(r, e.path, e.line) for r, e in got] == [(r, e.path, e.line) for r, e in want]


def test_score_follows_file_changes(tmp_path: Path) -> None:
    build_memory(tmp_path, random.Random(9), 12)
    index = MemoryIndex()
    index.refresh(tmp_path)
    now = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
    before = score(index, "what was the last thing", 5, now)
    newest = tmp_path / "memory" / "daily" / "2026-12-01.md"
    newest.write_text("- [23:59] the newest redis cache decision\n")
    os.utime(newest, None)
    index.refresh(tmp_path)
    after = score(index, "what was the last thing", 5, now)
    assert after[0][1].path == "memory/daily/2026-12-01.md" and after != before
    assert score(index, "redis cache", 3, now) == reference_score(index, "redis cache", 3, now)
    newest.unlink()
    index.refresh(tmp_path)
    assert all(e.path != "memory/daily/2026-12-01.md" for e in index.entries)
    assert score(index, "what was the last thing", 5, now) == reference_score(index, "what was the last thing", 5, now)
