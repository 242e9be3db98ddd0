"""The daemon's per-answer work, rewritten to do less, answers exactly as the plain definitions:
the calibration's coverage (only the words that stem to a query term are read), a calibrated or
merged hit built by ``Result.derived``, and Lossless's coverage lookups in one statement. Each is
held equal to the definition it replaced over generated inputs (hypothesis)."""

from __future__ import annotations

import re
import sqlite3
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import BackendResponse, Result
from memory_router.backends.common import words as _words
from memory_router.backends.common.words import stem, stemming_to
from memory_router.backends.lossless.search import Search
from memory_router.backends.lossless.terms import Term
from memory_router.core.asked import asked, exact
from memory_router.core.calibration import Calibration, Model, TermWords, coverage, gap

_WORD = re.compile(r"[0-9A-Za-z]+")
_SUFFIXES = ("", "s", "es", "e", "ed", "er", "ly", "ing", "ings", "ied", "ies", "ation", "ations")
# Roots and forms that stem into each other, irregular forms, words inside words, non-ASCII that
# lower-cases to ASCII (the Kelvin sign), digits.
_ROOTS = [
    "decid",
    "decide",
    "decision",
    "chose",
    "choos",
    "schema",
    "data",
    "databas",
    "tok",
    "token",
    "ab",
    "x1",
    "\u212aey",
]
words = st.builds(lambda root, suffix: root + suffix, st.sampled_from(_ROOTS), st.sampled_from(_SUFFIXES)) | st.text(
    "abcdeginorstyK\u212a19", max_size=9
)
texts = st.lists(
    st.tuples(words, st.sampled_from([" ", "-", "_", ".", "\n", "", "\u00e9", "'", "ABC"])), max_size=25
).map(lambda parts: "".join(w + sep for w, sep in parts))
term_sets = st.frozensets(words.map(lambda w: stem(w.lower())), max_size=5)


def coverage_as_defined(terms: frozenset[str], content: str) -> float:
    """The definition: every word of the text (its first 4000 characters) stemmed, then met with the terms."""
    if not terms:
        return 0.5
    found = {stem(w) for w in _WORD.findall(content[:4000].lower())}
    return len(terms & found) / len(terms)


@given(term_sets, words)
def test_a_word_is_among_the_words_stemming_to_the_terms_exactly_when_its_stem_is_a_term(terms, word):
    mapped = stemming_to(terms)
    assert (word in mapped) == (stem(word) in terms)
    if word in mapped:
        assert mapped[word] == stem(word)


@given(term_sets)
def test_every_word_stemming_to_a_term_is_found_whatever_the_suffix_or_irregular_form(terms):
    mapped = stemming_to(terms)
    for term in terms:
        for word in (term, *(term + s for s in _words._SUFFIXES), *_words._IRREGULAR):
            assert (word in mapped) == (stem(word) in terms)


@given(term_sets, texts)
def test_coverage_is_the_share_the_definition_gives(terms, text):
    assert coverage(terms, text) == coverage_as_defined(terms, text)
    assert coverage(terms, text, TermWords(terms)) == coverage_as_defined(terms, text)


@given(st.lists(st.text(max_size=12), max_size=4).map(frozenset), st.text(max_size=60))
def test_coverage_is_the_share_the_definition_gives_for_any_terms_and_text(terms, text):
    assert coverage(terms, text) == coverage_as_defined(terms, text)


def test_coverage_reads_only_the_first_4000_characters_as_before():
    terms = frozenset({"schema"})
    assert coverage(terms, "x" * 3995 + " schema") == coverage_as_defined(terms, "x" * 3995 + " schema") == 0.0
    assert coverage(terms, "x" * 3990 + " schema") == 1.0


def apply_as_defined(model: Model, query: str, response: BackendResponse) -> BackendResponse:
    """Calibration.apply as it was: a copy of each hit's extra keys, the native value set by
    setdefault, and each hit built again by Result's constructor."""
    wanted = asked(query)
    if not response.results or not wanted.judgeable:
        return response
    results: list[Result] = []
    cap = 1.0
    hits = response.results
    for position, hit in enumerate(hits, start=1):
        after = hits[position].relevance if position < len(hits) else 0.0
        value = model(
            hit.relevance,
            coverage_as_defined(wanted.terms, hit.content),
            1.0 / position,
            exact(wanted, hit),
            gap(hit.relevance, after),
        )
        if position == 1:
            value = model.first(value)
        cap = min(cap, value)
        extra = dict(hit.extra)
        extra.setdefault("native_relevance", hit.relevance)
        results.append(Result(hit.content, round(cap, 4), hit.source, hit.timestamp, **extra))
    return response.replace(results=tuple(results), normalized_relevance=results[0].relevance)


