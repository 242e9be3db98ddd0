"""Lossless: read-only search over lossless-claw's SQLite database (the conversation's DAG).

lossless-claw (the LCM plugin) stores every message of a conversation and a DAG of LLM-written
summaries of them (``leaf`` summaries of raw messages, ``condensed`` ones of lower summaries),
written to keep "decisions and rationale". This adapter reads that file; it never writes.

**Where the database is.** ``backends.<name>.db_path`` in router-config.json if set (it is then
the only candidate: a typo is reported, not papered over); otherwise the first existing of
``$LCM_DATABASE_PATH``, ``$OPENCLAW_STATE_DIR/lcm.db`` and ``~/.openclaw/lcm.db`` - the
plugin's own resolution order. Environment and home come from the :class:`BackendContext`.

**How it is opened.** ``file:<path>?mode=ro`` as a URI (a missing file is an error, never a new
empty database), ``PRAGMA query_only=ON``, a busy timeout (``busy_timeout_ms``), one short-lived
connection per search (so no read transaction outlives a query and WAL checkpoints of the live
plugin are never held back), a progress handler that aborts SQLite work at the request's
deadline or as soon as the router gives up on the call (its ``stop`` event, checked every 2000
SQLite VM steps, in the daemon and the one-shot CLI alike).

**Schema drift.** Columns and tables are detected with ``PRAGMA table_info`` and
``sqlite_master`` (cached per ``PRAGMA schema_version``): ``latest_at``, ``depth``, ``kind``,
``model``, ``session_key`` may be missing in old databases; ``summaries_fts``/``messages_fts``
are missing when the plugin's runtime had no FTS5; then the adapter searches with ``LIKE``.

**Query.** Natural-language queries are reduced to content terms: stopwords, meta words
("recently", "morning session") and rule 3's trigger words ("decide", "decision", "chose") are
dropped; quoted phrases and identifiers are kept. Each term is quoted as an FTS5 string, as
lossless-claw's ``sanitizeFts5Query`` does (so ``-``, ``:``, ``*``, ``OR``, ``NEAR`` are
literal). FTS5 ANDs the terms; when the strict form finds nothing in either table the adapter
relaxes to OR. ``query_sent`` reports what was searched, e.g. ``"database" "schema"`` or
``"database" OR "schema"`` or ``LIKE %databas% AND %schema%``.

**Relevance** (0..1; the router accepts >= 0.4, as for every backend)::

    coverage  = query terms the hit contains / query terms      (1.0 for every strict-AND hit)
    strength  = rank / best rank in the same table              (FTS5 bm25 rank; 1.0 for the best)
              = 0.5 for LIKE hits                               (LIKE has no rank)
    relevance = coverage * (0.7 + 0.3 * strength) * kind_weight * recency
    kind_weight = 1.0 for summaries (decisions and rationale), 0.9 for raw messages
    recency   = 0.85 + 0.15 * 0.5 ** (age_days / 14),  age from COALESCE(latest_at, created_at)

bm25 is relative because its magnitude depends on corpus size (a one-row corpus scores
-0.000001), so it only orders hits and spreads them within a band; what a score *means* comes
from coverage: a hit holding the whole query scores 0.54..1.0, one holding half of it ~0.3..0.5
(the threshold, as in Total Recall), one holding a third of it is weak. A query with no content
terms at all ("why did we do it that way") is a back-reference to the conversation: the most
recent summaries are returned, 0.5 x recency for those that state a decision or rationale
("decided", "because", "instead of"...), 0.3 x recency otherwise.

Each result names ``summary_id`` (``sum_...``, for ``lcm_describe``/``lcm_expand``), ``kind``,
``depth``, ``conversation_id`` and its time; a message hit names ``message_id``, ``role``,
``seq`` and the ``summary_id`` of the leaf that covers it, if any.
"""

from __future__ import annotations

import contextvars
import functools
import os
import pwd
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    QUERY_TIMEOUT,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
    Result,
    Stopwatch,
)
from memory_router.backends.common.settings import Limits
from memory_router.backends.common.words import META_WORDS, STOPWORDS, recency, stem
from memory_router.config.envvars import LOSSLESS
from memory_router.core.frozen import Frozen

