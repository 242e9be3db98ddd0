"""Keyword rewriting for qmd's BM25 search (which ANDs every term) and its relaxation ladder."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_router.backends._qmd_keywords import STOPWORDS, extract_terms, keyword_forms, trigger_words

RULE1_FUNCTION = r"\bfind\b.*\bfunctions?\b"
RULE3_DECIDE = r"\bdecid(?:e|es|ed|ing)\b"
RULE6_PATH = r"(?<![\w/])(?:~|\.{1,2})?/?[\w.-]+/[\w.*/-]*"


def strict(query: str, signal: str | None = None) -> str:
    forms = keyword_forms(query, signal)
    return forms[0].text if forms else ""


def test_spec_examples_become_keyword_queries() -> None:
    assert strict("find the function parseAuthToken", RULE1_FUNCTION) == "parseAuthToken"
    assert strict("find all usages of UserService", r"\bfind all usages of\b") == "UserService"
    assert strict("search in src/models/*.ts", RULE6_PATH) == '"src models" ts'
    assert strict("what did we decide about the database schema", RULE3_DECIDE) == "database schema"
    assert strict("the middleware issue") == "middleware issue"


def test_trigger_words_are_the_literal_words_of_the_signal_only() -> None:
    assert trigger_words(RULE1_FUNCTION) == {"find", "functions"}
    assert trigger_words(RULE6_PATH) == frozenset()
    assert trigger_words(r"(?-i:\b[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+[A-Z]?\b)") == frozenset()
    # content words caught by the signal's ".*" survive; only its literal words go
    assert strict("find the auth function", RULE1_FUNCTION) == "auth"


def test_identifiers_paths_and_phrases_are_kept_verbatim() -> None:
    terms = [t.text for t in extract_terms('where is "leader election" in raft_node.go for DEC-0054 and v2.8.3')]
    assert terms == ['"leader election"', '"raft_node go"', "DEC-0054", "v2.8.3"]
    assert [t.text for t in extract_terms("`sessionStore.load` in ./src/auth/")] == ["sessionStore.load", '"src auth"']


def test_negation_and_flags_cannot_be_smuggled_in() -> None:
    assert strict("-raft --help consensus") == "raft help consensus"


def test_only_stopwords_gives_no_query() -> None:
    assert keyword_forms("what was the last thing we did") == []


def test_relaxation_drops_plain_words_before_identifiers() -> None:
    forms = keyword_forms("parseAuthToken error handling code path")
    assert forms[0].text == "parseAuthToken error handling code path" and forms[0].coverage == 1.0
    assert forms[-1].text == "parseAuthToken"
    assert [round(f.coverage, 2) for f in forms] == [1.0, 0.67, 0.33]


words = st.one_of(
    st.sampled_from(sorted(STOPWORDS)[:60]),
    st.from_regex(r"[a-z]{2,9}", fullmatch=True),
    st.from_regex(r"[a-z]{2,6}[A-Z][a-z]{2,6}", fullmatch=True),
    st.from_regex(r"[a-z]{2,5}/[a-z]{2,5}(/\*)?(\.ts)?", fullmatch=True),
    st.from_regex(r'"[a-z]{2,6} [a-z]{2,6}"', fullmatch=True),
    st.sampled_from(["-x", "--", "*", "'", '"', "?", "&&", "$(rm)", "`a`", "é", "日本"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(words, min_size=0, max_size=12).map(" ".join), st.integers(1, 6))
def test_forms_are_well_formed(query: str, max_forms: int) -> None:
    forms = keyword_forms(query, max_forms=max_forms)
    assert len(forms) <= max_forms
    if not forms:
        return
    assert forms[0].coverage == 1.0
    coverages = [f.coverage for f in forms]
    assert coverages == sorted(coverages, reverse=True) and all(0 < c <= 1 for c in coverages)
    sizes = [len(re.findall(r'"[^"]*"|\S+', f.text)) for f in forms]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes)
    for form in forms:
        assert form.text.strip() == form.text and form.text
        assert form.text.count('"') % 2 == 0  # qmd rejects an unmatched quote
        for term in re.findall(r'"[^"]*"|\S+', form.text):
            assert not term.startswith("-")  # never a NOT
            assert term.lower() not in STOPWORDS
    # every strict-form term comes from the query's own characters (nothing invented)
    letters = set(re.sub(r"\W", "", query.lower()))
    assert set(re.sub(r"\W", "", forms[0].text.lower())) <= letters
