"""``query --min-relevance`` / ``--max-chars`` and the query op's ``min_relevance`` / ``max_chars``,
through real processes: the in-process CLI, the thin client over ``serve --socket`` and a raw
socket request give the same trimmed answer, with ``abstained`` / ``budget`` saying what was left
out (memory_router/core/trim.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from memory_router.client import thin as client

from ..support.client import assert_same_answer
from .test_client_daemon import Workspace, stop

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

QUERY = "auth"  # Total Recall over the demo memory: several hits of different relevance
OFF = {"MEMORY_ROUTER_DAEMON": "off"}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("trim"))


@pytest.fixture(scope="module")
def daemon(ws: Workspace) -> Iterator[subprocess.Popen[bytes]]:
    proc = ws.serve()
    yield proc
    stop(proc)


@pytest.fixture(scope="module")
def plain(ws: Workspace) -> dict:
    answer = ws.query(QUERY, env=OFF)
    assert answer.code == 0, answer.stderr
    envelope = answer.envelope
    assert len(envelope["results"]) >= 3, envelope  # the cases below need a few hits
    return envelope


def test_a_floor_above_every_hit_abstains_and_says_why(ws: Workspace, plain: dict) -> None:
    best = max(h["relevance"] for h in plain["results"])
    floor = round(min(1.0, best + 0.01), 4)
    answer = ws.query(QUERY, "--min-relevance", str(floor), env=OFF)
    assert answer.code == 0, answer.stderr
    env = answer.envelope
    assert env["results"] == [] and env["result_count"] == 0 and env["status"] == "empty"
    assert env["abstained"]["min_relevance"] == floor and env["abstained"]["dropped"] == len(plain["results"])
    assert abs(env["abstained"]["best"] - best) < 2e-4
    assert list(env)[: len(plain)] == list(plain) and list(env)[-1] == "abstained"
    assert env["routed_to"] == plain["routed_to"] and env["rule"] == plain["rule"]  # the rest is unchanged


def test_a_floor_the_best_hit_reaches_keeps_the_whole_answer(ws: Workspace, plain: dict) -> None:
    scores = sorted({h["relevance"] for h in plain["results"]})
    floor = round((scores[0] + scores[-1]) / 2, 4)  # between the hits: weaker ones under it
    assert any(h["relevance"] < floor for h in plain["results"])
    env = ws.query(QUERY, "--min-relevance", str(floor), env=OFF).envelope
    assert_same_answer(env, plain)  # every hit, the weak ones too: the floor judges the answer
    assert "abstained" not in env and "floor" not in env


def test_a_floor_of_zero_and_a_roomy_budget_change_nothing(ws: Workspace, plain: dict) -> None:
    env = ws.query(QUERY, "--min-relevance", "0", "--max-chars", "10000000", env=OFF).envelope
    assert_same_answer(env, plain)


def test_the_budget_keeps_whole_hits_in_rank_order_and_says_what_was_cut(ws: Workspace, plain: dict) -> None:
    sizes = [len(h["content"]) for h in plain["results"]]
    budget = sizes[0] + sizes[1]  # room for exactly the first two
    env = ws.query(QUERY, "--max-chars", str(budget), env=OFF).envelope
    assert [h["content"] for h in env["results"]] == [h["content"] for h in plain["results"][:2]]
    assert env["budget"] == {
        "max_chars": budget,
        "kept": 2,
        "cut": len(sizes) - 2,
        "chars": budget,
        "truncated": False,
    }
    tiny = ws.query(QUERY, "--max-chars", "5", env=OFF).envelope
    assert [h["content"] for h in tiny["results"]] == [plain["results"][0]["content"][:5]]
    assert tiny["budget"]["truncated"] is True and tiny["budget"]["chars"] == 5


def test_the_daemon_answers_the_same_trimmed_envelope(
    ws: Workspace, plain: dict, daemon: subprocess.Popen[bytes]
) -> None:
    sizes = [len(h["content"]) for h in plain["results"]]
    floor = round(sorted(h["relevance"] for h in plain["results"])[1], 4)
    args = (QUERY, "--min-relevance", str(floor), "--max-chars", str(sizes[0] + 1))
    warm = ws.query(*args)
    assert warm.code == 0 and warm.by_daemon, warm.stderr
    cold = ws.query(*args, env=OFF)
    assert not cold.by_daemon
    assert_same_answer(warm.envelope, cold.envelope, "daemon vs in-process")
    assert "budget" in warm.envelope


def test_the_socket_op_takes_the_keys_and_refuses_bad_values(
    ws: Workspace, plain: dict, daemon: subprocess.Popen[bytes]
) -> None:
    with client.Connection(str(ws.socket)) as conn:
        conn.hello()
        conn.send(json.dumps({"id": 1, "query": QUERY, "min_relevance": 1.0, "max_chars": 100}).encode())
        answer = json.loads(conn.receive(60))
        assert answer["id"] == 1 and answer["results"] == []
        assert answer["abstained"]["min_relevance"] == 1.0 or plain["results"][0]["relevance"] == 1.0
        conn.send(json.dumps({"id": 2, "query": QUERY, "max_chars": 0}).encode())
        bad = json.loads(conn.receive(60))
        assert bad["status"] == "error" and bad["error_code"] == "INVALID_REQUEST"
        assert '"max_chars" must be an integer from 1' in bad["error_message"]


def test_a_bad_value_on_the_command_line_is_a_usage_error(ws: Workspace) -> None:
    answer = ws.query(QUERY, "--min-relevance", "1.5", env=OFF)
    assert answer.code == 2 and "--min-relevance" in answer.stderr
    answer = ws.query(QUERY, "--max-chars", "0", env=OFF)
    assert answer.code == 2 and "--max-chars" in answer.stderr
