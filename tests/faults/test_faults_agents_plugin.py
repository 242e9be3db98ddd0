"""What one agent may read through the plugin (issue 30), and how the plugin starts its daemon.

The plugin's own tools and memory runtime run under Node against the real memory-router (the demo
workspace, its qmd index, its lcm.db): memory_get reads memory files and what a search returned to
the asking agent, never another file of the workspace nor another agent's hit; each Lossless hit
has its own path; a qmd hit is read from its collection's folder; a config error fails at once
with serve's own message; a daemon draining its last requests delays a start, not 15 s of it;
a state-dir router-config.json is served by the daemon. The two-agent Gateway is
tests/openclaw/test_openclaw_agents.py's. Each test adds its row to tests/FAULTS.md ("One agent's
memory stays that agent's").
Needs only a Node >= 22 (.tools), not OpenClaw.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from ..openclaw._support import PLUGIN_DIR, any_node, memory_router_bin
from ..openclaw.test_plugin_modules import _settings, node, stop_daemon
from ..support.faults import (
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
)

NODE = any_node()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="no Node >= 22 in .tools (run: bash .ci/setup.d/20-qmd.sh)"),
]
LIB = PLUGIN_DIR / "lib"
DECISION = "what did we decide about the database schema in the morning session"

# A plugin instance as OpenClaw builds one: its config, OpenClaw's config (agents.list with a
# workspace each), and the host's agent-workspace helper (resolveAgentWorkspaceDir's order:
# the agent's own workspace, else agents.defaults.workspace).
HOST = (
    f'import {{ MemoryRouterPlugin, memoryRuntime }} from "{LIB}/manager.js";'
    f'import {{ createSearchTool, createGetTool }} from "{LIB}/tools.js";'
    "const cfg = input.cfg;"
    "const resolveAgentWorkspaceDir = (c, id) => (c.agents.list.find((a) => a.id === id) ?? {}).workspace"
    " ?? c.agents.defaults.workspace;"
    "const api = { pluginConfig: input.plugin, config: cfg, logger: { info() {}, warn() {} },"
    " runtime: { agent: { resolveAgentWorkspaceDir } } };"
    "const plugin = new MemoryRouterPlugin(api);"
    "const search = async (ctx, query, args = {}) =>"
    " (await createSearchTool(plugin, { config: cfg, ...ctx }).execute('s', { query, ...args })).details;"
    "const get = async (ctx, path, args = {}) =>"
    " (await createGetTool(plugin, { config: cfg, ...ctx }).execute('g', { path, ...args })).details;"
)


def row(key: str, item: str, fault: str, outcome: str, measured: str = "") -> None:
    cells = {"item": item, "fault": fault, "outcome": outcome, "measured": measured}
    # Rows in the order, whichever module ran first (the daemon's rows share the section).
    order = f"{int(item.split()[0]):02d} {key}"
    report("agents", f"plugin-{key}", transport="OpenClaw plugin (Node)", order=order, **cells)


def run_host(body: str, data: dict[str, Any], state: Path) -> Any:
    try:
        return node(f"{HOST}\ntry {{ {body} }} finally {{ plugin.closeAll(); }}", data)
    finally:
        stop_daemon(state)
        for sock in state.glob("router-openclaw-*.sock"):
            subprocess.run(
                [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(state), "--socket", str(sock)],
                capture_output=True,
                check=False,
            )


def demo(root: Path) -> Path:
    subprocess.run([str(memory_router_bin()), "demo", "--dir", str(root)], capture_output=True, check=True, timeout=180)
    return root


def host_data(state: Path, agents: dict[str, Path], **plugin: Any) -> dict[str, Any]:
    names = list(agents)
    listed: list[dict[str, object]] = [{"id": n, "workspace": str(w)} for n, w in agents.items()]
    listed[0]["default"] = True
    return {
        "cfg": {"agents": {"defaults": {"workspace": str(agents[names[0]])}, "list": listed}},
        "plugin": {"command": str(memory_router_bin()), "stateDir": str(state), **plugin},
    }


# ---------------------------------------------------------------------------- item 1


def test_memory_get_reads_memory_files_and_returned_hits_only(tmp_path: Path) -> None:
    ws = demo(tmp_path / "demo")
    (ws / "MEMORY.md").write_text("long-term: the release train leaves on Fridays\n")
    (ws / "USER.md").write_text("the user prefers short answers\n")
    (ws / "dreams.md").write_text("dreamt of a faster index\n")
    (ws / ".env").write_text("OPENAI_API_KEY=sk-secret-123\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[remote]\n\turl = https://token@example.com/x.git\n")
    (ws / "memory" / "notes.txt").write_text("not markdown\n")
    state = ws / "state"
    # The demo dates its daily notes from today: take the oldest one it wrote.
    daily = sorted((ws / "memory" / "daily").glob("*.md"))[0].relative_to(ws).as_posix()
    body = (
        "const me = { agentId: 'main' };"
        f"const paths = ['MEMORY.md', 'USER.md', 'dreams.md', '{daily}', '.env', '.git/config',"
        " 'memory/notes.txt', 'src/auth/token.ts', 'state/router-config.json', 'CLAUDE.local.md', 'memory/none.md'];"
        "const before = {}; for (const p of paths) before[p] = await get(me, p);"
        "const found = await search(me, 'auth', { maxResults: 5 });"
        "const after = await get(me, 'CLAUDE.local.md');"
        "output = { before, found: found.results.map((r) => r.path), after };"
    )
    out = run_host(body, host_data(state, {"main": ws}, config=str(state / "router-config.json")), state)
    before = out["before"]
    for path in ("MEMORY.md", "USER.md", "dreams.md", daily):
        assert before[path]["status"] == "ok", (path, before[path])
        assert before[path]["text"] == (ws / path).read_text()
    assert before["MEMORY.md"]["text"].startswith("long-term: the release train")
    for path in (".env", ".git/config", "memory/notes.txt", "src/auth/token.ts", "state/router-config.json"):
        got = before[path]
        assert got["status"] == "error" and got["code"] == "MEMORY_PATH_NOT_ALLOWED" and got["text"] == "", (path, got)
        assert "not an allowed Markdown memory file" in got["error"]
    assert "sk-secret" not in json.dumps(before)
    # A memory path that is not there: not_found, as memory-core says it.
    assert before["memory/none.md"] == {"status": "not_found", "text": "", "path": "memory/none.md"}
    # CLAUDE.local.md (Total Recall's working memory) is no memory-core file: readable once a
    # search returned it to this agent, not before.
    assert before["CLAUDE.local.md"]["code"] == "MEMORY_PATH_NOT_ALLOWED"
    assert "CLAUDE.local.md" in out["found"]
    assert out["after"]["status"] == "ok" and out["after"]["text"] in (ws / "CLAUDE.local.md").read_text()
    row(
        "1",
        "1",
        "memory_get on .env, .git/config, memory/notes.txt, src/auth/token.ts, state/router-config.json",
        "status error, code MEMORY_PATH_NOT_ALLOWED, no text; MEMORY.md, USER.md, dreams.md, memory/**.md read; "
        "CLAUDE.local.md refused until a search returned it, then read",
        "5 of 5 non-memory files refused",
    )


# ---------------------------------------------------------------------------- item 2 (plugin level)


def test_one_agent_never_reads_another_agent_s_hits(tmp_path: Path) -> None:
    alice = demo(tmp_path / "alice")
    (alice / "MEMORY.md").write_text("alice's long-term memory: the auth token rotates every 7 days\n")
    with sqlite3.connect(alice / "state" / "lcm.db") as db:  # the demo's conversation is alice's
        db.execute("UPDATE conversations SET session_key = 'agent:alice:main'")
    bob = tmp_path / "bob"
    (bob / "memory").mkdir(parents=True)
    (bob / "memory" / "2026-11-30.md").write_text("# bob\n- bob likes tea\n")
    state = alice / "state"
    body = (
        "const a = await search({ agentId: 'alice' }, 'auth', { maxResults: 8 });"
        f"const d = await search({{ agentId: 'alice' }}, {json.dumps(DECISION)}, {{ maxResults: 3 }});"
        "const hits = [...a.results, ...d.results];"
        "const bobGets = []; for (const h of hits) bobGets.push(await get({ agentId: 'bob' }, h.path));"
        "const aliceGets = []; for (const h of hits) aliceGets.push(await get({ agentId: 'alice' }, h.path));"
        "output = { hits, bobGets, aliceGets, bobMemory: await get({ sessionKey: 'agent:bob:main' }, 'MEMORY.md') };"
    )
    data = host_data(state, {"alice": alice, "bob": bob}, config=str(state / "router-config.json"))
    out = run_host(body, data, state)
    paths = [h["path"] for h in out["hits"]]
    assert "MEMORY.md" in paths and any(p.startswith("memory-router/lossless/") for p in paths)
    assert all(g["status"] == "ok" for g in out["aliceGets"])
    for hit, got in zip(out["hits"], out["bobGets"], strict=True):
        assert got["status"] in ("not_found", "error") and got["text"] == "", (hit["path"], got)
        assert hit["snippet"] not in json.dumps(got)
    # bob has no MEMORY.md: not_found, never alice's (the session key names bob).
    assert out["bobMemory"] == {"status": "not_found", "text": "", "path": "MEMORY.md"}
    row(
        "2",
        "2",
        "alice searches (MEMORY.md, Lossless hits); bob calls memory_get on each path alice got",
        "bob: not_found / MEMORY_PATH_NOT_ALLOWED for every path, none of alice's text; bob's MEMORY.md not_found",
        f"{len(out['hits'])} of alice's hits, 0 read by bob",
    )


# ---------------------------------------------------------------------------- item 4


def test_each_lossless_hit_has_its_own_path(tmp_path: Path) -> None:
    """The demo's decision answer holds a leaf summary and a message it covers: two paths, and
    memory_get gives each hit its own text."""
    ws = demo(tmp_path / "demo")
    state = ws / "state"
    body = (
        f"const r = await search({{ agentId: 'main' }}, {json.dumps(DECISION)}, {{ maxResults: 8 }});"
        "const got = []; for (const h of r.results) got.push(await get({ agentId: 'main' }, h.path));"
        "output = { hits: r.results, got };"
    )
    out = run_host(body, host_data(state, {"main": ws}, config=str(state / "router-config.json")), state)
    lossless = [h for h in out["hits"] if h["memoryRouter"]["backend"] == "lossless"]
    assert len(lossless) >= 3
    assert len({h["path"] for h in lossless}) == len(lossless)  # one path per Lossless hit
    for hit, got in zip(out["hits"], out["got"], strict=True):
        if hit["memoryRouter"]["backend"] == "lossless":
            assert got["status"] == "ok" and got["text"] == hit["snippet"], hit["path"]
    row(
        "4",
        "4",
        "a Lossless answer holding a leaf summary and a message that leaf covers (same summary_id)",
        "one synthetic path per hit (message-<id> for a message); memory_get returns each hit's own text",
        f"{len(lossless)} Lossless hits, {len({h['path'] for h in lossless})} paths",
    )


# ---------------------------------------------------------------------------- item 5


def _index_collection(state: Path, source: Path, name: str) -> None:
    """`qmd collection add` into the demo's qmd index (as memory-router demo does)."""
    from memory_router.backends import BackendContext
    from memory_router.backends.common.settings import settings_from_json
    from memory_router.backends.qmd.adapter import Settings
    from memory_router.backends.qmd.backend import QmdBackend
    from memory_router.backends.qmd.indexing import build_collection

    home = state / "qmd"
    settings = {"index_path": str(home / "index.sqlite"), "config_dir": str(home / "config"), "collections": [name]}
    backend = QmdBackend("qmd", settings_from_json(Settings, settings), BackendContext(state_dir=state))
    build_collection(backend.transport(), source.resolve(), name, "**/*.ts", home / "index.lock")


