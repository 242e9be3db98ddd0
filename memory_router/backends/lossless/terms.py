"""What a natural-language query asks Lossless for: its content terms, as FTS5 strings and LIKE
needles, and whether it speaks to the assistant.

Stopwords, meta words ("recently", "morning session") and rule 3's trigger words ("decide",
"decision", "chose") are dropped; quoted phrases and identifiers are kept. Each term is quoted as
an FTS5 string, as lossless-claw's ``sanitizeFts5Query`` does (so ``-``, ``:``, ``*``, ``OR``,
``NEAR`` are literal).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from memory_router.backends.common.words import META_WORDS, STOPWORDS, stem
from memory_router.core.frozen import Frozen

MAX_TERMS = 12

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
# The second person outside quotes: "what did you recommend", "your suggestion".
_TO_ASSISTANT = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)


@functools.cache
def unsegmented() -> re.Pattern[str]:
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
    """The MATCH expression: quoted terms joined by implicit AND (``op="AND"``: rows holding every
    term) or by ``OR`` (what the adapter sends: every row holding any term, bm25 ranks them)."""
    quoted = [t.fts for t in terms]
    return " ".join(quoted) if op == "AND" else " OR ".join(quoted)


def addresses_assistant(query: str) -> bool:
    """Whether the query speaks to the assistant ("what did you recommend", "your last answer"):
    it is then after the assistant's own messages, which are long by nature, so the adapter does
    not discount long messages for it (:mod:`.ranking`)."""
    return bool(_TO_ASSISTANT.search(_QUOTED.sub(" ", query)))


def needs_substring_search(terms: Iterable[Term]) -> bool:
    """Whether a term is in a script written without spaces: unicode61 keeps such a run as one
    token, so FTS5 only matches it whole, and a substring search must look inside longer runs
    (lossless-claw falls back likewise)."""
    return any(not t.text.isascii() and unsegmented().search(t.text) for t in terms)
