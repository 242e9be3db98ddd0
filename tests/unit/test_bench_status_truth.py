"""The benches' AUC (bench/_common.py, read by status_truth.py and fit_calibration.py) and
status_truth.py's cross-store agreement feature (in-process)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import status_truth  # noqa: E402
from _common import auc  # noqa: E402


def test_auc_is_one_for_a_perfect_separation_zero_reversed_and_a_half_for_ties() -> None:
    assert auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auc([0.1, 0.2], [0.9, 0.8]) == 0.0
    assert auc([0.5, 0.5], [0.5]) == 0.5
    assert auc([0.9, 0.3], [0.5]) == 0.5


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_auc_counts_the_ordered_pairs(positive: list[float], negative: list[float]) -> None:
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative)
    assert abs(auc(positive, negative) - pairs / (len(positive) * len(negative))) < 1e-9


def test_agreement_counts_other_stores_only_and_never_the_gold_labels() -> None:
    first = {"source": "totalrecall", "content": "Caroline joined the pottery class in May [D1:3]"}
    same_store = {"source": "totalrecall", "content": "Caroline joined the pottery class in May"}
    assert status_truth.agreement([first, same_store]) == 0.0
    other = {"source": "lossless", "content": "Caroline: I joined a pottery class! [D1:3]"}
    assert status_truth.agreement([first, other]) == 1.0  # caroline, joined, pottery, class all held
    labels_only = {"source": "lossless", "content": "[D1:3] [D2:4]"}
    assert status_truth.agreement([first, labels_only]) == 0.0


def test_the_report_reads_router_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "locomo"
    records.mkdir()
    rows = [
        {"normalized_relevance": 0.8, "results": [{"hit": True, "content": "a right answer", "source": "qmd"}]},
        {"normalized_relevance": 0.2, "results": [{"hit": False, "content": "a wrong answer", "source": "qmd"}]},
        {"normalized_relevance": 0.0, "results": []},  # no answer: not counted
    ]
    (records / "router.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    assert status_truth.main([str(records)]) == 0
    out = capsys.readouterr().out
    assert "locomo" in out and "1.000" in out and "100 / 100" in out  # at 0.3..0.6 both are told apart