def test_a_qmd_hit_is_read_from_its_collection_not_the_workspace(tmp_path: Path) -> None:
    from memory_router.backends.qmd.adapter import Settings

    ws = demo(tmp_path / "demo")
    state = ws / "state"
    ext = tmp_path / "elsewhere"
    (ext / "src" / "auth").mkdir(parents=True)
    theirs = "// the collection's own file\nexport function parseAuthToken(raw: string) {\n  return raw.trim();\n}\n"
    (ext / "src" / "auth" / "token.ts").write_text(theirs)
    _index_collection(state, ext, "ext")
    cfg = json.loads((state / "router-config.json").read_text())
    cfg["backends"]["qmd"]["collections"] = ["ext"]  # only the outside collection
    if "agent_collections" in Settings._FIELDS:  # a scoped query searches the agent's
        cfg["backends"]["qmd"]["agent_collections"] = {"main": ["ext"]}
    (state / "router-config.json").write_text(json.dumps(cfg))
    assert (ws / "src" / "auth" / "token.ts").read_text() != theirs  # the workspace has its own
    body = (
        "const r = await search({ agentId: 'main' }, 'find the function parseAuthToken', { maxResults: 3 });"
        "const hit = r.results[0];"
        "output = { r, got: await get({ agentId: 'main' }, hit.path, { from: 1, lines: 50 }),"
        " plain: await get({ agentId: 'main' }, 'src/auth/token.ts') };"
    )
    out = run_host(body, host_data(state, {"main": ws}, config=str(state / "router-config.json")), state)
    hit = out["r"]["results"][0]
    assert out["r"]["routing"]["routed_to"] == "qmd" and hit["memoryRouter"]["backend"] == "qmd"
    assert hit["path"] == "memory-router/qmd/ext/src/auth/token.ts"
    assert out["got"]["status"] == "ok" and out["got"]["text"] == theirs
    # The workspace file of the same relative path was never returned to this agent: not read.
    assert out["plain"]["code"] == "MEMORY_PATH_NOT_ALLOWED"
    row(
        "5",
        "5",
        "a qmd hit src/auth/token.ts from a collection outside the workspace, which has its own src/auth/token.ts",
        "path memory-router/qmd/ext/src/auth/token.ts; memory_get reads the collection's file (its folder from "
        "qmd's index.yml); the workspace's file is not read",
    )