ENV_VARS: frozenset[str] = LOSSLESS  # the environment variables it reads: memory_router.config.envvars

SUMMARY_WEIGHT = 1.0
MESSAGE_WEIGHT = 0.9
BAND_FLOOR = 0.7  # coverage * (BAND_FLOOR + (1 - BAND_FLOOR) * strength)
LIKE_STRENGTH = 0.5
NO_TERMS_DECISION = 0.5
NO_TERMS_OTHER = 0.3
MAX_TERMS = 12
MAX_POOL = 200
RECENT_WINDOW = 2000
FIX_HINT = (
    "install and run the lossless-claw OpenClaw plugin (it creates lcm.db on start), or point "
    "backends.{name}.db_path in router-config.json (or LCM_DATABASE_PATH) at an existing lcm.db"
)
MODES = None  # a single mode: chain steps name none


@dataclass(frozen=True, slots=True)
class Settings:
    """``backends.<name>`` keys for ``"type": "lossless"`` in router-config.json (all optional)."""

    __pydantic_config__ = {"extra": "forbid", "strict": True}

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


def create(name: str, settings: Settings, context: BackendContext) -> LosslessBackend:
    return LosslessBackend(name, settings, context)


# --------------------------------------------------------------------------- locating the DB


class Location(Frozen):
    path: Path | None  # the database to open; None when no candidate exists
    source: str  # where it came from ("backends.lossless.db_path", "LCM_DATABASE_PATH"...)
    tried: tuple[tuple[str, Path], ...]  # every candidate considered, in order

    def describe_tried(self) -> str:
        return "; ".join(f"{src}: {p}" for src, p in self.tried)


def resolve_db_path(name: str, settings: Settings, context: BackendContext) -> Location:
    """The lossless-claw database per the order in the module docstring. Never creates anything."""
    env = context.environ
    if settings.db_path:
        path = _expand_home(_expand_vars(settings.db_path, env), env)
        if not path.is_absolute():
            path = context.cwd / path
        src = f"backends.{name}.db_path"
        return Location(path if path.is_file() else None, src, ((src, path),))
    candidates: list[tuple[str, Path]] = []
    if env.get("LCM_DATABASE_PATH"):
        candidates.append(("LCM_DATABASE_PATH", _expand_home(env["LCM_DATABASE_PATH"], env)))
    if env.get("OPENCLAW_STATE_DIR"):
        candidates.append(("$OPENCLAW_STATE_DIR/lcm.db", _expand_home(env["OPENCLAW_STATE_DIR"], env) / "lcm.db"))
    candidates.append(("~/.openclaw/lcm.db", _home(env) / ".openclaw" / "lcm.db"))
    candidates = [(src, p if p.is_absolute() else context.cwd / p) for src, p in candidates]
    for src, path in candidates:
        if path.is_file():
            return Location(path, src, tuple(candidates))
    return Location(None, "", tuple(candidates))


def config_env_vars(settings: Settings) -> frozenset[str]:
    """Variables a configured ``db_path`` names (``$NAME``/``${NAME}``), beyond ``ENV_VARS``: the
    socket daemon adds them to the names a client must agree on."""
    return frozenset(a or b for a, b in _VAR.findall(settings.db_path or ""))


def _home(env: Any) -> Path:
    """``$HOME`` from the context's environment, else the account's home directory."""
    if env.get("HOME"):
        return Path(env["HOME"])
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, AttributeError):  # no passwd entry (or not POSIX)
        return Path("~").expanduser()


_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _expand_vars(raw: str, env: Any) -> str:
    """``$NAME``/``${NAME}`` from the context's environment; unknown names stay as written."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), raw)


def _expand_home(raw: str, env: Any) -> Path:
    if raw == "~" or raw.startswith("~/"):
        return _home(env) / raw[2:]
    return Path(raw)


def connect_readonly(path: Path, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open ``path`` read-only: ``mode=ro`` URI (never creates a file) plus ``query_only``."""
    uri = path.absolute().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_ms / 1000, check_same_thread=False, isolation_level=None)
    try:
        conn.execute("PRAGMA query_only=ON")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    except BaseException:
        conn.close()
        raise
    return conn


