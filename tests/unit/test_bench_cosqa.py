"""bench/cosqa.py: the labelling rule (a result hits when its file is the gold function's module,
however the backend spells the path), hit@k/MRR and status-against-truth arithmetic, the stable
cross-validation groups, the deterministic subset; and, slow, a quick run over a tiny fixture
corpus through real qmd whose records follow that rule."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from _cosqa_workspace import Function, subset  # noqa: E402
from cosqa import group_of, labelled_results, quality, status_truth, workspace_path  # noqa: E402

from .test_bench_smoke import _qmd_installed, run_bench  # noqa: E402

WORKSPACE = Path("/w/full/workspace")
GOLD = "src/maple/is_iterable.py"


def test_a_result_hits_only_when_its_file_is_the_gold_module() -> None:
    results = [
        {"path": "qmd://code/src/maple/is_iterable.py", "source": "qmd", "relevance": 0.5, "line": 1},
        {"path": str(WORKSPACE / GOLD), "source": "totalrecall", "relevance": 0.4},
        {"path": GOLD, "source": "bm25", "relevance": 0.9},
        {"path": "qmd://code/src/maple/is_iterable_2.py", "source": "qmd", "relevance": 0.8},
        {"path": "/elsewhere/src/maple/is_iterable.py", "source": "totalrecall", "relevance": 0.3},
        {"content": "def is_iterable(x): ...", "source": "lossless", "relevance": 0.7},  # no path: no file
    ]
    out = labelled_results(results, WORKSPACE, GOLD)
    assert [r["hit"] for r in out] == [True, True, True, False, False, False]
    assert [r["dia_ids"] for r in out] == [[GOLD], [GOLD], [GOLD], ["src/maple/is_iterable_2.py"], [], []]
    assert [r["rank"] for r in out] == [1, 2, 3, 4, 5, 6]
    assert out[0]["line"] == 1  # the result's own keys are kept
    assert workspace_path({"path": ""}, WORKSPACE) is None


def test_hit_at_k_mrr_and_status_against_the_truth() -> None:
    def rec(status: str, hits: list[bool]) -> dict:
        return {"status": status, "results": [{"rank": i, "hit": h} for i, h in enumerate(hits, 1)]}

    records = [
        rec("success", [True]),
        rec("partial", [False, False, True]),
        rec("success", [False]),
        rec("empty", []),
        rec("partial", [True, False]),
    ]
    q = quality(records)
    assert (q["hit@1"], q["hit@10"]) == (40.0, 60.0)
    assert q["mrr@10"] == pytest.approx(100 * (1 + 1 / 3 + 1) / 5)
    truth = status_truth(records)
    # right top-1: 2, one says success; wrong (or none): 3, two do not say success
    assert truth == {"right": 2, "right_success": 50.0, "wrong": 3, "wrong_not_success": pytest.approx(200 / 3)}


def test_groups_are_five_stable_buckets() -> None:
    groups = {group_of(f"cosqa-train-{i}") for i in range(200)}
    assert groups == {"b0", "b1", "b2", "b3", "b4"}
    assert group_of("cosqa-train-8333") == group_of("cosqa-train-8333")


def test_the_subset_keeps_every_gold_function_and_a_fixed_share_of_the_rest() -> None:
    corpus = [Function(idx=i, code=f"def f{i}(): pass", path=f"src/elm/f{i}.py") for i in range(50)]
    picked = subset(corpus, {3, 40}, 5)
    assert {3, 40} <= {f.idx for f in picked} and len(picked) == 7
    assert picked == subset(list(reversed(corpus)), {3, 40}, 5)[::-1]  # by hash, not by order
    assert subset(corpus, {3}, None) == corpus


FIXTURE = [
    ("def is_iterable(obj):\n    \"\"\"Check if a variable is iterable.\"\"\"\n    try:\n        iter(obj)\n"
     "    except TypeError:\n        return False\n    return True", "src/maple/is_iterable.py"),
    ("def read_yaml(path):\n    \"\"\"Load a YAML file into a dict.\"\"\"\n    import yaml\n"
     "    with open(path) as f:\n        return yaml.safe_load(f)", "src/birch/read_yaml.py"),
    ("def flatten(lists):\n    \"\"\"Flatten a list of lists.\"\"\"\n    return [x for l in lists for x in l]",
     "src/cedar/flatten.py"),
    ("def http_get(url):\n    \"\"\"Download a web page.\"\"\"\n    import urllib.request\n"
     "    return urllib.request.urlopen(url).read()", "src/elm/http_get.py"),
]  # fmt: skip
QUERIES = [("q-1", "python check if a variable is iterable", 0), ("q-2", "python load yaml file", 1)]


@pytest.mark.slow
def test_quick_run_records_follow_the_labelling_rule(tmp_path: Path) -> None:
    if not _qmd_installed():
        pytest.skip("qmd is not installed (.ci/setup.d/20-qmd.sh)")
    data = tmp_path / "data"
    data.mkdir()
    with gzip.open(data / "corpus.jsonl.gz", "wt") as out:
        out.writelines(json.dumps({"idx": i, "code": c, "path": p}) + "\n" for i, (c, p) in enumerate(FIXTURE))
    with gzip.open(data / "dev.jsonl.gz", "wt") as out:
        out.writelines(json.dumps({"qid": q, "query": t, "retrieval_idx": g}) + "\n" for q, t, g in QUERIES)
    proc = run_bench(
        "cosqa.py",
        *("--quick", "--no-embed", "--data", str(data), "--work", str(tmp_path / "work")),
        *("--records", str(tmp_path / "records"), "--json", str(tmp_path / "r.json")),
        *("--variant", "alone:qmd:search", "--variant", "bm25", "--variant", "router"),
        timeout=120,
    )
    assert "## CoSQA dev: hit@k and MRR@10" in proc.stdout and "## Status against the truth" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["queries"] == 2 and report["functions"] == 4
    # Each query names its function's own words: BM25 ranks both first; qmd search the first
    # (for the second it sends qmd only "python", which no function holds).
    assert report["variants"]["bm25"]["overall"]["hit@1"] == 100.0
    assert report["variants"]["alone:qmd:search"]["overall"]["hit@1"] >= 50.0
    for name in ("alone:qmd:search", "bm25", "router"):
        records = [json.loads(line) for line in (tmp_path / "records" / f"{name}.jsonl").read_text().splitlines()]
        assert [r["qid"] for r in records] == ["q-1", "q-2"]
        for r, (_, _, gold) in zip(records, QUERIES, strict=True):
            assert r["bench"] == "cosqa" and r["variant"] == name and r["conv"] == group_of(r["qid"])
            assert r["evidence"] == [FIXTURE[gold][1]]
            for x in r["results"]:
                assert x["hit"] == (x["dia_ids"] == r["evidence"])
                if x["source"] == "qmd":
                    assert x["dia_ids"] and x["dia_ids"][0] in {p for _, p in FIXTURE}
        if name != "router":
            assert records[0]["results"][0]["hit"] and records[0]["results"][0]["dia_ids"] == [FIXTURE[0][1]], name
