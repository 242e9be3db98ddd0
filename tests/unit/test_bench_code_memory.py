"""bench/code_memory.py: the labelling rule (a result holds a gold id when it is from the gold file
and the lines it shows overlap the gold span, however the backend spells the path), the AST
generator's ground truth on a tiny fixture repository (each query names what its gold lines hold,
fires the rule it is written for, and comes out the same every time), MRR and status-against-truth
arithmetic; and, slow, the generator on the real repository and a quick run through real qmd whose
records follow that rule."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from _code_queries import PER_KIND, Query, generate, group_of, labelled_results, parse_gold, words  # noqa: E402
from code_memory import quality, status_truth  # noqa: E402

from memory_router.config.router_config import load_config  # noqa: E402

from .test_bench_smoke import _qmd_installed, run_bench  # noqa: E402

ENGINE = '''\
class TaskRunner:
    """Run queued jobs one after another."""

    def submit_job(self, job):
        """Queue a job for the runner."""
        return self._queue_item(job)

    def _queue_item(self, job):
        return job


@staticmethod
def start_engine(runner):
    """Start the engine with the given runner."""
    runner.submit_job(1)
    runner.submit_job(2)
    return TaskRunner()
'''
HELPERS = '''\
from pkg.core.engine import start_engine, TaskRunner


def build_default_runner():
    """Create the default runner and start the engine with it."""
    runner = TaskRunner()
    start_engine(runner)
    return start_engine(runner)


def parse_config_text(text):
    """Read settings from the given text."""
    return dict(line.split("=") for line in text.splitlines())


def merge_settings_layers(base, extra):
    """Combine two settings layers into one."""
    return {**base, **extra}


def format_report_line(name, value):
    """Returns one report line for a name and its value."""
    return f"{name}: {value}"
'''
# Every definition query of the fixture, and one query of each other kind.
FIXTURE_PER_KIND = {k: 10 if k in ("function", "class", "usages") else 1 for k in PER_KIND}


def routes(text: str) -> str:
    return load_config().rules.match(text).rule.id


@pytest.fixture
def fixture_repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg" / "core").mkdir(parents=True)
    (tmp_path / "pkg" / "util").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core" / "engine.py").write_text(ENGINE)
    (tmp_path / "pkg" / "util" / "helpers.py").write_text(HELPERS)
    return tmp_path


def test_a_result_holds_a_gold_id_when_its_shown_lines_overlap_the_span() -> None:
    repo = Path("/w/repo")
    gold = ["pkg/core/engine.py:4-6"]
    results: list[dict[str, Any]] = [
        {"path": "qmd://code/pkg/core/engine.py", "line": 4, "content": "def submit_job(self, job):\n    ..."},
        {"path": "/w/repo/pkg/core/engine.py", "line": 8, "content": "x"},  # shows 7-9: touches nothing
        {"path": "pkg/core/engine.py", "line": 7, "content": "x"},  # shows 6-8: its first line is the span's last
        {"path": "qmd://code/pkg/util/helpers.py", "line": 5, "content": "x"},  # another file
        {"path": "pkg/core/engine.py", "content": "def submit_job"},  # no line: nothing to place
        {"path": "/elsewhere/pkg/core/engine.py", "line": 5, "content": "x"},  # not under the repository
    ]
    out = labelled_results(results, repo, gold)
    assert [r["hit"] for r in out] == [True, False, True, False, False, False]
    # A whole-file gold id (a path query's): any result from that file holds it, with a line or not.
    whole = labelled_results(results, repo, ["pkg/core/engine.py"])
    assert [r["hit"] for r in whole] == [True, True, True, False, True, False]
    assert out[0]["dia_ids"] == gold and out[1]["dia_ids"] == []
    assert [r["rank"] for r in out] == [1, 2, 3, 4, 5, 6]
    assert out[0]["line"] == 4  # the result's own keys are kept


def test_generated_queries_name_what_their_gold_lines_hold(fixture_repo: Path) -> None:
    queries = generate(fixture_repo, routes, FIXTURE_PER_KIND)
    assert queries == generate(fixture_repo, routes, FIXTURE_PER_KIND)  # seeded: the same set every time
    assert {q.kind for q in queries} == set(PER_KIND)
    for q in queries:
        assert routes(q.question) == q.category, q  # each fires the rule it is written for
        assert q.group == group_of(parse_gold(q.evidence[0])[0])
        for gid in q.evidence:
            path, first, last = parse_gold(gid)
            lines = (fixture_repo / path).read_text().split("\n")[first - 1 : last] if first else []
            shown = "\n".join(lines)
            if q.kind in ("dir", "file"):  # a whole file, one that defines the name asked for
                assert first == last == 0
                defined = re.findall(r"(?:def|class) (\w+)", (fixture_repo / path).read_text())
                assert any(words(d) == words(q.question.split(" for ")[-1].split(" in ")[0]) for d in defined), q
            if q.kind in ("function", "class"):
                name = q.question.split()[-1]
                assert re.search(rf"^\s*(?:async )?(?:def|class) {re.escape(name)}\b", shown, re.M), (q, shown)
            if q.kind == "usages":
                name = q.question.removeprefix("find all usages of ")
                assert name in shown and not re.search(rf"(?:def|class) {name}\b", shown), (q, shown)
            if q.kind == "file":
                assert path == q.question.split(" in ")[1]
            if q.kind == "dir":
                folder = q.question.removeprefix("search in ").split("/*.py")[0]
                assert PurePosixPath(path).parent.as_posix() == folder
            if q.kind in ("doc", "explain"):
                # The docstring's sentence past its verb ("Returns" is asked as "return").
                assert " ".join(q.question.removeprefix("explain how to ").split()[1:]) in " ".join(shown.split())
            if q.kind in ("how", "words"):
                defined = re.findall(r"(?:def|class) (\w+)", shown)
                assert any(words(d) in q.question for d in defined), (q, shown)
    usages = next(q for q in queries if q.question == "find all usages of start_engine")
    # The import (line 1) and two calls in helpers.py (lines 7 and 8); not the definition.
    assert usages.evidence == ("pkg/util/helpers.py:1-1", "pkg/util/helpers.py:7-7", "pkg/util/helpers.py:8-8")
    finder = next(q for q in queries if q.question == "find the function start_engine")
    assert finder.evidence == ("pkg/core/engine.py:12-14",)  # decorator to docstring: the definition's head
    assert finder.category == "exact_symbol" and finder.group == "pkg/core"


def test_mrr_and_status_against_the_truth() -> None:
    def rec(status: str, hits: list[bool]) -> dict:
        return {"status": status, "results": [{"rank": i, "hit": h} for i, h in enumerate(hits, 1)]}

    records = [rec("success", [True]), rec("partial", [False, False, True]), rec("success", [False]), rec("empty", [])]
    q = quality(records)
    assert (q["hit@1"], q["hit@10"]) == (25.0, 50.0) and q["MRR@10"] == pytest.approx(100 * (1 + 1 / 3) / 4)
    assert status_truth(records) == {
        "right": 1,
        "right_success": 100.0,
        "wrong": 3,
        "wrong_not_success": pytest.approx(200 / 3),
    }


@pytest.mark.slow
def test_the_real_repository_gives_the_full_balanced_set(tmp_path: Path) -> None:
    """The installed anyio copied as the bench copies it: ~32 queries per rule, and every
    definition query's gold head holds the definition it names."""
    import _code_workspace

    version, files = _code_workspace.distribution()
    _code_workspace._copy(files, version, tmp_path)
    assert (tmp_path / "LICENSE").is_file() and (tmp_path / "SOURCE.md").is_file()
    queries: list[Query] = generate(tmp_path, routes)
    per_rule = {c: sum(q.category == c for q in queries) for c in ("exact_symbol", "concept", "file_path", "default")}
    assert per_rule == {"exact_symbol": 32, "concept": 32, "file_path": 32, "default": 32}
    for q in queries:
        if q.kind in ("function", "class"):
            name = q.question.split()[-1]
            for gid in q.evidence:
                path, first, last = parse_gold(gid)
                shown = "\n".join((tmp_path / path).read_text().split("\n")[first - 1 : last])
                assert re.search(rf"(?:def|class) {re.escape(name)}\b", shown), (q, shown)


@pytest.mark.slow
def test_quick_run_records_follow_the_labelling_rule(tmp_path: Path) -> None:
    if not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    records = tmp_path / "records"
    proc = run_bench("code_memory.py", "--quick", "--work", str(tmp_path / "work"), "--records", str(records))
    assert "## Code memory (anyio-" in proc.stdout and "## Status against the truth" in proc.stdout
    for variant in ("router", "alone:qmd:search", "bm25"):
        rows = [json.loads(line) for line in (records / f"{variant}.jsonl").read_text().splitlines()]
        assert len(rows) == len(PER_KIND) and len({r["qid"] for r in rows}) == len(rows)
        for r in rows:
            assert r["bench"] == "code" and r["category"] in ("exact_symbol", "concept", "file_path", "default")
            if variant == "router":
                assert r["rule"]["id"] == r["category"]  # the router fired the rule the query is written for
            for result in r["results"]:
                assert result["hit"] == bool(result["dia_ids"]) and set(result["dia_ids"]) <= set(r["evidence"])
                for gid in result["dia_ids"]:
                    path, first, last = parse_gold(gid)
                    assert result["path"].endswith(path)
                    if first:  # a line span: the result's line is at most one line before its end
                        assert result["line"] - 1 <= last
