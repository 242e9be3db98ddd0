"""The SQL of one Lossless search: FTS5 (or LIKE) over summaries and messages, within the call's
scope, each hit with what :mod:`.ranking` scores it by.

One :class:`Search` per call: the adapter instance is shared by every agent's queries (the daemon
keeps it warm), so the agent and the time window a call may read live here, never on the instance.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memory_router.backends.lossless.tables import Schema
from memory_router.backends.lossless.terms import Term, fts_match
from memory_router.core.frozen import Frozen

RECENT_WINDOW = 2000


class Hit(Frozen):
    table: str  # "summaries" | "messages"
    row: dict[str, Any]
    coverage: float  # the share of the query's terms the row holds
    strength: float  # bm25 relative to the table's best hit (1.0 for it); LIKE: ranking.LIKE_STRENGTH
    match: str  # fts | like | recent


class Search:
    """One call's statements over ``conn``: every row they return is in the configured session
    family (``session_key``; every conversation by default), in the asking agent's conversations
    when the call is scoped to one (:func:`agent_sql`), and written inside the call's time window
    when it has one (a message's ``created_at``, a summary's event time; a row with no time is
    outside every window)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        schema: Schema,
        *,
        session_key: str | None,
        agent: str | None,
        unkeyed_visible: bool,
        window: tuple[str, str] | None,
    ) -> None:
        self.conn, self.schema = conn, schema
        self.session_key, self.agent, self.unkeyed_visible, self.window = session_key, agent, unkeyed_visible, window

    # -- scope

    def scope(self, alias: str, table: str) -> str:
        where = [self._conversations(alias)]
        if self.window is not None:
            moment = self.schema.summary_time(alias) if table == "summaries" else f"{alias}.created_at"
            where.append(f"datetime({moment}) >= ? AND datetime({moment}) < ?")
        return " AND ".join(where)

    def _conversations(self, alias: str) -> str:
        schema = self.schema
        if self.session_key is None and self.agent is None:
            return "1"
        if self.agent is not None and self.session_key is None and not schema.conversations:
            return "1" if self.unkeyed_visible else "0"  # no conversations table: no keys at all
        column = "session_key" if "session_key" in schema.conversations else "session_id"
        where = [f"{column} = ?"] if self.session_key is not None else []
        if self.agent is not None:
            where.append(agent_sql(schema, self.unkeyed_visible))
        return f"{alias}.conversation_id IN (SELECT conversation_id FROM conversations WHERE {' AND '.join(where)})"

    def scope_args(self) -> tuple[str | int, ...]:
        args: tuple[str | int, ...] = () if self.session_key is None else (self.session_key,)
        if self.agent is not None and "session_key" in self.schema.conversations:
            prefix = f"agent:{self.agent}:"
            args += (len(prefix), prefix)
        if self.window is not None:
            args += self.window
        return args

    # -- FTS5

    def fts(self, table: str, terms: tuple[Term, ...], pool: int) -> tuple[list[Hit], str]:
        """The ``pool`` best rows by bm25 that hold ANY of the terms (the OR of them): a row
        missing one word of the question may be the answer, and bm25 ranks rows holding more of
        the rarer terms first anyway. When at least ``pool`` rows hold EVERY term, those are the
        candidates instead: FTS5 finds them by intersecting the terms' lists, where the OR of
        common words scores every row holding any of them (at 100k rows, 2-10 ms against
        40-120 ms). Raises ``sqlite3.OperationalError`` when the FTS table refuses the MATCH (the
        caller searches the base table with LIKE instead)."""
        if len(terms) > 1:
            every = fts_match(terms, "AND")
            rows = self._fts_rows(table, every, pool)
            if len(rows) >= pool:
                return self._fts_hits(table, terms, rows, full=True), every
        expr = fts_match(terms, "OR")
        return self._fts_hits(table, terms, self._fts_rows(table, expr, pool), full=len(terms) == 1), expr

    def _fts_rows(self, table: str, expr: str, pool: int) -> list[dict[str, Any]]:
        fts = f"{table}_fts"
        join = "s.summary_id = f.summary_id" if table == "summaries" else "s.message_id = f.rowid"
        col = 1 if table == "summaries" else 0
        sql = (
            f"SELECT f.rowid AS fts_rowid, f.rank AS rank, snippet({fts}, {col}, '', '', '...', 32) AS snippet, "
            f"{self.select_list(table, 's')} "
            f"FROM {fts} f JOIN {table} s ON {join} WHERE {fts} MATCH ? AND {self.scope('s', table)} "
            f"ORDER BY f.rank LIMIT ?"
        )
        rows = _rows(self.conn.execute(sql, (expr, *self.scope_args(), pool)))
        return _dedupe(rows, "summary_id" if table == "summaries" else "message_id")

    def _fts_hits(self, table: str, terms: tuple[Term, ...], rows: list[dict[str, Any]], *, full: bool) -> list[Hit]:
        """``full``: every row holds every term (coverage 1.0 without asking)."""
        if not rows:
            return []
        best = min(r["rank"] for r in rows)
        rowids = [r["fts_rowid"] for r in rows]
        coverage = dict.fromkeys(rowids, 1.0) if full else self._fts_coverage(f"{table}_fts", terms, rowids)
        return [Hit(table, r, coverage.get(r["fts_rowid"], 0.0), strength(r["rank"], best), "fts") for r in rows]

    def _fts_coverage(self, fts: str, terms: Sequence[Term], rowids: list[int]) -> dict[int, float]:
        """Fraction of the query's terms each candidate row matches (one indexed lookup per term)."""
        counts = dict.fromkeys(rowids, 0)
        # One statement for every term, each term's lookup a SELECT of its own and their rows
        # concatenated (UNION ALL): the same rows as a statement per term, without a statement
        # run per term. The rowids are bound once (?1..?n), the terms after them.
        n = len(rowids)
        marks = ", ".join(f"?{i}" for i in range(1, n + 1))
        sql = " UNION ALL ".join(
            f"SELECT rowid FROM {fts} WHERE {fts} MATCH ?{n + k} AND rowid IN ({marks})"
            for k in range(1, len(terms) + 1)
        )
        for (rowid,) in self.conn.execute(sql, (*rowids, *(term.fts for term in terms))):
            counts[rowid] += 1
        return {rowid: n / len(terms) for rowid, n in counts.items()}

    # -- LIKE

    def like(self, table: str, terms: tuple[Term, ...], pool: int, strength: float) -> tuple[list[Hit], str]:
        """The fallback without FTS5: case-insensitive (ASCII) substring search on the base table,
        the rows holding the most terms first, then the newest. The rows holding every term are
        asked for first (newest first, ``rowid DESC`` lets SQLite stop early); only when they do
        not fill the pool are the rows holding some of them searched (a full scan), which gives the
        same first rows."""
        needles = [n for n in dict.fromkeys(t.like for t in terms) if n]
        patterns = ["%" + n.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for n in needles]
        like = "s.content LIKE ? ESCAPE '\\'"
        select = self.select_list(table, "s")
        every = " AND ".join([like] * len(patterns))
        sql = (
            f"SELECT {select} FROM {table} s WHERE ({every}) AND {self.scope('s', table)} ORDER BY s.rowid DESC LIMIT ?"
        )
        rows = _rows(self.conn.execute(sql, (*patterns, *self.scope_args(), pool)))
        op = " AND "
        if len(rows) < pool and len(needles) > 1:
            op = " OR "
            hit_count = " + ".join([f"({like})"] * len(patterns))  # each row's LIKEs evaluated once
            sql = (
                f"SELECT {select} FROM (SELECT s.rowid AS rid, {hit_count} AS hits FROM {table} s) h "
                f"JOIN {table} s ON s.rowid = h.rid WHERE h.hits > 0 AND {self.scope('s', table)} "
                f"ORDER BY h.hits DESC, h.rid DESC LIMIT ?"
            )
            rows = _rows(self.conn.execute(sql, (*patterns, *self.scope_args(), pool)))
        hits = []
        for r in rows:
            low = (r["content"] or "").lower()
            matched = sum(1 for n in needles if n in low)
            hits.append(Hit(table, r, matched / len(needles), strength, "like"))
        return hits, "LIKE " + op.join(f"%{n}%" for n in needles)

    # -- no terms

    def recent(self, tables: list[str], pool: int) -> list[Hit]:
        """No content terms: the newest summaries (else messages), decision-bearing ones first.

        Only the last ``RECENT_WINDOW`` rows by insertion order are sorted by event time (the
        plugin inserts a summary after the messages it covers, so the newest events are among the
        newest rows); sorting a whole 100k-row table by julianday() would take ~0.5 s.
        """
        for table in tables:
            sql = (
                f"SELECT {self.select_list(table, 's')} FROM "
                f"(SELECT * FROM {table} t WHERE {self.scope('t', table)} "
                f"ORDER BY rowid DESC LIMIT {RECENT_WINDOW}) s "
                f"ORDER BY {_newest_first(self.schema, table)} LIMIT ?"
            )
            rows = _rows(self.conn.execute(sql, (*self.scope_args(), pool)))
            if rows:
                return [Hit(table, r, 0.0, 0.0, "recent") for r in rows]
        return []

    # -- columns

    def select_list(self, table: str, alias: str) -> str:
        schema = self.schema
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


def agent_sql(schema: Schema, unkeyed_visible: bool) -> str:
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


def strength(rank: float | None, best: float | None) -> float:
    """bm25 relative to the best hit: rank is negative, lower is better."""
    if rank is None or best is None or best >= 0 or rank >= 0:
        return 1.0
    return max(0.0, min(1.0, rank / best))


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
