"""Reliability round 3, items 6-10 of issue 22, through the real CLI and daemon processes:
non-UTF-8 bytes in names, a config cache whose body is bad or huge, a socket client that
disconnects mid-request, and ``--limit`` against a backend that ignores it. (Item 9, the Cognee
path that missed a hop, runs against the real Cognee server in
tests/adapters/test_cognee_relations.py.) Each test adds a row to the "Bounded work" section of
tests/FAULTS.md; docs/reliability-round3-b.md describes each item."""

from __future__ import annotations

import os
from pathlib import Path

from memory_router.envelope import Envelope

from ..faults_support import (
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
    run_cli,
    run_daemon,
    write_setup,
)


def row(key: str, case: str, transport: str, outcome: str, measured: str = "") -> None:
    report("bounded", key, case=case, transport=transport, outcome=outcome, measured=measured)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_"))}
    return {**env, "MEMORY_ROUTER_DAEMON": "off", **extra}


# --------------------------------------------------------------------------- 10. --limit


def test_limit_caps_the_results_of_a_backend_that_ignores_it(tmp_path: Path) -> None:
    state, config = write_setup(tmp_path, {"many": command_backend("many", "--count", "30")}, ["many"])
    args = ["--state-dir", str(state), "--config", str(config)]
    cli = run_cli(["query", "auth", "--limit", "1", *args], env=_env())
    assert cli.returncode == 0, cli.stderr
    envelope = cli.envelope
    Envelope.from_dict(envelope)
    # The backend printed 30 hits, its best one last: the router keeps that one only.
    assert [r["content"] for r in envelope["results"]] == ["hit 30 for auth"]
    assert envelope["result_count"] == 1 and envelope["attempts"][0]["result_count"] == 1
    assert envelope["normalized_relevance"] == envelope["results"][0]["relevance"] == 0.9

    daemon = run_daemon(args, [{"id": 1, "query": "auth", "limit": 3}, {"id": 2, "query": "auth"}])
    capped, default = daemon.responses
    assert [r["relevance"] for r in capped["results"]] == [0.9, 0.8867, 0.8733]
    assert capped["result_count"] == 3 and capped["normalized_relevance"] == 0.9
    # No --limit: the config's result_limit (10 here, the default) caps it.
    assert default["result_count"] == len(default["results"]) == 10
    row(
        "22.10-limit",
        "#22.10: `query auth --limit 1` answered by a command backend that prints 30 results (its best last)",
        "cli, daemon",
        "1 result, the best one (result_count 1, normalized_relevance 0.9); the daemon's `limit: 3` gives the "
        "3 best; no limit: result_limit (10)",
        "was: 30 results, result_count 30",
    )