unit = st.floats(0, 1)
models = st.builds(
    Model,
    st.floats(-6, 6),
    st.floats(0, 8),
    st.floats(0, 8),
    st.floats(-3, 3),
    st.floats(0, 8),
    st.just((0.2, 0.6)),
    st.just((0.1, 0.7)),
    st.floats(0, 8),
)
extras = st.dictionaries(
    st.sampled_from(["path", "line", "native_relevance", "also_from", "kind"]),
    st.one_of(st.integers(0, 9), st.text(max_size=8), unit, st.lists(st.text(max_size=4), max_size=2)),
    max_size=4,
)
hits = st.builds(
    lambda text, relevance, source, extra: Result(text, relevance, source, None, **extra),
    texts,
    unit,
    st.sampled_from(["lossless", "totalrecall"]),
    extras,
)
queries = st.sampled_from(
    ["what did we decide about the database schema", "the token decisions", "find parseAuthToken in src/auth/", "why"]
) | st.text("abcdeginorstyK ", max_size=30)


@given(models, queries, st.lists(hits, min_size=1, max_size=8))
def test_calibrating_an_answer_gives_the_values_keys_and_order_the_definition_gives(model, query, results):
    response = BackendResponse.from_results("lossless", query, sorted(results, key=lambda r: -r.relevance))
    calibrated = Calibration({"lossless": model}, "test").apply("lossless", query, response)
    expected = apply_as_defined(model, query, response)
    assert calibrated == expected
    assert [list(r.as_dict().items()) for r in calibrated.results] == [
        list(r.as_dict().items()) for r in expected.results
    ]


@given(hits, unit, extras)
def test_a_derived_hit_is_the_hit_its_constructor_builds(hit, relevance, extra):
    derived = hit.derived(relevance, extra)
    built = Result(hit.content, relevance, hit.source, hit.timestamp, **extra)
    assert derived == built and type(derived) is Result
    assert list(derived.as_dict().items()) == list(built.as_dict().items())
    changed = hit.derived(hit.relevance, {**hit.extra, "also_from": ["qmd"]})
    assert list(changed.as_dict().items()) == list(hit.replace(also_from=["qmd"]).as_dict().items())


# ---------------------------------------------------------------------------- Lossless


def fts_coverage_as_defined(
    conn: sqlite3.Connection, fts: str, terms: list[Term], rowids: list[int]
) -> dict[int, float]:
    """Lossless's coverage as it was: one statement per term."""
    counts = dict.fromkeys(rowids, 0)
    marks = ", ".join("?" * len(rowids))
    for term in terms:
        for (rowid,) in conn.execute(
            f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid IN ({marks})", (term.fts, *rowids)
        ):
            counts[rowid] += 1
    return {rowid: n / len(terms) for rowid, n in counts.items()}


fts_words = st.sampled_from(
    ["schema", "database", "uuid", "keys", "soft", "deleted", "v7", "orders", "AND", "NOT", "a-b"]
)


@given(
    st.lists(st.lists(fts_words, max_size=6).map(" ".join), min_size=1, max_size=12),
    st.lists(
        st.tuples(fts_words | st.lists(fts_words, min_size=2, max_size=3).map(" ".join), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.data(),
)
def test_losslesss_coverage_in_one_statement_is_the_coverage_of_one_statement_per_term(rows, terms, data):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE messages_fts USING fts5(content)")
    conn.executemany("INSERT INTO messages_fts(content) VALUES (?)", [(r,) for r in rows])
    rowids = data.draw(st.lists(st.integers(1, len(rows) + 2), min_size=1, max_size=len(rows) + 2, unique=True))
    asked_terms = [Term(text, phrase) for text, phrase in terms]
    search: Any = SimpleNamespace(conn=conn)
    assert Search._fts_coverage(search, "messages_fts", asked_terms, rowids) == fts_coverage_as_defined(
        conn, "messages_fts", asked_terms, rowids
    )
