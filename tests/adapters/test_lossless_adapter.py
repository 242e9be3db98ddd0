"""The Lossless adapter against hand-built lossless-claw databases with the real schema
(current 0.15.x, the legacy pre-0.1.2 layout, and the current layout without FTS tables)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.common import settings as _settings
from memory_router.backends.lossless import adapter as L
from memory_router.backends.lossless.schema import LcmWriter, Variant

from ..support.lcm_fixtures import CONDENSED, NOW, OLD_CACHE_LEAF, QUEUE_LEAF, SCHEMA_LEAF, build_small_db


def backend(
    tmp_path: Path,
    db: Path | None = None,
    environ: dict[str, str] | None = None,
    *,
    long_lived: bool = False,
    **settings: object,
) -> L.LosslessBackend:
    """``long_lived``: the daemon's instance (it keeps idle connections between searches)."""
    if db is not None:
        settings["db_path"] = str(db)
    return L.create(
        "lossless",
        _settings.validate(L.Settings, settings),
        BackendContext(state_dir=tmp_path, environ=environ or {}, cwd=tmp_path, long_lived=long_lived),
    )


def search(b: L.LosslessBackend, query: str, **kw: Any) -> BackendResponse:
    return asyncio.run(b.search(BackendRequest(query, **kw)))


@pytest.fixture(params=["current", "legacy", "no_fts"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return build_small_db(tmp_path / f"{request.param}.db", request.param)


# --------------------------------------------------------------------------- search and ranking


def test_decision_query_finds_the_schema_summary_in_every_schema_variant(any_db: Path, tmp_path: Path) -> None:
    resp = search(backend(tmp_path, any_db), "what did we decide about the database schema in the morning session")
    assert resp.status == "success"
    # The leaf and the condensed node above it both hold the whole query (database, schema).
    assert {r.extra.get("summary_id") for r in resp.results[:2]} == {SCHEMA_LEAF, CONDENSED}
    top = next(r for r in resp.results if r.extra.get("summary_id") == SCHEMA_LEAF)
    assert top.relevance >= 0.8  # all of the query, from today
    # An agent can follow up with lcm_describe: id, kind, depth, conversation and time are named.
    assert top.extra["kind"] == "leaf" and top.extra["depth"] == 0
    assert top.extra["conversation_id"] == 1
    assert top.timestamp and top.timestamp.endswith("Z") and top.timestamp[:10] <= NOW.date().isoformat()
    assert "UUID v7" in top.content
    # Trigger words and stopwords are not searched for; what was sent is reported.
    assert resp.query_sent is not None and "decide" not in resp.query_sent and "morning" not in resp.query_sent
    assert ("schema" in resp.query_sent) and ("databas" in resp.query_sent)


def test_fts_query_sent_is_the_quoted_or_expression(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db), "what did we decide about the database schema")
    assert resp.query_sent == '"database" OR "schema"'
    assert {r.extra["match"] for r in resp.results} == {"fts"}
    # The rows holding both words come first (bm25 and coverage agree).
    assert {r.extra.get("summary_id") for r in resp.results[:2]} == {SCHEMA_LEAF, CONDENSED}


def test_summaries_outrank_messages_and_both_are_searched(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db), "OrderController PaymentService")
    kinds = [r.extra["kind"] for r in resp.results]
    assert "message" in kinds and kinds[0] in ("leaf", "condensed")
    message = next(r for r in resp.results if r.extra["kind"] == "message")
    # A message names its id, role and the leaf summary that covers it (for lcm_describe).
    assert message.extra["message_id"] > 0 and message.extra["role"] == "user"
    assert message.extra["summary_id"] == QUEUE_LEAF
    best_summary = max(r.relevance for r in resp.results if r.extra["kind"] != "message")
    assert all(r.relevance < best_summary for r in resp.results if r.extra["kind"] == "message")


def test_include_messages_false_searches_summaries_only(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db, include_messages=False), "OrderController PaymentService")
    assert resp.results and all(r.extra["kind"] != "message" for r in resp.results)


