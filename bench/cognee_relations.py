"""Ranking quality of relationship answers from a REAL Cognee 1.6.5 server (not speed).

    python bench/cognee_relations.py [--mode graph|cypher] [--paths auto|cypher|expand] [--repeat N] [--quick]

Starts the test server (tests/support/cognee: Cognee's own API app from .tools/cognee-venv,
access control on, the FAKE hashed bag-of-words embeddings), or uses a running one given by
$COGNEE_BASE_URL and $COGNEE_API_KEY, and asks the adapter the questions of
tests/support/cognee/relation_questions.py over the "services" graph. Prints:

  right edge at rank 1   relation-type and direction questions whose first result is a right edge
  path complete          path questions whose first result is the whole path, in order
  hops returned          of those paths' hops, how many come back as results of >= 0.4
  unknown entity weak    questions naming an entity the graph lacks whose best result is < 0.4

plus the adapter time per question kind (median over questions of each one's median of
--repeat runs, default 3). --quick: two questions of each kind, one run. Needs the Cognee venv;
exits 0 with a note if it is absent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_router.backends.base import Backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, environment_line, fmt, median, parser, repeats, table  # noqa: E402

sys.path.insert(0, str(REPO))  # the tests' Cognee harness and questions, tests/support/cognee/
from tests.support.cognee import cognee_server as harness  # noqa: E402
from tests.support.cognee import relation_questions as rq  # noqa: E402


def ask_all(
    backend: Backend, mode: str, queries: list[str], repeat: int
) -> dict[str, tuple[list[dict[str, Any]], float]]:
    """Each query's results (first run) and median adapter time over ``repeat`` runs."""
    from memory_router.backends.base import BackendRequest

    async def one(query: str) -> tuple[list[dict[str, Any]], float]:
        times, results = [], None
        for _ in range(repeat):
            t = time.perf_counter()
            r = await backend.search(BackendRequest(query, mode, timeout_s=5.0))
            times.append((time.perf_counter() - t) * 1000)
            assert r.status in ("success", "empty"), r.error_message
            results = results or [res.as_dict() for res in r.results]
        return results or [], median(times)

    return {q: asyncio.run(one(q)) for q in queries}


def path_hops(results: list[dict[str, Any]], nodes: tuple[str, ...]) -> tuple[int, int]:
    """Of the path's hops, how many come back in a result of >= 0.4 (as an edge or in a path)."""
    strong = set()
    for r in results:
        if r["relevance"] < 0.4:
            continue
        if edge := rq.edge_of(r):
            strong.add(frozenset((edge[0], edge[2])))
        p = r.get("path_nodes") or []
        strong |= {frozenset(pair) for pair in zip(p, p[1:], strict=False)}
    pairs = {frozenset(pair) for pair in zip(nodes, nodes[1:], strict=False)}
    return len(pairs & strong), len(pairs)


def score(
    answers: dict[str, tuple[list[dict[str, Any]], float]],
    edges: Sequence[rq.EdgeQuestion],
    paths: Sequence[rq.PathQuestion],
    unknown: Sequence[rq.UnknownQuestion],
) -> tuple[list[list[str]], list[str]]:
    rows: list[list[str]] = []
    misses: list[str] = []

    def first(q: str) -> str | None:
        results = answers[q][0]
        return results[0]["content"] if results else None

    right = [q for q in edges if answers[q.query][0] and rq.edge_of(answers[q.query][0][0]) in q.best]
    misses += [f"edge    {q.query!r}: first {first(q.query)!r}" for q in edges if q not in right]
    rows.append(["right edge at rank 1", f"{len(right)}/{len(edges)}", fmt(median(answers[q.query][1] for q in edges))])
    whole = [q for q in paths if answers[q.query][0] and rq.path_of(answers[q.query][0][0]) == q.nodes]
    misses += [f"path    {q.query!r}: first {first(q.query)!r}" for q in paths if q not in whole]
    rows.append(
        ["path complete (rank 1)", f"{len(whole)}/{len(paths)}", fmt(median(answers[q.query][1] for q in paths))]
    )
    hops = [path_hops(answers[q.query][0], q.nodes) for q in paths]
    rows.append(["path hops returned (>= 0.4)", f"{sum(h for h, _ in hops)}/{sum(n for _, n in hops)}", ""])
    best = {q.query: (answers[q.query][0] or [{"relevance": 0.0}])[0]["relevance"] for q in unknown}
    misses += [f"unknown {q!r}: best {b} {first(q)!r}" for q, b in best.items() if b >= 0.4]
    weak = sum(b < 0.4 for b in best.values())
    rows.append(["unknown entity weak (< 0.4)", f"{weak}/{len(unknown)}", fmt(median(answers[q][1] for q in best))])
    return rows, misses


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--mode", default="graph", choices=["graph", "cypher"])
    ap.add_argument("--paths", default="auto", choices=["auto", "cypher", "expand"])
    args = ap.parse_args()
    n = repeats(args, 3)
    from memory_router.backends.cognee import adapter

    srv = None
    if os.environ.get("COGNEE_BASE_URL") and os.environ.get("COGNEE_API_KEY"):
        env = {"COGNEE_BASE_URL": os.environ["COGNEE_BASE_URL"], "COGNEE_API_KEY": os.environ["COGNEE_API_KEY"]}
    else:
        python = harness.cognee_python()
        if python is None:
            print("no Cognee venv (.tools/cognee-venv): run `bash .ci/setup.d/40-cognee.sh`", file=sys.stderr)
            return 0
        srv = harness.start(python)
        env = {"COGNEE_BASE_URL": srv.base_url, "COGNEE_API_KEY": srv.api_key}
    backend = adapter.CogneeBackend("cognee", adapter.Settings(datasets=("services",), paths=args.paths), env)
    cut = 2 if args.quick else None
    edges, paths, unknown = rq.EDGE_QUESTIONS[:cut], rq.PATH_QUESTIONS[:cut], rq.UNKNOWN_QUESTIONS[:cut]
    try:
        queries = [q.query for q in edges] + [q.query for q in paths] + [q.query for q in unknown]
        rows, misses = score(ask_all(backend, args.mode, queries, n), edges, paths, unknown)
        table(
            f"Cognee relationship answers, services graph, mode {args.mode}, paths {args.paths}",
            ["measure", "score", "median ms"],
            rows,
            note=f"adapter time per question, median of {n} runs; {environment_line()}",
        )
        for line in misses:
            print("  miss: " + line)
    finally:
        if srv is not None:
            srv.stop()
            shutil.rmtree(srv.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
