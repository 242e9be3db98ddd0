"""What the thin client compares with a daemon before it lets the daemon answer: the context.
(Its argument parser is the contract's table: tests/unit/test_contract.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_router.client import thin as client


def context(cwd: Path, environ: dict[str, str]) -> dict[str, Any]:
    """The context of a client in ``cwd`` with ``environ``, for the same (relative) files."""
    return client.context(
        cwd=str(cwd), environ=environ, state_dir="s", backends_json="s/backends.json", config="c.json"
    )


def test_context_covers_what_changes_an_answer(tmp_path: Path) -> None:
    env = {"OPENCLAW_REPO_ROOT": "/r", "PATH": "/bin", "HOME": "/h", "TERM": "xterm", "MEMORY_ROUTER_DAEMON": "auto"}
    mine = context(tmp_path, env)
    assert mine["state_dir"] == str(tmp_path / "s")  # relative paths resolve against the cwd
    # TERM and the daemon switch do not matter; the others are hashes, never the values
    assert {k for k, v in mine["env"].items() if v is not None} == {"OPENCLAW_REPO_ROOT", "PATH", "HOME"}
    assert not {"/r", "/bin", "/h"} & set(mine["env"].values())
    assert client.context_diff(mine, context(tmp_path, {**env, "TERM": "dumb"})) == []
    other = context(tmp_path, {**env, "OPENCLAW_REPO_ROOT": "/elsewhere", "INDEX_PATH": "x"})
    assert client.context_diff(mine, other) == ["env.INDEX_PATH", "env.OPENCLAW_REPO_ROOT"]
    moved = context(tmp_path / "sub", env)
    assert client.context_diff(mine, moved) == ["cwd", "state_dir", "backends_json", "config"]
    assert client.context_diff(mine, "garbage") == ["context"]