# --------------------------------------------------------------------------- schema detection


class Schema(Frozen):
    summaries: frozenset[str]  # column names; empty when the table is missing
    messages: frozenset[str]
    conversations: frozenset[str]
    summaries_fts: bool  # present, queryable and shaped as the plugin makes it
    messages_fts: bool
    summary_messages: bool
    fts_problem: str | None = None  # why FTS is not used, when tables exist but cannot be queried

    @property
    def is_lcm(self) -> bool:
        return {"content", "summary_id"} <= self.summaries or {"content", "message_id"} <= self.messages

    def summary_time(self, alias: str = "s") -> str:
        """The event time: COALESCE(latest_at, created_at), as lossless-claw's search uses."""
        if "latest_at" in self.summaries and "created_at" in self.summaries:
            return f"COALESCE({alias}.latest_at, {alias}.created_at)"
        return f"{alias}.created_at" if "created_at" in self.summaries else "NULL"

    def missing_columns(self) -> list[str]:
        wanted = {"summaries": ("kind", "depth", "latest_at", "model"), "conversations": ("session_key", "active")}
        have = {"summaries": self.summaries, "conversations": self.conversations}
        return [f"{t}.{c}" for t, cols in wanted.items() if have[t] for c in cols if c not in have[t]]


def _columns(conn: sqlite3.Connection, table: str) -> frozenset[str]:
    return frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))


def detect_schema(conn: sqlite3.Connection) -> Schema:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    problem: str | None = None

    def fts_ok(table: str, needed: set[str]) -> bool:
        nonlocal problem
        if table not in tables:
            return False
        try:
            conn.execute(f"SELECT rowid FROM {table} WHERE 0").fetchall()
            cols = _columns(conn, table)
        except sqlite3.Error as exc:  # e.g. "no such module: fts5" on a build without FTS5
            problem = f"{table}: {exc}"
            return False
        if not needed <= cols:
            problem = f"{table} has columns {sorted(cols)}, expected {sorted(needed)}"
            return False
        return True

    return Schema(
        summaries=_columns(conn, "summaries") if "summaries" in tables else frozenset(),
        messages=_columns(conn, "messages") if "messages" in tables else frozenset(),
        conversations=_columns(conn, "conversations") if "conversations" in tables else frozenset(),
        summaries_fts=fts_ok("summaries_fts", {"summary_id", "content"}),
        messages_fts=fts_ok("messages_fts", {"content"}),
        summary_messages="summary_messages" in tables,
        fts_problem=problem,
    )


# --------------------------------------------------------------------------- the query

# Phrases that say *when* or *that* something was decided, not *what*: rule 3's trigger phrases.
_TRIGGER_PHRASES = re.compile(
    r"\b(?:morning|afternoon|evening)\s+sessions?\b|\bearlier\s+in\s+(?:the\s+|this\s+|our\s+)?conversation\b",
    re.IGNORECASE,
)
DECISION_WORDS = frozenset(
    """decide decides decided deciding decision decisions chose choose chooses choosing chosen choice
    choices recall recalled remember remembered rationale reason reasons reasoning""".split()
)
_DROP = STOPWORDS | META_WORDS | DECISION_WORDS
_QUOTED = re.compile(r'"([^"]*)"')
_EDGE_PUNCT = re.compile(r"^[^\w]+|[^\w]+$", re.UNICODE)
_CLITIC = re.compile(r"^(\w+)['’](?:s|t|re|ve|ll|d|m)$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@functools.cache
def _unsegmented() -> re.Pattern[str]:
    """Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul, Thai.
    Compiled on first use: ``re`` expands these ranges character by character, ~3 ms, which a
    cold query with only ASCII terms never needs to pay."""
    return re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0e7f\uf900-\ufaff]")


