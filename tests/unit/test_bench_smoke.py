"""CI smoke step for bench/: every benchmark script runs in a tiny mode (--quick, or the
smallest sizes for the scripts other issues wrote), exits 0 and prints its tables. The figures
of such a run mean nothing; speed is measured by running the scripts by hand (docs/benchmarks.md),
never asserted in tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..openclaw._support import openclaw_missing
from ..support.cognee.cognee_server import cognee_python

BENCH = Path(__file__).resolve().parents[2] / "bench"

# script -> (arguments for a tiny run, the table titles it must print)
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "route_decision.py": (["--quick"], ["Route decision per query", "By matched rule", "By stage"]),
    "overhead.py": (["--quick"], ["Router overhead per query"]),
    "cold_start.py": (["--quick"], ["CLI cold start", "Inside one `query` process", "python -X importtime"]),
    "totalrecall_scale.py": (["--quick"], ["Total Recall search", "Warm search split"]),
    "totalrecall_excerpt.py": (["--quick"], ["Total Recall warm search over"]),
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
    # The real-OpenClaw row takes a minute of set-up: left out of the smoke run.
    "openclaw_plugin.py": (
        ["--quick", "--skip-openclaw"],
        ["memory query cost: the OpenClaw plugin vs the skill's exec path (ms)"],
    ),
    # Reads the LoCoMo files outside the repository; without them it says so and exits 0
    # (test_locomo_quick_run_scores_every_question_once checks its figures).
    "locomo.py": (["--quick"], []),
    # Real qmd over a copy of the installed anyio (without qmd or anyio it says so and exits 0);
    # test_bench_code_memory checks its records.
    "code_memory.py": (["--quick"], ["Code memory (anyio-", "Status against the truth per kind of query"]),
    # Reads the LongMemEval files outside the repository; without them it says so and exits 0
    # (test_bench_longmemeval checks its records on a fixture).
    "longmemeval.py": (["--quick"], []),
    # Reads the CoSQA files outside the repository (without them it says so and exits 0); the
    # quick run embeds 35 functions with MiniLM (test_bench_cosqa checks its records).
    "cosqa.py": (["--quick"], []),
    # Reads the LoCoMo and LongMemEval benches' records and workspaces (.bench-data, or
    # $MEMORY_ROUTER_BENCH_DATA); without them it says so and exits 0.
    "lossless_ranking.py": (["--quick"], []),
}
NOT_SCRIPTS = {"_common.py", "corpus.py", "_instant_adapter.py", "_locomo_data.py", "_locomo_score.py"}
NOT_SCRIPTS |= {"_locomo_workspace.py", "_qmd_index.py"}
NOT_SCRIPTS |= {"_code_queries.py", "_code_workspace.py"}
NOT_SCRIPTS |= {"_longmemeval_workspace.py"}
NOT_SCRIPTS |= {"_cosqa_workspace.py", "_serve.py"}
# Needs the records of a LoCoMo run: test_locomo_quick_run_scores_every_question_once runs it on them.
NOT_SCRIPTS |= {"fit_calibration.py"}
# Reads router records of real bench runs: tests/unit/test_bench_status_truth.py runs it on a tiny set.
NOT_SCRIPTS |= {"status_truth.py"}
# Reads router records of real bench runs: tests/unit/test_bench_abstention.py runs it on a tiny set.
NOT_SCRIPTS |= {"abstention.py"}
# Reads the alone records of real bench runs: tests/unit/test_bench_rule7_replay.py runs it on a tiny set.
NOT_SCRIPTS |= {"rule7_replay.py"}
# Reads the alone records of the chat benches: tests/unit/test_bench_fill_replay.py runs it on a tiny set.
NOT_SCRIPTS |= {"fill_replay.py"}
# Three minutes of the real OpenClaw even when tiny: test_locomo_openclaw_quick_run_... runs it once.
NOT_SCRIPTS |= {"locomo_openclaw.py"}
# The LoCoMo files in the shared folder beside the checkout, or beside one of its ancestors (a worktree).
LOCOMO = Path(
    os.environ.get("LOCOMO_DIR")
    or next(
        (
            p / "shared" / "data" / "locomo-dev"
            for p in BENCH.parents
            if (p / "shared" / "data" / "locomo-dev").is_dir()
        ),
        BENCH.parents[1] / "shared" / "data" / "locomo-dev",
    )
)


def test_every_script_is_smoke_tested() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - NOT_SCRIPTS
    assert scripts == set(SCRIPTS), "add new bench scripts to SCRIPTS (with tiny-run arguments)"


def _qmd_installed() -> bool:
    from memory_router.backends import BackendContext
    from memory_router.backends.qmd import adapter as qmd

    context = BackendContext(state_dir=Path("/nonexistent"), cwd=BENCH.parent)
    return qmd.create("qmd", qmd.Settings(), context).probe().ok


def run_bench(script: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python bench/<script> <args>`` from the repository root, as the benchmarks' docs run it,
    asserting it exits 0 (else its stderr's tail is the failure). The caller's own state, config,
    daemon and OpenClaw set-up stay out of it; where qmd is (MEMORY_ROUTER_QMD/NODE) stays, as
    _qmd_installed saw it."""
    own = ("MEMORY_ROUTER_CONFIG", "MEMORY_ROUTER_STATE_DIR", "MEMORY_ROUTER_DAEMON", "MEMORY_ROUTER_SOCKET")
    env = {k: v for k, v in os.environ.items() if k not in own and not k.startswith("OPENCLAW_")}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_tiny_and_prints_its_tables(script: str) -> None:
    if script in ("qmd_search.py", "qmd_engine.py", "warm_start.py") and not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    if (
        script in ("qmd_engine.py", "warm_start.py")
        and not (BENCH.parent / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf").is_file()
    ):
        pytest.skip("the MiniLM GGUF is not built (.ci/setup.d/30-qmd-models.sh)")
    if script == "cognee_relations.py" and cognee_python() is None:
        # Without the venv the script only says so and exits 0: none of its tables to check.
        pytest.skip("the Cognee venv (.tools/cognee-venv) is not installed: run `bash .ci/setup.d/40-cognee.sh`")
    args, titles = SCRIPTS[script]
    proc = run_bench(script, *args)
    assert (proc.stdout + proc.stderr).strip(), f"{script} printed nothing"
    for title in titles:
        assert f"## {title}" in proc.stdout, f"{script} did not print the table {title!r}:\n{proc.stdout}"
    # Each table has a header rule and at least one data row.
    assert proc.stdout.count("\n--") >= len(titles)


RECORD_KEYS = {
    "variant", "conv", "qid", "category", "question", "evidence", "status", "error_code", "normalized_relevance",
    "rule", "routed_to", "routed_mode", "fallbacks_used", "duration_ms", "attempts", "results",
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not (LOCOMO / "30.json").is_file(), reason=f"the LoCoMo development files are not in {LOCOMO}")
def test_locomo_quick_run_scores_every_question_once(tmp_path: Path) -> None:
    """bench/locomo.py --quick: one conversation, 20 questions, the router, qmd search alone and
    BM25. The report has every metric, in range, and every question has exactly one record per
    variant, labelled consistently with its evidence."""
    import json

    if not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    proc = run_bench(
        "locomo.py",
        *("--quick", "--json", str(tmp_path / "r.json"), "--work", str(tmp_path / "work")),
        *("--records", str(tmp_path / "records"), "--data", str(LOCOMO)),
        timeout=120,
    )
    for title in ("LoCoMo dev half", "Evidence recall@10 per category", "Router router: why", "Calibration bm25"):
        assert f"## {title}" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["questions"] == 20 and set(report["variants"]) == {"router", "alone:qmd:search", "bm25"}
    for name, summary in report["variants"].items():
        q = summary["overall"]
        assert q["questions"] == 20
        assert 0 <= q["hit@1"] <= q["hit@5"] <= q["hit@10"] <= 100, (name, q)
        assert 0 <= q["recall@5"] <= q["recall@10"] <= 100, (name, q)
        assert q["hit@10"] > 0, f"{name}: nothing labelled as a hit: the labelling is broken"
        assert summary["latency_ms"]["median"] <= summary["latency_ms"]["p95"]
        for rows in summary["calibration"].values():
            buckets, usable = rows[:5], rows[5]  # [0,.2) .. [.8,1], then ">= 0.4"
            assert usable["answers"] == sum(r["answers"] for r in buckets[2:])
            assert sum(r["share"] for r in buckets) == pytest.approx(100.0)
        records = [json.loads(line) for line in (tmp_path / "records" / f"{name}.jsonl").read_text().splitlines()]
        assert len(records) == 20 and len({r["qid"] for r in records}) == 20  # each question answered once
        for r in records:
            assert set(r) == RECORD_KEYS and r["variant"] == name
            assert [x["rank"] for x in r["results"]] == list(range(1, len(r["results"]) + 1))
            assert len(r["results"]) <= 10
            for x in r["results"]:
                assert x["hit"] == bool(set(x["dia_ids"]) & set(r["evidence"]))
    router = report["variants"]["router"]
    assert sum(router["outcome"].values()) == 20 and sum(router["fallbacks_used"].values()) == 20
    # The calibration fitter takes these records as they are: it fits the one backend it has
    # (qmd search alone), prints its tables, and writes a file the router can load.
    from memory_router.core.calibration import parse

    fitted = run_bench(
        "fit_calibration.py",
        "--records",
        str(tmp_path / "records"),
        "--write",
        str(tmp_path / "calibration.json"),
        timeout=120,
    )
    assert "**qmd:search**" in fitted.stdout and "| spec table, calibrated |" in fitted.stdout
    maps = parse(json.loads((tmp_path / "calibration.json").read_text()))
    assert set(maps) == {"qmd:search"}  # only what was measured is mapped
    assert all(m.native >= 0 and m.coverage >= 0 for m in maps.values())


@pytest.mark.slow
@pytest.mark.skipif(not (LOCOMO / "30.json").is_file(), reason=f"the LoCoMo development files are not in {LOCOMO}")
def test_locomo_openclaw_quick_run_asks_memory_core_and_the_plugin_the_same_questions(tmp_path: Path) -> None:
    """bench/locomo_openclaw.py --quick: one conversation, 4 questions, through the real OpenClaw's
    memory_search twice, memory-core's (keyword) and the memory-router plugin's. Both tables come
    from the same scorer; every question has one record per system; memory-core's hits are its
    notes, labelled, all scored under its own 0.35 floor (its 30-day decay from today on 2023
    notes); the plugin's come from memory-router's backends and some hold the evidence."""
    import json

    if openclaw_missing():
        pytest.skip(openclaw_missing() or "")
    if not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    proc = run_bench(
        "locomo_openclaw.py",
        *("--quick", "--questions", "4", "--json", str(tmp_path / "r.json"), "--work", str(tmp_path / "work")),
        *("--records", str(tmp_path / "records"), "--data", str(LOCOMO)),
        timeout=900,
    )
    for title in ("LoCoMo dev half inside OpenClaw", "Evidence found in the first 10 hits", "memory-core: its hits"):
        assert f"## {title}" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["systems"]) == {"memory-core:keyword", "memory-router"}
    for name, summary in report["systems"].items():
        q = summary["overall"]
        assert q["questions"] == 4, name
        assert 0 <= q["hit@1"] <= q["hit@5"] <= q["hit@10"] <= 100, (name, q)
        assert 0 <= q["recall@5"] <= q["recall@10"] <= 100, (name, q)
        records = [json.loads(line) for line in (tmp_path / "records" / f"{name.replace(':', '_')}.jsonl").open()]
        assert len({r["qid"] for r in records}) == len(records) == 4
        for r in records:
            assert len(r["results"]) <= 10
            for x in r["results"]:
                assert x["hit"] == bool(set(x["dia_ids"]) & set(r["evidence"]))
    core = [json.loads(line) for line in (tmp_path / "records" / "memory-core_keyword.jsonl").open()]
    hits = [x for r in core for x in r["results"]]
    assert hits and all(x["path"].startswith("memory/") and x["dia_ids"] for x in hits)
    assert {r["routed_mode"] for r in core} == {"keyword-only"}  # no embedding provider: keywords only
    assert report["systems"]["memory-core:keyword"]["memory_core"]["under_floor"] == 100.0
    router = [json.loads(line) for line in (tmp_path / "records" / "memory-router.jsonl").open()]
    assert {x["source"] for r in router for x in r["results"]} <= {"qmd", "totalrecall", "lossless"}
    assert report["systems"]["memory-router"]["overall"]["hit@10"] > 0, "the plugin's hits were never labelled"
