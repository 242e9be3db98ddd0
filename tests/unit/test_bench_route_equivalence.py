"""The route-decision optimisations (bench issue) change speed, not decisions.

``reference_match`` and ``reference_normalise`` are the original implementations, kept verbatim
as the specification: the optimised ``RuleTable.match`` (passes flattened once, the signal found
through ``lastgroup``) and ``normalise`` (a fast path for printable text) must agree with them on
any text, including control characters, identifiers and every signal of the packaged rules.
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.config.router_config import load_config, parse_config
from memory_router.core.asked import asked
from memory_router.core.query import normalise
from memory_router.core.rules import RuleMatch, RuleTable, plain_pattern
from memory_router.routing.cpu_alarm import interrupter

from ..support.budget import examples

TABLE = load_config().rules


def reference_match(table: RuleTable, query: str) -> RuleMatch:
    timed_out: list[int] = []
    for strength in ("strong", "weak"):
        for rule in table.rules:
            pattern = rule.strong if strength == "strong" else rule.weak
            if pattern is None:
                continue
            try:
                m = pattern.search(query, timeout=table.regex_timeout_s)
            except TimeoutError:
                timed_out.append(rule.number)
                continue
            if m is not None:
                sources = rule.strong_sources if strength == "strong" else rule.weak_sources
                index = next(int(k[1:]) for k, v in m.groupdict().items() if v is not None and k[1:].isdigit())
                return RuleMatch(rule, strength, sources[index], m.group(), m.span(), tuple(timed_out))
    return RuleMatch(table.default, "default", timed_out=tuple(timed_out))


_CONTROL = regex.compile(r"[\p{Cc}\p{Cs}\u2028\u2029]+")


def reference_normalise(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


FRAGMENTS = [
    "find",
    "the",
    "function",
    "class",
    "method",
    "all usages of",
    "search for",
    "relate",
    "relationship",
    "depends on",
    "dependency",
    "connection",
    "call chain",
    "trace",
    "to",
    "path between",
    "decide",
    "decision",
    "chose",
    "why did we",
    "recall",
    "earlier in the conversation",
    "morning session",
    "how does",
    "work",
    "where is",
    "handled",
    "explain",
    "strategy",
    "approach for",
    "what is the",
    "for",
    "just discussed",
    "few minutes ago",
    "last change",
    "recently",
    "last thing",
    "what was the last",
    "that thing",
    "the thing with",
    "what we talked about",
    "src/models/*.ts",
    "docs/a.md",
    "x.py",
    "parseAuthToken",
    "UserService",
    "user_service",
    "*",
    "/",
    "~/",
    "..",
    "auth",
    "database",
    "\x00",
    "\t",
    "\n",
    "\u2028",
    "\u00a0",
    "\u200b",
    "é",
    "ß",
    "İ",
    "\ud800",
]
text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=12).map(" ".join)


def as_tuple(m: RuleMatch) -> tuple:
    return (m.rule.number, m.strength, m.signal, m.matched, m.span, m.timed_out)


@settings(max_examples=examples(600), deadline=None)
@given(query=text)
def test_match_equals_reference(query: str) -> None:
    clean = reference_normalise(query)
    assert as_tuple(TABLE.match(clean)) == as_tuple(reference_match(TABLE, clean))


@settings(max_examples=examples(600), deadline=None)
@given(query=st.one_of(text, st.text()))
def test_normalise_equals_reference(query: str) -> None:
    assert normalise(query) == reference_normalise(query)


def test_signal_with_its_own_groups_is_still_named() -> None:
    """A signal regex with capture groups of its own: the signal reported is still the right one."""
    data = load_config().path.read_bytes()
    import orjson

    config = orjson.loads(data)
    config["rules"][0]["strong"] = [r"\b(zeta)\b", r"\b(?P<word>alpha)(beta)?\b", r"((gam)(ma))"]
    table = parse_config(config, load_config().path).rules
    for query in ("alpha", "alphabeta x", "gamma", "zeta", "x zeta alpha", "nothing"):
        assert as_tuple(table.match(query)) == as_tuple(reference_match(table, query))
    assert table.match("alpha").signal == r"\b(?P<word>alpha)(beta)?\b"
    found = regex.compile(r"\b(?P<word>alpha)(beta)?\b").search("alpha")
    assert found is not None and found.lastgroup == "word"


# ------------------------------------------------------------------- a one-shot query, with re


def test_the_one_shot_interrupter_runs_in_the_main_thread_only() -> None:
    import threading

    assert interrupter() is not None  # pytest runs the tests in the main thread
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(interrupter()))
    worker.start()
    worker.join()
    assert seen == [None]


@settings(max_examples=examples(600), deadline=None)
@given(query=text)
def test_match_with_re_equals_reference(query: str) -> None:
    """A one-shot query matches with re where a signal is plain (every packaged one is): the
    same rule, signal, text and span as regex (the daemon's), ASCII or not (not: regex)."""
    clean = reference_normalise(query)
    assert as_tuple(TABLE.match(clean, interrupt=interrupter())) == as_tuple(reference_match(TABLE, clean))


@settings(max_examples=examples(300), deadline=None)
@given(query=text)
def test_asked_with_re_equals_asked_with_regex(query: str) -> None:
    clean = reference_normalise(query)
    rule = TABLE.match(clean).rule
    assert asked(clean, rule, interrupt=interrupter()) == asked(clean, rule)


def test_every_packaged_signal_is_plain() -> None:
    """What keeps regex out of a cold query with the packaged config (docs/benchmarks.md)."""
    for rule in TABLE.rules:
        for strength in ("strong", "weak"):
            source = rule.strong_regex if strength == "strong" else rule.weak_regex
            assert source is None or rule.plain(strength) is not None, (rule.number, strength)


PLAIN = [
    r"a{2}",
    r"a{2,}",
    r"a{,3}",
    r"(?i)abc",
    r"(?-i:Ab)",
    r"(?P<s0>x)|(?:y)",
    r"\bfoo\.py\b",
    r"[^a-z\]]+",
    r"x(?=y)",
]
NOT_PLAIN = [
    r"a{}",
    r"a{e<=1}",  # regex: a fuzzy match; re: the text "a{e<=1}"
    r"(?<n>x)",
    r"(?>x)",
    r"\p{L}",
    r"\X",
    r"[[:alpha:]]",  # regex: a POSIX class; re: a set and a "]"
    r"[a--b]",
    "café",
    r"\1",
    r"\B",  # re never matches it on empty text, regex does
    r"(?#c)",
    "a\\",
]


@pytest.mark.parametrize("source", PLAIN)
def test_plain_patterns(source: str) -> None:
    assert plain_pattern(source)


@pytest.mark.parametrize("source", NOT_PLAIN)
def test_patterns_regex_reads_otherwise_are_not_plain(source: str) -> None:
    assert not plain_pattern(source)


_ATOMS = [
    "a",
    "b",
    "x",
    "A",
    "_",
    "1",
    " ",
    "-",
    ".",
    r"\b",
    r"\w",
    r"\W",
    r"\d",
    r"\s",
    r"\S",
    r"\.",
    "[a-c]",
    "[^b ]",
    "[A-z]",
    "(?:a|bb)",
    "(a)",
    "(?=a)",
    "(?!b)",
    "(?<=a)",
    "(?<!x)",
    "^",
    "$",
    r"\Z",
]
_REPEATS = ["", "", "*", "+", "?", "*?", "+?", "{2}", "{1,2}", "{,2}", "{2,}?"]
_piece = st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_REPEATS)).map("".join)
_branch = st.lists(_piece, min_size=1, max_size=5).map("".join)
_pattern = st.lists(_branch, min_size=1, max_size=3).map(
    lambda bs: "|".join(f"(?P<s{i}>{b})" for i, b in enumerate(bs))
)
_ascii_text = st.text(alphabet=st.sampled_from("abxAB_1 -.z"), max_size=20)


