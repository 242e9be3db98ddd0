"""What a query asks for: content terms without the rule's own words, identifiers and paths matched
exactly. These are the features that let one relevance judge code answers as well as chat ones."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import Result
from memory_router.backends.common.words import stem
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config
from memory_router.core.asked import Asked, asked, exact, path_matches

RULES = load_config(packaged_config()).rules


def read(query: str) -> Asked:
    return asked(query, RULES.match(query).rule)


@pytest.mark.parametrize(
    ("query", "signal_words", "kept"),
    [
        ("find the function parseAuthToken", {"function"}, {"parseauthtoken"}),
        ("find the class TokenStore", {"class"}, {"tokenstor"}),
        ("how does the token refresh work", {"work"}, {"token", "refresh"}),
        ("explain the retry strategy", {"explain", "strategy"}, {"retry"}),
        ("what did we decide about the database schema", {"decide"}, {"schema"}),
    ],
)
def test_the_matched_rules_own_words_are_not_content(query, signal_words, kept):
    terms = read(query).terms
    assert kept <= terms
    assert not {stem(w) for w in signal_words} & terms


def test_words_between_a_signals_pieces_stay_content():
    # "how does X work": X is what is asked; only the signal's own words go.
    assert read("how does the session cookie rotation work").terms == {
        stem(w) for w in ("session", "cookie", "rotation")
    }


def test_a_rule_that_did_not_match_keeps_its_words():
    # "function" is rule 1's word, but this query did not match rule 1 by it.
    assert "function" in asked("what is a good function for a birthday party", None).terms


def test_identifiers_and_the_name_after_the_kind_are_exact_anchors():
    assert read("find the function parseAuthToken").identifiers == ("parseAuthToken",)
    assert read("find all usages of load_config").identifiers == ("load_config",)
    assert read("find the function render").identifiers == ("render",)
    assert read("what did Caroline say about her plans").identifiers == ()


def test_a_path_query_names_its_path_and_its_words_are_not_text_to_cover():
    wanted = read("search in src/auth/*.py for token validation")
    assert wanted.paths == ("src/auth/*.py",)
    assert "src" not in wanted.terms and "auth" not in wanted.terms and "search" not in wanted.terms
    assert {"token", "valid"} <= wanted.terms


def test_not_everything_with_a_dot_is_a_file():
    assert asked("e.g. config.load in v1.2").paths == ()
    assert asked("open auth.py").paths == ("auth.py",)


@pytest.mark.parametrize(
    ("wanted", "path", "expected"),
    [
        ("src/auth/*.py", "qmd://repo/src/auth/jwt.py", True),
        ("src/auth/*.py", "qmd://repo/src/billing/jwt.py", False),
        ("src/auth", "repo/src/auth/jwt.py", True),
        ("./src/auth/", "/home/u/repo/src/auth/deep/x.py", True),
        ("auth.py", "lib/auth.py", True),
        ("auth.py", "lib/oauth.py", False),
        ("*.ts", "web/app.ts", True),
        ("src/auth", "", False),
    ],
)
def test_a_result_answers_a_path_query_by_its_own_path(wanted, path, expected):
    assert path_matches(wanted, path) is expected


def hit(content: str, path: str = "notes/a.md") -> Result:
    return Result(content, 0.5, "qmd", path=path)


def test_exact_is_the_share_of_anchors_a_result_matches_case_and_all():
    wanted = read("relationship between OrderController and PaymentService")
    assert exact(wanted, hit("class OrderController: pays via PaymentService")) == 1.0
    assert exact(wanted, hit("class OrderController: pays")) == 0.5
    assert exact(wanted, hit("the ordercontroller, lower case")) == 0.0
    assert exact(wanted, hit("OrderControllerFactory")) == 0.0  # a longer name is another identifier
    path_query = read("search in src/auth/*.py for token validation")
    assert exact(path_query, hit("def check(): ...", path="src/auth/jwt.py")) == 1.0
    assert exact(path_query, hit("token validation", path="docs/auth.md")) == 0.0
    assert exact(read("what did we decide about the schema"), hit("schema")) == 0.0  # no anchors: nothing exact


@given(st.text(max_size=80), st.text(max_size=200), st.text(max_size=40))
def test_exact_stays_a_share_and_reading_never_fails(query, content, path):
    wanted = asked(query, RULES.match(query).rule)
    value = exact(wanted, Result(content, 0.1, "qmd", path=path))
    assert 0.0 <= value <= 1.0
    assert wanted.judgeable == (bool(wanted.terms) or bool(wanted.identifiers) or bool(wanted.paths))
