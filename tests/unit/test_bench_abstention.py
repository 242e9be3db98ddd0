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
    results = [{"relevance": r, "hit": h, "content": "x"} for r, h in hits]
    return {"qid": qid, "category": category, "status": status, "results": results}


ANSWERABLE = [
    record("a1", 1, (0.7, True), (0.2, False)),  # right top-1, strong
    record("a2", 2, (0.25, False), (0.15, True)),  # a right hit under the top
    record("a3", 4, (0.1, False)),  # nothing right
    record("a4", 1, (0.9, True), status="error"),  # an error answer keeps nothing
]
UNANSWERABLE = [record("u1", 5, (0.35, False)), record("u2_abs", "multi-session", (0.05, False))]


def test_the_four_shares_at_a_floor() -> None:
    m = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.2)
    assert m["unanswerable_no_hits"] == 50.0  # u2 abstains, u1 (0.35) does not
    assert m["answerable_keep_hits"] == 50.0  # a1, a2 keep hits; a3 (0.1) and the error do not
    assert m["keep_a_right_hit"] == 100 * 1 / 3  # a1 keeps its right hit; a2's (0.15) and a4's are gone
    assert m["right_top1_survives"] == 100.0  # a1 and a4 have a right top-1; both are >= 0.2
    assert m["counts"] == {"unanswerable": 2, "answerable": 4, "with_right_hit": 3, "right_top1": 2}
    zero = abstention.measure(ANSWERABLE, UNANSWERABLE, 0.0)
    assert zero["unanswerable_no_hits"] == 0.0 and zero["answerable_keep_hits"] == 75.0


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
