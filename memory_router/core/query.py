"""The query as the router sees it: checked once, normalised for matching and for backends.

``query_echo`` in the envelope is always the caller's original text; rules and backends get
the normalised text (control characters, NULs included, become spaces; runs of whitespace
collapse), which keeps argv-safe input for external programs and one-line log entries.
"""

from __future__ import annotations

import re

from memory_router.contract import EMPTY_QUERY, QUERY_TOO_LONG
from memory_router.core.errors import InvalidQuery

# The control (Cc: U+0000-001F, U+007F-009F) and surrogate (Cs) code points and the line and
# paragraph separators, spelt out for re (regex's [\p{Cc}\p{Cs}\u2028\u2029]; a test holds the
# two equal over every code point). Compiled through re's cache on first use.
_CONTROL = r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]+"


def normalise(text: str) -> str:
    # str.isprintable() is False for every character _CONTROL matches (categories Cc, Cs, Zl,
    # Zp), so printable text skips the pattern: the common case, on every query.
    if text.isprintable():
        return " ".join(text.split())
    return " ".join(re.sub(_CONTROL, " ", text).split())


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
