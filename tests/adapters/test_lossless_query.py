"""The FTS query sanitiser: any string becomes a valid MATCH expression or a clean 'no terms'."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends.lossless import adapter as L

from ..support.budget import examples

FTS5_SYNTAX = st.sampled_from(
    [
        '"',
        "'",
        "*",
        "-",
        "+",
        "^",
        ":",
        "(",
        ")",
        "{",
        "}",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "col:",
        "\x00",
        "\n",
        "’",
        "’s",
        "\\",
        "%",
        "_",
        "—",
        "🙂",
        "é",
        "日本",
    ]
)
QUERIES = st.lists(st.one_of(st.text(max_size=12), FTS5_SYNTAX), max_size=12).map(" ".join)


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, tokenize='porter unicode61')"
    )
    conn.execute("INSERT INTO summaries_fts VALUES ('sum_1', 'database schema decided: UUID v7 keys and deleted_at')")
    return conn


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERIES)
def test_any_query_is_a_valid_match_expression_or_no_terms(fts: sqlite3.Connection, query: str) -> None:
    terms = L.query_terms(query)
    assert len(terms) <= L.MAX_TERMS
    if not terms:
        return  # the adapter's clean fallback: most recent summaries, no MATCH at all
    for op in ("AND", "OR"):
        expr = L.fts_match(terms, op)
        fts.execute("SELECT rowid, rank FROM summaries_fts WHERE summaries_fts MATCH ?", (expr,)).fetchall()
    for term in terms:
        assert term.like  # a LIKE needle is never empty (an empty one would match everything)
        assert "\x00" not in term.fts


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did we decide about the database schema in the morning session", ["database", "schema"]),
        ("recall the architecture decision from this morning", ["architecture"]),
        ("why did we do it that way", []),
        ("why did we choose JWT over sessions?", ["JWT", "sessions"]),
        ("earlier in the conversation we discussed OrderController", ["OrderController"]),
        ('what did we decide about "soft deletes" for orders', ["soft deletes", "orders"]),
        ("what's the decision on src/auth/token.ts", ["src/auth/token.ts"]),
        ("lcm_expand OR crash", ["lcm_expand", "crash"]),
        ("Schema schema SCHEMA", ["Schema"]),
    ],
)
def test_query_terms_keep_content_and_drop_trigger_words(query: str, expected: list[str]) -> None:
    assert [t.text for t in L.query_terms(query)] == expected


def test_fts_strings_neutralise_operators() -> None:
    terms = L.query_terms('col:x NEAR(a b) -foo "un"closed')
    assert L.fts_match(terms) == '"un" "col:x" "NEAR(a" "foo" "closed"'
    assert L.fts_match(terms, "OR") == '"un" OR "col:x" OR "NEAR(a" OR "foo" OR "closed"'


@pytest.fixture(scope="module", params=["current", "no_fts"])
def lcm_backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> L.LosslessBackend:
    from memory_router.backends import BackendContext

    from ..support.lcm_fixtures import build_small_db

    root = tmp_path_factory.mktemp(request.param)
    db = build_small_db(root / "lcm.db", request.param)
    return L.create("lossless", L.Settings(db_path=str(db)), BackendContext(state_dir=root, environ={}))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERIES)
def test_any_query_searches_cleanly_with_fts_and_with_like(lcm_backend: L.LosslessBackend, query: str) -> None:
    from memory_router.backends.base import BackendRequest

    resp = lcm_backend.search_blocking(BackendRequest(query), threading.Event())
    assert resp.status in ("success", "empty"), resp.error_message
    assert all(0.0 <= r.relevance <= 1.0 for r in resp.results)
