"""Two agents in one real OpenClaw Gateway: alice's memory never reaches bob (issue 30).

In a scratch HOME, the README's install (copied, memory-core disabled) and two agents with their
own workspaces, configured once as OpenClaw 2026.9 writes the roster (`agents.entries`, what
`openclaw config set agents.list` stores) and once as the legacy `agents.list[]` array, each a
Gateway of its own. Every backend is real and holds something of alice's only:

- Lossless: the demo's lcm.db, whose conversation is alice's (`agent:alice:main`);
- Total Recall: alice's workspace (the demo, plus a MEMORY.md holding a secret, and a .env);
  bob's holds one daily note and no MEMORY.md;
- qmd (the real CLI from .tools): the demo's collection over alice's workspace, hers alone
  (`agent_collections`), and a `team-docs` collection shared on purpose (`shared_collections`);
- Cognee (the real server from tests/support/cognee, skipped without its venv): the `arch`
  graph is alice's (`agent_datasets`), the `services` graph shared (`shared_datasets`).

The plugin is told only its state dir, which holds the router-config.json (config precedence 3).
For each backend, alice's own search finds her memory there; bob's `memory_search` and
`memory_get` (the Gateway's /tools/invoke as bob), Gateway `memory.search` (`agentId: bob`) and
`openclaw memory search --agent bob` never return it; the shared collection and dataset reach
both. Skipped only when .tools/openclaw is absent.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..support.cognee import cognee_server as cognee_harness
from ._support import TOKEN, gateway_run, memory_router_bin, openclaw_missing, scratch_env, shipped_plugin
from .test_openclaw_e2e import daemons, ok, openclaw

pytestmark = [pytest.mark.slow, pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or "")]

DECISION = "what did we decide about the database schema in the morning session"
SECRET = "the vault code is 4711-alpha"
PAGER = "escalateOncallPager"
TEAM_DOC = (
    "# On-call handbook (shared by the whole team)\n\n"
    f"`{PAGER}(severity)` pages the engineer on call; severity 1 also calls the lead.\n"
)
ROSTERS = ("entries", "list")
COGNEE = cognee_harness.cognee_python()


@dataclass
class World:
    """What both Gateways share: the agents' workspaces, one state dir, the Cognee server."""

    root: Path
    alice: Path
    bob: Path
    team: Path
    cognee_env: dict[str, str]

    @property
    def state(self) -> Path:
        return self.alice / "state"


@dataclass
class Gateway:
    world: World
    roster: str
    home: Path
    env: dict[str, str]
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def state(self) -> Path:
        return self.world.state


