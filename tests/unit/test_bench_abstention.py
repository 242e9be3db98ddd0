"""bench/abstention.py's arithmetic on hand-made records (in-process): a floor as the router applies
it (memory_router/core/trim.py), and the four shares it prints."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import abstention  # noqa: E402


def record(qid: str, category: object, *hits: tuple[float, bool], status: str = "success") -> dict:
    """A router record: each hit's relevance and whether it holds the evidence (E1; a wrong one
    holds X), as bench/locomo.py and bench/longmemeval.py label them."""
    results = [{"relevance": r, "hit": h, "content": "x", "dia_ids": ["E1"] if h else ["X"]} for r, h in hits]
    return {"qid": qid, "category": category, "status": status, "evidence": ["E1", "E2"], "results": results}


ANSWERABLE = [
    record("a1", 1, (0.7, True), (0.2, False)),  # right top-1, strong
    record("a2", 2, (0.25, False), (0.15, True)),  # a right hit under the top
    record("a3", 4, (0.1, False)),  # nothing right
    record("a4", 1, (0.9, True), status="error"),  # an error answer keeps nothing
]
UNANSWERABLE = [record("u1", 5, (0.35, False)), record("u2_abs", "multi-session", (0.05, False))]


def test_the_shares_at_a_floor_that_judges_the_answer() -> None:
    m = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.2)
    assert m["unanswerable_no_hits"] == 50.0  # u2 abstains, u1 (0.35) does not
    assert m["answerable_keep_hits"] == 50.0  # a1, a2 are kept; a3 (0.1) and the error are not
    assert m["keep_a_right_hit"] == 100 * 2 / 3  # a1 and a2 (its best, 0.25, reaches 0.2) are kept whole; a4 is not
    assert m["right_top1_survives"] == 50.0  # a1 and a4 have a right top-1; a4 is an error
    assert m["counts"] == {"unanswerable": 2, "answerable": 4, "with_right_hit": 3, "right_top1": 2}
    zero = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.0)
    assert zero["unanswerable_no_hits"] == 0.0 and zero["answerable_keep_hits"] == 75.0


def test_recall_and_hit_at_1_of_what_the_floor_keeps_beside_a_floor_hit_by_hit() -> None:
    m = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.2)
    # a1 and a2 find E1 of their two evidence ids: recall 0.5 each, a3 and a4 0; over 4 questions.
    assert m["recall@10"] == 100 * (0.5 + 0.5) / 4
    assert m["hit@1"] == 25.0  # a1 only: a2's first is wrong, a4 is an error
    # Had each hit under 0.2 been dropped, a2's right hit (0.15) would be gone.
    assert m["recall@10_hit_by_hit"] == 100 * 0.5 / 4
    high = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.8)
    assert high["recall@10"] == high["hit@1"] == high["recall@10_hit_by_hit"] == 0.0


def test_the_report_reads_records_and_tells_the_kinds_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answerable, unanswerable = tmp_path / "a.jsonl", tmp_path / "u.jsonl"
    answerable.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*ANSWERABLE, *UNANSWERABLE]))
    unanswerable.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [*UNANSWERABLE, ANSWERABLE[0]]))
    out = tmp_path / "report.json"
    argv = ["abstention.py", "--answerable", f"t={answerable}", "--unanswerable", f"t={unanswerable}"]
    sys.argv = [*argv, "--json", str(out)]
    assert abstention.main() == 0
    printed = capsys.readouterr().out
    assert "t: a relevance floor on the router's answers (%)" in printed
    assert "questions: 2 unanswerable, 4 answerable" in printed  # each file's own kind only
    report = orjson.loads(out.read_bytes())
    assert [m["floor"] for m in report["t"]] == list(abstention.FLOORS)


def test_missing_records_measure_nothing_and_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.argv = ["abstention.py", "--answerable", f"t={tmp_path}/a", "--unanswerable", f"t={tmp_path}/u"]
    assert abstention.main() == 0
    assert "nothing measured" in capsys.readouterr().out