@settings(max_examples=examples(600), deadline=None)
@given(source=_pattern, text=_ascii_text, ignore_case=st.booleans())
def test_a_plain_pattern_matches_ascii_text_as_regex_does(source: str, text: str, ignore_case: bool) -> None:
    """The premise of matching with re: on ASCII text (a normalised query's), a plain pattern
    finds what regex finds, span, groups and the last group alike."""
    import re

    assert plain_pattern(source)
    try:
        mine = re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return  # re refuses it (a repeated look-around...): such a rule is matched with regex
    theirs = regex.compile(source, (regex.IGNORECASE if ignore_case else 0) | regex.UNICODE)
    a, b = mine.search(text), theirs.search(text)
    assert (a is None) == (b is None), (source, text)
    if a is not None and b is not None:
        assert (a.span(), a.groups(), a.lastgroup) == (b.span(), b.groups(), b.lastgroup), (source, text)


def _table_with_first_signal(signal: str) -> RuleTable:
    import orjson

    config = orjson.loads(load_config().path.read_bytes())
    config["rules"][0]["strong"] = [signal]
    return parse_config(config, load_config().path).rules


def test_a_signal_re_backtracks_on_is_searched_with_regex_as_before() -> None:
    """regex's optimisations end ``(a+)+b`` at once; re backtracks until half the budget is
    spent, then regex searches it in the rest: the same answer, no timeout."""
    table = _table_with_first_signal(r"(a+)+b")
    assert table.rules[0].plain("strong") is not None
    query = "a" * 40 + " what did we decide"
    with_re = table.match(query, 0.2, interrupt=interrupter())
    assert as_tuple(with_re) == as_tuple(table.match(query, 0.2)) == as_tuple(reference_match(table, query))
    assert with_re.timed_out == () and with_re.rule.number == 3


def test_a_signal_both_backtrack_on_times_out_and_spends_the_budget_as_before() -> None:
    table = _table_with_first_signal(r"(a|aa)+b")
    query = "a" * 40
    with_re, with_regex = table.match(query, 0.05, interrupt=interrupter()), table.match(query, 0.05)
    # Which later rules the spent budget also cuts depends on the machine's load, either way.
    for found in (with_re, with_regex):
        assert found.timed_out[0] == table.rules[0].number and found.strength == "default"
