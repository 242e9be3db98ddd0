"""The vocabulary the adapters that match text themselves share (Total Recall, Lossless, the
Cognee result ranking, qmd's keyword extraction): stopwords, words about *when* rather than
*what*, a light stemmer, identifier parts, and the recency weight of a dated hit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
RECENCY_HALF_LIFE_DAYS = 14.0

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few for
    from further had has have having he her here hers him his how i if in into is it its itself
    just me more most my no nor not of off on once only or other our ours out over own same she
    should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with
    would you your yours s t don let lets us get got go going make made way ve ll re
    thing things stuff something anything everything one ones please show tell find give know
    look see want need""".split()
)
# Words that say *when* or *how* to look rather than *what*: matching them would only add noise.
META_WORDS = frozenset(
    """recently recent last latest earlier ago minute minutes hour hours today yesterday
    morning afternoon evening conversation discussed talked mentioned remember recall""".split()
)
_IRREGULAR = {"decision": "decid", "decisions": "decid", "chose": "choos", "chosen": "choos", "choice": "choos"}
_SUFFIXES = ("ations", "ation", "ings", "ing", "ied", "ies", "ed", "es", "er", "ly", "s", "e")


def stem(word: str) -> str:
    """A deliberately light stemmer: enough to join decide/decided, token/tokens."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stemming_to(terms: Iterable[str], stemmer: Callable[[str], str] = stem) -> dict[str, str]:
    """Every word whose :func:`stem` is one of ``terms``, mapped to that stem: a word's stem is
    the word itself, the word less one of the suffixes, or an irregular form's, so each term's
    candidates are itself, itself plus each suffix and the irregular forms, each kept when it
    stems to a term. A text's words that meet this map are the only ones that can match a term:
    the rest need not be stemmed at all. ``stemmer``: :func:`stem` or a memo of it."""
    wanted = set(terms)
    found: dict[str, str] = {}
    for word in (*wanted, *(term + suffix for term in wanted for suffix in _SUFFIXES), *_IRREGULAR):
        root = stemmer(word)
        if root in wanted:
            found[word] = root
    return found


def identifier_parts(word: str) -> list[str]:
    """``parseAuthToken`` -> ['parse', 'auth', 'token']; ``user_id`` -> ['user', 'id']: the
    lower-cased camelCase/PascalCase/snake_case parts of one word (digits are parts too)."""
    parts: list[str] = []
    for piece in word.split("_"):
        parts.extend(p.lower() for p in _CAMEL_PART.findall(piece))
    return parts


def recency(age_days: float | None) -> float:
    """The weight of a hit ``age_days`` old: 1.0 now, halving its 0.15 share every
    ``RECENCY_HALF_LIFE_DAYS``; 0.85 for an undated hit."""
    if age_days is None:
        return 0.85
    # typeshed types float ** float as Any (a negative base gives a complex); this base is 0.5.
    halved: float = 0.5 ** (max(0.0, float(age_days)) / RECENCY_HALF_LIFE_DAYS)
    return 0.85 + 0.15 * halved