class Term(Frozen):
    text: str  # as the user wrote it (minus edge punctuation and double quotes)
    phrase: bool  # came from a "quoted phrase"

    @property
    def fts(self) -> str:
        """An FTS5 string: everything inside double quotes is literal (operators included)."""
        return '"' + self.text.replace('"', "") + '"'

    @property
    def like(self) -> str:
        """The lower-cased substring for LIKE; single words lightly stemmed (decided -> decid)."""
        low = self.text.lower()
        return low if self.phrase else stem(low)


def query_terms(query: str) -> tuple[Term, ...]:
    """The content terms of a natural-language query (possibly none)."""
    text = _CONTROL.sub(" ", query)
    terms: list[Term] = []
    for phrase in _QUOTED.findall(text):
        phrase = " ".join(phrase.split())
        if any(ch.isalnum() for ch in phrase):
            terms.append(Term(phrase, True))
    rest = _TRIGGER_PHRASES.sub(" ", _QUOTED.sub(" ", text)).replace('"', " ")
    for raw in rest.split():
        word = _EDGE_PUNCT.sub("", raw)
        if not any(ch.isalnum() for ch in word):
            continue
        low = word.lower()
        base = m.group(1).lower() if (m := _CLITIC.match(low)) else low
        if base in _DROP or (len(base) < 2 and not base.isdigit()):
            continue
        terms.append(Term(word, False))
    seen: dict[str, Term] = {}
    for term in terms:
        seen.setdefault(term.text.lower(), term)
    return tuple(seen.values())[:MAX_TERMS]


def fts_match(terms: Iterable[Term], op: str = "AND") -> str:
    """The MATCH expression: quoted terms joined by implicit AND (``op="AND"``) or ``OR``."""
    quoted = [t.fts for t in terms]
    return " ".join(quoted) if op == "AND" else " OR ".join(quoted)


