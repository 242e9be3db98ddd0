"""The query as the router sees it: checked once, normalised for matching and for backends.

``query_echo`` in the envelope is always the caller's original text; rules and backends get
the normalised text (control characters, NULs included, become spaces; runs of whitespace
collapse), which keeps argv-safe input for external programs and one-line log entries.
"""

from __future__ import annotations

import regex

from memory_router.core.errors import InvalidQuery

EMPTY_QUERY = "EMPTY_QUERY"
QUERY_TOO_LONG = "QUERY_TOO_LONG"

_CONTROL = regex.compile(r"[\p{Cc}\p{Cs}\u2028\u2029]+")


def normalise(text: str) -> str:
    # str.isprintable() is False for every character _CONTROL matches (categories Cc, Cs, Zl,
    # Zp), so printable text skips the regex pass: the common case, on every query.
    if text.isprintable():
        return " ".join(text.split())
    return " ".join(_CONTROL.sub(" ", text).split())


def check_query(text: str, max_chars: int) -> str:
    """Return the normalised query or raise :class:`InvalidQuery` (empty or too long)."""
    if len(text) > max_chars:
        raise InvalidQuery(
            QUERY_TOO_LONG,
            f"the query is {len(text)} characters; the limit is {max_chars} (max_query_chars in "
            "router-config.json). Send the key terms, not a whole document.",
        )
    clean = normalise(text)
    if not clean:
        raise InvalidQuery(EMPTY_QUERY, "the query is empty or only whitespace; pass the text to search for.")
    return clean
