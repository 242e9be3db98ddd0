"""Why Lossless alone trailed a plain BM25 over the same turns, and what its ranking does now: each
step of the ranking measured on the LoCoMo and LongMemEval development workspaces (issue 29).

Reads the questions from a bench's records (``<records>/bm25.jsonl``, written by ``bench/locomo.py``
and ``bench/longmemeval.py``) and each question's ``lcm.db`` and ``manifest.json`` from the bench's
workspaces; asks every question in-process, ``limit`` 10. The workspaces hold raw turns only (no
summaries: lossless-claw writes those with an LLM), so every row is a message. Rankings:

* ``bm25`` - the benches' baseline: the question's words minus stopwords, OR'ed, FTS5 bm25 order
  (the same ranking as their ``bm25`` variant, run here over the messages' own FTS table);
* ``before`` - Lossless until this change: its content terms ANDed, OR only when no row held them
  all, ordered by coverage x (0.7 + 0.3 x bm25 strength);
* ``OR, bm25 order`` / ``OR, coverage band`` - the OR of its terms always, ordered by bm25 alone or by
  the coverage band;
* ``+ brevity N`` - the shipped adapter with ``BRIEF_CHARS`` N (a message longer than N characters
  has its coverage discounted by N / length), with and without the exception for a question to the
  assistant ("what did you recommend");
* ``shipped`` - ``LosslessBackend`` as packaged.

    python bench/lossless_ranking.py [--quick] [--locomo DIR] [--longmemeval DIR]
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
from _common import BENCH_DATA, fmt, parser, table

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.common.words import STOPWORDS
from memory_router.backends.lossless import adapter, ranking
from memory_router.backends.lossless.terms import fts_match, query_terms

BENCHES = {"locomo": BENCH_DATA / "locomo", "longmemeval": BENCH_DATA / "longmemeval"}
LIMIT, POOL, QUICK = 10, 30, 20


class Question:
    def __init__(self, row: dict[str, Any], work: Path) -> None:
        self.text: str = row["question"]
        self.evidence = set(row["evidence"])
        self.base = work / str(row["conv"])
        self.db = self.base / "state" / "lcm.db"


Ranker = Callable[[Question, sqlite3.Connection], list[int]]


def questions(root: Path, quick: bool) -> list[Question]:
    records = root / "records" / "bm25.jsonl"
    if not records.is_file():
        return []
    rows = [orjson.loads(line) for line in records.read_bytes().splitlines() if line.strip()]
    return [Question(r, root / "work") for r in rows[: QUICK if quick else None]]


def _rows(conn: sqlite3.Connection, expr: str) -> list[tuple[int, float, int]]:
    sql = (
        "SELECT f.rowid, f.rank, length(m.content) FROM messages_fts f JOIN messages m ON m.message_id = f.rowid "
        "WHERE messages_fts MATCH ? ORDER BY f.rank LIMIT ?"
    )
    return conn.execute(sql, (expr, POOL)).fetchall()


def _coverage(conn: sqlite3.Connection, terms: Sequence[str], rowids: list[int]) -> dict[int, float]:
    got = dict.fromkeys(rowids, 0)
    marks = ",".join("?" * len(rowids))
    for term in terms:
        sql = f"SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? AND rowid IN ({marks})"
        for (rowid,) in conn.execute(sql, (term, *rowids)):
            got[rowid] += 1
    return {k: v / len(terms) for k, v in got.items()}


def bm25(q: Question, conn: sqlite3.Connection) -> list[int]:
    words = [w for w in dict.fromkeys(re.findall(r"\w+", q.text.lower())) if w not in STOPWORDS]
    return [r[0] for r in _rows(conn, " OR ".join(f'"{w}"' for w in words))][:LIMIT] if words else []


def banded(and_first: bool, by_coverage: bool) -> Ranker:
    def rank(q: Question, conn: sqlite3.Connection) -> list[int]:
        terms = query_terms(q.text)
        if not terms:
            return []
        rows = _rows(conn, fts_match(terms, "AND")) if and_first else []
        rows = rows or _rows(conn, fts_match(terms, "OR"))
        if not rows or not by_coverage:
            return [r[0] for r in rows][:LIMIT]
        best = rows[0][1]
        cov = _coverage(conn, [t.fts for t in terms], [r[0] for r in rows])
        rows.sort(key=lambda r: -cov[r[0]] * (0.7 + 0.3 * r[1] / best))
        return [r[0] for r in rows][:LIMIT]

    return rank


@contextmanager
def patched(brief: int | None, to_assistant: bool) -> Iterator[None]:
    with mock.patch.object(ranking, "BRIEF_CHARS", brief or ranking.BRIEF_CHARS):
        if to_assistant:
            yield
        else:
            with mock.patch.object(adapter, "addresses_assistant", lambda _query: False):
                yield


def shipped(brief: int | None = None, to_assistant: bool = True) -> Ranker:
    backends: dict[Path, adapter.LosslessBackend] = {}

    def rank(q: Question, conn: sqlite3.Connection) -> list[int]:
        if q.db not in backends:
            settings = adapter.Settings(db_path=str(q.db))
            backends[q.db] = adapter.LosslessBackend("lossless", settings, BackendContext(state_dir=q.base))
        with patched(brief, to_assistant):
            resp = backends[q.db].search_blocking(BackendRequest(q.text, limit=LIMIT, timeout_s=60), threading.Event())
        return [r.extra["message_id"] for r in resp.results]

    return rank


RANKINGS: dict[str, Ranker] = {
    "bm25 (the benches' baseline)": bm25,
    "before: AND first, coverage band": banded(True, True),
    "OR, bm25 order": banded(False, False),
    "OR, coverage band": banded(False, True),
    "+ brevity 400, no exception for 'you'": shipped(400, to_assistant=False),
    "+ brevity 200": shipped(200),
    "+ brevity 300": shipped(300),
    "+ brevity 700": shipped(700),
    "shipped (brevity 400)": shipped(),
}


def score(qs: Sequence[Question], ranker: Ranker) -> tuple[float, float, float]:
    hit1 = hit10 = recall = 0.0
    for q in qs:
        labels = _labels(q.base)
        conn = sqlite3.connect(f"file:{q.db}?mode=ro", uri=True)
        try:
            found = [labels.get(m) for m in ranker(q, conn)[:LIMIT]]
        finally:
            conn.close()
        hit1 += bool(found and found[0] in q.evidence)
        hit10 += bool(q.evidence & set(found))
        recall += len(q.evidence & set(found)) / len(q.evidence)
    n = max(1, len(qs))
    return 100 * hit1 / n, 100 * hit10 / n, 100 * recall / n


_LABELS: dict[Path, dict[int, str]] = {}


def _labels(base: Path) -> dict[int, str]:
    if base not in _LABELS:
        manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
        _LABELS[base] = {int(k): v for k, v in manifest["message_dia"].items()}
    return _LABELS[base]


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    for name, root in BENCHES.items():
        p.add_argument(f"--{name}", type=Path, default=root, help=f"the bench's data folder (default {root})")
    args = p.parse_args()
    measured = 0
    for name in BENCHES:
        qs = questions(getattr(args, name), args.quick)
        if not qs:
            print(f"{name}: no records in {getattr(args, name)}/records (run bench/{name}.py first); nothing measured")
            continue
        measured += 1
        rows = [[label, *(fmt(v) for v in score(qs, ranker))] for label, ranker in RANKINGS.items()]
        table(f"Lossless alone vs BM25, {name} ({len(qs)} questions)", ["ranking", "hit@1", "hit@10", "R@10"], rows)
    return 0 if measured or args.quick else 0


if __name__ == "__main__":
    raise SystemExit(main())
