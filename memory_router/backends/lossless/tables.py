"""Which tables and columns an lcm.db has: lossless-claw's schema drifted across releases.

Columns and tables are detected with ``PRAGMA table_info`` and ``sqlite_master``: ``latest_at``,
``depth``, ``kind``, ``model``, ``session_key`` may be missing in old databases;
``summaries_fts``/``messages_fts`` are missing when the plugin's runtime had no FTS5 (the
adapter then searches with ``LIKE``). The adapter caches a :class:`Schema` per ``PRAGMA
schema_version``.
"""

from __future__ import annotations

import sqlite3

from memory_router.core.frozen import Frozen


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
