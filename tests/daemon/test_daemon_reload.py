"""Hot reload under a running ``memory-router serve``: edit backends.json / router-config.json and
the next requests see the new plan; write a broken file and the last good version keeps serving,
with the problem on stderr and in router.log."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.config.paths import packaged_config
from memory_router.config.router_config import read_json

from .test_daemon_serve import Daemon

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

QUERY = "the middleware issue"  # rule 7: qmd/query -> totalrecall (the spec's chain; Pro extends it)


def write_atomically(path: Path, data: bytes) -> None:
    """How editors and installers save: a temporary file renamed over the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def chain(daemon: Daemon, query: str = QUERY) -> list[str]:
    response = daemon.ask({"id": "plan", "query": query, "explain": True})
    assert response["status"] == "plan", response
    return [s["backend"] + (f"/{s['mode']}" if s["mode"] else "") for s in response["chain"]]


def eventually(probe: Callable[[], Any], want: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    got = probe()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.05)
        got = probe()
    assert got == want


def start(tmp_path: Path) -> tuple[Daemon, Path, Path, Path]:
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "CLAUDE.local.md").write_text("- The middleware issue: the auth middleware reads the session cookie.\n")
    config = read_json(packaged_config())
    config["backends"]["totalrecall"]["root"] = str(tmp_path)
    config_path = state / "router-config.json"
    config_path.write_bytes(orjson.dumps(config))
    backends = state / "backends.json"
    backends.write_bytes(orjson.dumps({"tier": "starter", "backends": {"totalrecall": {"status": "ready"}}}))
    daemon = Daemon(
        [sys.executable, "-m", "memory_router", "serve", "--state-dir", str(state), "--config", str(config_path)]
    )
    daemon.wait_for_stderr("ready")
    return daemon, state, backends, config_path


def test_backends_json_edit_changes_the_plan_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    daemon, state, backends, _ = start(tmp_path)
    try:
        assert chain(daemon) == ["totalrecall"]
        write_atomically(
            backends, orjson.dumps({"backends": {"qmd": {"status": "ready"}, "totalrecall": {"status": "ready"}}})
        )
        eventually(lambda: chain(daemon), ["qmd/query", "totalrecall"])
        daemon.wait_for_stderr("backends.json reloaded: usable backends: qmd, totalrecall")

        backends.write_bytes(b'{"backends": {"qmd": {"status": "ready"}, ')  # truncated: invalid JSON
        daemon.wait_for_stderr("reload failed")
        assert chain(daemon) == ["qmd/query", "totalrecall"]  # the last good version
        answer = daemon.ask({"id": 1, "query": "the middleware issue we just discussed"})  # totalrecall first
        assert (answer["id"], answer["status"], answer["routed_to"]) == (1, "success", "totalrecall")
        log = (state / "router.log").read_text()
        assert "RELOAD_FAILED message=" in log and "not valid JSON" in log

        write_atomically(backends, orjson.dumps({"backends": ["totalrecall"]}))  # fixed again
        eventually(lambda: chain(daemon), ["totalrecall"])
    finally:
        daemon.close()


def test_router_config_edit_changes_rules_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    daemon, state, backends, config_path = start(tmp_path)
    try:
        write_atomically(backends, orjson.dumps({"backends": ["qmd", "totalrecall"]}))
        eventually(lambda: chain(daemon), ["qmd/query", "totalrecall"])

        config = orjson.loads(config_path.read_bytes())
        config["rules"][-1]["chain"] = [{"backend": "totalrecall"}]  # the default rule now skips qmd
        config_path.write_bytes(orjson.dumps(config))  # written in place this time
        eventually(lambda: chain(daemon), ["totalrecall"])

        config["rules"][-1]["chain"] = [{"backend": "cogne"}]  # a typo: refused, old rules kept
        config_path.write_bytes(orjson.dumps(config))
        daemon.wait_for_stderr("names unknown backend 'cogne'")
        assert chain(daemon) == ["totalrecall"]
        assert "RELOAD_FAILED" in (state / "router.log").read_text()
        stats = daemon.ask({"op": "stats"})["stats"]
        assert stats["reloads"]["failed"] == 1 and stats["reloads"]["ok"] >= 2
    finally:
        daemon.close()


def test_warm_queries_reuse_the_backend_and_see_memory_edits(tmp_path: Path) -> None:
    daemon, _, _, _ = start(tmp_path)
    try:
        first = daemon.ask({"id": 1, "query": "zanzibar ferry schedule"})
        assert first["status"] == "empty"
        memory = tmp_path / "CLAUDE.local.md"
        memory.write_text(memory.read_text() + "- The zanzibar ferry schedule moved to Fridays.\n")
        second = daemon.ask({"id": 2, "query": "zanzibar ferry schedule"})
        assert second["status"] == "success" and "Fridays" in second["results"][0]["content"]
    finally:
        daemon.close()
