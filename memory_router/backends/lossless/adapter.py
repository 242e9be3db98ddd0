"""Lossless: read-only search over lossless-claw's SQLite database (the conversation's DAG).

lossless-claw (the LCM plugin) stores every message of a conversation and a DAG of LLM-written
summaries of them (``leaf`` summaries of raw messages, ``condensed`` ones of lower summaries),
written to keep "decisions and rationale". This adapter reads that file; it never writes.

**Where the database is** (:mod:`.location`). ``backends.<name>.db_path`` in router-config.json if
set (it is then the only candidate: a typo is reported, not papered over); otherwise the first
existing of ``$LCM_DATABASE_PATH``, ``$OPENCLAW_STATE_DIR/lcm.db`` and ``~/.openclaw/lcm.db`` - the
plugin's own resolution order. Environment and home come from the :class:`BackendContext`.

**How it is opened.** ``file:<path>?mode=ro`` as a URI (a missing file is an error, never a new
empty database), ``PRAGMA query_only=ON``, a busy timeout (``busy_timeout_ms``), no read
transaction outliving a search (so WAL checkpoints of the live plugin are never held back; the
daemon keeps a few idle connections between searches, which hold none:
:class:`~.location.Connections`), a progress handler that aborts SQLite work at the request's
deadline or as soon as the router gives up on the call (its ``stop`` event, checked every 2000
SQLite VM steps, in the daemon and the one-shot CLI alike).

**Schema drift** (:mod:`.tables`). Columns and tables are detected with ``PRAGMA table_info`` and
``sqlite_master`` (cached per ``PRAGMA schema_version``): ``latest_at``, ``depth``, ``kind``,
``model``, ``session_key`` may be missing in old databases; ``summaries_fts``/``messages_fts``
are missing when the plugin's runtime had no FTS5; then the adapter searches with ``LIKE``.

**Query** (:mod:`.terms`, :mod:`.search`). Natural-language queries are reduced to content terms:
stopwords, meta words ("recently", "morning session") and rule 3's trigger words ("decide",
"decision", "chose") are dropped; quoted phrases and identifiers are kept. Each term is quoted as
an FTS5 string, as lossless-claw's ``sanitizeFts5Query`` does (so ``-``, ``:``, ``*``, ``OR``,
``NEAR`` are literal). FTS5 searches each table for the OR of the terms and keeps the best rows by
bm25 (three times the request's limit): a row that lacks one word of the question can still be its
answer (LongMemEval, LoCoMo: ANDing first and relaxing only when nothing matched lost evidence that
a plain BM25 found; docs/benchmarks-lossless.md). Without FTS5, ``LIKE`` finds the rows holding
every term first and, when they are fewer than that, the rows holding the most terms.
``query_sent`` reports what was searched, e.g. ``"database" OR "schema"`` or ``LIKE %databas% AND
%schema%``.

**Relevance** (0..1; the router accepts >= 0.4, as for every backend; :mod:`.ranking`)::

    coverage  = query terms the hit contains / query terms
    brevity   = 1.0 for a summary, and for a message of at most 400 characters
              = 400 / length for a longer message (1.0 when the query speaks to the assistant:
                "what did you recommend")
    strength  = rank / best rank in the same table              (FTS5 bm25 rank; 1.0 for the best)
              = 0.5 for LIKE hits                               (LIKE has no rank)
    relevance = coverage * brevity * (0.7 + 0.3 * strength) * kind_weight * recency
    kind_weight = 1.0 for summaries (decisions and rationale), 0.9 for raw messages
    recency   = 0.85 + 0.15 * 0.5 ** (age_days / 14),  age from COALESCE(latest_at, created_at)

and the results are returned in that order. bm25 is relative because its magnitude depends on
corpus size (a one-row corpus scores -0.000001), so it only orders hits and spreads them within a
band; what a score *means* comes from coverage: a short hit holding the whole query scores
0.54..1.0, one holding half of it ~0.3..0.5 (the threshold, as in Total Recall), one holding a
third of it is weak. Brevity is there because a long message holds many of a question's words by
sheer size: an assistant's long answer repeats the words of the question it answers, while the
user's short message states the fact (measured on LongMemEval, where it lifts hit@1 from 52 to 63;
docs/benchmarks-lossless.md). A query with no content terms at all ("why did we do it that way") is a
back-reference to the conversation: the most recent summaries are returned, 0.5 x recency for
those that state a decision or rationale ("decided", "because", "instead of"...), 0.3 x recency
otherwise.

Each result names ``summary_id`` (``sum_...``, for ``lcm_describe``/``lcm_expand``), ``kind``,
``depth``, ``conversation_id``, its time and ``match`` (``fts``, ``like`` or ``recent``); a message
hit names ``message_id``, ``role``, ``seq`` and the ``summary_id`` of the leaf that covers it, if any.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    ON_LOOP_S,
    QUERY_TIMEOUT,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
    Stopwatch,
)
from memory_router.backends.common.settings import AdapterSettings, Limits
from memory_router.backends.common.words import STOPWORDS as STOPWORDS
from memory_router.backends.common.words import recency as recency
from memory_router.backends.lossless.location import Connections, locate, variables_in
from memory_router.backends.lossless.location import Location as Location
from memory_router.backends.lossless.location import connect_readonly as connect_readonly
from memory_router.backends.lossless.ranking import LIKE_STRENGTH, to_result
from memory_router.backends.lossless.search import Hit, Search
from memory_router.backends.lossless.tables import Schema as Schema
from memory_router.backends.lossless.tables import detect_schema as detect_schema
from memory_router.backends.lossless.terms import MAX_TERMS as MAX_TERMS
from memory_router.backends.lossless.terms import Term as Term
from memory_router.backends.lossless.terms import addresses_assistant, needs_substring_search
from memory_router.backends.lossless.terms import fts_match as fts_match
from memory_router.backends.lossless.terms import query_terms as query_terms
from memory_router.config.envvars import LOSSLESS

TYPE_CHECKING = False  # not typing's: a cold query builds these settings without importing typing
if TYPE_CHECKING:
    from typing import Annotated

ENV_VARS: frozenset[str] = LOSSLESS  # the environment variables it reads: memory_router.config.envvars

MAX_POOL = 200
THREADS_AFTER_SLOW_S = 60.0  # after a search longer than ON_LOOP_S, search_now declines this long
IDLE_CONNECTIONS = 4  # as many as the instance's worker threads (threads.DEFAULT_WORKERS)
FIX_HINT = (
    "install and run the lossless-claw OpenClaw plugin (it creates lcm.db on start), or point "
    "backends.{name}.db_path in router-config.json (or LCM_DATABASE_PATH) at an existing lcm.db"
)
MODES = None  # a single mode: chain steps name none


class Settings(AdapterSettings):
    """``backends.<name>`` keys for ``"type": "lossless"`` in router-config.json (all optional)."""

    db_path: str | None = None
    """Path of lcm.db; default: $LCM_DATABASE_PATH, $OPENCLAW_STATE_DIR/lcm.db, ~/.openclaw/lcm.db."""
    busy_timeout_ms: Annotated[int, Limits(ge=0, le=600_000)] = 5000
    """How long a read waits on a lock held by the plugin (migrations, checkpoints)."""
    include_messages: bool = True
    """Also search raw messages (summaries are always searched and preferred)."""
    max_content_chars: Annotated[int, Limits(ge=100, le=1_000_000)] = 2000
    session_key: str | None = None
    """Only this OpenClaw session family (``conversations.session_key``, e.g. ``agent:main:main``;
    ``session_id`` on databases older than v0.4.0). Default: every conversation in the file."""
    unkeyed_agents: tuple[str, ...] = ()
    """Agents whose scoped queries also read conversations with no ``session_key`` (NULL or empty:
    written before lossless-claw kept keys, or by a tool outside a session); ``["*"]``: every
    agent. Default: none; such a conversation is visible to unscoped queries only."""


class _NotNow(Exception):
    """:meth:`LosslessBackend.search_now`'s search met a lock or ran out of its time."""