# ---------------------------------------------------------------------------- item 6

ROUTER = f'import {{ RouterClient }} from "{LIB}/router.js";'
TIMED = (
    f"{ROUTER} const c = new RouterClient(input, {{ info() {{}}, warn() {{}} }});"
    "const t0 = Date.now(); let r = null, error = null;"
    "try { r = await c.query('auth', { limit: 2, scope: { agent: 'main' } }); } catch (e) { error = e.message; }"
    "output = { ms: Date.now() - t0, error, via: r?.via, status: r?.envelope?.status,"
    " code: r?.envelope?.error_code, message: r?.envelope?.error_message, d: c.describe() }; c.close();"
)


def test_a_config_error_fails_fast_with_serve_s_message(tmp_path: Path) -> None:
    ws = demo(tmp_path / "demo")
    state = ws / "state"
    cfg = json.loads((state / "router-config.json").read_text())
    cfg["rules"][0]["chain"][0]["backend"] = "cogne"  # the typo
    (state / "router-config.json").write_text(json.dumps(cfg))
    try:
        out = node(TIMED, _settings(tmp_path))
    finally:
        stop_daemon(state)
    # serve exits 2 for the config error: no 15 s wait for a daemon that will never listen.
    assert out["ms"] < 10_000, out
    assert "the daemon exited (2) before listening" in out["d"]["fallbackReason"]
    assert "cogne" in out["d"]["fallbackReason"]  # serve's own reason, from its stderr
    assert out["status"] == "error" and out["code"] == "CONFIG_INVALID" and "cogne" in out["message"]
    row(
        "6a",
        "6",
        "router-config.json with a typo (backend 'cogne'): serve exits 2",
        "no wait for a daemon that never listens: serve's stderr reason shown (fallbackReason), the query answers "
        "CONFIG_INVALID through exec",
        f"first search answered in {out['ms']} ms (was 15 s + exec)",
    )


