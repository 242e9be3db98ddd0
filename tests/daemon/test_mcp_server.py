"""``memory-router mcp`` driven by the official MCP SDK's own stdio client, as an MCP host would.

The SDK is the ``mcp`` extra, installed in CI by .ci/setup.d/10-python-extras.sh. Outside CI a
checkout without it skips these tests; in CI a missing SDK is a failure, not a skip.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..support.client import assert_same_answer, run_cli, starter_workspace

REPO = Path(__file__).resolve().parents[2]

# Looked up, not imported: the SDK takes ~1 s to import, which every collection, the fast tier's
# too, would pay for these slow tests; with_session imports it.
if importlib.util.find_spec("mcp") is None:
    if os.environ.get("CI"):
        raise ImportError("CI must have the mcp extra: pip install -e '.[mcp]' (.ci/setup.d/10-python-extras.sh)")
    pytest.skip("the mcp extra is not installed: pip install -e '.[mcp]'", allow_module_level=True)
if TYPE_CHECKING:
    from mcp import ClientSession

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    return starter_workspace(tmp_path / "demo")


def with_session(
    args: list[str], body: Callable[[ClientSession], Awaitable[Any]], env: dict[str, str] | None = None
) -> Any:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_router", "mcp", *args],
        env={"MEMORY_ROUTER_DAEMON": "off", **(env or {})},
    )

    async def run() -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

    return asyncio.run(asyncio.wait_for(run(), timeout=60))


def test_tools_are_listed_with_schemas(workspace: tuple[Path, Path]) -> None:
    state, config = workspace

    async def body(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in with_session(["--state-dir", str(state), "--config", str(config)], body)}
    assert set(tools) == {"memory_query", "memory_route"}
    query_schema = tools["memory_query"].input_schema
    assert query_schema["required"] == ["query"]
    assert set(query_schema["properties"]) == {
        "query",
        "limit",
        "timeout_ms",
        "scope",
        "min_relevance",
        "max_chars",
        "since",
        "until",
    }
    assert tools["memory_route"].input_schema["required"] == ["query"]
    assert "envelope" in tools["memory_query"].description


def test_tools_carry_read_only_safety_annotations(workspace: tuple[Path, Path]) -> None:
    """Hosts (OpenClaw's `mcp doctor`, approval postures) read these hints from tools/list: without
    them every memory lookup asks the user for approval."""
    state, config = workspace

    async def body(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    for tool in with_session(["--state-dir", str(state), "--config", str(config)], body):
        hints = tool.annotations
        assert hints is not None, tool.name
        assert (hints.read_only_hint, hints.idempotent_hint, hints.open_world_hint, hints.destructive_hint) == (
            True,
            True,
            False,
            False,
        ), tool.name


def test_memory_query_returns_the_cli_envelope_and_memory_route_the_plan(workspace: tuple[Path, Path]) -> None:
    state, config = workspace
    flags = ["--state-dir", str(state), "--config", str(config)]
    queries = [
        "find the function parseAuthToken",
        "why did we do it that way",
        "zzzqqq xxyyzz",
        "that thing with the tokens",
    ]

    async def body(session: ClientSession) -> Any:
        out = []
        for q in queries:
            queried = await session.call_tool("memory_query", {"query": q, "limit": 2})
            routed = await session.call_tool("memory_route", {"query": q})
            out.append((queried, routed))
        return out

    answers = with_session(flags, body)
    for q, (queried, routed) in zip(queries, answers, strict=True):
        assert not queried.is_error and not routed.is_error
        cli_env = json.loads(run_cli("query", q, "--limit", "2", *flags, env={"MEMORY_ROUTER_DAEMON": "off"}).stdout)
        assert_same_answer(queried.structured_content, cli_env, q)
        # The text content is the same envelope, for hosts that only read text.
        assert json.loads(queried.content[0].text) == queried.structured_content
        cli_plan = json.loads(run_cli("route", "--json", q, *flags).stdout)
        plan = routed.structured_content
        assert {k: plan[k] for k in cli_plan} == cli_plan  # the CLI's dry run, plus:
        assert plan["query_echo"] == q and plan["cooldown"] == {}
    statuses = [q.structured_content["status"] for q, _ in answers]
    assert statuses == ["success", "partial", "empty", "success"]


def test_memory_query_abstains_under_min_relevance_and_budgets_max_chars(workspace: tuple[Path, Path]) -> None:
    state, config = workspace
    flags = ["--state-dir", str(state), "--config", str(config)]

    async def body(session: ClientSession) -> Any:
        plain = await session.call_tool("memory_query", {"query": "auth"})
        floored = await session.call_tool("memory_query", {"query": "auth", "min_relevance": 1.0})
        budgeted = await session.call_tool("memory_query", {"query": "auth", "max_chars": 40})
        bad = await session.call_tool("memory_query", {"query": "auth", "min_relevance": 2})
        return plain, floored, budgeted, bad

    plain, floored, budgeted, bad = with_session(flags, body)
    hits = plain.structured_content["results"]
    assert hits and all(h["relevance"] < 1.0 for h in hits)
    env = floored.structured_content
    assert env["results"] == [] and env["status"] == "empty"
    assert env["abstained"] == {"min_relevance": 1.0, "best": env["abstained"]["best"], "dropped": len(hits)}
    cut = budgeted.structured_content
    assert sum(len(h["content"]) for h in cut["results"]) <= 40 and cut["budget"]["max_chars"] == 40
    assert bad.is_error and "min_relevance" in bad.content[0].text


def test_memory_query_s_scope_reads_only_that_agent_s_conversations(tmp_path: Path) -> None:
    """One lcm.db holding alice's and bob's conversations (issue 30): memory_query with a scope
    answers each agent from its own, and one agent's session key cannot speak for another."""
    import orjson

    from ..support.lcm_fixtures import ALICE_SAYS, BOB_SAYS, HOUSE, build_two_agents_db

    db = build_two_agents_db(tmp_path / "lcm.db")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "backends.json").write_bytes(orjson.dumps({"backends": {"lossless": {"status": "ready"}}}))
    config = state / "router-config.json"
    chain = [{"backend": "lossless"}]
    backends = {"lossless": {"type": "lossless", "db_path": str(db)}}
    config.write_bytes(orjson.dumps({"rules": [{"number": 7, "id": "default", "chain": chain}], "backends": backends}))

    async def body(session: ClientSession) -> Any:
        asked = {}
        for name, scope in (
            ("alice", {"agent": "alice"}),
            ("bob", {"agent": "bob"}),
            ("bob's key", {"session_key": "agent:bob:main"}),
            ("crossed", {"agent": "alice", "session_key": "agent:bob:main"}),
        ):
            asked[name] = (await session.call_tool("memory_query", {"query": HOUSE, "scope": scope})).structured_content
        return asked

    asked = with_session(["--state-dir", str(state), "--config", str(config)], body)

    def texts(name: str) -> str:
        return "\n".join(r["content"] for r in asked[name]["results"])

    assert ALICE_SAYS in texts("alice") and BOB_SAYS not in texts("alice")
    for bob in ("bob", "bob's key"):
        assert BOB_SAYS in texts(bob) and "sell the house" not in texts(bob), asked[bob]
    assert asked["crossed"]["error_code"] == "INVALID_SCOPE" and asked["crossed"]["results"] == []


