"""Lossless adapter search latency on synthetic real-schema lcm.db files (1k / 10k / 100k rows).

    python bench/bench_lossless.py [--sizes 1000,10000,100000] [--repeats 15] [--dir DIR] [--json]

For each size N a database with N messages and N summaries is built (once; reused from --dir)
in the current layout and in the no-FTS layout (LIKE fallback), then each query is run
``repeats`` times through ``LosslessBackend.search_sync`` (open, detect, search, close: the full
per-query cost). Prints the median and p90 in milliseconds per (size, layout, query).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends import lossless as L
from memory_router.backends._lcm_schema import create_lcm_db, populate_synthetic
from memory_router.backends.base import BackendRequest

QUERIES = {
    "and": "what did we decide about billing and the queue",  # strict AND hits
    "or": "billing kubernetes terraform",  # AND finds nothing, relaxed to OR
    "none": "why did we do it that way",  # no content terms: newest summaries
}


def build(path: Path, n: int, variant: str) -> Path:
    if not path.exists():
        conn = create_lcm_db(path, variant)  # type: ignore[arg-type]
        populate_synthetic(conn, messages=n, summaries=n, conversations=20)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-lossless-"))
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for variant in ("current", "no_fts"):
            started = time.perf_counter()
            db = build(root / f"lcm-{variant}-{n}.db", n, variant)
            built_s = time.perf_counter() - started
            b = L.create("lossless", L.Settings(db_path=str(db)), BackendContext(state_dir=root, environ={}))
            for label, query in QUERIES.items():
                b.search_sync(BackendRequest(query))  # warm the page cache and the schema cache
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    resp = b.search_sync(BackendRequest(query, timeout_s=30))
                    times.append((time.perf_counter() - t0) * 1000)
                times.sort()
                rows.append({
                    "rows": n, "layout": variant, "query": label, "status": resp.status,
                    "results": resp.result_count, "top": resp.normalized_relevance,
                    "median_ms": round(statistics.median(times), 2),
                    "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
                    "build_s": round(built_s, 1), "sent": resp.query_sent,
                })
                print(f"{n:>7} {variant:8} {label:5} {rows[-1]['median_ms']:>9.2f} ms median "
                      f"{rows[-1]['p90_ms']:>9.2f} ms p90  {resp.status} {resp.result_count} "
                      f"top={resp.normalized_relevance}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
