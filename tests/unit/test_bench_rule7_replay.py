"""bench/rule7_replay.py: rule 7's qmd answer rebuilt from qmd's modes, replayed over records
(in-process, on a tiny set of records written here in the benches' shared record format)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import rule7_replay as r7  # noqa: E402


def _step(key: str, *items: tuple[str, str, bool, float]) -> r7.Step:
    """A step from (path, evidence id, hit, relevance) per result."""
    return r7.Step(key, tuple(r7.Item(frozenset({i}), h, rel, p) for p, i, h, rel in items))


QUERY = _step(r7.QUERY, ("a.py", "a.py:37-40", False, 0.6), ("b.py", "b.py:1-4", False, 0.3))


def test_agreement_shows_searchs_lines_first_only_when_both_first_results_are_one_file() -> None:
    search = _step(r7.SEARCH, ("a.py", "a.py:582-585", True, 0.8))
    agreed = r7.lines_from(QUERY, search, head_only=True)
    assert agreed is not None
    # search's lines of the same file come first, at query's relevance; query's own lines stay, second.
    assert [(i.path, i.hit, i.relevance) for i in agreed.items] == [
        ("a.py", True, 0.6),
        ("a.py", False, 0.6),
        ("b.py", False, 0.3),
    ]
    # search's first result is another file: query's answer as it was, even if search holds a.py lower.
    other = _step(r7.SEARCH, ("c.py", "c.py:1-4", True, 0.8), ("a.py", "a.py:582-585", True, 0.5))
    assert r7.lines_from(QUERY, other, head_only=True) == QUERY
    # Without head_only every file both return takes search's lines first.
    every = r7.lines_from(QUERY, other)
    assert every is not None and [i.path for i in every.items] == ["a.py", "a.py", "b.py"]
    assert r7.lines_from(None, search) is None and r7.lines_from(QUERY, None) == QUERY


def test_vector_head_only_replaces_a_weak_keyword_first_the_vector_list_does_not_hold() -> None:
    vsearch = _step(r7.VSEARCH, ("b.py", "b.py:1-4", False, 0.2), ("c.py", "c.py:1-4", True, 0.1))
    weak_search = _step(r7.SEARCH, ("a.py", "a.py:37-40", False, 0.3))
    headed = r7.vector_head(QUERY, vsearch, weak_search, 0.4)
    assert headed is not None and headed.items[0].path == "b.py" and headed.items[0].relevance == 0.6
    assert headed.items[1:] == QUERY.items  # query's list follows, nothing dropped
    # search reaches the threshold: its first place stands.
    strong_search = _step(r7.SEARCH, ("a.py", "a.py:37-40", False, 0.5))
    assert r7.vector_head(QUERY, vsearch, strong_search, 0.4) == QUERY
    # The vector list holds query's first file: both kinds of search put it high, it stands.
    holds = _step(r7.VSEARCH, ("c.py", "c.py:1-4", False, 0.2), ("a.py", "a.py:9-12", False, 0.1))
    assert r7.vector_head(QUERY, holds, weak_search, 0.4) == QUERY
    # query's first is not search's: not the keyword list's doing.
    elsewhere = _step(r7.SEARCH, ("c.py", "c.py:1-4", False, 0.1))
    assert r7.vector_head(QUERY, vsearch, elsewhere, 0.4) == QUERY


def _row(variant: str, qid: str, question: str, results: list[tuple[str, str, float]], gold: str) -> dict[str, Any]:
    return {
        "variant": variant,
        "bench": "code",
        "conv": "anyio",
        "qid": qid,
        "question": question,
        "evidence": [gold],
        "status": "success",
        "results": [
            {
                "content": f"def x():  # {path}",
                "relevance": rel,
                "source": "qmd",
                "dia_ids": [ident],
                "hit": ident == gold,
            }
            | {"path": path}
            for path, ident, rel in results
        ],
    }


def test_the_script_replays_every_policy_and_scores_the_agreement_row(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    q1, gold1 = "task handle return value", "a.py:582-585"
    q2, gold2 = "Pause the current task until the given time", "d.py:10-12"
    answers = {
        "alone:qmd:query": [
            _row("alone:qmd:query", "1", q1, [("a.py", "a.py:37-40", 1.0), ("b.py", "b.py:1-4", 0.5)], gold1),
            _row("alone:qmd:query", "2", q2, [("d.py", gold2, 1.0)], gold2),
        ],
        "alone:qmd:search": [
            _row("alone:qmd:search", "1", q1, [("a.py", gold1, 1.0)], gold1),
            _row("alone:qmd:search", "2", q2, [("e.py", "e.py:1-4", 1.0)], gold2),
        ],
        "alone:qmd:vsearch": [
            _row("alone:qmd:vsearch", "1", q1, [("b.py", "b.py:1-4", 0.5)], gold1),
            _row("alone:qmd:vsearch", "2", q2, [("d.py", gold2, 0.6)], gold2),
        ],
    }
    for variant, rows in answers.items():
        (records / f"{variant}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "table.md"
    assert r7.main(["--records", str(records), "--markdown", str(out)]) == 0
    table = {line.split(" | ")[0].lstrip("| "): line for line in out.read_text().splitlines() if line.startswith("| ")}
    for label in r7.policies():
        assert label in table, f"no row for {label!r}"
    # Query's first result is the right file at the wrong lines in question 1: the packaged chain
    # misses it, the agreement row shows search's lines for it (2 of 2 at hit@1).
    assert table["packaged `fill` (qmd `query`, Lossless, Total Recall)"].split(" | ")[3].startswith("50.0 /")
    agreement = next(v for k, v in table.items() if k.startswith("agreement"))
    assert agreement.split(" | ")[3].startswith("100.0 /")


def test_the_script_says_when_there_are_no_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert r7.main(["--records", str(tmp_path)]) == 2
    assert "no alone:* records" in capsys.readouterr().err