_DECISION_TEXT = re.compile(
    r"\b(?:decid\w*|decision\w*|chose|chosen|choose|because|rationale|instead\s+of|trade-?offs?|went\s+with|settled\s+on)\b",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- searching


class _Deadline(Exception):
    pass


class _Hit(Frozen):
    table: str  # "summaries" | "messages"
    row: dict[str, Any]
    coverage: float
    strength: float
    match: str  # fts | fts-or | like | like-or | recent
    fts_rowid: int | None = None


class LosslessBackend(BlockingAdapter):
    def __init__(self, name: str, settings: Settings, context: BackendContext) -> None:
        self.name = name
        self.settings = settings
        self.context = context
        self._schemas: dict[tuple[str, int], Schema] = {}
        self._schemas_lock = threading.Lock()

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
        watch = Stopwatch()
        loc = self.location()
        if loc.path is None:
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, self._unavailable_message(loc), duration_ms=watch.ms
            )
        try:
            # A lock wait is not interruptible (the progress handler does not run while SQLite
            # sleeps on a busy lock), so it must not be allowed to outlive the router's timeout.
            busy_ms = min(self.settings.busy_timeout_ms, max(1, int(request.timeout_s * 1000)))
            conn = connect_readonly(loc.path, busy_timeout_ms=busy_ms)
        except sqlite3.Error as exc:
            return BackendResponse.failure(
                self.name,
                request.query,
                BACKEND_UNAVAILABLE,
                f"cannot open {loc.path} read-only ({loc.source}): {exc}; check the file's permissions "
                "(a WAL database opened read-only needs its -wal/-shm files or a writable directory)",
                duration_ms=watch.ms,
            )
        deadline = time.monotonic() + max(0.0, request.timeout_s)
        # Checked every 2000 VM steps: a cancelled call or a passed deadline aborts the statement
        # ("interrupted"), so no SQLite work outlives the router's timeout.
        conn.set_progress_handler(lambda: 1 if stop.is_set() or time.monotonic() > deadline else 0, 2000)
        if stop.is_set():  # the router gave up before the thread got here
            conn.close()
            return BackendResponse.failure(
                self.name,
                request.query,
                QUERY_TIMEOUT,
                "cancelled before the SQLite search started",
                duration_ms=watch.ms,
            )
        sent: str | None = None
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
            # The call's agent reaches every statement through _scope(): a context variable of
            # this worker thread, set for this call only (the instance is shared by all agents).
            agent_token = _CALL_AGENT.set(request.scope.agent if request.scope is not None else None)
            columns_token = _CALL_COLUMNS.set(schema.conversations)
            window_token = _CALL_WINDOW.set(request.window.sql_bounds() if request.window is not None else None)
            try:
                hits, sent = self._find(conn, schema, request)
            finally:
                _CALL_AGENT.reset(agent_token)
                _CALL_COLUMNS.reset(columns_token)
                _CALL_WINDOW.reset(window_token)
            results = [self._result(h, schema) for h in hits]
            results.sort(key=lambda r: r.relevance, reverse=True)
            return BackendResponse.from_results(
                self.name, request.query, results[: request.limit], duration_ms=watch.ms, query_sent=sent
            )
        except sqlite3.Error as exc:  # OperationalError (interrupted, locked...), DatabaseError (not a database...)
            operational = isinstance(exc, sqlite3.OperationalError)
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
            conn.close()

    # -- search strategy

    def _find(self, conn: sqlite3.Connection, schema: Schema, request: BackendRequest) -> tuple[list[_Hit], str | None]:
        terms = query_terms(request.query)
        pool = min(MAX_POOL, max(1, request.limit) * 3)
        tables = ["summaries"] if schema.summaries else []
        if self.settings.include_messages and schema.messages:
            tables.append("messages")
        if not terms:
            return self._recent(conn, schema, tables, pool), None
        ops = ("AND", "OR") if len(terms) > 1 else ("AND",)
        hits, sent = self._ladder(ops, tables, lambda t, op: self._search_table(conn, schema, t, terms, op, pool))
        if not hits and any(not t.text.isascii() and _unsegmented().search(t.text) for t in terms):
            # unicode61 keeps a run of CJK characters as one token, so FTS5 only matches it whole;
            # a substring search finds it inside longer runs (lossless-claw falls back likewise).
            hits, like_sent = self._ladder(ops, tables, lambda t, op: self._like(conn, schema, t, terms, op, pool))
            sent = f"{sent} | {like_sent}" if hits else sent
        return hits, sent

    @staticmethod
    def _ladder(ops: tuple[str, ...], tables: list[str], run: Any) -> tuple[list[_Hit], str]:
        """Strict AND first; relax to OR only when no table found anything."""
        sent: list[str] = []
        for op in ops:
            hits: list[_Hit] = []
            sent = []
            for table in tables:
                found, how = run(table, op)
                hits.extend(found)
                if how not in sent:
                    sent.append(how)
            if hits:
                return hits, " | ".join(sent)
        return [], " | ".join(sent)

    def _search_table(
        self, conn: sqlite3.Connection, schema: Schema, table: str, terms: tuple[Term, ...], op: str, pool: int
    ) -> tuple[list[_Hit], str]:
        use_fts = schema.summaries_fts if table == "summaries" else schema.messages_fts
        if use_fts:
            expr = fts_match(terms, op)
            try:
                return self._fts(conn, schema, table, terms, expr, op, pool), expr
            except sqlite3.OperationalError as exc:
                if "interrupt" in str(exc).lower():
                    raise
                # A MATCH the FTS table refuses (or a broken FTS table): search the base table.
        return self._like(conn, schema, table, terms, op, pool)

    def _scope(self, schema: Schema, alias: str, table: str) -> str:
        """SQL restricting rows to the configured session family (all conversations by default),
        for a query scoped to an agent to that agent's conversations (see :func:`_agent_sql`), and
        for a query with a time window to the rows written inside it (a message's ``created_at``,
        a summary's event time; a row with no time is outside every window)."""
        where = [self._conversations(schema, alias)]
        if _CALL_WINDOW.get() is not None:
            moment = schema.summary_time(alias) if table == "summaries" else f"{alias}.created_at"
            where.append(f"datetime({moment}) >= ? AND datetime({moment}) < ?")
        return " AND ".join(where)

    def _conversations(self, schema: Schema, alias: str) -> str:
        agent = _CALL_AGENT.get()
        if self.settings.session_key is None and agent is None:
            return "1"
        if agent is not None and self.settings.session_key is None and not schema.conversations:
            return "1" if self._unkeyed_visible(agent) else "0"  # no conversations table: no keys at all
        column = "session_key" if "session_key" in schema.conversations else "session_id"
        where = [f"{column} = ?"] if self.settings.session_key is not None else []
        if agent is not None:
            where.append(_agent_sql(schema, self._unkeyed_visible(agent)))
        return f"{alias}.conversation_id IN (SELECT conversation_id FROM conversations WHERE {' AND '.join(where)})"

    def _scope_args(self) -> tuple[str | int, ...]:
        args: tuple[str | int, ...] = () if self.settings.session_key is None else (self.settings.session_key,)
        agent = _CALL_AGENT.get()
        if agent is not None and "session_key" in _CALL_COLUMNS.get():
            prefix = f"agent:{agent}:"
            args += (len(prefix), prefix)
        if (bounds := _CALL_WINDOW.get()) is not None:
            args += bounds
        return args

    def _unkeyed_visible(self, agent: str) -> bool:
        return "*" in self.settings.unkeyed_agents or agent in self.settings.unkeyed_agents

    def _select_list(self, schema: Schema, table: str, alias: str) -> str:
        if table == "summaries":
            cols = schema.summaries
            t = schema.summary_time(alias)
            return ", ".join(
                [
                    f"{alias}.summary_id AS summary_id",
                    f"{alias}.conversation_id AS conversation_id",
                    f"{alias}.kind AS kind" if "kind" in cols else "NULL AS kind",
                    f"{alias}.depth AS depth" if "depth" in cols else "NULL AS depth",
                    f"{alias}.content AS content",
                    f"{alias}.earliest_at AS earliest_at" if "earliest_at" in cols else "NULL AS earliest_at",
                    f"{alias}.latest_at AS latest_at" if "latest_at" in cols else "NULL AS latest_at",
                    f"{t} AS event_time",
                    f"julianday('now') - julianday({t}) AS age_days",
                ]
            )
        cols = schema.messages
        t = f"{alias}.created_at" if "created_at" in cols else "NULL"
        covering = (
            (
                f"(SELECT sm.summary_id FROM summary_messages sm WHERE sm.message_id = {alias}.message_id "
                "LIMIT 1) AS summary_id"
            )
            if schema.summary_messages
            else "NULL AS summary_id"
        )
        return ", ".join(
            [
                f"{alias}.message_id AS message_id",
                f"{alias}.conversation_id AS conversation_id",
                f"{alias}.role AS role" if "role" in cols else "NULL AS role",
                f"{alias}.seq AS seq" if "seq" in cols else "NULL AS seq",
                f"{alias}.content AS content",
                covering,
                f"{t} AS event_time",
                f"julianday('now') - julianday({t}) AS age_days",
            ]
        )

    def _fts(
        self,
        conn: sqlite3.Connection,
        schema: Schema,
        table: str,
        terms: tuple[Term, ...],
        expr: str,
        op: str,
        pool: int,
    ) -> list[_Hit]:
        fts = f"{table}_fts"
        join = "s.summary_id = f.summary_id" if table == "summaries" else "s.message_id = f.rowid"
        col = 1 if table == "summaries" else 0
        sql = (
            f"SELECT f.rowid AS fts_rowid, f.rank AS rank, snippet({fts}, {col}, '', '', '...', 32) AS snippet, "
            f"{self._select_list(schema, table, 's')} "
            f"FROM {fts} f JOIN {table} s ON {join} WHERE {fts} MATCH ? AND {self._scope(schema, 's', table)} "
            f"ORDER BY f.rank LIMIT ?"
        )
        rows = _rows(conn.execute(sql, (expr, *self._scope_args(), pool)))
        rows = _dedupe(rows, "summary_id" if table == "summaries" else "message_id")
        if not rows:
            return []
        best = min(r["rank"] for r in rows)
        coverage = {r["fts_rowid"]: 1.0 for r in rows}
        if op == "OR":
            coverage = self._fts_coverage(conn, fts, terms, [r["fts_rowid"] for r in rows])
        match = "fts" if op == "AND" else "fts-or"
        return [
            _Hit(table, r, coverage.get(r["fts_rowid"], 0.0), _strength(r["rank"], best), match, r["fts_rowid"])
            for r in rows
        ]

    @staticmethod
    def _fts_coverage(
        conn: sqlite3.Connection, fts: str, terms: tuple[Term, ...], rowids: list[int]
    ) -> dict[int, float]:
        """Fraction of the query's terms each candidate row matches (one indexed lookup per term)."""
        counts = dict.fromkeys(rowids, 0)
        marks = ", ".join("?" * len(rowids))
        for term in terms:
            for (rowid,) in conn.execute(
                f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid IN ({marks})", (term.fts, *rowids)
            ):
                counts[rowid] += 1
        return {rowid: n / len(terms) for rowid, n in counts.items()}

    def _like(
        self, conn: sqlite3.Connection, schema: Schema, table: str, terms: tuple[Term, ...], op: str, pool: int
    ) -> tuple[list[_Hit], str]:
        """The fallback without FTS5: case-insensitive (ASCII) substring search on the base table.

        AND: the newest matching rows by insertion order (``rowid DESC`` lets SQLite stop early).
        OR: rows holding the most terms first, then the newest (a full scan, but correct).
        """
        needles = [n for n in dict.fromkeys(t.like for t in terms) if n]
        patterns = ["%" + n.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for n in needles]
        like = "s.content LIKE ? ESCAPE '\\'"
        select = self._select_list(schema, table, "s")
        if op == "AND":
            where = " AND ".join([like] * len(patterns))
            sql = (
                f"SELECT {select} FROM {table} s WHERE ({where}) AND {self._scope(schema, 's', table)} "
                "ORDER BY s.rowid DESC LIMIT ?"
            )
        else:  # each row's LIKEs are evaluated once, in the subquery
            hit_count = " + ".join([f"({like})"] * len(patterns))
            sql = (
                f"SELECT {select} FROM (SELECT s.rowid AS rid, {hit_count} AS hits FROM {table} s) h "
                f"JOIN {table} s ON s.rowid = h.rid WHERE h.hits > 0 AND {self._scope(schema, 's', table)} "
                f"ORDER BY h.hits DESC, h.rid DESC LIMIT ?"
            )
        rows = _rows(conn.execute(sql, (*patterns, *self._scope_args(), pool)))
        hits = []
        for r in rows:
            low = (r["content"] or "").lower()
            matched = sum(1 for n in needles if n in low)
            hits.append(_Hit(table, r, matched / len(needles), LIKE_STRENGTH, "like" if op == "AND" else "like-or"))
        return hits, "LIKE " + (" AND " if op == "AND" else " OR ").join(f"%{n}%" for n in needles)

    def _recent(self, conn: sqlite3.Connection, schema: Schema, tables: list[str], pool: int) -> list[_Hit]:
        """No content terms: the newest summaries (else messages), decision-bearing ones first.

        Only the last ``RECENT_WINDOW`` rows by insertion order are sorted by event time (the
        plugin inserts a summary after the messages it covers, so the newest events are among the
        newest rows); sorting a whole 100k-row table by julianday() would take ~0.5 s.
        """
        for table in tables:
            sql = (
                f"SELECT {self._select_list(schema, table, 's')} FROM "
                f"(SELECT * FROM {table} t WHERE {self._scope(schema, 't', table)} "
                f"ORDER BY rowid DESC LIMIT {RECENT_WINDOW}) s "
                f"ORDER BY {_newest_first(schema, table)} LIMIT ?"
            )
            rows = _rows(conn.execute(sql, (*self._scope_args(), pool)))
            if rows:
                return [_Hit(table, r, 0.0, 0.0, "recent") for r in rows]
        return []

    # -- results

    def _result(self, hit: _Hit, schema: Schema) -> Result:
        r = hit.row
        recency_weight = recency(r.get("age_days"))
        weight = SUMMARY_WEIGHT if hit.table == "summaries" else MESSAGE_WEIGHT
        if hit.match == "recent":
            base = NO_TERMS_DECISION if _DECISION_TEXT.search(r["content"] or "") else NO_TERMS_OTHER
            relevance = base * recency_weight
        else:
            relevance = hit.coverage * (BAND_FLOOR + (1 - BAND_FLOOR) * hit.strength) * weight * recency_weight
        content = r["content"] or ""
        limit = self.settings.max_content_chars
        if len(content) > limit:
            content = content[: limit - 1] + "…"
        extra: dict[str, Any] = {"conversation_id": r["conversation_id"], "match": hit.match}
        if hit.table == "summaries":
            extra.update(
                summary_id=r["summary_id"],
                kind=r["kind"],
                depth=r["depth"],
                earliest_at=r["earliest_at"],
                latest_at=r["latest_at"],
            )
        else:
            extra.update(
                message_id=r["message_id"], kind="message", role=r["role"], seq=r["seq"], summary_id=r["summary_id"]
            )
        if r.get("snippet"):
            extra["snippet"] = r["snippet"]
        return Result(
            content=content,
            relevance=round(min(1.0, max(0.0, relevance)), 4),
            source=self.name,
            timestamp=_iso(r.get("event_time")),
            **extra,
        )


