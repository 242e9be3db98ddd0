"""Two agents in one real OpenClaw Gateway (`agents.list[]`): alice's memory never reaches bob
(issue 30).

In a scratch HOME, the README's install (copied, memory-core disabled), two agents with their
own workspaces: alice's is the demo workspace (its lcm.db's conversation is alice's,
`agent:alice:main`) plus a MEMORY.md and a .env; bob's holds one daily note and no MEMORY.md.
The plugin is told only its state dir, which holds a router-config.json (config precedence 3).
Through the Gateway's /tools/invoke as each agent, `memory.search` and `openclaw memory search
--agent`: memory_get reads memory files, not the workspace; each Lossless hit reads back its own
text; bob never gets alice's text from memory_get or from a search; a state-dir config is served
by the daemon. Skipped only when .tools/openclaw is absent.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ._support import NODE24, OPENCLAW_MJS, memory_router_bin, openclaw_missing, scratch_env, shipped_plugin
from .test_openclaw_e2e import TOKEN, daemons, free_port, ok, openclaw

pytestmark = [pytest.mark.slow, pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or "")]

DECISION = "what did we decide about the database schema in the morning session"
SECRET = "the vault code is 4711-alpha"


@dataclass
class Gateway:
    home: Path
    alice: Path
    bob: Path
    env: dict[str, str]
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def state(self) -> Path:
        return self.alice / "state"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    home = tmp_path_factory.mktemp("agents")
    env = scratch_env(home)
    alice, bob = home / "alice", home / "bob"
    subprocess.run(
        [str(memory_router_bin()), "demo", "--dir", str(alice)], env=env, check=True, capture_output=True, timeout=180
    )
    (alice / "MEMORY.md").write_text(f"# Long-term\n- alice's secret: {SECRET}\n")
    (alice / ".env").write_text("OPENAI_API_KEY=sk-alice-secret\n")
    (bob / "memory").mkdir(parents=True)
    (home / "main").mkdir()
    (bob / "memory" / "2026-11-30.md").write_text("# 2026-11-30\n- [09:00] bob likes green tea\n")
    state = alice / "state"
    # One state dir for the Gateway; Total Recall's root follows each agent's workspace (not pinned).
    cfg = json.loads((state / "router-config.json").read_text())
    cfg["backends"]["totalrecall"].pop("root", None)
    (state / "router-config.json").write_text(json.dumps(cfg, indent=2))
    with sqlite3.connect(state / "lcm.db") as db:  # the demo's conversation is alice's
        db.execute("UPDATE conversations SET session_key = 'agent:alice:main'")
    ok(openclaw(env, home, "plugins", "install", "--force", "--accept-capabilities", str(shipped_plugin(home))))
    settings = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {
            "path": "agents.list",
            "value": [
                {"id": "alice", "default": True, "workspace": str(alice)},
                {"id": "bob", "workspace": str(bob)},
                {"id": "main", "workspace": str(home / "main")},  # OpenClaw's own entry stays
            ],
        },
        {"path": "plugins.entries.memory-router.config", "value": {"stateDir": str(state)}},
    ]
    ok(openclaw(env, home, "config", "set", "--batch-json", json.dumps(settings), "--strict-json"))
    port = free_port()
    log = home / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(NODE24), str(OPENCLAW_MJS), "gateway", "run", "--port", str(port), "--bind", "loopback"]
            + ["--auth", "token", "--token", TOKEN, "--allow-unconfigured"],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    g = Gateway(home, alice, bob, env, port, proc, log)
    try:
        _ready(g)
        yield g
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        for sock in [state / "router.sock", *state.glob("router-openclaw-*.sock")]:
            subprocess.run(
                [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(state), "--socket", str(sock)],
                env=env,
                capture_output=True,
                timeout=30,
                check=False,
            )


def _ready(g: Gateway, timeout: float = 150) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert g.proc.poll() is None, f"the Gateway exited:\n{g.log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{g.port}/", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"the Gateway did not listen within {timeout} s:\n{g.log.read_text()[-3000:]}")


def invoke(g: Gateway, agent: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call in `agent`'s main session (the tool context carries its agentId and sessionKey)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{g.port}/tools/invoke",
        data=json.dumps({"tool": tool, "args": args, "agentId": agent, "sessionKey": f"agent:{agent}:main"}).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.loads(response.read())
    assert body.get("ok") is True, body
    return body["result"]["details"]


def alice_texts(g: Gateway) -> list[str]:
    """Every text of alice's that bob must never see: her conversation and her memory files."""
    with sqlite3.connect(g.state / "lcm.db") as db:
        texts = [r[0] for r in db.execute("SELECT content FROM summaries")]
        texts += [r[0] for r in db.execute("SELECT content FROM messages")]
    return [t for t in texts if t] + [SECRET]