def test_relevance_follows_the_share_of_the_query_a_hit_holds(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db)
    # No row holds all three words: the rows holding one of them are found.
    resp = search(b, "memcached kubernetes helm")
    assert resp.query_sent == '"memcached" OR "kubernetes" OR "helm"'
    assert resp.status == "success"
    assert {r.extra["match"] for r in resp.results} == {"fts"}
    # One of three terms: a weak match, below the router's 0.4 threshold.
    assert resp.normalized_relevance < 0.4
    two_of_three = search(b, "memcached Redis helm")
    assert two_of_three.results[0].extra["summary_id"] == OLD_CACHE_LEAF
    assert 0.4 <= two_of_three.normalized_relevance < 0.9


def test_recency_prefers_newer_summary_for_equal_text_matches(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db), "caching")
    by_id = {r.extra.get("summary_id"): r.relevance for r in resp.results if r.extra["kind"] != "message"}
    assert OLD_CACHE_LEAF in by_id
    # 60 days old: the recency factor is close to its 0.85 floor.
    assert 0.85 * 0.7 <= by_id[OLD_CACHE_LEAF] <= 0.88


def test_no_content_terms_returns_latest_decisions(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db), "why did we do it that way")
    assert resp.status == "success" and resp.query_sent is None
    # The newest summary that states a decision comes first.
    assert resp.results[0].extra["summary_id"] == QUEUE_LEAF
    assert {r.extra["match"] for r in resp.results} == {"recent"}
    decision = next(r for r in resp.results if r.extra["summary_id"] == QUEUE_LEAF)
    assert decision.relevance >= 0.4  # states a decision: usable
    no_decision = next(r for r in resp.results if r.extra["summary_id"] == CONDENSED)
    assert no_decision.relevance < 0.4  # states no decision or rationale


def test_operators_in_queries_are_literal(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db)
    for query in [
        'schema AND NOT "',
        "col:schema*",
        "NEAR(database schema)",
        "-deleted_at +uuid ^orders",
        "(((",
        "schema OR",
    ]:
        resp = search(b, query)
        assert resp.status in ("success", "empty"), (query, resp.error_message)
    assert search(b, "deleted_at").results[0].extra["summary_id"] == SCHEMA_LEAF
    assert search(b, '"payments queue"').results[0].extra["summary_id"] in (QUEUE_LEAF, CONDENSED)


