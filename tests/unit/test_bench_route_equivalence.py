"""The route-decision optimisations (bench issue) change speed, not decisions.

``reference_match`` and ``reference_normalise`` are the original implementations, kept verbatim
as the specification: the optimised ``RuleTable.match`` (passes flattened once, the signal found
through ``lastgroup``) and ``normalise`` (a fast path for printable text) must agree with them on
any text, including control characters, identifiers and every signal of the packaged rules.
"""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.config.router_config import load_config, parse_config
from memory_router.core.query import _CONTROL, normalise
from memory_router.core.rules import RuleMatch, RuleTable

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
