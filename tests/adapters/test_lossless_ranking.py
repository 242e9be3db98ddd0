"""How Lossless finds and orders a chat's messages, on lcm.db files with lossless-claw's real
schema: the evidence a plain BM25 over the same turns finds is not lost (LongMemEval and LoCoMo,
docs/benchmarks-lossless.md)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.lossless import adapter as L
from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db, sqlite_time

from ..support.lcm_fixtures import NOW

# The user states the fact once, in a short message; the assistant's long answer in another
# session repeats every word of the question that will be asked.
EVIDENCE = "By the way, I caught 12 largemouth bass on my last trip to Lake Michigan; spinner lures worked best."
ECHO = (
    "How many largemouth bass you catch on a fishing trip to Lake Michigan depends on the season, the "
    "weather and the spot. " + "In late spring bass move to shallow water to spawn, and a slow retrieve helps. " * 8
)
QUESTION = "How many largemouth bass did I catch on my fishing trip to Lake Michigan?"


def chat_db(path: Path) -> tuple[Path, dict[str, int]]:
    conn = create_lcm_db(path, "current")
    ids: dict[str, int] = {}
    try:
        w = LcmWriter(conn)
        conn.execute("BEGIN")
        first = w.conversation("s-1", session_key="agent:main:main", created=NOW - timedelta(days=40))
        at = NOW - timedelta(days=40)
        w.message(first, "user", "Any tips for a weekend fishing trip? I want to catch bass.", at=at)
        ids["echo"] = w.message(first, "assistant", ECHO, at=at + timedelta(minutes=1))
        # The /new that started the second session archived the first (one active conversation per key).
        conn.execute(
            "UPDATE conversations SET active = 0, archived_at = ?, archive_cause = 'manual-reset' "
            "WHERE conversation_id = ?",
            (sqlite_time(NOW - timedelta(days=10)), first),
        )
        second = w.conversation("s-2", session_key="agent:main:main", created=NOW - timedelta(days=10))
        at = NOW - timedelta(days=10)
        w.message(second, "user", "Can you suggest a recipe for grilled fish?", at=at)
        ids["evidence"] = w.message(second, "user", EVIDENCE, at=at + timedelta(minutes=1))
        w.message(
            second,
            "assistant",
            "Twelve is a great haul! Spinner lures are a fine choice.",
            at=at + timedelta(minutes=2),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path, ids


def ask(db: Path, query: str, limit: int = 10) -> list[int]:
    backend = L.create("lossless", L.Settings(db_path=str(db)), BackendContext(state_dir=db.parent, environ={}))
    resp = backend.search_blocking(BackendRequest(query, limit=limit), threading.Event())
    assert resp.status == "success", resp.error_message
    return [r.extra["message_id"] for r in resp.results]


def test_a_message_lacking_a_word_of_the_question_is_still_found_and_a_short_statement_comes_first(
    tmp_path: Path,
) -> None:
    db, ids = chat_db(tmp_path / "lcm.db")
    found = ask(db, QUESTION)
    # The assistant's answer holds every term ("catch", "fishing"), the user's statement does not
    # ("caught"): searching for all the terms first returned the answer alone and lost the fact.
    assert ids["evidence"] in found
    # It holds most of the question in 100 characters; the 700-character answer holds all of it by
    # repeating it: the short statement comes first.
    assert found[0] == ids["evidence"]


def test_a_question_to_the_assistant_finds_its_long_answer_first(tmp_path: Path) -> None:
    db, ids = chat_db(tmp_path / "lcm.db")
    found = ask(db, "What did you tell me about how many largemouth bass to catch on a fishing trip to Lake Michigan?")
    assert found[0] == ids["echo"]


def test_relevance_never_rises_down_the_list_and_stays_in_0_1(tmp_path: Path) -> None:
    db, _ = chat_db(tmp_path / "lcm.db")
    backend = L.create("lossless", L.Settings(db_path=str(db)), BackendContext(state_dir=tmp_path, environ={}))
    resp = backend.search_blocking(BackendRequest(QUESTION), threading.Event())
    values = [r.relevance for r in resp.results]
    assert values == sorted(values, reverse=True) and all(0.0 <= v <= 1.0 for v in values)
    assert resp.query_sent is not None and resp.query_sent.count(" OR ") == 7  # eight terms, OR'ed
