"""The rule engine: the spec's 15 examples, two-pass matching, tier filtering, robustness."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config, parse_config, read_json
from memory_router.core.plan import make_plan
from memory_router.demo import SPEC_EXAMPLES

from ..conftest import ALL_BACKENDS, STARTER, installed
from ..support.budget import examples

CONFIG = load_config()


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_spec_example_matches_its_rule(example):
    assert CONFIG.rules.match(example.query).rule.number == example.rule


SPEC_TABLE = parse_config({**read_json(packaged_config()), "table": "spec"}, packaged_config())


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_spec_example_pro_chain_is_the_spec_table_in_its_order_plus_only_marked_extensions(example):
    plan = make_plan(CONFIG.rules.match(example.query), installed(*ALL_BACKENDS).unusable_reason)
    spec_steps = [s for s in plan.steps if not s.extension]
    assert tuple(s.backend for s in spec_steps) == example.chain  # the spec's steps, in the spec's order
    assert plan.steps[0] == spec_steps[0]  # an extension never goes before the spec's first step here
    assert plan.skipped == ()


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_spec_example_pro_chain_is_the_spec_table_exactly_with_the_switch(example):
    plan = make_plan(SPEC_TABLE.rules.match(example.query), installed(*ALL_BACKENDS).unusable_reason)
    assert tuple(plan.fallback_chain) == example.chain
    assert not any(s.extension for s in plan.steps)


def test_the_default_rule_asks_lossless_before_total_recall_on_pro_and_never_on_starter():
    pro = make_plan(CONFIG.rules.match("database"), installed(*ALL_BACKENDS).unusable_reason)
    assert [(s.backend, s.mode, s.extension) for s in pro.steps] == [
        ("qmd", "query", False),
        ("lossless", None, True),
        ("totalrecall", None, False),
    ]
    chain = pro.as_dict()["chain"]
    assert isinstance(chain, list) and chain[1] == {"backend": "lossless", "mode": None, "extension": True}
    starter = make_plan(CONFIG.rules.match("database"), installed(*STARTER).unusable_reason)
    assert starter.fallback_chain == ["qmd", "totalrecall"]


@pytest.mark.parametrize(
    ("query", "rule", "spec_chain"),
    [
        # A weak rule-1 signal (an identifier-shaped name) in a chat question: LongMemEval's kind.
        ("How many days before I bought the iPhone 13 Pro did I attend the Holiday Market?", 1, ["qmd", "totalrecall"]),
        ("find the function parseAuthToken", 1, ["qmd", "totalrecall"]),
        ("What is the total cost of the food bowl I got for Max?", 4, ["qmd", "qmd", "totalrecall"]),
    ],
)
def test_rules_1_and_4_ask_lossless_last_on_pro_and_not_with_the_spec_table(
    query: str, rule: int, spec_chain: list[str]
) -> None:
    match = CONFIG.rules.match(query)
    assert match.rule.number == rule
    pro = make_plan(match, installed(*ALL_BACKENDS).unusable_reason)
    assert pro.fallback_chain == [*spec_chain, "lossless"] and pro.steps[-1].extension
    spec = make_plan(SPEC_TABLE.rules.match(query), installed(*ALL_BACKENDS).unusable_reason)
    assert spec.fallback_chain == spec_chain
    assert make_plan(match, installed(*STARTER).unusable_reason).fallback_chain == spec_chain


@pytest.mark.parametrize("example", SPEC_EXAMPLES, ids=lambda e: f"ex{e.number}")
def test_spec_example_starter_tier_drops_cognee_and_lossless(example):
    plan = make_plan(CONFIG.rules.match(example.query), installed(*STARTER).unusable_reason)
    assert tuple(plan.fallback_chain) == tuple(b for b in example.chain if b in STARTER)
    assert {s.step.backend for s in plan.skipped} == {s.backend for s in plan.match.rule.chain} - set(STARTER)
    assert all("not listed" in s.reason for s in plan.skipped)


def test_strong_signal_of_a_later_rule_beats_weak_signal_of_an_earlier_one():
    match = CONFIG.rules.match("what's the relationship between OrderController and PaymentService")
    assert (match.rule.number, match.strength, match.matched) == (2, "strong", "relationship")


def test_identifier_alone_is_a_weak_rule_1_signal():
    match = CONFIG.rules.match("UserService")
    assert (match.rule.number, match.strength, match.matched, match.span) == (1, "weak", "UserService", (0, 11))


@pytest.mark.parametrize("query", ["Postgres", "API", "HTTP handler", "the Auth flow", "JSON"])
def test_capitalised_words_and_acronyms_are_not_identifiers(query):
    assert CONFIG.rules.match(query).rule.number == 7


@pytest.mark.parametrize(
    ("query", "rule"),
    [
        ("snake_case_name", 1),
        ("getUserById", 1),
        ("what depends on the billing worker", 2),
        ("call chain from checkout to ledger", 2),
        ("trace the request from nginx to the db", 2),
        ("why did we pick redis", 3),
        ("earlier in conversation you said", 3),
        ("where is retry handled", 4),
        ("what is the flag for verbose output", 4),
        ("what did we just discussed", 5),
        ("a few minutes ago", 5),
        ("config.yaml", 6),
        ("**/*.swift", 6),
        ("docs/adr", 6),
        ("hello", 7),
    ],
)
def test_signal_lists_route_as_the_spec_says(query, rule):
    assert CONFIG.rules.match(query).rule.number == rule


def test_status_filter_keeps_ready_and_degraded_only():
    match = CONFIG.rules.match("how does the cache relate to the queue")  # rule 2
    usable = installed("qmd", "totalrecall", "cognee", statuses={"cognee": "degraded", "qmd": "installed"})
    plan = make_plan(match, usable.unusable_reason)
    assert plan.fallback_chain == ["cognee", "totalrecall"]
    (skipped,) = plan.skipped
    assert skipped.step.backend == "qmd" and "'installed'" in skipped.reason


def test_rule_4_keeps_both_qmd_steps_in_the_chain():
    plan = make_plan(CONFIG.rules.match("explain the caching strategy"), installed(*STARTER).unusable_reason)
    assert [(s.backend, s.mode) for s in plan.steps] == [("qmd", "vsearch"), ("qmd", "query"), ("totalrecall", None)]


def test_catastrophic_regex_is_bounded_by_the_match_timeout(tmp_path):
    data = read_json(packaged_config())
    data["regex_timeout_ms"] = 20
    data["rules"][0]["strong"] = ["^(a|aa)+$"]  # exponential backtracking in `regex`
    config = parse_config(data, tmp_path / "router-config.json")
    started = time.perf_counter()
    match = config.rules.match("a" * 40 + "!")
    assert 1 in match.timed_out
    assert match.rule.number != 1
    assert time.perf_counter() - started < 1.0


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=300))
def test_any_text_routes_to_exactly_one_rule_without_raising(text):
    match = CONFIG.rules.match(text)
    assert match.rule in CONFIG.rules.rules
    if match.strength == "default":
        assert match.rule.number == 7 and match.signal is None
    else:
        assert match.span is not None and text[match.span[0] : match.span[1]] == match.matched


WORDS = ["relationship", "decide", "explain", "recently", "src/x.py", "parseAuthToken", "that thing", "the", "auth"]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
def test_first_strong_rule_wins_regardless_of_order(words):
    query = " ".join(words)
    match = CONFIG.rules.match(query)
    strong = [r.number for r in CONFIG.rules.rules if r.strong is not None and r.strong.search(query)]
    if strong:
        assert (match.rule.number, match.strength) == (min(strong), "strong")
    else:
        assert match.strength in ("weak", "default")