def test_limit_is_respected(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    resp = search(backend(tmp_path, db), "OrderController", limit=2)
    assert resp.result_count == 2 == len(resp.results)


# --------------------------------------------------------------------------- schema variants and fallback


def test_like_fallback_without_fts_tables(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db", "no_fts")
    with sqlite3.connect(db) as conn:
        LcmWriter(conn).summary(
            1, "Database schema follow-up: migration 0043 adds an index.", latest=NOW - timedelta(days=30)
        )
    b = backend(tmp_path, db)
    resp = search(b, "the database schema decisions")
    # Fewer rows hold both words than the search wants (three times the limit): the rows holding
    # either are searched too, those holding both first.
    assert resp.query_sent == "LIKE %databas% OR %schema%"
    assert {r.extra.get("summary_id") for r in resp.results[:2]} == {SCHEMA_LEAF, CONDENSED}
    assert resp.results[0].extra["match"] == "like" and resp.normalized_relevance >= 0.8
    # Enough summaries hold every term (limit 1: three wanted): the fast form (newest first,
    # SQLite stops early) is enough.
    one = search(backend(tmp_path, db, include_messages=False), "the database schema decisions", limit=1)
    assert one.query_sent == "LIKE %databas% AND %schema%" and one.results[0].extra["match"] == "like"
    relaxed = search(b, "memcached kubernetes")
    assert relaxed.query_sent == "LIKE %memcach% OR %kubernet%"
    assert {r.extra["match"] for r in relaxed.results} == {"like"}
    probe = b.probe()
    assert probe.ok and probe.facts["search"] == "like" and not probe.facts["summaries_fts"]


def test_dangling_fts_rows_are_not_returned(tmp_path: Path) -> None:
    # The plugin indexes FTS rows best-effort (no triggers): a summary may lack its FTS row. FTS
    # search then cannot see it, but it never returns an FTS row whose base row is gone.
    db = build_small_db(tmp_path / "lcm.db")
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM summaries WHERE summary_id = ?", (QUEUE_LEAF,))  # FTS row left dangling
    conn.commit()
    conn.close()
    resp = search(backend(tmp_path, db), "payments queue")
    assert QUEUE_LEAF not in {r.extra.get("summary_id") for r in resp.results if r.extra["kind"] != "message"}


def test_legacy_schema_uses_created_at_and_reports_missing_columns(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db", "legacy")
    b = backend(tmp_path, db)
    resp = search(b, "payments queue")
    top = resp.results[0]
    assert top.extra["latest_at"] is None and top.timestamp is not None
    probe = b.probe()
    assert probe.ok
    assert {"summaries.latest_at", "summaries.model", "conversations.session_key"} <= set(
        probe.facts["missing_columns"]
    )


def test_fts_table_this_sqlite_cannot_read_falls_back_to_like(tmp_path: Path) -> None:
    # A database whose summaries_fts was made by a different module (here FTS4) looks like a stale
    # or foreign FTS table: the adapter must not trust it and searches the base table instead.
    db = build_small_db(tmp_path / "lcm.db", "no_fts")
    conn = sqlite3.connect(db)
    conn.execute("CREATE VIRTUAL TABLE summaries_fts USING fts4(content)")
    conn.commit()
    conn.close()
    resp = search(backend(tmp_path, db), "deleted_at")
    assert resp.results[0].extra["summary_id"] == SCHEMA_LEAF
    assert resp.query_sent is not None
    assert resp.query_sent.startswith("LIKE")


@pytest.mark.parametrize("long_lived", [False, True], ids=["one-shot", "daemon"])
def test_schema_change_while_cached_is_picked_up(tmp_path: Path, long_lived: bool) -> None:
    db = build_small_db(tmp_path / "lcm.db", "no_fts")
    b = backend(tmp_path, db, long_lived=long_lived)
    assert (search(b, "database schema").query_sent or "").startswith("LIKE")
    conn = sqlite3.connect(db)
    conn.executescript("""
        CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize='porter unicode61');
        CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, tokenize='porter unicode61');
        INSERT INTO messages_fts(rowid, content) SELECT message_id, content FROM messages;
        INSERT INTO summaries_fts(summary_id, content) SELECT summary_id, content FROM summaries;
    """)
    conn.close()
    assert search(b, "database schema").query_sent == '"database" OR "schema"'


# --------------------------------------------------------------------------- read-only and WAL


def test_reader_sees_committed_rows_only_while_the_plugin_writes_in_wal(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db)
    writer = sqlite3.connect(db, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    w = LcmWriter(writer)
    writer.execute("BEGIN IMMEDIATE")
    w.summary(1, "Zeppelin decision: we chose zeppelins for freight.", latest=NOW, summary_id="sum_00000000000000f1")
    # The writer holds the write lock: the reader still answers at once, without the uncommitted row.
    resp = search(b, "zeppelin freight", timeout_s=2.0)
    assert resp.status == "empty" and resp.error_code is None
    assert search(b, "database schema").status == "success"
    writer.execute("COMMIT")
    after = search(b, "zeppelin freight")
    assert after.results[0].extra["summary_id"] == "sum_00000000000000f1"
    writer.close()


def _open_fds_on(path: Path) -> int:
    """This process's descriptors open on ``path`` (Linux: /proc/self/fd)."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += fd.resolve() == path.resolve()
        except OSError:
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_the_daemon_keeps_a_connection_between_searches_that_never_holds_back_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's instance opens the file once for many searches (opening it cost more than the
    search), yet between searches it holds no transaction: the plugin's checkpoint truncates the
    WAL, its new rows are found by the next search, and closing the instance closes the file."""
    db = build_small_db(tmp_path / "lcm.db")
    opened: list[Path] = []
    real_connect = L.connect_readonly

    def counting(path: Path, **kw: Any) -> sqlite3.Connection:
        opened.append(path)
        return real_connect(path, **kw)

    monkeypatch.setattr("memory_router.backends.lossless.location.connect_readonly", counting)
    b = backend(tmp_path, db, long_lived=True)

    async def run() -> None:
        for _ in range(5):
            assert (await b.search(BackendRequest("database schema"))).status == "success"
        assert len(opened) == 1 and _open_fds_on(db) == 1
        writer = sqlite3.connect(db, isolation_level=None)
        LcmWriter(writer).summary(
            1, "Zeppelin decision: we chose zeppelins for freight.", latest=NOW, summary_id="sum_00000000000000f1"
        )
        busy, _, _ = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        writer.close()
        assert busy == 0, "an idle connection held back the plugin's checkpoint"
        found = await b.search(BackendRequest("zeppelin freight"))
        assert found.results[0].extra["summary_id"] == "sum_00000000000000f1"
        assert len(opened) == 1
        await b.aclose()
        assert _open_fds_on(db) == 0, "a closed instance left the database open"

    asyncio.run(run())


def test_a_database_replaced_on_disk_is_read_afresh_by_the_daemon(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db, long_lived=True)
    assert search(b, "database schema").status == "success"
    # Another lcm.db moved over the path (a restore, a copy from another machine).
    other = build_small_db(tmp_path / "other.db")
    conn = sqlite3.connect(other, isolation_level=None)
    LcmWriter(conn).summary(1, "Zeppelin decision: we chose zeppelins for freight.", latest=NOW)
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    other.replace(db)
    assert search(b, "zeppelin freight").results[0].content.startswith("Zeppelin decision")


def test_connection_is_read_only(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    before = db.read_bytes()
    conn = L.connect_readonly(db)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            conn.execute("INSERT INTO conversations (session_id) VALUES ('x')")
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("PRAGMA query_only=OFF")
            conn.execute("DELETE FROM summaries")  # still refused: the file is opened mode=ro
    finally:
        conn.close()
    assert db.read_bytes() == before


def test_searching_never_writes_the_database(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db.read_bytes()
    b = backend(tmp_path, db)
    for q in ("database schema", "why did we", "memcached kubernetes"):
        search(b, q)
    assert db.read_bytes() == before


# --------------------------------------------------------------------------- locating the database


def test_missing_database_is_unavailable_names_paths_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    state = tmp_path / "state"
    env = {"HOME": str(home), "OPENCLAW_STATE_DIR": str(state), "LCM_DATABASE_PATH": str(tmp_path / "x" / "lcm.db")}
    b = backend(tmp_path, environ=env)
    resp = search(b, "database schema")
    assert resp.status == "error" and resp.error_code == "BACKEND_UNAVAILABLE"
    for expected in (str(tmp_path / "x" / "lcm.db"), str(state / "lcm.db"), str(home / ".openclaw" / "lcm.db")):
        assert resp.error_message is not None
        assert expected in resp.error_message
    assert resp.error_message is not None
    assert "db_path" in resp.error_message and "lossless-claw" in resp.error_message
    assert not b.probe().ok
    assert not (tmp_path / "x").exists() and not state.exists() and not home.exists()


def test_configured_path_that_is_missing_is_not_created_and_not_papered_over(tmp_path: Path) -> None:
    other = build_small_db(tmp_path / "real.db")
    missing = tmp_path / "typo" / "lcm.db"
    b = backend(tmp_path, missing, environ={"LCM_DATABASE_PATH": str(other)})
    resp = search(b, "database schema")
    assert resp.error_message is not None
    assert resp.error_code == "BACKEND_UNAVAILABLE" and str(missing) in resp.error_message
    assert not missing.parent.exists()


def test_resolution_order_env_then_state_dir_then_home(tmp_path: Path) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    (home / ".openclaw").mkdir(parents=True)
    state.mkdir()
    build_small_db(home / ".openclaw" / "lcm.db")
    env = {"HOME": str(home), "OPENCLAW_STATE_DIR": str(state), "LCM_DATABASE_PATH": str(tmp_path / "nope.db")}
    loc = L.resolve_db_path("lossless", L.Settings(), BackendContext(state_dir=tmp_path, environ=env, cwd=tmp_path))
    assert loc.path == home / ".openclaw" / "lcm.db" and loc.source == "~/.openclaw/lcm.db"
    build_small_db(state / "lcm.db")
    loc = L.resolve_db_path("lossless", L.Settings(), BackendContext(state_dir=tmp_path, environ=env, cwd=tmp_path))
    assert loc.path == state / "lcm.db" and loc.source == "$OPENCLAW_STATE_DIR/lcm.db"
    build_small_db(tmp_path / "nope.db")
    loc = L.resolve_db_path("lossless", L.Settings(), BackendContext(state_dir=tmp_path, environ=env, cwd=tmp_path))
    assert loc.source == "LCM_DATABASE_PATH"
    loc = L.resolve_db_path(
        "lossless",
        L.Settings(db_path="~/.openclaw/lcm.db"),
        BackendContext(state_dir=tmp_path, environ=env, cwd=tmp_path),
    )
    assert loc.path == home / ".openclaw" / "lcm.db" and loc.source == "backends.lossless.db_path"


def test_a_file_that_is_not_a_database_is_a_clear_error_and_untouched(tmp_path: Path) -> None:
    junk = tmp_path / "lcm.db"
    junk.write_bytes(b"this is not sqlite\n" * 100)
    resp = search(backend(tmp_path, junk), "database schema")
    assert resp.status == "error" and resp.error_code == "BACKEND_ERROR"
    assert resp.error_message is not None
    assert str(junk) in resp.error_message and "not a database" in resp.error_message
    assert junk.read_bytes() == b"this is not sqlite\n" * 100
    assert not backend(tmp_path, junk).probe().ok


def test_a_sqlite_file_without_lcm_tables_is_named(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE nodes (rowid INTEGER PRIMARY KEY, content TEXT)")  # the stack's imagined schema
    conn.commit()
    conn.close()
    resp = search(backend(tmp_path, other), "database schema")
    assert resp.error_message is not None
    assert resp.error_code == "BACKEND_ERROR" and "not a lossless-claw database" in resp.error_message


def test_settings_reject_unknown_keys() -> None:
    with pytest.raises(Exception, match="db_pth"):
        _settings.validate(L.Settings, {"db_pth": "/x"})


# --------------------------------------------------------------------------- deadline


def test_a_search_stopped_before_it_starts_does_no_sqlite_work(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db)
    stop = threading.Event()
    stop.set()  # the router gave up before the worker thread got to the search
    resp = b.search_blocking(BackendRequest("database schema"), stop)
    assert resp.status == "error" and resp.error_code == "QUERY_TIMEOUT"
    assert resp.error_message == "cancelled before the SQLite search started"


def test_deadline_stops_a_long_scan(tmp_path: Path) -> None:
    from memory_router.backends.lossless.schema import create_lcm_db, populate_synthetic

    conn = create_lcm_db(tmp_path / "big.db", "no_fts")
    populate_synthetic(conn, messages=3000, summaries=3000)
    conn.close()
    b = backend(tmp_path, tmp_path / "big.db")
    query = "billing kubernetes terraform"  # LIKE, relaxed to OR: a full scan of both tables
    assert search(b, query).status == "success"
    started = time.perf_counter()
    resp = b.search_blocking(BackendRequest(query, timeout_s=1e-6), threading.Event())
    assert resp.error_message is not None
    assert resp.status == "error" and resp.error_code == "QUERY_TIMEOUT" and "deadline" in resp.error_message
    assert time.perf_counter() - started < 1.0


def test_router_timeout_cancels_the_search(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    b = backend(tmp_path, db)

    async def run() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.search(BackendRequest("database schema")), 0)
        # The adapter stays usable after a cancelled call.
        assert (await b.search(BackendRequest("database schema"))).status == "success"

    asyncio.run(run())


def test_cjk_query_inside_a_longer_run_is_found_by_substring(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    conn = sqlite3.connect(db, isolation_level=None)
    LcmWriter(conn).summary(
        1, "决定：端到端测试结果保存在数据库中，因为需要审计。", latest=NOW, summary_id="sum_00000000000000d1"
    )
    conn.close()
    resp = search(backend(tmp_path, db), "端到端测试")
    assert resp.results and resp.results[0].extra["summary_id"] == "sum_00000000000000d1"
    assert resp.query_sent == '"端到端测试" | LIKE %端到端测试%'


@pytest.mark.parametrize("variant", ["current", "legacy", "no_fts"])
def test_session_key_limits_search_to_one_session_family(tmp_path: Path, variant: Variant) -> None:
    db = build_small_db(tmp_path / "lcm.db", variant)
    conn = sqlite3.connect(db, isolation_level=None)
    w = LcmWriter(conn)
    other = w.conversation("sess-2", session_key="agent:other:main")
    w.summary(
        other,
        "Database schema decision in another agent: we chose MongoDB.",
        latest=NOW,
        summary_id="sum_00000000000000e1",
    )
    conn.close()
    everything = search(backend(tmp_path, db), "database schema")
    assert "sum_00000000000000e1" in {r.extra.get("summary_id") for r in everything.results}
    # Legacy databases have no session_key column: the session_id is matched instead.
    key = "sess-1" if variant == "legacy" else "agent:main:main"
    scoped = backend(tmp_path, db, session_key=key)
    for query in ("database schema", "MongoDB database", "why did we"):
        ids = {r.extra.get("summary_id") for r in search(scoped, query).results}
        assert "sum_00000000000000e1" not in ids, query
    assert search(scoped, "database schema").results[0].extra["conversation_id"] == 1


def test_a_database_locked_by_the_plugin_is_a_clear_error_within_the_busy_timeout(tmp_path: Path) -> None:
    db = build_small_db(tmp_path / "lcm.db")
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA locking_mode=EXCLUSIVE")  # WAL without shared memory: readers are shut out
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("UPDATE conversations SET title = 'x'")
    try:
        b = backend(tmp_path, db, busy_timeout_ms=200)
        started = time.perf_counter()
        resp = search(b, "database schema")
        assert time.perf_counter() - started < 3.0
        assert resp.status == "error" and resp.error_code == "BACKEND_ERROR"
        assert resp.error_message is not None
        assert "locked" in resp.error_message and "busy_timeout_ms" in resp.error_message
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert search(backend(tmp_path, db), "database schema").status == "success"


def test_db_path_expands_variables_and_home_from_the_context_not_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_small_db(tmp_path / "lcm.db")
    monkeypatch.setenv("MR_TEST_LCM_DIR", "/nowhere")  # the process environment must not be used
    ctx = BackendContext(
        state_dir=tmp_path, environ={"MR_TEST_LCM_DIR": str(tmp_path), "HOME": str(tmp_path)}, cwd=tmp_path
    )
    for raw in ("$MR_TEST_LCM_DIR/lcm.db", "${MR_TEST_LCM_DIR}/lcm.db", "~/lcm.db", "lcm.db"):
        loc = L.resolve_db_path("lossless", L.Settings(db_path=raw), ctx)
        assert loc.path == tmp_path / "lcm.db", raw
    loc = L.resolve_db_path("lossless", L.Settings(db_path="$UNSET_NAME/lcm.db"), ctx)
    assert loc.path is None and "$UNSET_NAME/lcm.db" in loc.describe_tried()