def test_a_query_while_the_old_daemon_drains_starts_a_new_one_when_it_is_gone(tmp_path: Path) -> None:
    """A daemon that is draining holds its socket's lock with a stale socket file and no
    listener. The plugin's new daemon exits 2 (lock held); once the old one is gone the plugin
    starts another, instead of polling out its 15 s start wait."""
    ws = demo(tmp_path / "demo")
    state = ws / "state"
    sock = state / "router.sock"
    # The draining daemon's state: the lock held (by a live process whose pid is in it), the socket
    # file left from its closed listener. It exits 2.5 s later.
    holder = subprocess.Popen(
        [
            "python3",
            "-c",
            "import fcntl, os, socket, sys, time\n"
            "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()\n"
            "fd = os.open(sys.argv[1] + '.lock', os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); os.ftruncate(fd, 0); os.write(fd, f'{os.getpid()}\\n'.encode())\n"
            "print('held', flush=True); time.sleep(2.5); os.unlink(sys.argv[1])\n",
            str(sock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    # Reaped as soon as it exits (a daemon's parent reaps it too): a zombie would look alive.
    threading.Thread(target=holder.wait, daemon=True).start()
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        out = node(TIMED, _settings(tmp_path))
    finally:
        holder.kill()
        holder.wait()
        stop_daemon(state)
    assert out["via"] == "daemon" and out["status"] == "success", out
    assert out["ms"] < 12_000, out  # 2.5 s of drain plus a daemon start, not 15 s plus exec
    assert out["d"]["spawns"] == 2  # one refused by the lock, one after the old daemon went
    row(
        "6b",
        "6",
        "a query while the old daemon drains (its lock held, a stale socket, no listener; gone after 2.5 s)",
        "the new daemon exits 2 (lock held); once the holder is gone another is started; answered by the daemon",
        f"answered in {out['ms']} ms, 2 daemon starts (was 15 s + exec)",
    )


# ---------------------------------------------------------------------------- item 7


def test_a_state_dir_router_config_is_served_by_the_daemon(tmp_path: Path) -> None:
    """No `config` setting: memory-router's precedence picks <state dir>/router-config.json (the
    demo's), and so does the daemon the plugin starts; the plugin uses it, on the shared socket."""
    ws = demo(tmp_path / "demo")
    state = ws / "state"
    try:
        out = node(TIMED, _settings(tmp_path, config=None))
    finally:
        stop_daemon(state)
    assert out["via"] == "daemon" and out["status"] == "success", out
    assert out["d"]["socket"] == str(state / "router.sock") and out["d"]["spawns"] == 1
    assert not list(state.glob("router-openclaw-*.sock"))
    row(
        "7",
        "7",
        "no `config` setting, <state dir>/router-config.json present (precedence 3)",
        "the daemon on <state dir>/router.sock serves it and the plugin uses it: via daemon, 1 daemon, "
        "no router-openclaw-<hash>.sock",
    )


def test_expected_context_follows_the_config_precedence(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    script = (
        f'import {{ expectedContext }} from "{LIB}/wire.js";output = input.map((s) => expectedContext(s, {{}}).config);'
    )
    base: dict[str, object] = {"memoryRoot": str(tmp_path), "stateDir": str(state), "config": None, "env": {}}
    before = node(script, [base])
    (state / "router-config.json").write_text("{}")
    after = node(
        script,
        [
            base,
            {**base, "env": {"MEMORY_ROUTER_CONFIG": "cfg/r.json"}},
            {**base, "config": "/etc/x.json", "env": {"MEMORY_ROUTER_CONFIG": "cfg/r.json"}},
        ],
    )
    assert before == [None]  # the packaged one (recognised by its place in the package)
    assert after == [str(state / "router-config.json"), str(tmp_path / "cfg" / "r.json"), "/etc/x.json"]


# ---------------------------------------------------------------------------- the scope on the wire


def test_every_query_carries_the_asking_agent(tmp_path: Path) -> None:
    """The tool context's agent and session key reach memory-router as the request's scope, over
    the daemon and over exec alike (router.log records the routing of each)."""
    ws = demo(tmp_path / "demo")
    state = ws / "state"
    (state / "router.log").unlink(missing_ok=True)
    body = (
        "const viaDaemon = await search({ agentId: 'main', sessionKey: 'agent:main:main' }, 'auth');"
        "const refused = await search({ agentId: 'main', sessionKey: 'agent:bob:main' }, 'auth');"
        "output = { viaDaemon, refused };"
    )
    out = run_host(body, host_data(state, {"main": ws}, config=str(state / "router-config.json")), state)
    assert out["viaDaemon"]["routing"]["via"] == "daemon" and out["viaDaemon"]["results"]
    # A session key of another agent: memory-router refuses the scope (one session never speaks
    # for another agent), so the scope did reach it.
    assert out["refused"]["results"] == [] and "INVALID_SCOPE" in out["refused"]["error"]
    row(
        "scope",
        "3 (plugin side)",
        "a tool call with agentId main and another agent's session key (agent:bob:main)",
        "the plugin sends scope {agent, session_key} with every query; memory-router refuses it (INVALID_SCOPE), "
        "nothing returned",
    )
