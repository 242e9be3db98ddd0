"""Build lossless-claw (LCM) SQLite databases with the plugin's real schema.

This is the *writer* side, for the demo, the tests and the benchmarks; the adapter
(:mod:`.lossless`) only ever reads. The DDL is copied from lossless-claw's
``src/db/migration.ts`` (``runLcmMigrations``; main @ 4214b480, package 0.15.3), including the
columns that a real database gets through ``ALTER TABLE ... ADD COLUMN`` (they are physically
last, as in a migrated database). Three variants:

* ``"current"``: 0.15.x, the recall-relevant tables plus ``messages_fts``/``summaries_fts``
  (and ``summaries_fts_cjk`` with the trigram tokenizer when this SQLite has it);
* ``"legacy"``: the first released layout (lossless-claw's initial scaffold, before v0.1.2): no
  ``summaries.earliest_at/latest_at/descendant_*/model``, no ``conversations.session_key/
  active/archived_at``, no ``messages.identity_hash/...``; FTS tables present;
* ``"no_fts"``: the current layout on a runtime without FTS5 (the plugin then creates no FTS
  tables at all, ``src/db/features.ts``).

Like the plugin, rows are indexed into the FTS tables by application code right after the base
insert (there are no triggers): :class:`LcmWriter` does exactly that. Timestamps follow the
plugin too: ``created_at`` is SQLite's ``YYYY-MM-DD HH:MM:SS`` (UTC, no zone) while summaries'
``earliest_at``/``latest_at`` are JavaScript ISO strings (``...T...sssZ``).

Used by ``lossless.demo_setup`` and importable by tests and benchmarks::

    from memory_router.backends.lossless.schema import create_lcm_db, LcmWriter, populate_synthetic
"""

from __future__ import annotations

import random
import secrets
import sqlite3
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

Variant = Literal["current", "legacy", "no_fts"]
VARIANTS: tuple[Variant, ...] = ("current", "legacy", "no_fts")

# --------------------------------------------------------------------------- DDL (0.15.x)

_CURRENT_TABLES = """
CREATE TABLE conversations (
  conversation_id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  session_key TEXT,
  active INTEGER NOT NULL DEFAULT 1,
  archived_at TEXT,
  archive_cause TEXT,
  title TEXT,
  bootstrapped_at TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE messages (
  message_id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  identity_hash TEXT,
  openclaw_sender_metadata TEXT,
  transcript_entry_id TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (conversation_id, seq)
);
CREATE TABLE summaries (
  summary_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
  depth INTEGER NOT NULL DEFAULT 0,
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  earliest_at TEXT,
  latest_at TEXT,
  descendant_count INTEGER NOT NULL DEFAULT 0,
  descendant_token_count INTEGER NOT NULL DEFAULT 0,
  source_message_token_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  file_ids TEXT NOT NULL DEFAULT '[]'
);
ALTER TABLE summaries ADD COLUMN model TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE messages ADD COLUMN large_content TEXT;
ALTER TABLE messages ADD COLUMN stable_event_key TEXT;
CREATE TABLE summary_messages (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, message_id)
);
CREATE TABLE summary_parents (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, parent_summary_id)
);
CREATE TABLE context_items (
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  item_type TEXT NOT NULL CHECK (item_type IN ('message', 'summary')),
  message_id INTEGER REFERENCES messages(message_id) ON DELETE RESTRICT,
  summary_id TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (conversation_id, ordinal),
  CHECK (
    (item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL) OR
    (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL)
  )
);
CREATE TABLE large_files (
  file_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  file_name TEXT,
  mime_type TEXT,
  byte_size INTEGER,
  line_count INTEGER,
  storage_uri TEXT NOT NULL,
  exploration_summary TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE lcm_migration_state (
  step_name TEXT NOT NULL,
  algorithm_version INTEGER NOT NULL,
  completed_at TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (step_name, algorithm_version)
);
CREATE INDEX messages_conv_seq_idx ON messages (conversation_id, seq);
CREATE INDEX summaries_conv_created_idx ON summaries (conversation_id, created_at);
CREATE INDEX summary_messages_message_idx ON summary_messages (message_id);
CREATE INDEX summary_parents_parent_summary_idx ON summary_parents (parent_summary_id);
CREATE INDEX context_items_conv_idx ON context_items (conversation_id, ordinal);
CREATE INDEX large_files_conv_idx ON large_files (conversation_id, created_at);
CREATE UNIQUE INDEX conversations_active_session_key_idx
  ON conversations (session_key) WHERE session_key IS NOT NULL AND active = 1;
CREATE INDEX summaries_conv_depth_kind_idx ON summaries (conversation_id, depth, kind);
INSERT INTO lcm_migration_state (step_name, algorithm_version) VALUES
  ('backfillSummaryDepths', 1), ('backfillSummaryMetadata', 1),
  ('backfillToolCallColumns', 1), ('repairOpenClawMetadataIdentityState', 2);
"""

