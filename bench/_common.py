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
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