def _index_team_docs(state: Path, team: Path) -> None:
    """`qmd collection add` the shared folder into the demo's qmd index (as the demo does)."""
    from memory_router.backends import BackendContext
    from memory_router.backends.common.settings import settings_from_json
    from memory_router.backends.qmd.adapter import Settings
    from memory_router.backends.qmd.backend import QmdBackend
    from memory_router.backends.qmd.indexing import build_collection

    home = state / "qmd"
    settings = {"index_path": str(home / "index.sqlite"), "config_dir": str(home / "config")}
    backend = QmdBackend("qmd", settings_from_json(Settings, settings), BackendContext(state_dir=state))
    build_collection(backend.transport(), team.resolve(), "team-docs", "**/*.md", home / "index.lock")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("agents")
    env = scratch_env(root)
    alice, bob, team = root / "alice", root / "bob", root / "team"
    subprocess.run(
        [str(memory_router_bin()), "demo", "--dir", str(alice)], env=env, check=True, capture_output=True, timeout=300
    )
    (alice / "MEMORY.md").write_text(f"# Long-term\n- alice's secret: {SECRET}\n")
    (alice / ".env").write_text("OPENAI_API_KEY=sk-alice-secret\n")
    (bob / "memory").mkdir(parents=True)
    (bob / "memory" / "2026-11-30.md").write_text("# 2026-11-30\n- [09:00] bob likes green tea\n")
    team.mkdir()
    (team / "oncall.md").write_text(TEAM_DOC)
    state = alice / "state"
    _index_team_docs(state, team)
    server = None
    if COGNEE is not None:
        try:
            server = cognee_harness.start(COGNEE)
        except cognee_harness.ServerStartError as exc:
            pytest.fail(f"the real Cognee server did not come up: {exc}", pytrace=False)
    try:
        cfg = json.loads((state / "router-config.json").read_text())
        # One state dir for the Gateway; Total Recall's root follows each agent's workspace (not pinned).
        cfg["backends"]["totalrecall"].pop("root", None)
        (demo_collection,) = cfg["backends"]["qmd"]["collections"]
        cfg["backends"]["qmd"].update(
            collections=[demo_collection, "team-docs"],
            agent_collections={"alice": [demo_collection]},
            shared_collections=["team-docs"],
        )
        cfg["backends"]["cognee"] = {"type": "cognee", "agent_datasets": {"alice": ["arch"]}}
        cfg["backends"]["cognee"]["shared_datasets"] = ["services"]
        (state / "router-config.json").write_text(json.dumps(cfg, indent=2))
        if server is not None:  # the demo probed no Cognee: this one is there
            installed = json.loads((state / "backends.json").read_text())
            installed["backends"]["cognee"] = {"status": "ready", "message": None}
            (state / "backends.json").write_text(json.dumps(installed, indent=2))
        with sqlite3.connect(state / "lcm.db") as db:  # the demo's conversation is alice's
            db.execute("UPDATE conversations SET session_key = 'agent:alice:main'")
        cognee_env = {"COGNEE_BASE_URL": server.base_url, "COGNEE_API_KEY": server.api_key} if server else {}
        yield World(root, alice, bob, team, cognee_env)
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)


def _roster(world: World) -> list[dict[str, Any]]:
    return [
        {"id": "alice", "default": True, "workspace": str(world.alice)},
        {"id": "bob", "workspace": str(world.bob)},
        {"id": "main", "workspace": str(world.root / "main")},  # OpenClaw's own entry stays
    ]


def roster_kind(home: Path) -> str:
    """Which roster openclaw.json holds: ``entries`` or ``list``."""
    agents = json.loads((home / ".openclaw" / "openclaw.json").read_text())["agents"]
    kinds = [k for k in ("entries", "list") if k in agents]
    assert len(kinds) == 1, agents
    return kinds[0]


@pytest.fixture(scope="module", params=ROSTERS)
def gw(request: pytest.FixtureRequest, world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    roster = request.param
    home = tmp_path_factory.mktemp(f"gateway-{roster}")
    env = {**scratch_env(home), **world.cognee_env}
    (world.root / "main").mkdir(exist_ok=True)
    ok(openclaw(env, home, "plugins", "install", "--force", "--accept-capabilities", str(shipped_plugin(home))))
    settings = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {"path": "plugins.entries.memory-router.config", "value": {"stateDir": str(world.state)}},
    ]
    if roster == "entries":  # OpenClaw 2026.9 stores what `config set agents.list` is given as agents.entries
        settings.append({"path": "agents.list", "value": _roster(world)})
    ok(openclaw(env, home, "config", "set", "--batch-json", json.dumps(settings), "--strict-json"))
    if roster == "list":  # the legacy array, as a hand-written or older openclaw.json has it
        path = home / ".openclaw" / "openclaw.json"
        config = json.loads(path.read_text())
        config.setdefault("agents", {}).pop("entries", None)
        config["agents"]["list"] = _roster(world)
        path.write_text(json.dumps(config, indent=2))
    assert roster_kind(home) == roster
    try:
        with gateway_run(env, home) as running:
            g = Gateway(world, roster, home, env, running.port, running.proc, running.log)
            running.wait_listening()
            yield g
    finally:  # the Gateway gone first: nothing starts a daemon again
        for sock in [world.state / "router.sock", *world.state.glob("router-openclaw-*.sock")]:
            subprocess.run(
                [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(world.state), "--socket", str(sock)],
                env=env,
                capture_output=True,
                timeout=30,
                check=False,
            )


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


