"""bench/locomo.py's own logic: evidence-id repair, the labelling rule (a qmd snippet that lost its
label still hits through its path and line), hit/recall arithmetic and variant config patches.
In-process and fast; the end-to-end quick run is in test_bench_smoke.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from _locomo_data import load_conversation, parse_when, repair_ids  # noqa: E402
from _locomo_score import hit_at, label, labelled_results, recall_at  # noqa: E402
from _locomo_workspace import Workspace, note_bullet  # noqa: E402
from locomo import builtin, deep_merge, parse_variant  # noqa: E402

KNOWN = {"D8:6", "D9:17", "D11:26", "D30:5", "D1:3"}


@pytest.mark.parametrize(
    ("raw", "ids", "repaired", "dropped"),
    [
        (["D1:3"], ["D1:3"], 0, 0),
        (["D8:6; D9:17"], ["D8:6", "D9:17"], 1, 0),
        (["D:11:26"], ["D11:26"], 1, 0),
        (["D30:05"], ["D30:5"], 1, 0),
        (["D"], [], 0, 1),
        (["D10:19", "D1:3"], ["D1:3"], 0, 1),  # names no turn of this conversation
        ("D1:3", ["D1:3"], 0, 0),  # observations give a bare string
        ([None, 7], [], 0, 2),
    ],
)
def test_evidence_ids_are_repaired_or_dropped_and_counted(raw: object, ids: list, repaired: int, dropped: int) -> None:
    assert repair_ids(raw, KNOWN) == (ids, repaired, dropped)


@given(st.lists(st.text(max_size=12), max_size=6))
def test_repair_never_invents_an_id(raw: list[str]) -> None:
    ids, repaired, dropped = repair_ids(raw, KNOWN)
    assert set(ids) <= KNOWN and len(ids) == len(set(ids))
    assert repaired <= len(raw) and dropped >= 0


def test_session_dates_are_read_as_written() -> None:
    assert parse_when("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert parse_when("12:09 am on 13 September, 2023").isoformat() == "2023-09-13T00:09:00+00:00"
    with pytest.raises(ValueError, match="unreadable date"):
        parse_when("yesterday")


def test_a_malformed_file_names_the_question_it_skips(tmp_path: Path) -> None:
    data = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1_observation": {"Ann": [["Ann adopted a cat.", "D1:1"]]},
        "qa": [
            {"question": "What did Ann adopt?", "evidence": ["D1:01"], "category": 4},
            {"question": "Is Bo an ally?", "evidence": [], "category": 3},
            {"question": "Trick?", "evidence": [], "category": 5},
        ],
    }
    path = tmp_path / "99.json"
    path.write_text(json.dumps(data))
    conv = load_conversation(path)
    assert [q.evidence for q in conv.questions] == [("D1:1",)]
    assert (conv.repaired, conv.dropped, conv.skipped_questions) == (1, 0, 1)
    assert any("99.json: qa[1] ('Is Bo an ally?'): no usable evidence" in p for p in conv.problems)
    # --adversarial (abstention): category 5 alone, kept even without evidence; the others left out.
    adversarial = load_conversation(path, adversarial=True)
    assert [(q.qid, q.category, q.question, q.evidence) for q in adversarial.questions] == [("99-q2", 5, "Trick?", ())]


NOTE = """# 2023-05-08

## Session 1, 13:56

