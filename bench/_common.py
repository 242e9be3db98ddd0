"""Shared helpers for the bench/ scripts: argument parsing, statistics, small tables.

The scripts are plain programs (``python bench/<name>.py [--quick]``); they import the installed
``memory_router`` package, so run them with the interpreter of the environment you measure
(``.venv/bin/python bench/route_decision.py``). ``--quick`` shrinks every size and repeat count so
the CI smoke test only checks that each script runs and prints its table; its figures mean
nothing.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Where the retrieval benches keep their workspaces, qmd indexes and records between runs (large:
# CoSQA's embedded index is gigabytes, so they are reused); MEMORY_ROUTER_BENCH_DATA puts them
# elsewhere, for example one folder shared by several checkouts.
BENCH_DATA = Path(os.environ.get("MEMORY_ROUTER_BENCH_DATA") or REPO / ".bench-data")


def scratch_dir(prefix: str) -> Path:
    """A new temporary directory, removed when the script exits (after its own cleanup, on an
    error too): the CI smoke test runs every script, and /tmp must not fill up with their data."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick", action="store_true", help="tiny sizes and one repeat (CI smoke test; figures meaningless)"
    )
    p.add_argument("--repeat", type=int, default=None, help="repeats per measurement (default per script)")
    return p


def repeats(args: argparse.Namespace, default: int) -> int:
    if args.repeat is not None:
        repeat: int = args.repeat  # argparse: type=int
        return max(1, repeat)
    return 1 if args.quick else default


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct in 0..100) of unsorted values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else math.nan


def fmt(value: float, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], note: str | None = None) -> None:
    """Print a small aligned table (first column left-aligned, the rest right-aligned)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        padded = (c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        return "  ".join(padded).rstrip()

    print(f"\n## {title}")
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    if note:
        print(note)
    sys.stdout.flush()


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a random positive scores above a random negative), ties counted half (Mann-Whitney): how
    well one number (a relevance) tells right answers from wrong ones."""
    if not positive or not negative:
        return math.nan
    scored = sorted([(v, 1) for v in positive] + [(v, 0) for v in negative])
    rank_sum, i = 0.0, 0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j][0] == scored[i][0]:
            j += 1
        rank_sum += sum(label for _, label in scored[i:j]) * (i + j + 1) / 2  # mid-rank of the tie block
        i = j
    n = len(positive)
    return (rank_sum - n * (n + 1) / 2) / (n * len(negative))


def verdict(value: float, target: float, *, below: bool = True) -> str:
    """'ok' if the figure meets the target, else 'MISSED'."""
    if math.isnan(value):
        return "-"
    return "ok" if (value < target if below else value > target) else "MISSED"


def environment_line() -> str:
    import platform

    try:
        load = f"load average {os.getloadavg()[0]:.1f}"
    except OSError:
        load = "load average unknown"
    # The load average matters: on a shared machine, preemption shows up in every p99.
    return (
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {load}"
    )


def router_report(
    summaries: Mapping[str, Mapping[str, Any]],
    *,
    unit: str,
    sections: Sequence[tuple[str, str]],
    holds: str = "holding evidence",
) -> None:
    """The retrieval benches' closing tables, one run's variants each: for every routed variant
    (not ``bm25`` nor ``alone:...``) how its answers were reached (``sections``: a summary key and
    its title), then each variant's calibration buckets, its per-result calibration (results that
    ``holds``), and its status and error codes. ``unit``: what the bench counts ("questions")."""
    for name, s in summaries.items():
        if name == "bm25" or name.startswith("alone:"):
            continue
        total = s["overall"][unit]
        for key, title in sections:
            table(
                f"Router {name}: {title}",
                [key, unit, "%"],
                [[k, v, fmt(100 * v / total)] for k, v in s[key].items()] or [["-", 0, "-"]],
            )
    for name, s in summaries.items():
        for by, rows in s["calibration"].items():
            table(
                f"Calibration {name}, answered by {by}: normalized_relevance bucket -> hit rate",
                ["bucket", "answers", "share %", "hit@10 %", "hit@1 %"],
                [[r["bucket"], r["answers"], fmt(r["share"]), fmt(r["hit@10"]), fmt(r["hit@1"])] for r in rows],
            )
    for name, s in summaries.items():
        groups = s.get("result_calibration")
        if groups:
            buckets = [r["bucket"] for r in next(iter(groups.values()))]
            table(
                f"Per-result calibration {name}: each result's relevance bucket -> % of results {holds} (n)",
                ["answered by", *buckets],
                [[by, *[f"{fmt(r['hit'])} ({r['results']})" for r in rows]] for by, rows in groups.items()],
            )
    for name, s in summaries.items():
        print(f"{name}: status {s['status']}" + (f", error codes {s['error_codes']}" if s["error_codes"] else ""))
