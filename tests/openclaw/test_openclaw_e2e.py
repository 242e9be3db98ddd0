"""The memory-router plugin inside the real OpenClaw (npm `openclaw` 2026.9.6, .tools/openclaw).

In a scratch HOME, as openclaw-plugin/README.md says: a copied install
(`openclaw plugins install --force --accept-capabilities`), memory-core disabled, the plugin's
config set, the demo workspace as the agent workspace; a loopback Gateway with network features
off. Every surface that reaches the memory slot must give memory-router's own answer
(`memory-router query` on the same workspace): `openclaw memory search --json`, the Gateway RPC
`memory.search`, the `memory_search` tool through the Gateway's /tools/invoke, `memory_get` on the
paths it returned, and `openclaw status --all --json`'s memory block. The Gateway closes the
manager after every search: that must cost no new daemon and no new connection.

Skipped only when .tools/openclaw is absent (CI installs it with .ci/setup.d/50-openclaw.sh).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_router.client.wire import Connection

from ._support import (
    NODE24,
    OPENCLAW_MJS,
    TOKEN,
    RunningGateway,
    gateway_run,
    memory_router_bin,
    openclaw_missing,
    scratch_env,
    shipped_plugin,
)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or "")]

DECISION = "what did we decide about the database schema in the morning session"  # Lossless: no file
AUTH = "auth"  # rule 7: its hits include Total Recall's, workspace files with lines


@dataclass
class Setup:
    home: Path
    demo: Path
    env: dict[str, str]
    port: int
    gateway: subprocess.Popen[bytes]
    gateway_log: Path

    @property
    def state(self) -> Path:
        return self.demo / "state"


def openclaw(
    setup_env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE24), str(OPENCLAW_MJS), *args],
        env=setup_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, (
        f"{proc.args[2:]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    return proc


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    home = tmp_path_factory.mktemp("oc")
    env = scratch_env(home)
    demo = home / "demo"
    subprocess.run(
        [str(memory_router_bin()), "demo", "--dir", str(demo)], env=env, check=True, capture_output=True, timeout=120
    )
    # The README's install steps.
    ok(openclaw(env, home, "plugins", "install", "--force", "--accept-capabilities", str(shipped_plugin(home))))
    settings = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {"path": "agents.defaults.workspace", "value": str(demo)},
        {
            "path": "plugins.entries.memory-router.config",
            "value": {"stateDir": str(demo / "state"), "config": str(demo / "state" / "router-config.json")},
        },
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


def gateway_ready(setup: Setup, timeout: float = 150) -> None:
    RunningGateway(setup.port, setup.gateway, setup.gateway_log).wait_listening(timeout)


def router_query(setup: Setup, query: str, limit: int) -> dict[str, Any]:
    """memory-router's own answer on the same workspace, state dir and config, for the agent the
    plugin asks as (OpenClaw's default agent, main: every plugin query carries its scope)."""
    proc = subprocess.run(
        [str(memory_router_bin()), "query", "--limit", str(limit), "--state-dir", str(setup.state)]
        + ["--config", str(setup.state / "router-config.json"), "--agent", "main", "--", query],
        env={**setup.env, "OPENCLAW_REPO_ROOT": str(setup.demo)},
        cwd=setup.demo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_same_answer(results: list[dict[str, Any]], envelope: dict[str, Any], limit: int) -> None:
    """The plugin's hits are the router's hits, in its order, in OpenClaw's shape."""
    expected = envelope["results"][:limit]
    assert [r["snippet"] for r in results] == [h["content"] for h in expected]
    for hit, want in zip(results, expected, strict=True):
        assert hit["source"] == "memory"
        # Total Recall weighs recency, so a second later a score may move in its 4th decimal.
        assert abs(hit["score"] - want["relevance"]) < 0.005
        if want.get("path"):
            assert hit["path"] == want["path"]
            assert hit["startLine"] == want.get("line", 1)
        else:
            assert hit["path"].startswith(f"memory-router/{want['source']}/")
        assert hit["memoryRouter"]["routed_to"] == envelope["routed_to"]
        assert hit["memoryRouter"]["rule"]["id"] == envelope["rule"]["id"]
        assert hit["memoryRouter"]["status"] == envelope["status"]


def daemons(state: Path) -> list[int]:
    """Pids of memory-router daemons serving this state dir."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"--socket" in argv and str(state).encode() in argv:
            pids.append(int(entry.name))
    return pids


def clients(state: Path) -> int:
    """How many clients the daemon has (this probe included)."""
    with Connection(str(state / "router.sock")) as conn:
        return int(conn.hello()["clients"])


def invoke(setup: Setup, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{setup.port}/tools/invoke",
        data=json.dumps({"tool": tool, "args": args}).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.loads(response.read())
    assert body.get("ok") is True, body
    return body["result"]["details"]


# ---------------------------------------------------------------------------- the tests


def test_the_install_is_a_copy_holding_the_memory_slot(setup: Setup) -> None:
    installed = setup.home / ".openclaw" / "extensions" / "memory-router"
    assert (installed / "index.js").is_file() and not installed.is_symlink()
    assert (installed / "lib" / "router.js").is_file()
    cfg = json.loads((setup.home / ".openclaw" / "openclaw.json").read_text())
    assert cfg["plugins"]["slots"]["memory"] == "memory-router"
    assert cfg["plugins"]["entries"]["memory-core"]["enabled"] is False


def test_openclaw_memory_search_answers_through_memory_router(setup: Setup) -> None:
    proc = ok(openclaw(setup.env, setup.home, "memory", "search", "--json", "--max-results", "3", DECISION))
    payload = json.loads(proc.stdout)
    envelope = router_query(setup, DECISION, 3)
    assert envelope["routed_to"] == "lossless"
    assert_same_answer(payload["results"], envelope, 3)
    assert payload["routing"]["rule"]["id"] == "decision_recall"
    # The plugin started the daemon for the state dir it resolved: exactly one serves it.
    assert len(daemons(setup.state)) == 1


def test_status_all_shows_the_plugin_s_memory_block(setup: Setup) -> None:
    proc = ok(openclaw(setup.env, setup.home, "status", "--all", "--json"))
    memory = json.loads(proc.stdout)["memory"]
    assert memory["provider"] == "memory-router"
    assert memory["workspaceDir"] == str(setup.demo)  # agents.defaults.workspace
    mr = memory["custom"]["memoryRouter"]
    assert mr["stateDir"] == str(setup.state)
    assert mr["socket"] == str(setup.state / "router.sock")
    # After `memory search` (the test before) its daemon still serves the socket.
    assert mr["socketPresent"] is (setup.state / "router.sock").exists()


def test_gateway_memory_search_rpc_and_close_cost_no_daemon(setup: Setup) -> None:
    gateway_ready(setup)
    invoke(setup, "memory_search", {"query": AUTH})  # the Gateway's plugin instance connects
    pids, before = daemons(setup.state), clients(setup.state)
    params = json.dumps({"query": AUTH, "maxResults": 3})
    call = ["gateway", "call", "memory.search", "--port", str(setup.port), "--token", TOKEN, "--params", params]
    call += ["--json", "--timeout", "90000"]  # its default 10 s is too short on a loaded machine
    answer = json.loads(ok(openclaw(setup.env, setup.home, *call)).stdout)
    assert answer["provider"] == "memory-router"
    assert_same_answer(answer["results"], router_query(setup, AUTH, 3), 3)
    # The Gateway got a manager for that search and closed it afterwards: still the same one
    # daemon, and the Gateway's connection is still open (a close() that dropped it would leave
    # one client fewer; the `gateway call` CLI never talks to the daemon).
    assert daemons(setup.state) == pids and len(pids) == 1
    assert clients(setup.state) == before


def test_memory_search_tool_and_memory_get_through_the_gateway(setup: Setup) -> None:
    gateway_ready(setup)
    pids = daemons(setup.state)
    found = invoke(setup, "memory_search", {"query": DECISION, "maxResults": 2})
    assert_same_answer(found["results"], router_query(setup, DECISION, 2), 2)
    assert found["routing"]["routed_to"] == "lossless" and found["routing"]["via"] == "daemon"
    # A Lossless summary has no file: memory_get reads it back from its synthetic path.
    hit = found["results"][0]
    got = invoke(setup, "memory_get", {"path": hit["path"]})
    assert got["status"] == "ok" and got["text"] == hit["snippet"]
    # A Total Recall hit is a workspace file: memory_get reads the file at the hit's line.
    hits = invoke(setup, "memory_search", {"query": AUTH, "maxResults": 10})["results"]
    tr = next(r for r in hits if r["memoryRouter"]["backend"] == "totalrecall")
    got = invoke(setup, "memory_get", {"path": tr["path"], "from": tr["startLine"], "lines": 1})
    assert got["status"] == "ok"
    assert got["text"] == (setup.demo / tr["path"]).read_text().split("\n")[tr["startLine"] - 1]
    assert tr["snippet"] in got["text"] or got["text"] in tr["snippet"]
    # Outside the memory root: a clear error, not a read.
    bad = invoke(setup, "memory_get", {"path": "../.openclaw/openclaw.json"})
    assert bad["status"] == "error" and "outside the memory root" in bad["error"]
    missing = invoke(setup, "memory_get", {"path": "memory-router/lossless/no-such-summary"})
    assert missing["status"] == "not_found"
    assert daemons(setup.state) == pids
