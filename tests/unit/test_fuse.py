"""The opt-in fused strategy: every usable step at once, merged by reciprocal rank fusion."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import BackendRequest, BackendResponse, Result
from memory_router.backends.mock import BlockingMockBackend, Handler, MockBackend, answer, fail
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import parse_config, read_json
from memory_router.core.attempts import Attempt
from memory_router.core.envelope import ALL_BACKENDS_FAILED
from memory_router.core.fuse import RRF_K, fill_results, fuse_results
from memory_router.core.rules import ChainStep

from ..conftest import ALL_BACKENDS, STARTER, installed, make_router


def fused_config(**extra):
    data = {**read_json(packaged_config()), "strategy": "fuse", "calibration": "off", **extra}
    return parse_config(data, packaged_config())


def hits(source: str, *items: tuple[str, float]) -> Handler:
    def handler(request: BackendRequest) -> BackendResponse:
        results = [Result(text, rel, source, path=f"{text}.md") for text, rel in items]
        return BackendResponse.from_results(source, request.query, results)

    return handler


def route(router, query="database", tier=STARTER):
    return asyncio.run(router.route(query, installed(*tier)))


def test_fuse_asks_every_step_even_when_the_first_is_good_enough(tmp_path):
    qmd = MockBackend("qmd", answer(0.9))
    totalrecall = MockBackend("totalrecall", answer(0.8))
    envelope = route(make_router(fused_config(), tmp_path, {"qmd": qmd, "totalrecall": totalrecall}))
    assert len(qmd.requests) == len(totalrecall.requests) == 1
    assert [a["backend"] for a in envelope.attempts] == ["qmd", "totalrecall"]
    assert all(a["accepted"] for a in envelope.attempts)
    # Both answered the same text: one result, from the more relevant answer, naming the other.
    assert (envelope.status, envelope.fallbacks_used, envelope.result_count) == ("success", 0, 1)
    assert envelope.results[0].relevance == 0.9 and envelope.routed_to == "qmd"


def test_results_are_ordered_by_reciprocal_rank_and_duplicates_merged(tmp_path):
    qmd = MockBackend("qmd", hits("qmd", ("a", 0.9), ("shared", 0.5), ("b", 0.4)))
    totalrecall = MockBackend("totalrecall", hits("totalrecall", ("shared", 0.6), ("c", 0.3)))
    envelope = route(make_router(fused_config(), tmp_path, {"qmd": qmd, "totalrecall": totalrecall}))
    contents = [r.content for r in envelope.results]
    # Votes weighted by relevance: shared .5/(k+2) + .6/(k+1); a .9/(k+1); b .4/(k+3); c .3/(k+2)
    assert contents == ["shared", "a", "b", "c"]
    shared = envelope.results[0]
    assert (shared.source, shared.relevance, shared.extra["also_from"]) == ("totalrecall", 0.6, ["qmd"])
    assert (envelope.routed_to, envelope.routed_mode) == ("totalrecall", None)
    assert envelope.normalized_relevance == 0.9  # the best relevance in the merged list


def test_the_merged_list_is_cut_at_the_limit(tmp_path):
    qmd = MockBackend("qmd", hits("qmd", *((f"q{i}", 0.5) for i in range(8))))
    totalrecall = MockBackend("totalrecall", hits("totalrecall", *((f"t{i}", 0.5) for i in range(8))))
    router = make_router(fused_config(), tmp_path, {"qmd": qmd, "totalrecall": totalrecall})
    envelope = asyncio.run(router.route("database", installed(*STARTER), limit=5))
    assert envelope.result_count == len(envelope.results) == 5


def test_a_failing_step_is_logged_and_counted_while_the_others_answer(tmp_path):
    router = make_router(
        fused_config(),
        tmp_path,
        {
            "qmd": MockBackend("qmd", fail("BACKEND_ERROR", "boom")),
            "totalrecall": MockBackend("totalrecall", answer(0.3)),
        },
    )
    envelope = route(router)
    assert (envelope.status, envelope.routed_to, envelope.fallbacks_used) == ("partial", "totalrecall", 1)
    assert [a["accepted"] for a in envelope.attempts] == [False, True]
    log = (tmp_path / "state" / "router.log").read_text()
    assert "FALLBACK" in log and "backend=qmd" in log and 'error_message="boom"' in log


def test_all_steps_failing_is_the_specs_error_envelope(tmp_path):
    router = make_router(
        fused_config(),
        tmp_path,
        {"qmd": MockBackend("qmd", fail()), "totalrecall": MockBackend("totalrecall", fail())},
    )
    envelope = route(router)
    assert (envelope.status, envelope.error_code, envelope.results) == ("error", ALL_BACKENDS_FAILED, ())


def test_all_steps_empty_is_empty(tmp_path):
    router = make_router(
        fused_config(),
        tmp_path,
        {"qmd": MockBackend("qmd", answer()), "totalrecall": MockBackend("totalrecall", answer())},
    )
    assert route(router).status == "empty"


def test_a_slow_step_is_cut_by_its_timeout_without_holding_the_others(tmp_path):
    slow = MockBackend("qmd", answer(0.9, delay_s=5))
    router = make_router(
        fused_config(), tmp_path, {"qmd": slow, "totalrecall": MockBackend("totalrecall", answer(0.7))}
    )
    envelope = asyncio.run(router.route("database", installed(*STARTER), timeout_ms=200))
    assert envelope.attempts[0]["error_code"] == "QUERY_TIMEOUT"
    assert (envelope.routed_to, envelope.status) == ("totalrecall", "success")


def test_a_rule_can_fuse_while_the_rest_stay_sequential(tmp_path):
    data = read_json(packaged_config())
    data["rules"][-1]["strategy"] = "fuse"
    config = parse_config({**data, "calibration": "off", "strategy": "sequential"}, packaged_config())
    assert config.strategy == "sequential" and config.strategy_for("default") == "fuse"
    qmd, totalrecall = MockBackend("qmd", answer(0.9)), MockBackend("totalrecall", answer(0.9))
    router = make_router(
        config, tmp_path, {"qmd": qmd, "totalrecall": totalrecall, "lossless": MockBackend("lossless", answer())}
    )
    route(router, "database", ALL_BACKENDS)  # default rule: fused, every step asked
    assert len(totalrecall.requests) == 1
    route(router, "find the function parseAuthToken", ALL_BACKENDS)  # rule 1: sequential, qmd accepted
    assert len(totalrecall.requests) == 1


def test_the_one_shot_driver_fuses_alike(tmp_path):
    def backends():
        return {
            "qmd": BlockingMockBackend("qmd", hits("qmd", ("a", 0.9), ("b", 0.2))),
            "totalrecall": BlockingMockBackend("totalrecall", hits("totalrecall", ("b", 0.5))),
        }

    blocking = make_router(fused_config(), tmp_path, backends()).route_blocking("database", installed(*STARTER))
    awaited = route(make_router(fused_config(), tmp_path, backends()))
    for envelope in (blocking, awaited):
        assert [r.content for r in envelope.results] == ["a", "b"]  # .9/(k+1) beats .2/(k+2) + .5/(k+1)
    assert blocking.as_dict() | {
        "router_duration_ms": 0,
        "backend_duration_ms": 0,
        "attempts": [],
    } == awaited.as_dict() | {
        "router_duration_ms": 0,
        "backend_duration_ms": 0,
        "attempts": [],
    }


texts = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6)


@given(st.lists(texts, min_size=1, max_size=4), st.integers(1, 10))
def test_fused_results_are_unique_capped_and_ordered_by_their_rrf_score(answers, limit):
    attempts = []
    for i, items in enumerate(answers):
        results = tuple(Result(t, 0.5, f"b{i}") for t in items)
        response = BackendResponse(
            query_echo="q", results=results, result_count=len(results), status="success", backend=f"b{i}"
        )
        attempts.append(Attempt(ChainStep(f"b{i}"), response, 1, True))
    merged, top = fuse_results(attempts, limit)
    contents = [r.content for r in merged]
    assert len(contents) == len(set(contents)) == min(limit, len(set().union(*map(set, answers))))

    def score(text):
        return sum(0.5 / (RRF_K + items.index(text) + 1) for items in answers if text in items)

    scores = [score(c) for c in contents]
    assert scores == sorted(scores, reverse=True)
    if merged:
        assert top is not None and merged[0].source == top.step.backend
        assert all(set(r.extra.get("also_from", [])) <= {f"b{i}" for i in range(len(answers))} for r in merged)
    else:
        assert top is None


# Every character Python's text patterns take for a space (re's \s up to U+3000: tabs, the ASCII separators
# \x1c-\x1f, NEL, no-break and ideographic spaces...).
SPACES = "".join(chr(c) for c in range(0x3001) if re.fullmatch(r"\s", chr(c)))


@given(st.lists(st.sampled_from(["Decision:", "UUID", "v7", "keys"]), min_size=1, max_size=4), st.data())
def test_texts_that_differ_only_in_spacing_and_case_are_one_memory(words, data):
    """Two backends' hits with no path are merged when their texts differ only in where and which
    spaces they have and in case (a summary and the message it quotes); any other difference keeps
    them apart."""
    gap = st.text(SPACES, min_size=1, max_size=3)
    spaced = data.draw(st.sampled_from(["", *SPACES]))  # leading spaces too
    for word in words:
        spaced += word + data.draw(gap)
    plain = " ".join(words)
    attempts = [
        Attempt(ChainStep(b), BackendResponse.from_results(b, "q", [Result(text, 0.5, b)]), 1, True)
        for b, text in (("lossless", plain), ("totalrecall", spaced.upper()))
    ]
    merged, _ = fuse_results(attempts, 10)
    assert [r.content for r in merged] == [plain] and merged[0].extra["also_from"] == ["totalrecall"]
    attempts[1] = Attempt(
        ChainStep("totalrecall"),
        BackendResponse.from_results("totalrecall", "q", [Result(spaced + "s", 0.5, "totalrecall")]),
        1,
        True,
    )
    assert len(fuse_results(attempts, 10)[0]) == 2


@pytest.mark.parametrize("value", ["fuse", "sequential"])
def test_route_shows_the_strategy(tmp_path, value):
    config = fused_config(strategy=value)
    assert config.strategy_for("default") == value


def test_the_packaged_strategy_fills_and_the_spec_table_walks_as_the_spec_does():
    data = read_json(packaged_config())
    packaged = parse_config(data, packaged_config())
    assert {packaged.strategy_for(rule.id) for rule in packaged.rules.rules} == {"fill"}
    spec = parse_config({**data, "table": "spec"}, packaged_config())
    assert {spec.strategy_for(rule.id) for rule in spec.rules.rules} == {"sequential"}
    # A fuse asked for on purpose stays a fuse, whatever the table.
    assert (
        parse_config({**data, "table": "spec", "strategy": "fuse"}, packaged_config()).strategy_for("default") == "fuse"
    )


def answered(backend: str, *results: Result) -> Attempt:
    return Attempt(ChainStep(backend), BackendResponse.from_results(backend, "q", list(results)), 1, True)


TURN = "I adopted a greyhound called Biscuit from the shelter on Elm Street last spring."
NOTE = (
    '# Session: 2026-11-02\n\nuser: "We should plan the garden."\nassistant: "Sure."\n'
    f'user: "By the way, {TURN}\\n\\nShe loves long walks."\n'
)


def test_a_turn_the_note_above_it_quotes_gives_its_slot_to_the_next_evidence():
    """Lossless's turn and the session note that quotes it (JSON-escaped, as OpenClaw's hook
    writes it) are one piece of evidence: the turn is folded into the note, and the list's last
    slot goes to the next result instead."""
    attempts = [
        answered("totalrecall", Result(NOTE, 0.7, "totalrecall", path="memory/2026-11-02-0914.md", line=3)),
        answered(
            "lossless",
            Result(TURN, 0.5, "lossless", message_id=7),
            Result("We moved the standup to 9:30 on Mondays.", 0.4, "lossless", message_id=9),
        ),
    ]
    merged, _ = fuse_results(attempts, 2)
    assert [r.source for r in merged] == ["totalrecall", "lossless"]
    assert merged[1].content.startswith("We moved the standup")
    assert merged[0].extra["also_from"] == ["lossless"]
    filled = fill_results(merged[0], attempts, 2)
    assert [r.content for r in filled] == [NOTE, "We moved the standup to 9:30 on Mondays."]


def test_one_backends_own_results_and_short_texts_are_never_folded():
    same = [
        answered("lossless", Result(NOTE, 0.7, "lossless", message_id=1), Result(TURN, 0.5, "lossless", message_id=2))
    ]
    assert len(fuse_results(same, 10)[0]) == 2  # a summary and the message it quotes: both the store's own answer
    short = [
        answered("totalrecall", Result(NOTE, 0.7, "totalrecall", path="n.md")),
        answered("lossless", Result("Biscuit", 0.5, "lossless")),
    ]
    assert [r.content for r in fuse_results(short, 10)[0]] == [NOTE, "Biscuit"]  # four words or fewer: a coincidence


words = st.lists(st.sampled_from("alpha beta gamma delta eps zeta eta theta".split()), min_size=0, max_size=14)


@given(st.lists(st.lists(words, max_size=4), min_size=1, max_size=3), st.integers(1, 8))
def test_no_result_repeats_what_another_backends_result_above_it_shows(answers, limit):
    """Whatever the backends return: the list is capped, and no result of five words or more says
    nothing but what a result above it from another backend says (its words, in order, inside
    that one's); every result left out of a list that is not full was folded into one that names
    its backend in ``also_from``."""
    attempts = [
        answered(
            f"b{i}",
            *(
                Result(" ".join(w) or f"empty {i} {j}", 0.5, f"b{i}", line=j, path=f"b{i}.md")
                for j, w in enumerate(items)
            ),
        )
        for i, items in enumerate(answers)
    ]
    merged, _ = fuse_results(attempts, limit)
    assert len(merged) <= limit
    for k, hit in enumerate(merged):
        mine = f" {hit.content} "
        if len(hit.content.split()) >= 5:
            assert not any(a.source != hit.source and mine in f" {a.content} " for a in merged[:k])
    if len(merged) < limit:
        shown = {(r.source, r.extra["path"], r.extra["line"]) for r in merged}
        for attempt in attempts:
            for r in attempt.response.results:
                if (r.source, r.extra["path"], r.extra["line"]) not in shown:
                    assert any(r.source in m.extra.get("also_from", ()) for m in merged)