# The agent a search is scoped to (``request.scope``), and its database's conversations columns,
# for the duration of one call in its worker thread (see search_blocking).
_CALL_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("lossless_agent", default=None)
_CALL_COLUMNS: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("lossless_columns", default=frozenset())
# The call's time window as SQLite datetime() text in UTC, (since, until): Window.sql_bounds().
_CALL_WINDOW: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("lossless_window", default=None)


def _agent_sql(schema: Schema, unkeyed_visible: bool) -> str:
    """The conversations of one agent: those whose ``session_key`` is OpenClaw's ``agent:<id>:...``
    (compared as a prefix with ``substr``, not ``LIKE``: ``_`` in an agent id is no wildcard), and,
    when ``unkeyed_agents`` lets this agent see them, those with no key. A database without a
    ``session_key`` column (before lossless-claw v0.4.0) cannot tell agents apart: all of its
    conversations count as having no key."""
    unkeyed = "(session_key IS NULL OR session_key = '')"
    if "session_key" not in schema.conversations:
        return "1" if unkeyed_visible else "0"
    mine = "lower(substr(session_key, 1, ?)) = ?"
    return f"({mine} OR {unkeyed})" if unkeyed_visible else mine


def _newest_first(schema: Schema, table: str) -> str:
    """Event time through julianday() (the plugin mixes two formats); on a tie, the summary
    higher in the DAG (it covers more) first."""
    if table == "summaries" and "depth" in schema.summaries:
        return "julianday(event_time) DESC, s.depth DESC"
    return "julianday(event_time) DESC"


def _rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _dedupe(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """FTS rows are written by app code without constraints: keep the first (best) per id."""
    seen: set[Any] = set()
    out = []
    for r in rows:
        if r[key] not in seen:
            seen.add(r[key])
            out.append(r)
    return out


def _strength(rank: float | None, best: float | None) -> float:
    """bm25 relative to the best hit: rank is negative, lower is better."""
    if rank is None or best is None or best >= 0 or rank >= 0:
        return 1.0
    return max(0.0, min(1.0, rank / best))


_ISO_Z = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|[+-]00:?00)?$")


def _iso(value: Any) -> str | None:
    """Both of the plugin's formats as ``YYYY-MM-DDTHH:MM:SSZ``; anything else as stored."""
    if value is None:
        return None
    text = str(value)
    m = _ISO_Z.match(text)
    return f"{m.group(1)}T{m.group(2)}Z" if m else text


# --------------------------------------------------------------------------- demo


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, str]:
    """A small real-schema lcm.db in ``state_dir``: today's morning session of the demo project."""
    from memory_router.backends.lossless.demo import build_demo_db

    path = state_dir / "lcm.db"
    build_demo_db(path)
    return {"db_path": str(path)}
