"""The relevance floor (abstention) and the character budget on a finished envelope
(memory_router.core.trim): the invariants, then the documented edge cases."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import Result
from memory_router.core.envelope import Envelope, error_envelope
from memory_router.core.trim import Trim, apply


def envelope_of(hits: list[Result], status: str = "success") -> Envelope:
    best = max((h.relevance for h in hits), default=0.0)
    return Envelope(
        query_echo="q",
        routed_to="qmd",
        routed_mode="search",
        fallback_chain=["qmd"],
        fallbacks_used=0,
        results=hits,
        result_count=len(hits),
        normalized_relevance=best,
        status=status,  # type: ignore[arg-type]
    )


hits_strategy = st.lists(
    st.builds(
        Result,
        content=st.text(max_size=60),
        relevance=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
        source=st.just("qmd"),
    ),
    max_size=12,
)
floors = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
budgets = st.integers(min_value=1, max_value=300)


@given(hits_strategy, floors)
def test_the_floor_abstains_on_an_answer_whose_best_hit_is_under_it_and_keeps_the_rest_whole(
    hits: list[Result], floor: float
) -> None:
    before = envelope_of(hits)
    out = apply(before, Trim(min_relevance=floor))
    best = max((h.relevance for h in hits), default=None)
    if best is not None and best < floor:
        assert out.results == () and out.result_count == 0
        assert out.status == "empty" and out.normalized_relevance == 0.0
        assert out.abstained == {"min_relevance": floor, "best": best, "dropped": len(hits)}
        # Nothing else of the answer changes: which backend, which rule, how long.
        assert out.replace(results=before.results, result_count=before.result_count) == before.replace(
            normalized_relevance=0.0, status="empty", abstained=out.abstained
        )
    else:
        # Reached (or nothing to judge): the answer whole, weak hits under the best one included.
        assert out == before and out.abstained is None


@given(hits_strategy, floors)
def test_a_hit_under_the_floor_is_never_dropped_from_an_answer_that_reaches_it(
    hits: list[Result], floor: float
) -> None:
    out = apply(envelope_of(hits), Trim(min_relevance=floor))
    assert list(out.results) in ([], hits)  # all or nothing: never a subset


@given(hits_strategy, budgets)
def test_the_budget_is_never_passed_and_keeps_whole_hits_in_rank_order(hits: list[Result], max_chars: int) -> None:
    out = apply(envelope_of(hits), Trim(max_chars=max_chars))
    total = sum(len(h.content) for h in out.results)
    assert total <= max_chars
    if not hits:
        assert out.results == ()
        return
    assert out.results  # the first hit always stays
    whole = list(out.results)
    if len(hits[0].content) > max_chars:  # the one hit that may be cut: the first, alone too big
        assert out.results[0].content == hits[0].content[:max_chars] and len(out.results) == 1
        assert out.budget is not None and out.budget["truncated"] is True
        whole = whole[1:]
    assert whole == hits[len(out.results) - len(whole) : len(out.results)]  # a prefix, untouched
    if len(out.results) < len(hits):  # stopped because the next hit would pass the budget
        assert out.budget is not None  # a cut is always reported
        assert total + len(hits[len(out.results)].content) > max_chars or out.budget["truncated"]
        assert out.budget == {
            "max_chars": max_chars,
            "kept": len(out.results),
            "cut": len(hits) - len(out.results),
            "chars": total,
            "truncated": out.budget["truncated"],
        }
    elif out.budget is None:
        assert out == envelope_of(hits)


@given(hits_strategy, floors, budgets)
def test_floor_then_budget_composes_both_invariants(hits: list[Result], floor: float, max_chars: int) -> None:
    out = apply(envelope_of(hits), Trim(min_relevance=floor, max_chars=max_chars))
    reached = bool(hits) and max(h.relevance for h in hits) >= floor
    # The floor says all or nothing; the budget then trims what it kept, as it would alone.
    assert out == (apply(envelope_of(hits), Trim(max_chars=max_chars)) if reached or not hits else out)
    if hits and not reached:
        assert out.results == () and out.abstained is not None and out.budget is None
    assert sum(len(h.content) for h in out.results) <= max_chars
    Envelope.from_dict(orjson.loads(out.to_json()))  # still a valid envelope, read back strictly


def test_an_envelope_asked_for_neither_is_unchanged_byte_for_byte() -> None:
    env = envelope_of([Result("a", 0.2, "qmd"), Result("b", 0.1, "qmd")])
    assert apply(env, Trim()).to_json() == env.to_json()
    assert apply(env, None) is env
    assert b"abstained" not in env.to_json() and b"budget" not in env.to_json()


def test_an_answer_that_reaches_the_floor_keeps_its_weak_hits() -> None:
    # The calibrated relevance falls with rank: the evidence is often a weak hit under a strong one.
    env = envelope_of([Result("strong", 0.45, "qmd"), Result("the evidence", 0.08, "qmd"), Result("c", 0.02, "qmd")])
    out = apply(env, Trim(min_relevance=0.2))
    assert out.to_json() == env.to_json()  # unchanged, byte for byte: no report, nothing dropped
    assert apply(env, Trim(min_relevance=0.45)).to_json() == env.to_json()  # at the floor is reaching it


def test_abstention_says_why_and_the_json_carries_it_after_the_spec_fields() -> None:
    env = envelope_of([Result("weak", 0.12, "qmd"), Result("weaker", 0.05, "qmd")], status="partial")
    data = orjson.loads(apply(env, Trim(min_relevance=0.3)).to_json())
    assert data["results"] == [] and data["result_count"] == 0 and data["status"] == "empty"
    assert data["abstained"] == {"min_relevance": 0.3, "best": 0.12, "dropped": 2}
    assert list(data)[-1] == "abstained" and list(data)[:15] == list(env.as_dict())


def test_a_first_hit_larger_than_the_budget_is_cut_to_it_not_dropped() -> None:
    env = envelope_of([Result("x" * 50, 0.9, "qmd"), Result("short", 0.8, "qmd")])
    out = apply(env, Trim(max_chars=20))
    assert [h.content for h in out.results] == ["x" * 20]
    assert out.budget == {"max_chars": 20, "kept": 1, "cut": 1, "chars": 20, "truncated": True}


def test_nothing_follows_a_first_hit_cut_to_the_budget_not_even_an_empty_one() -> None:
    env = envelope_of([Result("00", 0.9, "qmd"), Result("", 0.8, "qmd")])
    out = apply(env, Trim(max_chars=1))
    assert [h.content for h in out.results] == ["0"]
    assert out.budget == {"max_chars": 1, "kept": 1, "cut": 1, "chars": 1, "truncated": True}


def test_a_smaller_later_hit_does_not_jump_the_queue() -> None:
    env = envelope_of([Result("a" * 10, 0.9, "qmd"), Result("b" * 30, 0.8, "qmd"), Result("c", 0.7, "qmd")])
    out = apply(env, Trim(max_chars=25))
    assert [h.content for h in out.results] == ["a" * 10]
    assert out.budget == {"max_chars": 25, "kept": 1, "cut": 2, "chars": 10, "truncated": False}


def test_characters_are_code_points_not_bytes() -> None:
    env = envelope_of([Result("é" * 10, 0.9, "qmd"), Result("ü" * 10, 0.8, "qmd")])
    assert len(apply(env, Trim(max_chars=20)).results) == 2


def test_error_envelopes_are_never_touched() -> None:
    env = error_envelope("q", "ALL_BACKENDS_FAILED", "all failed")
    assert apply(env, Trim(min_relevance=0.5, max_chars=1)) is env


# ---------------------------------------------------------------------- the request's keys


def test_the_query_op_reads_min_relevance_and_max_chars() -> None:
    from memory_router.daemon.protocol import parse_request

    request = parse_request({"query": "q", "min_relevance": 0.3, "max_chars": 500})
    assert (request.min_relevance, request.max_chars, request.extra) == (0.3, 500, None)
    assert parse_request({"query": "q", "min_relevance": 1}).min_relevance == 1.0
    assert parse_request({"query": "q"}).min_relevance is None


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("min_relevance", 1.5, "a number from 0 to 1"),
        ("min_relevance", -0.1, "a number from 0 to 1"),
        ("min_relevance", "0.3", "a number from 0 to 1"),
        ("min_relevance", True, "a number from 0 to 1"),
        ("max_chars", 0, "an integer from 1 to 10000000"),
        ("max_chars", 2.5, "an integer from 1 to 10000000"),
    ],
)
def test_a_bad_floor_or_budget_is_an_invalid_request_naming_the_key(key: str, value: object, says: str) -> None:
    from memory_router.daemon.protocol import INVALID_REQUEST, BadRequest, parse_request

    with pytest.raises(BadRequest) as caught:
        parse_request({"id": 4, "query": "q", key: value})
    assert caught.value.code == INVALID_REQUEST and caught.value.id == 4
    assert f'"{key}" must be {says}' in caught.value.message


def test_the_cli_parser_takes_plain_decimals_only() -> None:
    from memory_router.client.invocation import QueryArgs, parse_query_args

    assert parse_query_args(["--min-relevance", "0.35", "--max-chars=800", "q"]) == QueryArgs(
        "q", min_relevance=0.35, max_chars=800
    )
    for odd in ("1e-1", "nan", "1.5", "-0.1", " 0.3"):
        assert parse_query_args(["--min-relevance", odd, "q"]) is None  # click parses and reports it