- Caroline went to a support group. [D1:3]
- Melanie paints lake sunrises. [D1:5, D1:6]
- Caroline wants to study counseling. [D1:9]
"""


def _workspace(tmp_path: Path) -> Workspace:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2023-05-08.md").write_text(NOTE)
    return Workspace(
        conv="t",
        root=tmp_path,
        memory=tmp_path / "memory",
        lcm_db=tmp_path / "lcm.db",
        bm25_db=tmp_path / "bm25.db",
        qmd={},
        message_dia={41: "D3:7"},
        note_lines={"2023-05-08.md": {5: ("D1:3",), 6: ("D1:5", "D1:6"), 7: ("D1:9",)}},
        embedded=False,
        reused=True,
    )


def test_a_truncated_note_snippet_is_labelled_by_the_bullets_it_shows(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    # qmd: `line` is the best-matching line, the snippet starts before it; the second bullet is
    # cut before its label, the line map still names D1:5 and D1:6 - and not D1:9, not shown.
    snippet = "## Session 1, 13:56\n\n- Caroline went to a support group. [D1:3]\n- Melanie paints lake sunri"
    assert label({"content": snippet, "path": "2023-05-08.md", "line": 5}, ws) == ["D1:3", "D1:5", "D1:6"]
    # Total Recall reports the daily/ symlink: the same note, by its file name
    assert label(
        {"content": "- Caroline wants to study counseling.", "path": "memory/daily/2023-05-08.md", "line": 7}, ws
    ) == ["D1:9"]
    # a line number whose text is not shown labels nothing
    assert label({"content": "- something else entirely", "path": "2023-05-08.md", "line": 6}, ws) == []
    # a raw turn from Lossless, by the bench's message map; nothing from the text itself
    assert label({"content": "Caroline: see D1:3", "message_id": 41}, ws) == ["D3:7"]


def test_hit_and_recall_count_evidence_among_the_first_k_results(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    results = [
        {"content": "- a [D9:1]", "path": "x.md", "relevance": 0.9, "source": "qmd"},
        {"content": "Ann: hi", "message_id": 41, "relevance": 0.5, "source": "lossless"},
    ]
    record: dict[str, Any] = {"evidence": ["D3:7", "D4:4"], "results": labelled_results(results, ws, ["D3:7", "D4:4"])}
    assert [r["hit"] for r in record["results"]] == [False, True]
    assert record["results"][1]["message_id"] == 41  # the result's own keys are kept
    assert (hit_at(record, 1), hit_at(record, 10)) == (False, True)
    assert (recall_at(record, 1), recall_at(record, 10)) == (0.0, 0.5)


def test_note_bullets_carry_their_ids() -> None:
    assert note_bullet("Ann  adopted\na cat.", ("D1:1", "D2:4")) == "- Ann adopted a cat. [D1:1, D2:4]"


def test_variants_patch_the_packaged_config() -> None:
    assert deep_merge({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": None, "e": 4}, "d": [1]}) == {
        "a": {"c": 2, "e": 4},
        "d": [1],
    }
    alone = builtin("alone:qmd:vsearch")
    assert alone.config is not None
    assert {tuple(map(tuple, (s.items() for s in r["chain"]))) for r in alone.config["rules"]} == {
        ((("backend", "qmd"), ("mode", "vsearch")),)
    }
    assert alone.config["calibration"] == "off"  # the packaged config knows the key: native scores
    fused = parse_variant('fuse={"strategy": "fuse", "threshold": null}')
    assert fused.name == "fuse" and fused.config is not None
    assert fused.config["strategy"] == "fuse" and "threshold" not in fused.config
    based = parse_variant('tr@alone:totalrecall={"timeout_ms": 9000}')
    assert based.config is not None and based.config["timeout_ms"] == 9000
    assert based.config["rules"][0]["chain"] == [{"backend": "totalrecall"}]
    with pytest.raises(SystemExit, match="unknown variant"):
        builtin("alone:nosuch")


def test_outcome_says_why_the_router_answered_so() -> None:
    from _locomo_score import fallback_reason, outcome

    low = {"backend": "qmd", "mode": "query", "status": "success", "result_count": 3, "accepted": False}
    tr = {"backend": "totalrecall", "mode": None, "status": "success", "result_count": 5, "accepted": True}
    timeout = {"backend": "qmd", "mode": "vsearch", "status": "error", "error_code": "QUERY_TIMEOUT", "accepted": False}
    assert outcome({"status": "success", "attempts": [low, tr]}) == "accepted at step 2 (totalrecall)"
    assert outcome({"status": "partial", "attempts": [low]}) == "no step accepted: best weak answer returned"
    assert outcome({"status": "success", "attempts": [{**low, "accepted": True}, tr]}) == "fused: 2 of 2 steps answered"
    assert [fallback_reason(a) for a in (low, timeout)] == ["low relevance", "timeout"]
