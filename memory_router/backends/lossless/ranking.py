"""Lossless's relevance (0..1, the router accepts >= 0.4) and the results it returns.

The formula and why each factor is there are in :mod:`.adapter`'s docstring; the figures that
chose ``BRIEF_CHARS`` are in docs/benchmarks-lossless.md.
"""

from __future__ import annotations

import re
from typing import Any

from memory_router.backends.base import Result
from memory_router.backends.common.words import recency
from memory_router.backends.lossless.search import Hit

SUMMARY_WEIGHT = 1.0
MESSAGE_WEIGHT = 0.9
BAND_FLOOR = 0.7  # coverage * (BAND_FLOOR + (1 - BAND_FLOOR) * strength)
LIKE_STRENGTH = 0.5
BRIEF_CHARS = 400  # a message longer than this has its coverage discounted by BRIEF_CHARS / length
NO_TERMS_DECISION = 0.5
NO_TERMS_OTHER = 0.3

# Matched case-insensitively, compiled on first use (re's cache keeps it): only a query without
# terms (its hits the most recent rows) reads it, and compiling it at import cost every cold query.
_DECISION_TEXT = (
    r"\b(?:decid\w*|decision\w*|chose|chosen|choose|because|rationale|instead\s+of|trade-?offs?"
    r"|went\s+with|settled\s+on)\b"
)


def brevity(hit: Hit, to_assistant: bool) -> float:
    """1.0 for a summary and for a message of at most ``BRIEF_CHARS`` characters; a longer
    message ``BRIEF_CHARS / its length``. A long message holds many of a question's words by sheer
    size (an assistant's long answer repeats the words of the question it answers), so its
    coverage says less than a short one's. A query that speaks to the assistant is after those long
    answers: no discount then."""
    if hit.table == "summaries" or to_assistant:
        return 1.0
    chars = len(hit.row["content"] or "")
    return min(1.0, BRIEF_CHARS / chars) if chars else 1.0


def relevance(hit: Hit, to_assistant: bool) -> float:
    recency_weight = recency(hit.row.get("age_days"))
    if hit.match == "recent":
        decision = re.search(_DECISION_TEXT, hit.row["content"] or "", re.IGNORECASE)
        base = NO_TERMS_DECISION if decision else NO_TERMS_OTHER
        return base * recency_weight
    weight = SUMMARY_WEIGHT if hit.table == "summaries" else MESSAGE_WEIGHT
    band = BAND_FLOOR + (1 - BAND_FLOOR) * hit.strength
    return hit.coverage * brevity(hit, to_assistant) * band * weight * recency_weight


def to_result(hit: Hit, source: str, max_content_chars: int, to_assistant: bool) -> Result:
    r = hit.row
    content = r["content"] or ""
    if len(content) > max_content_chars:
        content = content[: max_content_chars - 1] + "…"
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
        relevance=round(min(1.0, max(0.0, relevance(hit, to_assistant))), 4),
        source=source,
        timestamp=iso(r.get("event_time")),
        **extra,
    )


_ISO_Z = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:Z|[+-]00:?00)?$")


def iso(value: Any) -> str | None:
    """Both of the plugin's formats as ``YYYY-MM-DDTHH:MM:SSZ``; anything else as stored."""
    if value is None:
        return None
    text = str(value)
    m = _ISO_Z.match(text)
    return f"{m.group(1)}T{m.group(2)}Z" if m else text