# The initial scaffold's layout (lossless-claw 3be0da92, before v0.1.2). Its tables repeat most of
# _CURRENT_TABLES on purpose: each is a verbatim copy of one upstream layout, to be diffed against its
# source; this one is frozen history, that one follows lossless-claw's migrations.
_LEGACY_TABLES = """
CREATE TABLE conversations (
  conversation_id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  title TEXT,
  bootstrapped_at TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE messages (
  message_id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  UNIQUE (conversation_id, seq)
);
CREATE TABLE summaries (
  summary_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
  depth INTEGER NOT NULL DEFAULT 0,
  content TEXT NOT NULL,
  token_count INTEGER NOT NULL,
  created_at TEXT NOT NULL DEFAULT (datetime('now')),
  file_ids TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE summary_messages (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, message_id)
);
CREATE TABLE summary_parents (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL,
  PRIMARY KEY (summary_id, parent_summary_id)
);
CREATE INDEX messages_conv_seq_idx ON messages (conversation_id, seq);
CREATE INDEX summaries_conv_created_idx ON summaries (conversation_id, created_at);
"""

_FTS_TABLES = """
CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize='porter unicode61');
CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, tokenize='porter unicode61');
"""
_FTS_CJK = "CREATE VIRTUAL TABLE summaries_fts_cjk USING fts5(summary_id UNINDEXED, content, tokenize='trigram');"


