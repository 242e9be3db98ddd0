"""bench/fill_replay.py: fill's merge policies replayed over records (in-process, on a tiny set of
records written here in the benches' shared record format, native relevance)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fill_replay as fr  # noqa: E402
import fit_calibration as fc  # noqa: E402

QUESTION = "What colour was the bike I bought"
GOLD = "s1:t0"


def _row(variant: str, results: list[tuple[str, str, str, float]]) -> dict[str, Any]:
    """A LongMemEval record from (source, text, turn id, relevance) per result."""
    return {
        "variant": variant,
        "bench": "longmemeval",
        "conv": "q1",
        "qid": "q1",
        "question": QUESTION,
        "evidence": [GOLD],
        "status": "success",
        "results": [
            {"content": text, "relevance": rel, "source": source, "dia_ids": [ident], "hit": ident == GOLD}
            for source, text, ident, rel in results
        ],
    }


def _records() -> dict[str, list[dict[str, Any]]]:
    # Lossless's first turn reaches the threshold (the walk's winner); its evidence turn is tenth,
    # weak. Total Recall's three notes are weak too; the first quotes Lossless's ninth turn.
    turns = [("lossless", f"turn number {n} about a bike and a shop", f"s9:t{n}", 0.5 - n * 0.04) for n in range(9)]
    turns.append(("lossless", "I bought a red bike at the shop last week", GOLD, 0.05))
    notes = [
        ("totalrecall", 'user: "turn number 8 about a bike and a shop"\nassistant: "nice"', "s9:t8", 0.3),
        ("totalrecall", 'user: "a note about a trip to the lake"', "s5:t0", 0.2),
        ("totalrecall", 'user: "a note about a new helmet"', "s6:t0", 0.1),
    ]
    return {"alone:lossless": [_row("alone:lossless", turns)], "alone:totalrecall": [_row("alone:totalrecall", notes)]}


def test_the_packaged_row_is_the_cores_fill_and_the_chain_order_row_keeps_losslesss_tail() -> None:
    r = fr.Replay(_records(), None)
    assert fc.chain_for(r.rule[("longmemeval", "q1", "q1")], True)[1:] == ["lossless", "totalrecall"]
    [(packaged, _)] = fr.replay(r, "longmemeval", fr.packaged)
    # The walk's winner (Lossless, 0.5 >= 0.4) first; the note quoting turn 8 takes turn 8's slot
    # (the turn is folded into the note above it); the notes push the evidence turn out of the ten.
    assert packaged.dia_ids[0] == frozenset({"s9:t0"}) and len(packaged.dia_ids) == 10
    assert frozenset({GOLD}) not in packaged.dia_ids
    assert (
        frozenset({"s9:t8"}) in packaged.dia_ids and sum(ids == frozenset({"s9:t8"}) for ids in packaged.dia_ids) == 1
    )
    [(chained, _)] = fr.replay(
        r, "longmemeval", fr.POLICIES["results under 0.4 after the rest, step by step in chain order"]
    )
    assert chained.dia_ids[-1] == frozenset({GOLD}) and chained.hits[-1]
    assert fc.metrics([(chained, frozenset({GOLD}))])["recall@10"] == 100.0
    # Every policy keeps the walk's first result first (hit@1 is the router's by construction).
    for label, policy in fr.POLICIES.items():
        [(got, _)] = fr.replay(r, "longmemeval", policy)
        assert got.dia_ids[0] == frozenset({"s9:t0"}), label
        assert len(got.dia_ids) <= fr.LIMIT, label


def test_the_script_writes_a_row_per_policy(tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    for variant, rows in _records().items():
        (records / f"{variant}.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    out = tmp_path / "table.md"
    assert fr.main(["--records", str(records), "--markdown", str(out)]) == 0
    text = out.read_text()
    for label in fr.POLICIES:
        assert f"| {label} |" in text, label
    # A row per rule whose packaged chain does not ask Lossless (rule 2's asks Cognee, qmd, Total Recall).
    assert "| chain change: Lossless last in rule 2 (relationship) |" in text
    assert "rule 7 (default)" not in text  # its chain asks Lossless already


def test_the_script_says_when_there_are_no_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fr.main(["--records", str(tmp_path)]) == 2
    assert "no alone:* records" in capsys.readouterr().err


def test_a_weak_note_from_a_session_the_turns_above_list_gives_its_slot_up() -> None:
    r = fr.Replay(_records(), None)
    [(packaged, _)] = fr.replay(r, "longmemeval", fr.packaged)
    [(by_session, _)] = fr.replay(r, "longmemeval", fr.session_listed(only_notes=True))
    # The note quoting turn 8 is from session s9, which Lossless's turns above already list: it
    # gives its place (sixth, turn 8 folded into it) up and comes after the rest, below the note of
    # session s5, which no other store's result lists.
    assert packaged.dia_ids.index(frozenset({"s9:t8"})) == 5
    assert by_session.dia_ids.index(frozenset({"s5:t0"})) == 8
    assert by_session.dia_ids[9] == frozenset({"s9:t8"})
