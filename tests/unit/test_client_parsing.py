"""The thin client re-implements query's argument parsing so that the warm path imports no click:
these tests hold it to click's parser. (Path resolution has one home, memory_router.config.paths, which
the client uses as is: tests/unit/test_paths.py.)"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.cli.main import main as cli_main
from memory_router.client import thin as client

QUERY_COMMAND = cli_main.get_command(click.Context(cli_main), "query")

TOKENS = st.sampled_from(
    [
        "--pretty",
        "--spawn",
        "--limit",
        "--limit=5",
        "5",
        "0",
        "1001",
        "--timeout-ms",
        "2000",
        "--timeout-ms=-3",
        "--state-dir",
        "/tmp/s",
        "--state-dir=~/x",
        "--backends-json",
        "b.json",
        "--config",
        "c.json",
        "--config=",
        "--daemon",
        "off",
        "require",
        "bogus",
        "--daemon=auto",
        "--",
        "-",
        "auth",
        "find the function x",
        "-x",
        "--help",
        "--unknown",
        "--limit=07",
        "--limit=٣",
    ]
)


def click_parse(args: list[str]) -> dict | None:
    try:
        ctx = QUERY_COMMAND.make_context("query", list(args))
    except (click.UsageError, click.exceptions.Exit):
        return None
    return ctx.params


@settings(max_examples=600, deadline=None)
@given(st.lists(TOKENS, max_size=7))
def test_fast_parser_agrees_with_click_whenever_it_answers(args: list[str]) -> None:
    fast = client.parse_query_args(args)
    if fast is None:
        return  # click will parse it (and report the error) itself
    slow = click_parse(args)
    assert slow is not None, f"the fast path accepted {args!r}, which click refuses"
    assert fast["query"] == slow["query"]
    for key in ("timeout_ms", "limit", "state_dir", "backends_json", "config"):
        assert fast.get(key) == slow[key], key
    assert fast.get("mode") == slow["daemon_mode"]
    assert fast.get("pretty", False) == slow["pretty"]
    assert fast.get("spawn", False) == slow["spawn"]


@pytest.mark.parametrize(
    "args",
    [
        ["auth"],
        ["auth", "--pretty", "--limit", "5"],
        ["--timeout-ms=2000", "find the function x"],
        ["-", "--state-dir", "/tmp/s"],
        ["--", "--pretty"],
        ["x", "--daemon", "require", "--spawn"],
    ],
)
def test_fast_parser_handles_the_usual_invocations(args: list[str]) -> None:
    assert client.parse_query_args(args) is not None
    assert click_parse(args) is not None


@pytest.mark.parametrize("args", [[], ["a", "b"], ["--help"], ["x", "--limit", "0"], ["x", "--limit"], ["x", "--nope"]])
def test_fast_parser_leaves_errors_and_help_to_click(args: list[str]) -> None:
    assert client.parse_query_args(args) is None


def test_context_covers_what_changes_an_answer(tmp_path: Path) -> None:
    base = dict(cwd=str(tmp_path), state_dir="s", backends_json="s/backends.json", config="c.json")
    env = {"OPENCLAW_REPO_ROOT": "/r", "PATH": "/bin", "HOME": "/h", "TERM": "xterm", "MEMORY_ROUTER_DAEMON": "auto"}
    mine = client.context(environ=env, **base)
    assert mine["state_dir"] == str(tmp_path / "s")  # relative paths resolve against the cwd
    # TERM and the daemon switch do not matter; the others are hashes, never the values
    assert {k for k, v in mine["env"].items() if v is not None} == {"OPENCLAW_REPO_ROOT", "PATH", "HOME"}
    assert not {"/r", "/bin", "/h"} & set(mine["env"].values())
    assert client.context_diff(mine, client.context(environ={**env, "TERM": "dumb"}, **base)) == []
    other = client.context(environ={**env, "OPENCLAW_REPO_ROOT": "/elsewhere", "INDEX_PATH": "x"}, **base)
    assert client.context_diff(mine, other) == ["env.INDEX_PATH", "env.OPENCLAW_REPO_ROOT"]
    moved = client.context(environ=env, **{**base, "cwd": str(tmp_path / "sub")})
    assert client.context_diff(mine, moved) == ["cwd", "state_dir", "backends_json", "config"]
    assert client.context_diff(mine, "garbage") == ["context"]
