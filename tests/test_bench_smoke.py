"""CI smoke step for bench/: every benchmark script runs in --quick mode, exits 0 and prints its
tables. The figures of a --quick run mean nothing (tiny sizes, one repeat); speed is measured by
running the scripts by hand (see README "Benchmarks"), never asserted in tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"

# script -> the table titles it must print
SCRIPTS = {
    "route_decision.py": ["Route decision per query", "By matched rule", "By stage"],
    "overhead.py": ["Router overhead per query"],
    "cold_start.py": ["CLI cold start", "Inside one `query` process", "python -X importtime"],
    "totalrecall_scale.py": ["Total Recall search", "Warm search split"],
    "fallback.py": ["Fallback cost"],
    "daemon_client.py": ["memory-router query per call", "python -X importtime of one warm `query`"],
}


def test_every_listed_script_exists() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert set(SCRIPTS) <= scripts, "a bench script listed in SCRIPTS is missing"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_quick_and_prints_its_tables(script: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMORY_ROUTER_CONFIG", "OPENCLAW_STATE_DIR")}
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for title in SCRIPTS[script]:
        assert f"## {title}" in proc.stdout, f"{script} did not print the table {title!r}:\n{proc.stdout}"
    # Each table has a header rule and at least one data row.
    assert proc.stdout.count("\n--") >= len(SCRIPTS[script])
