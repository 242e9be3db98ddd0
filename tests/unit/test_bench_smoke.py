"""CI smoke step for bench/: every benchmark script runs in a tiny mode (--quick, or the
smallest sizes for the scripts other issues wrote), exits 0 and prints its tables. The figures
of such a run mean nothing; speed is measured by running the scripts by hand (README
"Benchmarks"), never asserted in tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# script -> (arguments for a tiny run, the table titles it must print)
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "route_decision.py": (["--quick"], ["Route decision per query", "By matched rule", "By stage"]),
    "overhead.py": (["--quick"], ["Router overhead per query"]),
    "cold_start.py": (["--quick"], ["CLI cold start", "Inside one `query` process", "python -X importtime"]),
    "totalrecall_scale.py": (["--quick"], ["Total Recall search", "Warm search split"]),
    "fallback.py": (["--quick"], ["Fallback cost", "Cooldown on"]),
    "serve_throughput.py": (["--quick"], ["`memory-router serve` over stdin/stdout"]),
    "lossless_scale.py": (["--quick"], ["Lossless search (ms per query, open to close)", "Database build (s)"]),
    "soak.py": (["--quick"], ["Oversized backend output over the socket", "Soak: "]),
    "hostile_memory.py": (["--quick"], ["Total Recall over a 2 MB memory file", "Lossless while"]),
    # Written by the QMD and client issues; only checked to run.
    "daemon_client.py": (["--quick"], []),
    "qmd_search.py": (["--repeats", "1"], []),
    # Builds a qmd index embedded with the MiniLM GGUF; without the model it says so and exits 0.
    "qmd_engine.py": (["--quick"], ["Warm engine versus a process per call (median ratio)"]),
    # Starts fresh `serve` daemons on a MiniLM-embedded qmd index; without qmd or the model it exits 0.
    "warm_start.py": (["--quick"], ["First query of a fresh `serve`, medians of 1 daemons"]),
    # Real qmd; without it the script says so and exits 0.
    "definition_first.py": (["--quick"], []),
    # Starts a real Cognee server (~15-25 s); without the Cognee venv it says so and exits 0.
    "cognee_query.py": (["--quick"], []),
    "cognee_relations.py": (["--quick"], ["Cognee relationship answers, services graph, mode graph, paths auto"]),
}
NOT_SCRIPTS = {"_common.py", "corpus.py", "_instant_adapter.py"}


def test_every_script_is_smoke_tested() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - NOT_SCRIPTS
    assert scripts == set(SCRIPTS), "add new bench scripts to SCRIPTS (with tiny-run arguments)"


def _qmd_installed() -> bool:
    from memory_router.backends import BackendContext, qmd

    context = BackendContext(state_dir=Path("/nonexistent"), cwd=BENCH.parent)
    return qmd.create("qmd", qmd.Settings(), context).probe().ok


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_tiny_and_prints_its_tables(script: str) -> None:
    if script in ("qmd_search.py", "qmd_engine.py", "warm_start.py") and not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    if (
        script in ("qmd_engine.py", "warm_start.py")
        and not (BENCH.parent / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf").is_file()
    ):
        pytest.skip("the MiniLM GGUF is not built (.ci/setup.d/30-qmd-models.sh)")
    args, titles = SCRIPTS[script]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MEMORY_ROUTER_CONFIG", "OPENCLAW_STATE_DIR", "MEMORY_ROUTER_DAEMON")
    }
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (proc.stdout + proc.stderr).strip(), f"{script} printed nothing"
    for title in titles:
        assert f"## {title}" in proc.stdout, f"{script} did not print the table {title!r}:\n{proc.stdout}"
    # Each table has a header rule and at least one data row.
    assert proc.stdout.count("\n--") >= len(titles)
