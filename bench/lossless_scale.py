"""Lossless over synthetic real-schema lcm.db files of 1k / 10k / 100k rows: search latency.

Each size N is a database with N messages and N leaf summaries (``populate_synthetic`` in
``memory_router.backends.lossless.schema``: the plugin's DDL, FTS rows written by app code as the
plugin does), once in the current 0.15.x layout (FTS5) and once without FTS tables (the LIKE
fallback). Every query goes through ``LosslessBackend.search_blocking``: open read-only, schema
check, search, close - the whole per-query cost. Queries:

* ``and``  - every content term is in some rows: the strict FTS5 AND form answers;
* ``or``   - no row holds all terms: AND finds nothing, the relaxed OR form answers;
* ``none`` - no content terms ("why did we do it that way"): the newest summaries.

Target: FTS5 search at 100k rows under 50 ms (median).

    python bench/lossless_scale.py [--quick] [--sizes 1000,10000,100000] [--repeat N] [--dir DIR]
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from _common import fmt, median, parser, percentile, repeats, scratch_dir, table, verdict

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.lossless import adapter as L
from memory_router.backends.lossless.schema import create_lcm_db, populate_synthetic

TARGET_FTS_MS = 50.0
QUERIES = {
    "and": "what did we decide about billing and the queue",
    "or": "billing kubernetes terraform",
    "none": "why did we do it that way",
}


def build(path: Path, n: int, variant: str) -> float:
    """Build the database unless it exists (reuse with --dir); seconds spent."""
    if path.exists():
        return 0.0
    started = time.perf_counter()
    conn = create_lcm_db(path, variant)  # type: ignore[arg-type]
    populate_synthetic(conn, messages=n, summaries=n, conversations=20)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--dir", type=Path, default=None, help="keep (and reuse) the databases here")
    args = p.parse_args()
    sizes = [200] if args.quick else [int(s) for s in args.sizes.split(",")]
    n_repeat = repeats(args, 15)
    root = args.dir or scratch_dir("bench-lossless-")
    root.mkdir(parents=True, exist_ok=True)
    rows, builds = [], []
    for n in sizes:
        for layout in ("current", "no_fts"):
            db = root / f"lcm-{layout}-{n}.db"
            builds.append((f"{n:,} {layout}", fmt(build(db, n, layout), 2)))
            backend = L.create("lossless", L.Settings(db_path=str(db)), BackendContext(state_dir=root, environ={}))
            never = threading.Event()  # no search here is stopped
            for label, query in QUERIES.items():
                request = BackendRequest(query, timeout_s=60)
                backend.search_blocking(request, never)  # warm the page cache and the schema cache
                times = []
                for _ in range(n_repeat):
                    t0 = time.perf_counter()
                    resp = backend.search_blocking(request, never)
                    times.append((time.perf_counter() - t0) * 1000)
                search = "fts5" if layout == "current" else "like"
                target = verdict(median(times), TARGET_FTS_MS) if search == "fts5" else "-"
                rows.append(
                    (
                        f"{n:,}",
                        search,
                        label,
                        resp.status,
                        resp.result_count,
                        fmt(resp.normalized_relevance, 2),
                        fmt(median(times), 2),
                        fmt(percentile(times, 90), 2),
                        target,
                    )
                )
    table(
        "Lossless search (ms per query, open to close)",
        ["rows", "search", "query", "status", "hits", "top", "median", "p90", f"<{TARGET_FTS_MS:.0f} ms"],
        rows,
        note=f"{n_repeat} repeats per row; N messages + N summaries per database",
    )
    table("Database build (s)", ["database", "seconds"], builds, note=f"in {root}; 0 = reused")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
