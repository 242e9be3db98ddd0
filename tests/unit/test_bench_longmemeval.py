"""bench/longmemeval.py on a tiny fixture in LongMemEval's format: the session notes are what
OpenClaw's session-memory hook writes (the last 15 messages, one JSON-quoted line each), the
labelling rule (a note result holds the turns whose lines it shows), the stratified subset, and
the leakage rule: no session id, no ``answer_`` and no ``has_answer`` reaches a stored file or
the lcm.db, nor a request. The end-to-end run (real ``serve``, real Total Recall and Lossless) is
the slow test at the end."""

from __future__ import annotations

import json
import lzma
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from _longmemeval_workspace import (  # noqa: E402
    NOTE_MIN_SHARED,
    Question,
    build,
    label,
    labelled_results,
    read_question,
    stratified,
    transcript_lines,
)

EVIDENCE = "By the way, I adopted a greyhound called Biscuit last Sunday and he loves the beach."
LONG_EVIDENCE = "My sister moved to Lisbon in March. " + "She works as an architect there, designing museums. " * 12
SESSION_IDS = ["sharegpt_q1w2e3_0", "answer_4be1b6b4_1", "answer_4be1b6b4_2"]


def history(qid: str = "q-dog", *, same_minute: bool = False) -> dict[str, Any]:
    """Three sessions: chit-chat; 20 turns with the evidence early (turn 1) and late (turn 18);
    one with a long evidence turn. Session ids in LongMemEval's style, ``answer_`` for evidence."""
    chat = [
        {"role": "user", "content": "Can you suggest a pasta recipe?"},
        {"role": "assistant", "content": "Try cacio e pepe.<|im_end|>"},
    ]
    long_session: list[dict[str, object]] = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"filler message {k}"} for k in range(20)
    ]
    long_session[1] = {"role": "assistant", "content": "early evidence about Biscuit the greyhound", "has_answer": True}
    long_session[18] = {"role": "user", "content": EVIDENCE, "has_answer": True}
    long_session[16] = {"role": "user", "content": "/status"}
    third = [
        {"role": "user", "content": LONG_EVIDENCE, "has_answer": True},
        {"role": "assistant", "content": 'Lisbon is lovely.\nShe must "enjoy" it.'},
    ]
    dates = [
        "2023/05/20 (Sat) 09:00",
        "2023/05/21 (Sun) 10:00",
        "2023/05/21 (Sun) 10:18" if same_minute else "2023/05/22 (Mon) 08:30",
    ]
    return {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": "What is the name of the dog I adopted?",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer": "Biscuit",
        "answer_session_ids": SESSION_IDS[1:],
        "haystack_session_ids": SESSION_IDS,
        "haystack_dates": dates,
        "haystack_sessions": [chat, long_session, third],
    }


@pytest.fixture
def question() -> Question:
    return read_question(history())


def test_gold_is_turn_labels_by_position_and_evidence_sessions(question: Question) -> None:
    assert question.evidence == ("s1:t1", "s1:t18", "s2:t0")
    assert question.evidence_sessions == (1, 2)


def test_each_session_is_saved_as_the_session_memory_hook_saves_it(tmp_path: Path, question: Question) -> None:
    ws = build(question, tmp_path, log=lambda _: None)
    # The /new a minute after each session's last turn names the file (date-HHMM, UTC).
    assert sorted(p.name for p in ws.memory.iterdir()) == [
        "2023-05-20-0902.md",
        "2023-05-21-1020.md",
        "2023-05-22-0832.md",
    ]
    lines = (ws.memory / "2023-05-21-1020.md").read_text(encoding="utf-8").split("\n")
    assert lines[0] == "# Session: 2023-05-21 10:20:00 UTC"
    assert lines[2:5] == ["- **Session Key**: agent:main:main", lines[3], "- **Source**: webchat"]
    assert lines[3].startswith("- **Session ID**: ") and len(lines[3].split(": ")[1]) == 36  # a UUID
    assert lines[6:8] == ["## Conversation Summary", ""]
    transcript = lines[8:-1]
    # Only the last 15 messages: "/status" is left out, so turns 4-19 minus 16 remain.
    assert len(transcript) == 15 and transcript[-1] == 'assistant: "filler message 19"'
    assert f"user: {json.dumps(EVIDENCE)}" in transcript
    assert not any("early evidence" in t or "/status" in t for t in transcript)
    assert lines[-1] == ""  # the parts end with an empty one: the file ends with a newline
    chat = (ws.memory / "2023-05-20-0902.md").read_text(encoding="utf-8")
    assert 'assistant: "Try cacio e pepe.[REMOVED_SPECIAL_TOKEN]"' in chat
    third = (ws.memory / "2023-05-22-0832.md").read_text(encoding="utf-8")
    assert 'assistant: "Lisbon is lovely.\\nShe must \\"enjoy\\" it."' in third  # one line per message


def test_a_taken_note_name_gets_the_hooks_numeric_suffix(tmp_path: Path) -> None:
    ws = build(read_question(history(same_minute=True)), tmp_path, log=lambda _: None)
    # Session 2 starts 10:18 with 2 turns: its /new is 10:20 too, like session 1's.
    assert {"2023-05-21-1020.md", "2023-05-21-1020-2.md"} <= {p.name for p in ws.memory.iterdir()}


def test_every_turn_is_a_message_in_lcm_db_and_one_conversation_is_active(tmp_path: Path, question: Question) -> None:
    ws = build(question, tmp_path, log=lambda _: None)
    with sqlite3.connect(ws.lcm_db) as conn:
        rows = conn.execute("SELECT message_id, role, content FROM messages ORDER BY message_id").fetchall()
        active = conn.execute("SELECT COUNT(*) FROM conversations WHERE active = 1").fetchone()[0]
        fts = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'greyhound'").fetchone()[0]
    assert len(rows) == 24 and active == 1 and fts == 2
    assert {ws.message_dia[m] for m, _, c in rows if c == EVIDENCE} == {"s1:t18"}