def _has_trigram(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._probe_trigram USING fts5(x, tokenize='trigram')")
        conn.execute("DROP TABLE temp._probe_trigram")
        return True
    except sqlite3.OperationalError:
        return False


def create_lcm_db(path: Path | str, variant: Variant = "current", *, wal: bool = True) -> sqlite3.Connection:
    """Create a new, empty lossless-claw database at ``path`` and return a writable connection.

    Refuses to touch an existing file. ``wal`` sets ``journal_mode=WAL`` as the plugin does.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown LCM schema variant {variant!r}; use one of {', '.join(VARIANTS)}")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} already exists; create_lcm_db only builds new databases")
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(_LEGACY_TABLES if variant == "legacy" else _CURRENT_TABLES)
    if variant != "no_fts":
        conn.executescript(_FTS_TABLES)
        if variant == "current" and _has_trigram(conn):
            conn.execute(_FTS_CJK)
    return conn


# --------------------------------------------------------------------------- writing rows


def sqlite_time(ts: datetime) -> str:
    """``created_at`` format: ``YYYY-MM-DD HH:MM:SS`` in UTC (SQLite's ``datetime('now')``)."""
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def js_iso(ts: datetime) -> str:
    """``earliest_at``/``latest_at`` format: JavaScript's ``Date.toISOString()``."""
    ts = ts.astimezone(timezone.utc)
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def new_summary_id() -> str:
    return "sum_" + secrets.token_hex(8)


class LcmWriter:
    """Insert rows the way the plugin's stores do: base table first, then the FTS row."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
        self.fts = "summaries_fts" in tables and "messages_fts" in tables
        self.cjk = "summaries_fts_cjk" in tables
        self.summary_cols = {r[1] for r in conn.execute("PRAGMA table_info(summaries)")}
        self.conv_cols = {r[1] for r in conn.execute("PRAGMA table_info(conversations)")}
        self._seq: dict[int, int] = {}

    def conversation(
        self,
        session_id: str,
        *,
        session_key: str | None = None,
        title: str | None = None,
        created: datetime | None = None,
    ) -> int:
        cols = {"session_id": session_id, "title": title}
        if created is not None:
            cols["created_at"] = cols["updated_at"] = sqlite_time(created)
        if session_key is not None and "session_key" in self.conv_cols:
            cols["session_key"] = session_key
        names = ", ".join(cols)
        cur = self.conn.execute(
            f"INSERT INTO conversations ({names}) VALUES ({', '.join('?' * len(cols))})", tuple(cols.values())
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def message(
        self, conversation_id: int, role: str, content: str, *, at: datetime | None = None, index_fts: bool = True
    ) -> int:
        seq = self._seq.get(conversation_id, 0) + 1
        self._seq[conversation_id] = seq
        created = sqlite_time(at or datetime.now(timezone.utc))
        cur = self.conn.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, token_count, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (conversation_id, seq, role, content, max(1, len(content) // 4), created),
        )
        assert cur.lastrowid is not None
        message_id = cur.lastrowid
        if self.fts and index_fts:
            self.conn.execute("INSERT INTO messages_fts (rowid, content) VALUES (?, ?)", (message_id, content))
        return message_id

    def summary(
        self,
        conversation_id: int,
        content: str,
        *,
        kind: str = "leaf",
        depth: int | None = None,
        earliest: datetime | None = None,
        latest: datetime | None = None,
        created: datetime | None = None,
        message_ids: Iterable[int] = (),
        sources: Iterable[str] = (),
        model: str = "anthropic/claude-sonnet-4",
        summary_id: str | None = None,
        index_fts: bool = True,
    ) -> str:
        """A leaf (from ``message_ids``) or condensed (from ``sources``, lower summaries) node."""
        summary_id = summary_id or new_summary_id()
        depth = depth if depth is not None else (0 if kind == "leaf" else 1)
        created_at = sqlite_time(created or latest or datetime.now(timezone.utc))
        cols: dict[str, object] = {
            "summary_id": summary_id,
            "conversation_id": conversation_id,
            "kind": kind,
            "depth": depth,
            "content": content,
            "token_count": max(1, len(content) // 4),
            "created_at": created_at,
        }
        if "latest_at" in self.summary_cols:
            cols["earliest_at"] = js_iso(earliest) if earliest else None
            cols["latest_at"] = js_iso(latest) if latest else None
        if "model" in self.summary_cols:
            cols["model"] = model
        names = ", ".join(cols)
        self.conn.execute(
            f"INSERT INTO summaries ({names}) VALUES ({', '.join('?' * len(cols))})", tuple(cols.values())
        )
        for ordinal, mid in enumerate(message_ids):
            self.conn.execute(
                "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                (summary_id, mid, ordinal),
            )
        for ordinal, source in enumerate(sources):
            # The plugin's naming is inverted: summary_id is the condensed node, parent_summary_id its source.
            self.conn.execute(
                "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                (summary_id, source, ordinal),
            )
        if self.fts and index_fts:
            self.conn.execute("INSERT INTO summaries_fts (summary_id, content) VALUES (?, ?)", (summary_id, content))
            if self.cjk:
                self.conn.execute(
                    "INSERT INTO summaries_fts_cjk (summary_id, content) VALUES (?, ?)", (summary_id, content)
                )
        return summary_id


# --------------------------------------------------------------------------- synthetic corpora

_TOPICS = (
    "billing",
    "invoices",
    "search",
    "indexing",
    "notifications",
    "email",
    "uploads",
    "thumbnails",
    "reports",
    "exports",
    "webhooks",
    "retries",
    "metrics",
    "dashboards",
    "onboarding",
    "permissions",
    "audit",
    "logging",
    "tracing",
    "deploys",
    "migrations",
    "backups",
    "quotas",
    "ratelimits",
    "checkout",
    "coupons",
    "inventory",
    "shipping",
    "refunds",
    "localisation",
)
_ACTIONS = (
    "use a queue",
    "add a cache",
    "shard by tenant",
    "batch the writes",
    "keep it synchronous",
    "move it behind a feature flag",
    "split the service",
    "denormalise the table",
    "add an index",
    "retry with backoff",
    "drop the legacy path",
    "version the API",
)
_WHY = (
    "latency under load",
    "the on-call burden",
    "cost",
    "simpler rollbacks",
    "the audit requirement",
    "mobile clients",
    "team ownership",
    "data volume",
    "vendor limits",
    "consistency",
)
_FILLER = (
    "we looked at",
    "the trade-off was",
    "after benchmarking",
    "the team agreed",
    "for now",
    "the open question is",
    "follow-up work covers",
    "we measured",
    "the alternative was",
)


def synthetic_summary_text(rng: random.Random) -> str:
    topic, alt = rng.sample(_TOPICS, 2)
    action, other = rng.sample(_ACTIONS, 2)
    why = rng.choice(_WHY)
    filler = " ".join(rng.choice(_FILLER) for _ in range(rng.randint(3, 8)))
    return (
        f"Decisions: for {topic} we decided to {action} instead of {other}, because of {why}. "
        f"{filler} {alt}. Expand for details about: {topic} {action}, {alt}."
    )


def synthetic_message_text(rng: random.Random) -> str:
    topic = rng.choice(_TOPICS)
    words = [rng.choice(_FILLER) for _ in range(rng.randint(2, 6))]
    return f"{' '.join(words)} {topic} and {rng.choice(_ACTIONS)} ({rng.choice(_WHY)})."


def populate_synthetic(
    conn: sqlite3.Connection,
    *,
    messages: int,
    summaries: int,
    conversations: int = 10,
    seed: int = 7,
    start: datetime | None = None,
) -> None:
    """Fill a database made by :func:`create_lcm_db` with ``messages`` messages and ``summaries``
    leaf summaries spread over ``conversations`` conversations (for benchmarks: 1k/10k/100k).

    Deterministic for a seed. Runs in one transaction; 100k rows take a few seconds.
    """
    rng = random.Random(seed)
    start = start or datetime.now(timezone.utc) - timedelta(days=90)
    writer = LcmWriter(conn)
    conn.execute("BEGIN")
    try:
        conv_ids = [
            writer.conversation(f"bench-{i}", session_key=f"agent:bench:{i}", created=start)
            for i in range(max(1, conversations))
        ]
        step = timedelta(days=90) / max(1, messages)
        msg_ids: list[int] = []
        for i in range(messages):
            conv = conv_ids[i % len(conv_ids)]
            role = "user" if i % 2 == 0 else "assistant"
            msg_ids.append(writer.message(conv, role, synthetic_message_text(rng), at=start + step * i))
        sstep = timedelta(days=90) / max(1, summaries)
        for i in range(summaries):
            conv = conv_ids[i % len(conv_ids)]
            t0 = start + sstep * i
            covered = msg_ids[i * 4 : (i + 1) * 4] if msg_ids else []
            writer.summary(
                conv,
                synthetic_summary_text(rng),
                earliest=t0,
                latest=t0 + timedelta(minutes=20),
                message_ids=covered,
                summary_id=f"sum_{i:016x}",
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