_NEVER = threading.Event()  # the stop of a search on the event loop: nothing sets it (its budget stops it)


def create(name: str, settings: Settings, context: BackendContext) -> LosslessBackend:
    return LosslessBackend(name, settings, context)


class LosslessBackend(BlockingAdapter):
    def __init__(self, name: str, settings: Settings, context: BackendContext) -> None:
        self.name = name
        self.settings = settings
        self.context = context
        self._schemas: dict[tuple[str, int], Schema] = {}
        self._schemas_lock = threading.Lock()
        # The daemon keeps one idle connection per worker thread for the next search; a one-shot
        # router none (its one search closes what it opened).
        self._connections = Connections(IDLE_CONNECTIONS if context.long_lived else 0)
        self._threads_until = 0.0  # search_now declines until then (monotonic): a search took long

    # -- plumbing

    def location(self) -> Location:
        return resolve_db_path(self.name, self.settings, self.context)

    def _unavailable_message(self, loc: Location) -> str:
        return f"no lossless-claw database found (tried {loc.describe_tried()}); " + FIX_HINT.format(name=self.name)

    def _schema(self, conn: sqlite3.Connection, path: Path) -> Schema:
        version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
        key = (str(path), version)
        with self._schemas_lock:
            cached = self._schemas.get(key)
        if cached is None:
            cached = detect_schema(conn)
            with self._schemas_lock:
                self._schemas[key] = cached
        return cached

    # -- the Backend protocol

    def calibration_key(self, mode: str | None) -> str:
        """The calibration map (memory_router.core.calibration): one mode, one map."""
        return "lossless"

    def probe(self) -> Probe:
        loc = self.location()
        if loc.path is None:
            return Probe(False, self._unavailable_message(loc), {"tried": [str(p) for _, p in loc.tried]})
        try:
            conn = connect_readonly(loc.path, busy_timeout_ms=min(self.settings.busy_timeout_ms, 2000))
            try:
                schema = detect_schema(conn)
                if not schema.is_lcm:
                    return Probe(
                        False,
                        f"{loc.path} is not a lossless-claw database (no summaries/messages tables)",
                        {"db_path": str(loc.path)},
                    )
                counts = {
                    t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t, cols in (("summaries", schema.summaries), ("messages", schema.messages))
                    if cols
                }
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return Probe(False, f"cannot read {loc.path}: {exc}", {"db_path": str(loc.path)})
        fts = schema.summaries_fts and schema.messages_fts
        facts = {
            "db_path": str(loc.path),
            "source": loc.source,
            "search": "fts5" if fts else "like",
            "summaries_fts": schema.summaries_fts,
            "messages_fts": schema.messages_fts,
            "missing_columns": schema.missing_columns(),
            "sqlite": sqlite3.sqlite_version,
            **counts,
        }
        detail = (
            f"{loc.path} ({loc.source}): {counts.get('summaries', 0)} summaries, "
            f"{counts.get('messages', 0)} messages, {'FTS5' if fts else 'LIKE fallback'}"
        )
        return Probe(True, detail, facts)

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        """:class:`~.base.BlockingBackend` (the async ``search`` is :class:`~.base.BlockingAdapter`'s):
        the search in the caller's thread; ``stop`` aborts the SQLite statement at its next
        progress check (every 2000 VM steps)."""
        # A lock wait is not interruptible (the progress handler does not run while SQLite
        # sleeps on a busy lock), so it must not be allowed to outlive the router's timeout.
        busy_ms = min(self.settings.busy_timeout_ms, max(1, int(request.timeout_s * 1000)))
        return self._search(request, stop, max(0.0, request.timeout_s), busy_ms)

    def search_now(self, request: BackendRequest) -> BackendResponse | None:
        """:meth:`~.base.BlockingAdapter.search_now`: the same search on the caller's thread,
        never waiting on a lock (a busy timeout of 0) and stopped at :data:`~.base.ON_LOOP_S`;
        ``None`` when it met a lock or ran out of that time, and for a minute after a search of
        this instance took longer than that (a big database: its searches keep their threads)."""
        if time.monotonic() < self._threads_until:
            return None
        try:
            return self._search(request, _NEVER, ON_LOOP_S, 0, on_loop=True)
        except _NotNow:
            return None

    def _search(
        self, request: BackendRequest, stop: threading.Event, budget_s: float, busy_ms: int, *, on_loop: bool = False
    ) -> BackendResponse:
        """The search within ``budget_s`` (its SQLite work stopped there), waiting at most
        ``busy_ms`` on a lock. ``on_loop`` (:meth:`search_now`): a lock or the budget's end raises
        :class:`_NotNow` instead of answering."""
        watch = Stopwatch()
        loc = self.location()
        if loc.path is None:
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, self._unavailable_message(loc), duration_ms=watch.ms
            )
        try:
            conn = self._connections.take(loc.path, busy_ms)
        except sqlite3.Error as exc:
            return BackendResponse.failure(
                self.name,
                request.query,
                BACKEND_UNAVAILABLE,
                f"cannot open {loc.path} read-only ({loc.source}): {exc}; check the file's permissions "
                "(a WAL database opened read-only needs its -wal/-shm files or a writable directory)",
                duration_ms=watch.ms,
            )
        deadline = time.monotonic() + budget_s
        # Checked every 2000 VM steps: a cancelled call or a passed deadline aborts the statement
        # ("interrupted"), so no SQLite work outlives the router's timeout.
        conn.set_progress_handler(lambda: 1 if stop.is_set() or time.monotonic() > deadline else 0, 2000)
        if stop.is_set():  # the router gave up before the thread got here
            self._connections.give_back(conn, reusable=False)
            return BackendResponse.failure(
                self.name,
                request.query,
                QUERY_TIMEOUT,
                "cancelled before the SQLite search started",
                duration_ms=watch.ms,
            )
        sent: str | None = None
        reusable = False  # a connection whose search failed or was stopped is closed, never reused
        try:
            schema = self._schema(conn, loc.path)
            if not schema.is_lcm:
                return BackendResponse.failure(
                    self.name,
                    request.query,
                    BACKEND_ERROR,
                    f"{loc.path} ({loc.source}) is not a lossless-claw database: it has no summaries or "
                    f"messages table; " + FIX_HINT.format(name=self.name),
                    duration_ms=watch.ms,
                )
            agent = request.scope.agent if request.scope is not None else None
            search = Search(
                conn,
                schema,
                session_key=self.settings.session_key,
                agent=agent,
                unkeyed_visible=agent is not None and self._unkeyed_visible(agent),
                window=request.window.sql_bounds() if request.window is not None else None,
            )
            hits, sent = self._find(search, request)
            to_assistant = addresses_assistant(request.query)
            max_chars = self.settings.max_content_chars
            results = [to_result(h, self.name, max_chars, to_assistant) for h in hits]
            results.sort(key=lambda r: r.relevance, reverse=True)
            reusable = not stop.is_set()
            return BackendResponse.from_results(
                self.name, request.query, results[: request.limit], duration_ms=watch.ms, query_sent=sent
            )
        except sqlite3.Error as exc:  # OperationalError (interrupted, locked...), DatabaseError (not a database...)
            operational = isinstance(exc, sqlite3.OperationalError)
            if on_loop and operational and any(w in str(exc).lower() for w in ("interrupt", "locked", "busy")):
                raise _NotNow from exc  # a lock, or more work than the event loop may do: the threads
            if operational and "interrupt" in str(exc).lower():
                return BackendResponse.failure(
                    self.name,
                    request.query,
                    QUERY_TIMEOUT,
                    f"SQLite search of {loc.path} stopped at the {int(request.timeout_s * 1000)} ms deadline",
                    duration_ms=watch.ms,
                    query_sent=sent,
                )
            if operational and ("locked" in str(exc).lower() or "busy" in str(exc).lower()):
                return BackendResponse.failure(
                    self.name,
                    request.query,
                    BACKEND_ERROR,
                    f"{loc.path} stayed locked for {busy_ms} ms ({exc}): lossless-claw is probably migrating "
                    f"or checkpointing it; retry, or raise backends.{self.name}.busy_timeout_ms",
                    duration_ms=watch.ms,
                    query_sent=sent,
                )
            return BackendResponse.failure(
                self.name,
                request.query,
                BACKEND_ERROR,
                f"reading {loc.path}: {exc}",
                duration_ms=watch.ms,
                query_sent=sent,
            )
        finally:
            self._connections.give_back(conn, reusable=reusable)
            if watch.seconds > ON_LOOP_S:  # too big to answer on the event loop: the threads, for a while
                self._threads_until = time.monotonic() + THREADS_AFTER_SLOW_S

    def close_blocking(self) -> None:
        """:meth:`~.base.BlockingAdapter.close_blocking`: the idle connections close now, the ones
        in use when their search ends (the daemon closes a backend a reload replaced)."""
        self._connections.close()

    # -- search strategy

    def _find(self, search: Search, request: BackendRequest) -> tuple[list[Hit], str | None]:
        schema = search.schema
        terms = query_terms(request.query)
        pool = min(MAX_POOL, max(1, request.limit) * 3)
        tables = ["summaries"] if schema.summaries else []
        if self.settings.include_messages and schema.messages:
            tables.append("messages")
        if not terms:
            return search.recent(tables, pool), None
        hits: list[Hit] = []
        sent: list[str] = []
        for table in tables:
            found, how = self._search_table(search, table, terms, pool)
            hits += found
            sent += [how] if how not in sent else []
        if not hits and needs_substring_search(terms):
            # unicode61 keeps a run of CJK characters as one token, so FTS5 only matches it whole;
            # a substring search finds it inside longer runs (lossless-claw falls back likewise).
            like_sent: list[str] = []
            for table in tables:
                found, how = search.like(table, terms, pool, LIKE_STRENGTH)
                hits += found
                like_sent += [how] if how not in like_sent else []
            sent += like_sent if hits else []
        return hits, " | ".join(sent)

    @staticmethod
    def _search_table(search: Search, table: str, terms: tuple[Term, ...], pool: int) -> tuple[list[Hit], str]:
        use_fts = search.schema.summaries_fts if table == "summaries" else search.schema.messages_fts
        if use_fts:
            try:
                return search.fts(table, terms, pool)
            except sqlite3.OperationalError as exc:
                if "interrupt" in str(exc).lower():
                    raise
                # A MATCH the FTS table refuses (or a broken FTS table): search the base table.
        return search.like(table, terms, pool, LIKE_STRENGTH)

    def _unkeyed_visible(self, agent: str) -> bool:
        return "*" in self.settings.unkeyed_agents or agent in self.settings.unkeyed_agents


def resolve_db_path(name: str, settings: Settings, context: BackendContext) -> Location:
    """The lossless-claw database per the order in the module docstring. Never creates anything."""
    return locate(name, settings.db_path, context)


def config_env_vars(settings: Settings) -> frozenset[str]:
    """Variables a configured ``db_path`` names (``$NAME``/``${NAME}``), beyond ``ENV_VARS``: the
    socket daemon adds them to the names a client must agree on."""
    return variables_in(settings.db_path)


# --------------------------------------------------------------------------- demo


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, str]:
    """A small real-schema lcm.db in ``state_dir``: today's morning session of the demo project."""
    from memory_router.backends.lossless.demo import build_demo_db

    path = state_dir / "lcm.db"
    build_demo_db(path)
    return {"db_path": str(path)}