def test_no_session_id_or_gold_marker_reaches_a_stored_file(tmp_path: Path, question: Question) -> None:
    build(question, tmp_path, log=lambda _: None)
    stored = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "lcm.db" for p in stored) and any(p.suffix == ".md" for p in stored)
    for path in stored:
        data = path.read_bytes()
        for secret in ("answer_", "has_answer", *SESSION_IDS, "q1w2e3", "4be1b6b4"):
            assert secret.encode() not in data, f"{secret!r} leaked into {path}"


def note_result(ws: Any, name: str, content: str) -> dict[str, Any]:
    return {"source": "totalrecall", "path": f"memory/{name}", "line": 9, "content": content, "relevance": 0.5}


def test_labelling_rule(tmp_path: Path, question: Question) -> None:
    ws = build(question, tmp_path, log=lambda _: None)
    mid = next(m for m, lab in ws.message_dia.items() if lab == "s2:t0")
    assert label({"source": "lossless", "message_id": mid, "content": "x"}, ws) == (["s2:t0"], [2])
    assert label({"source": "bm25", "dia_id": "s1:t1", "content": "x"}, ws) == (["s1:t1"], [1])
    name = "2023-05-22-0832.md"
    note = (ws.memory / name).read_text(encoding="utf-8").split("\n")
    first, second = note[8], note[9]
    # The whole transcript shown: both turns.
    assert label(note_result(ws, name, f"{first}\n{second}"), ws) == (["s2:t0", "s2:t1"], [2])
    # Cut off inside the long first line: it counts from NOTE_MIN_SHARED characters on.
    assert label(note_result(ws, name, first[:NOTE_MIN_SHARED]), ws) == (["s2:t0"], [2])
    assert label(note_result(ws, name, first[: NOTE_MIN_SHARED - 1]), ws) == ([], [2])
    # A note of an evidence session that shows no evidence turn hits the session, not a turn.
    chat = (ws.memory / "2023-05-21-1020.md").read_text(encoding="utf-8").split("\n")
    (got,) = labelled_results([note_result(ws, "2023-05-21-1020.md", chat[8])], ws, question.evidence)
    assert (got["dia_ids"], got["sessions"], got["hit"], got["rank"]) == (["s1:t4"], [1], False, 1)
    # A file that is not one of the notes holds nothing.
    assert label(note_result(ws, "MEMORY.md", first), ws) == ([], [])


def test_transcript_drops_empty_and_command_messages() -> None:
    q = read_question(history())
    kept = [lab for lab, _ in transcript_lines(q.sessions[1].turns)]
    assert len(kept) == 15 and "s1:t16" not in kept and kept[0] == "s1:t4"


def test_the_subset_is_stratified_and_deterministic() -> None:
    sizes = {"a": 32, "b": 28, "c": 15, "d": 61, "e": 36, "f": 63}  # the development half's types
    questions = []
    for kind, n in sizes.items():
        for i in range(n):
            raw = {**history(f"{kind}{i}"), "question_type": kind}
            questions.append(read_question(raw))
    picked = stratified(questions, 100)
    counts = {k: sum(q.category == k for q in picked) for k in sizes}
    assert counts == {"a": 14, "b": 12, "c": 6, "d": 26, "e": 15, "f": 27}
    assert [q.qid for q in stratified(list(reversed(questions)), 100)] == [q.qid for q in picked]


@pytest.mark.slow
def test_bench_runs_end_to_end_without_leaking_and_labels_consistently(tmp_path: Path) -> None:
    """bench/longmemeval.py over two fixture questions through real `serve` daemons (Total Recall
    and Lossless), the BM25 baseline: one record per (variant, question) in the shared format,
    hits consistent with the labels, the evidence found, and no secret in any stored file."""
    data = tmp_path / "data"
    data.mkdir()
    with lzma.open(data / "questions.jsonl.xz", "wt", encoding="utf-8") as out:
        for qid in ("q-one", "q-two"):
            out.write(json.dumps(history(qid)) + "\n")
    work, records = tmp_path / "work", tmp_path / "records"
    argv = [sys.executable, str(BENCH / "longmemeval.py"), "--data", str(data), "--all"]
    argv += ["--work", str(work), "--records", str(records), "--json", str(tmp_path / "r.json")]
    for variant in ("router", "alone:lossless", "bm25"):
        argv += ["--variant", variant]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for title in ("LongMemEval S dev", "Status against the truth", "Calibration alone:lossless"):
        assert f"## {title}" in proc.stdout, proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["variants"]) == {"router", "alone:lossless", "bm25"}
    for name in report["variants"]:
        recs = [json.loads(line) for line in (records / f"{name}.jsonl").read_text().splitlines()]
        assert sorted(r["conv"] for r in recs) == ["q-one", "q-two"]
        for r in recs:
            assert r["bench"] == "longmemeval" and r["variant"] == name and r["conv"] == r["qid"]
            assert r["evidence"] == ["s1:t1", "s1:t18", "s2:t0"] and r["status"] != "error"
            assert any(x["hit"] for x in r["results"]), f"{name}: the dog's name was not found"
            for x in r["results"]:
                assert x["hit"] == bool(set(x["dia_ids"]) & set(r["evidence"]))
    for path in (p for p in work.rglob("*") if p.is_file()):
        data_bytes = path.read_bytes()
        for secret in ("answer_", "has_answer", *SESSION_IDS):
            assert secret.encode() not in data_bytes, f"{secret!r} leaked into {path}"