def search(g: Gateway, agent: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """The memory_search tool's hits for ``agent``; an unavailable or error payload fails (its
    empty results would prove nothing)."""
    found = invoke(g, agent, "memory_search", {"query": query, "maxResults": limit})
    assert not found.get("unavailable") and not found.get("error"), (agent, query, found)
    assert found["routing"]["status"] != "error", (agent, query, found["routing"])
    return list(found["results"])


def rpc_search(g: Gateway, agent: str, query: str) -> list[dict[str, Any]]:
    """Gateway RPC `memory.search` for ``agent`` (`openclaw gateway call`)."""
    params = json.dumps({"query": query, "maxResults": 10, "agentId": agent})
    call = ["gateway", "call", "memory.search", "--port", str(g.port), "--token", TOKEN, "--params", params]
    payload = json.loads(ok(openclaw(g.env, g.home, *call, "--json", "--timeout", "90000")).stdout)
    return payload["results"] if isinstance(payload, dict) else payload


def cli_search(g: Gateway, agent: str, query: str) -> list[dict[str, Any]]:
    """`openclaw memory search --agent` (the plugin's own command, in the CLI's process)."""
    proc = openclaw(g.env, g.home, "memory", "search", "--agent", agent, "--json", "--max-results", "10", query)
    return list(json.loads(ok(proc).stdout)["results"])


def by_backend(hits: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    return [h for h in hits if h.get("memoryRouter", {}).get("backend") == backend]


# ---------------------------------------------------------------------------- what is alice's alone


def lcm_texts(world: World) -> list[str]:
    """alice's conversation: every summary and message of the demo's lcm.db."""
    with sqlite3.connect(world.state / "lcm.db") as db:
        texts = [r[0] for r in db.execute("SELECT content FROM summaries")]
        texts += [r[0] for r in db.execute("SELECT content FROM messages")]
    return [t for t in texts if t]


# backend -> (a question alice's memory there answers, words only her memory there holds). The
# words are looked for in hits' text and paths only (a routing block echoes the query).
PRIVATE: dict[str, tuple[str, tuple[str, ...]]] = {
    "lossless": (DECISION, ()),  # her conversation's texts: lcm_texts()
    "totalrecall": ("what did I note recently about the vault code", ("4711-alpha",)),
    "qmd": ("find the function parseAuthToken", ("memory-router/qmd/demo/",)),
    "cognee": ("what depends on Postgres", ("AuthService", "OrderService", "BillingWorker")),
}
# backend -> (a question the shared collection or dataset answers, what the answer holds)
SHARED: dict[str, tuple[str, str]] = {
    "qmd": (f"find the function {PAGER}", "memory-router/qmd/team-docs/oncall.md"),
    "cognee": ("what depends on BillingDatabase", "LedgerService"),
}


def leaked(hits: list[dict[str, Any]], private: list[str]) -> list[str]:
    """Which of alice's private texts (or words, or paths) appear in these hits."""
    blob = "\n".join(f"{h.get('path', '')}\n{h.get('citation', '')}\n{h.get('snippet', '')}" for h in hits)
    return [p[:60] for p in private if p[:80] in blob]


def needs_backend(backend: str, world: World) -> None:
    if backend == "cognee" and not world.cognee_env:
        pytest.skip("the Cognee venv (.tools/cognee-venv) is not installed: run `bash .ci/setup.d/40-cognee.sh`")


# ---------------------------------------------------------------------------- the tests


def test_the_gateway_reads_the_roster_it_was_given(gw: Gateway) -> None:
    """The Gateway left the roster as written (it did not migrate a legacy list), so each
    roster's tests below really ran against that shape."""
    assert roster_kind(gw.home) == gw.roster


@pytest.mark.parametrize("backend", list(PRIVATE))
def test_alice_s_memory_never_reaches_bob(gw: Gateway, backend: str) -> None:
    needs_backend(backend, gw.world)
    query, words = PRIVATE[backend]
    mine = search(gw, "alice", query)
    hers = by_backend(mine, backend)
    assert hers, (backend, mine)  # the control: alice's own memory there answers her
    private = [*words, *(h["snippet"] for h in hers if not h["path"].startswith("memory-router/qmd/team-docs/"))]
    if backend == "lossless":
        private += lcm_texts(gw.world)
    assert leaked(hers, private), (backend, hers)
    # bob, through each surface: the tool, memory_get on every path alice got, the Gateway RPC,
    # the CLI (the last two are OpenClaw processes: run side by side).
    with ThreadPoolExecutor(2) as pool:
        rpc = pool.submit(rpc_search, gw, "bob", query)
        cli = pool.submit(cli_search, gw, "bob", query)
        tool = search(gw, "bob", query)
        gets = {h["path"]: invoke(gw, "bob", "memory_get", {"path": h["path"]}) for h in mine}
        answers = {"memory_search": tool, "memory.search": rpc.result(), "openclaw memory search": cli.result()}
    for surface, hits in answers.items():
        assert not leaked(hits, private), (backend, surface, hits)
    for path, got in gets.items():
        if path.startswith("memory-router/qmd/team-docs/"):
            continue  # shared on purpose (not alice's alone); bob never got it, so not_found
        assert got["status"] in ("not_found", "error") and got["text"] == "", (backend, path, got)


@pytest.mark.parametrize("backend", list(SHARED))
def test_what_is_shared_on_purpose_reaches_both(gw: Gateway, backend: str) -> None:
    needs_backend(backend, gw.world)
    query, mark = SHARED[backend]
    for agent in ("alice", "bob"):
        hits = by_backend(search(gw, agent, query), backend)
        where = [h for h in hits if mark in f"{h['path']}\n{h['snippet']}"]
        assert where, (agent, backend, hits)
        if backend == "qmd":  # readable back, by each agent, from the collection's folder
            got = invoke(gw, agent, "memory_get", {"path": where[0]["path"]})
            assert got["status"] == "ok" and got["text"] == TEAM_DOC, (agent, got)


def test_memory_get_reads_memory_files_not_the_workspace(gw: Gateway) -> None:
    got = invoke(gw, "alice", "memory_get", {"path": "MEMORY.md"})
    assert got["status"] == "ok" and SECRET in got["text"]
    for path in (".env", "state/router-config.json", "src/auth/token.ts"):
        bad = invoke(gw, "alice", "memory_get", {"path": path})
        assert bad["status"] == "error" and bad["code"] == "MEMORY_PATH_NOT_ALLOWED" and bad["text"] == "", bad
    assert "sk-alice" not in json.dumps(invoke(gw, "alice", "memory_get", {"path": ".env"}))
    # bob has no MEMORY.md of his own: not_found, never alice's (a shared hit cache gave him hers).
    assert invoke(gw, "bob", "memory_get", {"path": "MEMORY.md"}) == {
        "status": "not_found",
        "text": "",
        "path": "MEMORY.md",
    }
    assert invoke(gw, "bob", "memory_get", {"path": "memory/2026-11-30.md"})["text"].endswith("bob likes green tea\n")


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


def test_a_state_dir_router_config_is_served_by_the_daemon(gw: Gateway) -> None:
    """The plugin is given no `config`: the state dir's router-config.json is the one memory-router
    reads, and the daemon the plugin started serves it (no exec path, no second daemon for alice)."""
    found = invoke(gw, "alice", "memory_search", {"query": "auth", "maxResults": 2})
    assert found["routing"]["via"] == "daemon"
    assert found["routing"]["status"] != "error"
    assert daemons(gw.state)  # the Gateway's daemons serve this state dir
