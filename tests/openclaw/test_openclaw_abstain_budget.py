"""Abstention and the text budget through the real OpenClaw (2026.9.6): the plugin's
``memory_search`` tool over the Gateway's /tools/invoke honours ``minScore`` (else the plugin's
``minRelevance``) and ``maxChars``, and says what it left out (``abstained``, ``floor``,
``budget``), as memory-router's own ``query --min-relevance / --max-chars`` does on the same
workspace; ``openclaw memory search`` applies the configured floor too. The configured floor
judges the answer (its best hit); a caller's ``minScore`` keeps memory-core's meaning, a floor on
each hit.

The setup is test_openclaw_e2e's (a copied install, memory-core disabled, the demo workspace),
with ``minRelevance: 0.3`` in the plugin's config so the default floor is visible on the demo.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._support import gateway_run, memory_router_bin, openclaw_missing, scratch_env, shipped_plugin
from .test_openclaw_e2e import Setup, gateway_ready, invoke, ok, openclaw

pytestmark = [pytest.mark.slow, pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or "")]

AUTH = "auth"  # Total Recall over the demo memory: ten hits from 0.71 down to 0.07
WEAK = "meeting notes"  # two hits, the best 0.27: under the floor below
FLOOR = 0.3  # the plugin config's minRelevance here (above the packaged default, openclaw.plugin.json)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    home = tmp_path_factory.mktemp("oc-trim")
    env = scratch_env(home)
    demo = home / "demo"
    subprocess.run(
        [str(memory_router_bin()), "demo", "--dir", str(demo)], env=env, check=True, capture_output=True, timeout=120
    )
    ok(openclaw(env, home, "plugins", "install", "--force", "--accept-capabilities", str(shipped_plugin(home))))
    config = {"stateDir": str(demo / "state"), "config": str(demo / "state" / "router-config.json")}
    settings = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {"path": "agents.defaults.workspace", "value": str(demo)},
        {"path": "plugins.entries.memory-router.config", "value": {**config, "minRelevance": FLOOR}},
    ]
    ok(openclaw(env, home, "config", "set", "--batch-json", json.dumps(settings), "--strict-json"))
    try:
        with gateway_run(env, home) as gw:
            yield Setup(home, demo, env, gw.port, gw.proc, gw.log)
    finally:  # the Gateway gone first: nothing starts the daemon again
        subprocess.run(
            [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(demo / "state")],
            env=env,
            capture_output=True,
            timeout=30,
            check=False,
        )


def router_query(setup: Setup, query: str, *flags: str) -> dict[str, Any]:
    """memory-router's own answer on the same workspace, as the plugin's agent (main)."""
    state: Path = setup.state
    proc = subprocess.run(
        [str(memory_router_bin()), "query", "--limit", "10", "--state-dir", str(state)]
        + ["--config", str(state / "router-config.json"), "--agent", "main", *flags, "--", query],
        env={**setup.env, "OPENCLAW_REPO_ROOT": str(setup.demo), "MEMORY_ROUTER_DAEMON": "off"},
        cwd=setup.demo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_configured_floor_returns_every_hit_of_an_answer_that_reaches_it(setup: Setup) -> None:
    gateway_ready(setup)
    plain = router_query(setup, AUTH)
    weak = [h for h in plain["results"] if h["relevance"] < FLOOR]
    assert weak and plain["results"][0]["relevance"] >= FLOOR, plain  # the demo's auth: hits on both sides of 0.3
    found = invoke(setup, "memory_search", {"query": AUTH, "maxResults": 10})
    # The floor judges the answer, not each hit: the weak ones stay (the evidence is often among them).
    assert [r["snippet"] for r in found["results"]] == [h["content"] for h in plain["results"]]
    assert "abstained" not in found and "floor" not in found


def test_the_configured_floor_abstains_when_the_best_hit_is_under_it(setup: Setup) -> None:
    gateway_ready(setup)
    plain = router_query(setup, WEAK)
    best = max((h["relevance"] for h in plain["results"]), default=None)
    assert best is not None and best < FLOOR, plain  # the demo's weak answer: every hit under 0.3
    found = invoke(setup, "memory_search", {"query": WEAK, "maxResults": 10})
    assert found["results"] == [] and "disabled" not in found  # an answer, not an outage
    assert found["abstained"]["min_relevance"] == FLOOR and found["abstained"]["dropped"] == len(plain["results"])
    assert abs(found["abstained"]["best"] - best) < 0.005
    assert found["routing"]["status"] == "empty"


def test_min_score_keeps_memory_cores_meaning_each_hit_under_it_dropped(setup: Setup) -> None:
    gateway_ready(setup)
    plain = router_query(setup, AUTH)
    strong = [h["content"] for h in plain["results"] if h["relevance"] >= FLOOR]
    found = invoke(setup, "memory_search", {"query": AUTH, "maxResults": 10, "minScore": FLOOR})
    assert found["results"] and all(r["score"] >= FLOOR for r in found["results"])
    assert [r["snippet"] for r in found["results"]] == strong  # the same hits, in the router's order
    assert found["floor"] == {"min_score": FLOOR, "dropped": len(plain["results"]) - len(strong)}
    assert "abstained" not in found


def test_min_score_above_every_hit_abstains_with_the_reason(setup: Setup) -> None:
    gateway_ready(setup)
    best = max(h["relevance"] for h in router_query(setup, AUTH)["results"])
    found = invoke(setup, "memory_search", {"query": AUTH, "minScore": 0.99})
    assert found["results"] == [] and "disabled" not in found  # an answer, not an outage
    assert found["abstained"]["min_relevance"] == 0.99 and found["abstained"]["dropped"] == 10
    assert abs(found["abstained"]["best"] - best) < 0.005
    assert found["routing"]["status"] == "empty"
    # minScore 0 drops nothing, and the weak answer the configured floor abstains on comes back.
    everything = invoke(setup, "memory_search", {"query": WEAK, "minScore": 0, "maxResults": 10})
    assert everything["results"] and "floor" not in everything and "abstained" not in everything


def test_max_chars_keeps_whole_hits_in_rank_order_within_the_budget(setup: Setup) -> None:
    gateway_ready(setup)
    found = invoke(setup, "memory_search", {"query": AUTH, "minScore": 0, "maxResults": 10})
    sizes = [len(r["snippet"]) for r in found["results"]]
    budget = sizes[0] + sizes[1] + sizes[2] - 1  # the third does not fit
    cut = invoke(setup, "memory_search", {"query": AUTH, "minScore": 0, "maxResults": 10, "maxChars": budget})
    assert [r["snippet"] for r in cut["results"]] == [r["snippet"] for r in found["results"][:2]]
    assert sum(len(r["snippet"]) for r in cut["results"]) <= budget
    assert cut["budget"] == {"max_chars": budget, "kept": 2, "cut": 8, "chars": sizes[0] + sizes[1], "truncated": False}
    own = router_query(setup, AUTH, "--min-relevance", "0", "--max-chars", str(budget))
    assert cut["budget"] == own["budget"]  # what memory-router itself says of the same budget


def test_openclaw_memory_search_applies_the_configured_floor(setup: Setup) -> None:
    proc = ok(openclaw(setup.env, setup.home, "memory", "search", "--json", "--max-results", "10", AUTH))
    assert len(json.loads(proc.stdout)["results"]) == len(router_query(setup, AUTH)["results"])  # whole
    proc = ok(openclaw(setup.env, setup.home, "memory", "search", "--json", "--max-results", "10", WEAK))
    answer = json.loads(proc.stdout)
    assert answer["results"] == [] and answer["abstained"]["min_relevance"] == FLOOR
    proc = ok(openclaw(setup.env, setup.home, "memory", "search", "--max-results", "10", WEAK))
    assert "under the floor 0.3" in proc.stdout  # the human-readable answer says why too
