"""The fallback state machine, driven directly: no backend, no event loop, no clock but ours.

Each case is a chain, what each call answers, and the time the driver reports; the machine says
which calls to make, with which timeouts, what router.log must say and what the envelope is.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memory_router.backends.base import BACKEND_ERROR, QUERY_TIMEOUT, BackendResponse, Result
from memory_router.core.attempts import COOLDOWN, DEADLINE_EXCEEDED, Policy
from memory_router.core.calibration import NATIVE, Calibration, Model
from memory_router.core.cooldown import Cooldown
from memory_router.core.fallback import Call, Fallback, LogEvent, Outcome
from memory_router.core.plan import Plan
from memory_router.core.rules import ChainStep, Rule, RuleMatch

STEPS = (ChainStep("qmd", "query"), ChainStep("totalrecall"), ChainStep("lossless", None, True))


def plan(steps: Sequence[ChainStep] = STEPS) -> Plan:
    rule = Rule(7, "default", "", (), (), tuple(steps))
    return Plan(RuleMatch(rule, "default", None, None, None), tuple(steps), ())


def good(backend: str, relevance: float, n: int = 1) -> BackendResponse:
    hits = [Result(f"{backend} hit {i}", relevance, backend) for i in range(n)]
    return BackendResponse.from_results(backend, "q", hits)


def error(backend: str, code: str = BACKEND_ERROR, message: str = "boom") -> BackendResponse:
    return BackendResponse.failure(backend, "q", code, message)


def empty(backend: str) -> BackendResponse:
    return BackendResponse.from_results(backend, "q", [])


class FakeClock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def run(machine: Fallback, answers: dict[str, BackendResponse], clock: FakeClock, spend: float = 0.0) -> list[Call]:
    """Drive ``machine`` as a driver would, each call costing ``spend`` seconds of the fake clock."""
    made: list[Call] = []
    while calls := machine.next_calls(clock()):
        made.extend(calls)
        clock.now += spend
        machine.receive([(answers[c.backend], int(spend * 1000)) for c in calls])
    return made


@pytest.mark.parametrize(
    ("answers", "called", "status", "routed_to", "events"),
    [
        # The first answer at or above the threshold is accepted: nothing after it is called.
        ({"qmd": good("qmd", 0.8)}, ["qmd"], "success", "qmd", []),
        # Low relevance and empty move on quietly; the extension step is the last resort.
        (
            {"qmd": good("qmd", 0.2), "totalrecall": empty("totalrecall"), "lossless": good("lossless", 0.5)},
            ["qmd", "totalrecall", "lossless"],
            "success",
            "lossless",
            [],
        ),
        # Nothing good enough: the best answer across attempts, partial.
        (
            {"qmd": good("qmd", 0.3), "totalrecall": good("totalrecall", 0.35), "lossless": empty("lossless")},
            ["qmd", "totalrecall", "lossless"],
            "partial",
            "totalrecall",
            [],
        ),
        # An error logs a FALLBACK line naming the next backend, a timeout a TIMEOUT line.
        (
            {
                "qmd": error("qmd"),
                "totalrecall": error("totalrecall", QUERY_TIMEOUT, ""),
                "lossless": error("lossless"),
            },
            ["qmd", "totalrecall", "lossless"],
            "error",
            None,
            [
                ("fallback", "qmd", "totalrecall"),
                ("timeout", "totalrecall", "lossless"),
                ("fallback", "lossless", None),
            ],
        ),
        # Errors and empties only: empty, not error.
        (
            {"qmd": error("qmd"), "totalrecall": empty("totalrecall"), "lossless": empty("lossless")},
            ["qmd", "totalrecall", "lossless"],
            "empty",
            None,
            [("fallback", "qmd", "totalrecall")],
        ),
    ],
)
def test_the_sequential_walk(answers, called, status, routed_to, events):
    clock = FakeClock()
    machine = Fallback("q", plan(), Policy(threshold=0.4, timeout_s=5.0), now=clock())
    made = run(machine, answers, clock)
    assert [c.backend for c in made] == called
    assert all(c.timeout_s == 5.0 and c.request.limit == 10 for c in made)
    envelope = machine.envelope(router_ms=7)
    assert (envelope.status, envelope.routed_to) == (status, routed_to)
    assert envelope.fallbacks_used == sum(1 for a in envelope.attempts if not a["accepted"])
    assert [(e.kind, e.backend, e.next) for e in machine.events] == events


def test_the_deadline_cuts_the_timeout_then_stops_the_chain():
    clock = FakeClock(10.0)
    machine = Fallback("q", plan(), Policy(timeout_s=5.0, deadline_s=7.0), now=clock())
    first = machine.next_calls(clock())
    assert [(c.backend, c.timeout_s) for c in first] == [("qmd", 5.0)]
    clock.now += 5.0
    machine.receive([(error("qmd", QUERY_TIMEOUT, "slow"), 5000)])
    second = machine.next_calls(clock())
    assert [c.backend for c in second] == ["totalrecall"]
    assert [c.timeout_s for c in second] == pytest.approx([2.0])  # cut to the rest
    clock.now += 2.0
    machine.receive([(error("totalrecall", QUERY_TIMEOUT, "slow"), 2000)])
    assert machine.next_calls(clock()) == ()
    codes = [a.response.error_code for a in machine.attempts]
    assert codes == [QUERY_TIMEOUT, DEADLINE_EXCEEDED]  # the cut call says the deadline did it; lossless never ran
    envelope = machine.envelope(router_ms=7000)
    assert (envelope.status, envelope.error_code) == ("error", DEADLINE_EXCEEDED)
    assert [(e.kind, e.next) for e in machine.events] == [("timeout", "totalrecall"), ("timeout", None)]


def test_a_deadline_spent_before_a_step_records_it_as_not_tried():
    clock = FakeClock(0.0)
    machine = Fallback("q", plan(), Policy(timeout_s=5.0, deadline_s=1.0), now=clock())
    run(machine, {"qmd": good("qmd", 0.1)}, clock, spend=1.5)
    attempts = machine.attempts
    assert [a.step.backend for a in attempts] == ["qmd", "totalrecall"]
    assert attempts[1].response.error_code == DEADLINE_EXCEEDED
    assert attempts[1].response.error_message is not None
    assert "not tried" in attempts[1].response.error_message
    assert machine.envelope(1500).status == "partial"  # qmd's answer is still the best found


def test_a_backend_cooling_down_is_skipped_and_its_failures_counted():
    clock = FakeClock()
    cooldown = Cooldown(failures=1, seconds=30.0, clock=clock)
    for expected in (["qmd", "totalrecall"], ["totalrecall"]):
        machine = Fallback("q", plan(STEPS[:2]), Policy(), now=clock(), cooldown=cooldown)
        made = run(machine, {"qmd": error("qmd"), "totalrecall": good("totalrecall", 0.9)}, clock)
        assert [c.backend for c in made] == expected
    assert machine.attempts[0].response.error_code == COOLDOWN  # the second query skipped qmd
    clock.now += 31.0  # cooled down: one trial call
    machine = Fallback("q", plan(STEPS[:2]), Policy(), now=clock(), cooldown=cooldown)
    assert [c.backend for c in run(machine, {"qmd": good("qmd", 0.9)}, clock)] == ["qmd"]


def test_a_cancelled_query_gives_its_cooldown_slot_back():
    clock = FakeClock()
    cooldown = Cooldown(failures=1, seconds=1.0, clock=clock)
    Fallback("q", plan(STEPS[:1]), Policy(), now=clock(), cooldown=cooldown)  # nothing admitted yet
    first = Fallback("q", plan(STEPS[:1]), Policy(), now=clock(), cooldown=cooldown)
    run(first, {"qmd": error("qmd")}, clock)
    clock.now += 2.0
    trial = Fallback("q", plan(STEPS[:1]), Policy(), now=clock(), cooldown=cooldown)
    assert trial.next_calls(clock())  # the trial call is out
    other = Fallback("q", plan(STEPS[:1]), Policy(), now=clock(), cooldown=cooldown)
    assert other.next_calls(clock()) == ()  # ... so another query skips qmd meanwhile
    trial.cancel()
    again = Fallback("q", plan(STEPS[:1]), Policy(), now=clock(), cooldown=cooldown)
    assert again.next_calls(clock())  # the slot came back


def test_fuse_asks_every_step_in_one_batch_and_merges():
    clock = FakeClock()
    machine = Fallback("q", plan(), Policy(limit=3), now=clock(), strategy="fuse")
    calls = machine.next_calls(clock())
    assert [c.backend for c in calls] == ["qmd", "totalrecall", "lossless"]
    machine.receive([(good("qmd", 0.3, 2), 5), (error("totalrecall"), 3), (good("lossless", 0.6, 2), 9)])
    assert machine.next_calls(clock()) == ()
    envelope = machine.envelope(router_ms=10)
    assert envelope.status == "success" and envelope.result_count == 3
    assert (envelope.routed_to, envelope.fallbacks_used, envelope.backend_duration_ms) == ("lossless", 1, 9)
    assert [a["accepted"] for a in envelope.attempts] == [True, False, True]
    assert machine.events == [LogEvent("fallback", "totalrecall", BACKEND_ERROR, "boom", 3, "lossless")]


def test_fill_decides_as_the_spec_walk_and_fills_the_winners_list_from_every_step():
    clock = FakeClock()
    machine = Fallback("q", plan(), Policy(limit=4), now=clock(), strategy="fill")
    calls = machine.next_calls(clock())
    assert [c.backend for c in calls] == ["qmd", "totalrecall", "lossless"]  # all at once
    answers = [(good("qmd", 0.2, 2), 5), (good("totalrecall", 0.7, 2), 3), (good("lossless", 0.9, 3), 9)]
    machine.receive(answers)
    assert machine.next_calls(clock()) == ()
    envelope = machine.envelope(router_ms=10)
    # The walk would have stopped at Total Recall (the first answer at the threshold), although
    # Lossless scored higher: the winner, status and relevance are the sequential ones ...
    assert (envelope.routed_to, envelope.status, envelope.normalized_relevance) == ("totalrecall", "success", 0.7)
    assert envelope.fallbacks_used == 1  # qmd, as the walk counts it
    # ... its first result leads, and the rest of the list is every step's results, fused.
    assert envelope.results[0].content == "totalrecall hit 0"
    assert len(envelope.results) == 4 and len({r.content for r in envelope.results}) == 4
    assert {r.source for r in envelope.results[1:]} >= {"lossless"}
    assert len(envelope.attempts) == 3


def test_fill_with_no_answer_good_enough_keeps_the_best_as_partial_and_errors_as_the_walk_does():
    clock = FakeClock()
    machine = Fallback("q", plan(), Policy(limit=3), now=clock(), strategy="fill")
    run(
        machine,
        {"qmd": good("qmd", 0.1), "totalrecall": good("totalrecall", 0.3), "lossless": error("lossless")},
        clock,
    )
    envelope = machine.envelope(router_ms=1)
    assert (envelope.status, envelope.routed_to) == ("partial", "totalrecall")
    assert envelope.results[0].content == "totalrecall hit 0"
    assert [e.backend for e in machine.events] == ["lossless"]
    failed = Fallback("q", plan(), Policy(), now=clock(), strategy="fill")
    run(failed, {b: error(b) for b in ("qmd", "totalrecall", "lossless")}, clock)
    assert failed.envelope(router_ms=1).status == "error"


def test_calibration_is_applied_before_the_verdict():
    clock = FakeClock()
    # qmd's map says its native score predicts little here; totalrecall's outcome names no map (a
    # backend without one is taken at its word). The driver hands each outcome's key in.
    maps = Calibration({"qmd:query": Model(intercept=-5.0, native=0.0, coverage=0.0, rank=0.0)}, "test")
    machine = Fallback("database schema", plan(STEPS[:2]), Policy(threshold=0.4), now=clock(), calibration=maps)
    assert machine.calibrating
    answers = {"qmd": good("qmd", 0.6), "totalrecall": good("totalrecall", 0.9)}
    keys = {"qmd": "qmd:query", "totalrecall": None}
    made: list[Call] = []
    while calls := machine.next_calls(clock()):
        made.extend(calls)
        machine.receive([Outcome(answers[c.backend], 1, keys[c.backend]) for c in calls])
    assert [c.backend for c in made] == ["qmd", "totalrecall"]  # 0.6 -> 0.007: not good enough any more
    assert machine.envelope(1).routed_to == "totalrecall"


def test_a_machine_without_active_maps_asks_for_no_keys():
    clock = FakeClock()
    assert not Fallback("q", plan(), Policy(), now=clock()).calibrating
    assert not Fallback("q", plan(), Policy(), now=clock(), calibration=NATIVE).calibrating


def test_the_protocol_is_enforced():
    clock = FakeClock()
    machine = Fallback("q", plan(), Policy(), now=clock())
    machine.next_calls(clock())
    with pytest.raises(RuntimeError, match="before receive"):
        machine.next_calls(clock())
    with pytest.raises(ValueError, match="expected 1 outcomes, got 2"):
        machine.receive([(empty("qmd"), 1), (empty("qmd"), 1)])


def test_the_echo_is_the_users_text_and_the_backends_get_the_normalised_query():
    clock = FakeClock()
    machine = Fallback("auth  token", plan(STEPS[:1]), Policy(), now=clock(), echo="  auth\ttoken ")
    (call,) = machine.next_calls(clock())
    assert call.request.query == "auth  token"
    machine.receive([(good("qmd", 0.9), 1)])
    assert machine.envelope(1).query_echo == "  auth\ttoken "