def test_bad_input_is_an_answer_not_a_crash(workspace: tuple[Path, Path]) -> None:
    state, config = workspace

    async def body(session: ClientSession) -> Any:
        empty = await session.call_tool("memory_query", {"query": "   "})
        too_long = await session.call_tool("memory_query", {"query": "x" * 5000})
        bad_limit = await session.call_tool("memory_query", {"query": "auth", "limit": 0})
        route_empty = await session.call_tool("memory_route", {"query": ""})
        still_alive = await session.call_tool("memory_query", {"query": "auth", "limit": 1})
        return empty, too_long, bad_limit, route_empty, still_alive

    empty, too_long, bad_limit, route_empty, alive = with_session(
        ["--state-dir", str(state), "--config", str(config)], body
    )
    assert empty.structured_content["error_code"] == "EMPTY_QUERY"
    assert too_long.structured_content["error_code"] == "QUERY_TOO_LONG"
    assert bad_limit.is_error and "limit" in bad_limit.content[0].text
    assert route_empty.is_error and "EMPTY_QUERY" in route_empty.content[0].text
    assert alive.structured_content["status"] == "success"


def test_broken_state_is_reported_per_call_and_the_fix_is_picked_up(tmp_path: Path) -> None:
    """A missing backends.json is answered per call; writing it fixes the running server."""
    state, config = starter_workspace(tmp_path / "demo")
    good_backends = (state / "backends.json").read_text()
    (state / "backends.json").unlink()

    async def body(session: ClientSession) -> Any:
        missing = await session.call_tool("memory_query", {"query": "auth"})
        (state / "backends.json").write_text(good_backends)
        # Hot reload (watchfiles, debounced): the fix is picked up without a restart.
        for _ in range(100):
            fixed = await session.call_tool("memory_query", {"query": "auth"})
            if fixed.structured_content["status"] != "error":
                break
            await asyncio.sleep(0.1)
        return missing, fixed

    missing, fixed = with_session(["--state-dir", str(state), "--config", str(config)], body)
    assert missing.structured_content["status"] == "error"
    assert missing.structured_content["error_code"] == "BACKENDS_JSON_MISSING"
    assert fixed.structured_content["status"] == "success"


def test_without_the_sdk_the_command_says_how_to_install_it() -> None:
    # Simulate a plain install (no [mcp] extra) by making the SDK unimportable.
    code = "import sys; sys.modules['mcp'] = None; from memory_router.cli.main import main; main()"
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code, "mcp"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    # This checkout's own command (an installed copy is told pip/pipx/uv: tests/unit/test_installation.py).
    assert f"needs the mcp SDK: pip install -e '{REPO}[mcp]'" in proc.stderr
    assert proc.stdout == ""


def test_a_broken_config_is_an_error_envelope_until_fixed(tmp_path: Path) -> None:
    state, config = starter_workspace(tmp_path / "demo")
    good = config.read_text()
    config.write_text(good.replace('"threshold": 0.4', '"threshold": 7'))

    async def body(session: ClientSession) -> Any:
        broken = await session.call_tool("memory_query", {"query": "auth"})
        route = await session.call_tool("memory_route", {"query": "auth"})
        config.write_text(good)
        fixed = await session.call_tool("memory_query", {"query": "auth"})
        return broken, route, fixed

    broken, route, fixed = with_session(["--state-dir", str(state), "--config", str(config)], body)
    assert broken.structured_content["error_code"] == "CONFIG_INVALID"
    assert "threshold" in broken.structured_content["error_message"]
    assert route.is_error and "CONFIG_INVALID" in route.content[0].text
    assert fixed.structured_content["status"] == "success"