def leaks(payload: object, texts: list[str]) -> list[str]:
    blob = json.dumps(payload)
    return [t[:60] for t in texts if json.dumps(t)[1:-1][:80] in blob]


# ---------------------------------------------------------------------------- the tests


def test_memory_get_reads_memory_files_not_the_workspace(gw: Gateway) -> None:
    got = invoke(gw, "alice", "memory_get", {"path": "MEMORY.md"})
    assert got["status"] == "ok" and SECRET in got["text"]
    for path in (".env", "state/router-config.json", "src/auth/token.ts"):
        bad = invoke(gw, "alice", "memory_get", {"path": path})
        assert bad["status"] == "error" and bad["code"] == "MEMORY_PATH_NOT_ALLOWED" and bad["text"] == "", bad
    assert "sk-alice" not in json.dumps(invoke(gw, "alice", "memory_get", {"path": ".env"}))


def test_each_lossless_hit_reads_back_its_own_text(gw: Gateway) -> None:
    found = invoke(gw, "alice", "memory_search", {"query": DECISION, "maxResults": 8})
    assert found["routing"]["routed_to"] == "lossless"
    # The answer is Lossless's, filled from the other stores (strategy fill): several snippets of
    # one memory file share its path (with their own lines), each conversation hit has its own.
    hits = [h for h in found["results"] if h["path"].startswith("memory-router/lossless/")]
    assert len(hits) >= 3 and len({h["path"] for h in hits}) == len(hits), found["results"]
    for hit in hits:
        got = invoke(gw, "alice", "memory_get", {"path": hit["path"]})
        assert got["status"] == "ok" and got["text"] == hit["snippet"], hit["path"]


def test_alice_s_conversation_hits_never_reach_bob_through_memory_get(gw: Gateway) -> None:
    found = invoke(gw, "alice", "memory_search", {"query": DECISION, "maxResults": 5})["results"]
    mine = [h for h in found if h["path"].startswith("memory-router/lossless/")]
    assert mine
    for hit in mine:
        assert invoke(gw, "alice", "memory_get", {"path": hit["path"]})["text"] == hit["snippet"]
        got = invoke(gw, "bob", "memory_get", {"path": hit["path"]})
        assert got == {"status": "not_found", "text": "", "path": hit["path"]}, (hit["path"], got)
    assert invoke(gw, "bob", "memory_get", {"path": "memory/2026-11-30.md"})["text"].endswith("bob likes green tea\n")


def test_alice_s_memory_file_hit_never_reaches_bob(gw: Gateway) -> None:
    mine = invoke(gw, "alice", "memory_search", {"query": "what is the vault code", "maxResults": 5})["results"]
    assert "MEMORY.md" in [h["path"] for h in mine]
    # bob has no MEMORY.md of his own: not_found, not alice's (a shared hit cache gave him hers).
    assert invoke(gw, "bob", "memory_get", {"path": "MEMORY.md"}) == {
        "status": "not_found",
        "text": "",
        "path": "MEMORY.md",
    }


def test_bob_s_searches_never_return_alice_s_memory(gw: Gateway) -> None:
    texts = alice_texts(gw)
    control = invoke(gw, "alice", "memory_search", {"query": DECISION, "maxResults": 5})
    assert control["results"] and leaks(control, texts)  # alice does get her own
    for query in (DECISION, "what is the vault code", "what did we decide about selling the house"):
        tool = invoke(gw, "bob", "memory_search", {"query": query, "maxResults": 10})
        assert not leaks(tool, texts), (query, tool)
    params = json.dumps({"query": DECISION, "maxResults": 10, "agentId": "bob"})
    call = ["gateway", "call", "memory.search", "--port", str(gw.port), "--token", TOKEN, "--params", params]
    rpc = json.loads(ok(openclaw(gw.env, gw.home, *call, "--json", "--timeout", "90000")).stdout)
    assert not leaks(rpc, texts), rpc
    cli = ok(openclaw(gw.env, gw.home, "memory", "search", "--agent", "bob", "--json", "--max-results", "10", DECISION))
    assert not leaks(json.loads(cli.stdout), texts)


def test_a_state_dir_router_config_is_served_by_the_daemon(gw: Gateway) -> None:
    """The plugin is given no `config`: the state dir's router-config.json is the one memory-router
    reads, and the daemon the plugin started serves it (no exec path, no second daemon for alice)."""
    found = invoke(gw, "alice", "memory_search", {"query": "auth", "maxResults": 2})
    assert found["routing"]["via"] == "daemon"
    assert found["routing"]["status"] != "error"
    assert daemons(gw.state)  # the Gateway's daemons serve this state dir
