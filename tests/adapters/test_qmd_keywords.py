"""Keyword rewriting for qmd's BM25 search (which ANDs every term) and its relaxation ladder."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends.qmd.keywords import META_WORDS, STOPWORDS, extract_terms, keyword_forms, trigger_words

from ..support.budget import examples

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


@settings(max_examples=examples(150), deadline=None)
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


def test_slash_joined_plain_words_are_words_not_a_path() -> None:
    # LoCoMo questions that fire rule 6 on the slash: the relaxation used to keep "and or" only.
    forms = keyword_forms("Has Tim been to North Carolina and/or Tennesee states", RULE6_PATH)
    assert [f.text for f in forms] == ["tim north carolina tennesee states", "carolina tennesee states", "carolina"]
    assert strict("What artists/bands has Melanie seen?", RULE6_PATH) == "artists bands melanie seen"
    assert strict("he/she/they moved the src/auth/middleware", RULE6_PATH) == 'moved "src auth middleware"'
    # what still marks a path: a leading or trailing slash, a wildcard, a file name, a non-word segment
    assert strict("what is in docs/") == "docs"
    assert [t.text for t in extract_terms("~/notes ./build /etc/hosts api/v2 lib/auth_api")] == [
        "notes",
        "build",
        '"etc hosts"',
        '"api v2"',
        '"lib auth_api"',
    ]


def test_terms_made_of_stopwords_or_single_letters_are_dropped() -> None:
    assert keyword_forms('"and the" e.g. x_y i.e. */a/*') == []
    assert strict('"and the" or "the raft"') == '"the raft"'


CONTENT_WORDS = ["tim", "carolina", "bands", "raft", "melanie", "src", "auth", "qmd", "2023"]
SIGNALS = [None, RULE1_FUNCTION, RULE3_DECIDE, RULE6_PATH]
STOP_SAMPLE = sorted(STOPWORDS | META_WORDS)


def _alnum(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[^\W_]+", text)]


def _content(word: str, triggers: frozenset[str]) -> bool:
    return (
        (len(word) > 1 or word.isdigit())
        and word not in STOPWORDS
        and word not in META_WORDS
        # A trigger word, or one sharing a 4+ letter stem with it ("function"/"functions"); a
        # shorter word that only begins a trigger ("fi" of "find") is a word of its own.
        and not any(word.startswith(t) or (len(word) >= 4 and t.startswith(word)) for t in triggers if len(t) >= 4)
        and word not in triggers
    )


piece = st.one_of(
    st.sampled_from(STOP_SAMPLE),
    st.sampled_from(CONTENT_WORDS),
    st.from_regex(r"[a-z]{1,8}", fullmatch=True),
    st.lists(st.one_of(st.sampled_from(STOP_SAMPLE[:80]), st.sampled_from(CONTENT_WORDS)), min_size=2, max_size=4).map(
        "/".join
    ),
    st.lists(st.sampled_from(STOP_SAMPLE[:80] + CONTENT_WORDS), min_size=1, max_size=3).map(
        lambda ws: '"' + " ".join(ws) + '"'
    ),
    st.sampled_from(["/", "*", "-", "--", "&&", "?", "e.g.", "i.e.", "x_y", "a.b", "'", '"', "…", "/a/", "*/the/*"]),
    st.from_regex(r"[a-z]{2,5}[./_-][a-z0-9]{1,4}", fullmatch=True),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(piece, max_size=10).map(" ".join), st.sampled_from(SIGNALS), st.integers(1, 6))
def test_every_form_sent_is_made_of_the_querys_content_words(query: str, signal: str | None, max_forms: int) -> None:
    """Whatever the query, each form qmd is sent (strict or relaxed) holds only terms built from
    the query's own words, each term with at least one content word (no stopword, lone letter or
    punctuation fragment standing in for one); and there is a form whenever the query has a
    content word outside its quotes' stopword-only phrases."""
    triggers = trigger_words(signal)
    forms = keyword_forms(query, signal, max_forms)
    query_words = set(_alnum(query))
    for form in forms:
        for term in re.findall(r'"[^"]*"|\S+', form.text):
            words = _alnum(term)
            assert words and set(words) <= query_words, (term, query)
            assert any(_content(w, triggers) for w in words), (term, form.text, query)
    unquoted = re.sub(r'"[^"]*"', " ", query)
    if any(_content(w, triggers) for w in _alnum(unquoted)):
        assert forms, query
