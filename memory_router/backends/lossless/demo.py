"""The demo's lcm.db: this morning's session of the demo project (``memory_router/demo/workspace``),
as lossless-claw would have stored it - raw messages, three leaf summaries (database schema,
the OrderController/PaymentService architecture decision, JWT auth) and one condensed summary
of the whole session, with the real schema (:mod:`.lossless.schema`).

The story matches the workspace: Total Recall's decisions register and the daily log record the
same decisions, so the demo shows Lossless answering rule 3 from the conversation itself.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db

# (minutes after 09:00 UTC, role, content)
_SCHEMA_TALK = [
    (2, "user", "Before we write migration 0042, let's settle the database schema for orders and payments."),
    (
        5,
        "assistant",
        "Proposal: UUID v7 primary keys on orders and payments instead of auto-increment integers "
        "(ids are minted by several services, v7 keeps inserts time-ordered and index friendly), and "
        "soft deletes with a deleted_at column, because refunds and audits need the history.",
    ),
    (12, "user", "Agreed: UUID v7 keys and deleted_at soft deletes. Write migration 0042 for it."),
]
_ARCH_TALK = [
    (32, "user", "Architecture question: should OrderController keep calling PaymentService directly?"),
    (
        38,
        "assistant",
        "I'd publish a payment.requested event on the payments queue from OrderController and let "
        "PaymentService consume it and charge the card: a payment provider outage then cannot fail "
        "order creation, and retries live in one place.",
    ),
    (44, "user", "Yes, decided: go through the payments queue, one-way and asynchronous."),
]
_AUTH_TALK = [
    (78, "user", "Auth for the public API: server sessions or JWT?"),
    (
        85,
        "assistant",
        "Short-lived JWT access tokens (15 minutes) with rotating refresh tokens. The API gateway "
        "cannot reach the Redis session store and the mobile clients need stateless auth. Reusing an "
        "old refresh token should revoke the whole token family.",
    ),
    (91, "user", "Let's go with JWT then; parseAuthToken verifies signature, expiry and audience."),
]

_LEAVES = [
    (
        _SCHEMA_TALK,
        "Database schema review (morning session). Decisions: the orders and payments tables use UUID v7 primary "
        "keys instead of auto-increment integers, because several services mint ids and v7 keeps inserts "
        "time-ordered; rows are soft-deleted with a deleted_at column instead of being removed, because refunds "
        "and audits need the history. Migration 0042 implements the schema.\n"
        "Expand for details about: UUID v7 primary keys, deleted_at soft deletes, migration 0042.",
    ),
    (
        _ARCH_TALK,
        "Architecture decision: OrderController no longer calls PaymentService directly. OrderController publishes "
        "a payment.requested event on the payments queue; PaymentService consumes it and charges the card. "
        "Rationale: a payment provider outage must not fail order creation, retries live in one place, and the "
        "relationship stays one-way and asynchronous.\n"
        "Expand for details about: payments queue, payment.requested event, retry policy.",
    ),
    (
        _AUTH_TALK,
        "Auth tokens for the public API: we chose short-lived JWT access tokens (15 minutes) with rotating refresh "
        "tokens over server-side sessions. Rationale: the API gateway cannot reach the session store and mobile "
        "clients need stateless auth; reusing an old refresh token revokes the whole token family. parseAuthToken "
        "verifies signature, expiry and audience.\n"
        "Expand for details about: JWT lifetime, refresh token rotation, token family revocation.",
    ),
]

_CONDENSED = (
    "Morning session summary, three decisions with their rationale. (1) Database schema: UUID v7 primary keys "
    "and deleted_at soft deletes on orders and payments (migration 0042). (2) Architecture: OrderController "
    "talks to PaymentService through the payments queue instead of a direct call, so payment outages do not "
    "fail orders. (3) Auth: JWT access tokens with rotating refresh tokens instead of server sessions, because "
    "of the API gateway and mobile clients.\n"
    "Expand for details about: schema review, payments queue, JWT refresh rotation."
)


def build_demo_db(path: Path, *, day: date | None = None) -> Path:
    """Write the demo database at ``path`` (replacing a previous demo file). Returns ``path``."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    if day is None:  # the most recent morning that is over: no timestamps in the future
        now = datetime.now(timezone.utc)
        day = now.date() if now.time() >= time(11, 0) else now.date() - timedelta(days=1)
    morning = datetime.combine(day, time(9, 0), tzinfo=timezone.utc)
    conn = create_lcm_db(path, "current")
    try:
        writer = LcmWriter(conn)
        conn.execute("BEGIN")
        conv = writer.conversation(
            "demo-session-1", session_key="agent:main:main", title="shopfront", created=morning - timedelta(days=6)
        )
        leaves: list[str] = []
        for talk, text in _LEAVES:
            ids = [writer.message(conv, role, content, at=morning + timedelta(minutes=m)) for m, role, content in talk]
            first, last = morning + timedelta(minutes=talk[0][0]), morning + timedelta(minutes=talk[-1][0])
            leaves.append(
                writer.summary(
                    conv,
                    text,
                    kind="leaf",
                    earliest=first,
                    latest=last,
                    created=last + timedelta(minutes=2),
                    message_ids=ids,
                )
            )
        writer.summary(
            conv,
            _CONDENSED,
            kind="condensed",
            depth=1,
            earliest=morning + timedelta(minutes=2),
            latest=morning + timedelta(minutes=91),
            created=morning + timedelta(minutes=95),
            sources=leaves,
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path
