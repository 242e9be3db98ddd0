"""Shared builders for lossless-claw databases with the REAL schema, for tests and benchmarks.

The DDL and the row writer live in the package (``memory_router.backends.lossless.schema``, also
used by the demo); this module adds the small hand-written corpora the Lossless tests share.
Benchmarks build big ones with the package's ``populate_synthetic(conn, messages=100_000, summaries=10_000)``.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memory_router.backends.lossless.schema import LcmWriter, Variant, create_lcm_db

NOW = datetime.now(timezone.utc).replace(microsecond=0)

# Fixed ids so tests can assert on them.
SCHEMA_LEAF = "sum_00000000000000a1"
QUEUE_LEAF = "sum_00000000000000a2"
OLD_CACHE_LEAF = "sum_00000000000000a3"
CONDENSED = "sum_00000000000000c1"


def build_small_db(path: Path, variant: Variant = "current", *, wal: bool = True) -> Path:
    """A conversation with decisions: schema and payments-queue leaves from today, an older
    caching leaf from 60 days ago, a condensed node over the first two, and raw messages.

    Built once a session for each variant and copied: building takes ~0.1 s and some thirty tests
    each want a database of their own. The file is whole once its writer closes (SQLite folds the
    WAL back in then) and keeps its journal mode in its header."""
    key = (variant, wal)
    if key not in _SMALL_DBS:
        with tempfile.TemporaryDirectory() as scratch:
            _SMALL_DBS[key] = _write_small_db(Path(scratch) / "lcm.db", variant, wal=wal).read_bytes()
    path.write_bytes(_SMALL_DBS[key])
    return path


_SMALL_DBS: dict[tuple[Variant, bool], bytes] = {}


def _write_small_db(path: Path, variant: Variant, *, wal: bool) -> Path:
    conn = create_lcm_db(path, variant, wal=wal)
    try:
        w = LcmWriter(conn)
        conn.execute("BEGIN")
        conv = w.conversation(
            "sess-1", session_key="agent:main:main", title="shopfront", created=NOW - timedelta(days=90)
        )
        old = NOW - timedelta(days=60)
        m_old = w.message(conv, "user", "Should we use memcached for caching product pages?", at=old)
        w.summary(
            conv,
            "Caching decision: we rejected memcached and kept Redis for caching because Redis was "
            "already needed for sessions.\nExpand for details about: memcached, Redis.",
            earliest=old,
            latest=old + timedelta(minutes=5),
            message_ids=[m_old],
            summary_id=OLD_CACHE_LEAF,
        )
        t = NOW - timedelta(hours=3)
        m1 = w.message(conv, "user", "Let's settle the database schema for orders.", at=t)
        m2 = w.message(
            conv, "assistant", "Use UUID v7 primary keys and soft deletes with deleted_at.", at=t + timedelta(minutes=3)
        )
        w.summary(
            conv,
            "Database schema decision: orders use UUID v7 primary keys and deleted_at soft deletes, "
            "because several services mint ids.\nExpand for details about: UUID v7, migration 0042.",
            earliest=t,
            latest=t + timedelta(minutes=3),
            message_ids=[m1, m2],
            summary_id=SCHEMA_LEAF,
        )
        t2 = NOW - timedelta(hours=2)
        m3 = w.message(conv, "user", "OrderController should not call PaymentService directly.", at=t2)
        m4 = w.message(
            conv, "assistant", "Publish payment.requested on the payments queue instead.", at=t2 + timedelta(minutes=2)
        )
        w.summary(
            conv,
            "Architecture decision: OrderController publishes payment.requested on the payments "
            "queue and PaymentService consumes it, so provider outages never fail orders.",
            earliest=t2,
            latest=t2 + timedelta(minutes=2),
            message_ids=[m3, m4],
            summary_id=QUEUE_LEAF,
        )
        w.summary(
            conv,
            "Session summary: database schema (UUID v7, soft deletes) and the payments queue "
            "between OrderController and PaymentService.",
            kind="condensed",
            depth=1,
            earliest=t,
            latest=t2 + timedelta(minutes=2),
            sources=[SCHEMA_LEAF, QUEUE_LEAF],
            summary_id=CONDENSED,
        )
        w.message(
            conv, "tool", "pytest: 412 passed in 9.1s; kubernetes manifests unchanged", at=NOW - timedelta(hours=1)
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path


# Two OpenClaw agents' conversations in one lcm.db, as lossless-claw keeps them (issue 30).
HOUSE = "what did we decide about selling the house"
ALICE_SAYS = "We decided to sell the house in April and split the proceeds with my sister"
BOB_SAYS = "Remind me to renew the car insurance before the house party"
UNKEYED_SAYS = "An old note: we decided the house colour is blue"


def build_two_agents_db(path: Path) -> Path:
    """alice's conversation (``agent:alice:main``), bob's (``agent:bob:main``) and one with no
    session key (written before lossless-claw kept them), each mentioning the house."""
    conn = create_lcm_db(path)
    writer = LcmWriter(conn)
    alice = writer.conversation("s-alice", session_key="agent:alice:main")
    writer.message(alice, "user", ALICE_SAYS)
    writer.message(alice, "assistant", "Noted: the house goes on sale in April, proceeds split two ways.")
    bob = writer.conversation("s-bob", session_key="agent:bob:main")
    writer.message(bob, "user", BOB_SAYS)
    unkeyed = writer.conversation("s-old")
    writer.message(unkeyed, "user", UNKEYED_SAYS)
    conn.close()
    return path
