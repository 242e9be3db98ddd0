"""The plugin's own modules (openclaw-plugin/lib/*.js) run under Node, checked against
memory-router's Python side: the daemon context it compares, the envelope mapping, the transport
choices. Needs only a Node >= 22 (.tools/node22 or node24), not OpenClaw."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.client.wire import context
from memory_router.config import envvars

from ._support import PLUGIN_DIR, any_node, memory_router_bin

NODE = any_node()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="no Node >= 22 in .tools (run: bash .ci/setup.d/20-qmd.sh)"),
]
LIB = PLUGIN_DIR / "lib"


def node(script: str, data: Any, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
    """Run an ES module body with `data` as `input`; it sets `output`, returned as JSON."""
    program = (
        'const input = JSON.parse((await import("node:fs")).readFileSync(0, "utf8"));\nlet output;\n'
        f"{script}\nprocess.stdout.write(JSON.stringify(output));"
    )
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", program],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


WIRE = f'import {{ contextDiff, expectedContext, envDigest }} from "{LIB}/wire.js";'


def test_the_plugin_computes_the_context_a_daemon_it_starts_reports(tmp_path: Path) -> None:
    root, state = tmp_path / "ws", tmp_path / "state"
    cfg = tmp_path / "router-config.json"
    spawn_env = {"HOME": "/home/u", "PATH": "/usr/bin", "OPENCLAW_REPO_ROOT": str(root), "QMD_FORCE_CPU": "1"}
    # What memory_router.client.wire.context says the daemon started with these reports.
    theirs = context(
        cwd=str(root),
        environ=spawn_env,
        state_dir=str(state),
        backends_json=str(state / "backends.json"),
        config=str(cfg),
        salt="s4lt",
    )
    settings = {"memoryRoot": str(root), "stateDir": str(state), "config": str(cfg), "env": spawn_env}
    same = node(
        f"{WIRE} output = contextDiff(expectedContext(input.s, input.t), input.t);", {"s": settings, "t": theirs}
    )
    assert same == []
    other = {**settings, "memoryRoot": str(tmp_path / "other"), "env": {**spawn_env, "OPENCLAW_REPO_ROOT": "/x"}}
    diff = node(f"{WIRE} output = contextDiff(expectedContext(input.s, input.t), input.t);", {"s": other, "t": theirs})
    assert diff == ["cwd", "env.OPENCLAW_REPO_ROOT"]
    # Every name the router depends on is compared (the daemon's list, not a copy of it).
    assert set(theirs["env"]) == set(envvars.ALL)


@settings(max_examples=15, deadline=None)
@given(st.text(max_size=40), st.text(min_size=1, max_size=20), st.one_of(st.none(), st.text(max_size=40)))
def test_env_digest_matches_python(salt: str, name: str, value: str | None) -> None:
    from memory_router.client.wire import env_digest

    try:
        "\0".join((salt, name, value or "")).encode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates: JSON cannot carry them to Node either
    got = node(f"{WIRE} output = envDigest(input[0], input[1], input[2]);", [salt, name, value])
    assert got == env_digest(salt, name, value)


MAPPING = f'import {{ toSearchResults, HitCache, excerpt }} from "{LIB}/mapping.js";'

ENVELOPE = {
    "query_echo": "q",
    "routed_to": "totalrecall",
    "routed_mode": None,
    "fallback_chain": ["lossless", "totalrecall"],
    "fallbacks_used": 1,
    "status": "partial",
    "rule": {"number": 3, "id": "decision_recall", "strength": "strong"},
    "results": [
        {
            "content": "a\nb\nc",
            "relevance": 0.9,
            "source": "totalrecall",
            "timestamp": None,
            "path": "memory/x.md",
            "line": 7,
        },
        {"content": "summary", "relevance": 0.8, "source": "lossless", "timestamp": "t", "summary_id": "sum_1"},
        {
            "content": "A --[calls]--> B",
            "relevance": 0.7,
            "source": "cognee",
            "timestamp": None,
            "relationship": {"source": "A", "relation": "calls", "target": "B"},
        },
        {"content": "low", "relevance": 0.1, "source": "qmd", "timestamp": None, "path": "src/y.ts"},
    ],
}


def test_envelope_to_openclaw_results() -> None:
    out = node(
        f"{MAPPING} const cache = new HitCache();"
        "const results = toSearchResults(input, { maxResults: 10, cache });"
        "output = { results, back: results.map((r) => cache.get(r.path)?.text) };",
        ENVELOPE,
    )
    results = out["results"]
    assert [r["score"] for r in results] == [0.9, 0.8, 0.7, 0.1]  # every hit: floors are applied before
    assert all(r["source"] == "memory" for r in results)
    file_hit, summary, edge, _ = results
    assert (file_hit["path"], file_hit["startLine"], file_hit["endLine"]) == ("memory/x.md", 7, 9)
    assert summary["path"] == "memory-router/lossless/sum_1" and summary["startLine"] == 1
    assert edge["path"].startswith("memory-router/cognee/")
    assert out["back"] == ["a\nb\nc", "summary", "A --[calls]--> B", "low"]  # readFile can serve each
    facts = summary["memoryRouter"]
    assert facts["backend"] == "lossless" and facts["routed_to"] == "totalrecall"
    assert facts["rule"] == {"number": 3, "id": "decision_recall"} and facts["status"] == "partial"


def test_max_results_and_a_bounded_cache() -> None:
    out = node(
        f"{MAPPING} const cache = new HitCache(2);"
        "const r = toSearchResults(input, { maxResults: 3, cache });"
        "output = { n: r.length, kept: r.map((x) => Boolean(cache.get(x.path))) };",
        ENVELOPE,
    )
    assert out == {"n": 3, "kept": [False, True, True]}  # the oldest hit is dropped first


TRIM = f'import {{ budgetHits, dropUnder }} from "{LIB}/trim.js";'
HITS = st.lists(
    st.tuples(
        st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30),  # code points past U+FFFF too
        st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    ),
    max_size=8,
)


@settings(max_examples=25, deadline=None)
@given(HITS, st.floats(min_value=0.0, max_value=1.0, allow_nan=False), st.integers(1, 80))
def test_min_score_then_the_budget_is_memory_routers_budget_on_the_hits_that_passed(
    hits: list[tuple[str, float]], min_score: float, max_chars: int
) -> None:
    """The plugin's per-hit floor (memory-core's minScore) and its budget on what passed, against
    memory_router.core.trim's budget on the same hits: the same hits, cut the same way, the same report."""
    from memory_router.backends.base import Result
    from memory_router.core.envelope import Envelope
    from memory_router.core.trim import Trim, apply

    results = [{"content": c, "relevance": r, "source": "qmd", "timestamp": None} for c, r in hits]
    got = node(
        f"{TRIM} const d = dropUnder({{ results: input[0], status: 'success' }}, input[1]);"
        "const b = budgetHits(d.envelope, input[2]);"
        "output = { contents: (b.envelope.results ?? []).map((h) => h.content), floor: d.floor, budget: b.budget };",
        [results, min_score, max_chars],
    )
    passed = [Result(c, r, "qmd") for c, r in hits if r >= min_score]
    envelope = Envelope("q", "qmd", None, ["qmd"], 0, passed, len(passed), 0.0, "success")
    want = apply(envelope, Trim(max_chars=max_chars))
    assert got["contents"] == [h.content for h in want.results]
    assert got["budget"] == want.budget
    dropped = len(hits) - len(passed)
    assert got["floor"] == ({"min_score": min_score, "dropped": dropped} if dropped else None)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(alphabet="ab ", max_size=5), min_size=1, max_size=12), st.integers(1, 15), st.integers(1, 15))
def test_excerpt_pages_through_a_file(lines: list[str], start: int, count: int) -> None:
    text = "\n".join(lines)
    got = node(f"{MAPPING} output = excerpt(input[0], 'f.md', input[1], input[2]);", [text, start, count])
    assert got["text"] == "\n".join(lines[start - 1 : start - 1 + count])
    assert got["from"] == start and got["lines"] == len(lines[start - 1 : start - 1 + count])
    if start - 1 + count < len(lines):
        assert got["truncated"] is True and got["nextFrom"] == start + count
    else:
        assert "nextFrom" not in got


ROUTER = f'import {{ RouterClient }} from "{LIB}/router.js";'


def stop_daemon(state: Path) -> None:
    subprocess.run(
        [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(state)], capture_output=True, check=False
    )


def _settings(tmp_path: Path, **over: Any) -> dict[str, Any]:
    demo = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "MEMORY_ROUTER_"))}
    env["OPENCLAW_REPO_ROOT"] = str(demo)
    return {
        "command": str(memory_router_bin()),
        "stateDir": str(demo / "state"),
        "socket": None,
        "memoryRoot": str(demo),
        "config": str(demo / "state" / "router-config.json"),
        "timeoutMs": 5000,
        "maxResults": 5,
        "env": env,
        **over,
    }


QUERY = (
    f"{ROUTER} const c = new RouterClient(input, {{ info() {{}}, warn(m) {{ console.error(m); }} }});"
    "try { const r = await c.query('auth', { limit: 2 });"
    "output = { via: r.via, routed_to: r.envelope.routed_to, n: r.envelope.results.length, d: c.describe() }; }"
    "catch (e) { output = { error: e.message, code: e.code }; } finally { c.close(); }"
)


def test_an_unusable_socket_falls_back_to_exec(tmp_path: Path) -> None:
    subprocess.run([str(memory_router_bin()), "demo", "--dir", str(tmp_path / "demo")], capture_output=True, check=True)
    planted = tmp_path / "demo" / "state" / "router.sock"
    planted.write_text("not a socket")
    out = node(QUERY, _settings(tmp_path))
    # Answered through `memory-router query` (which backend answers "auth" depends on the demo's
    # qmd models: qmd when they are there, else rule 7's next steps, Lossless or Total Recall).
    assert out["via"] == "exec" and out["routed_to"] in ("qmd", "lossless", "totalrecall") and out["n"] == 2
    assert "is not a socket" in out["d"]["fallbackReason"]
    assert out["d"]["spawns"] == 0  # a path it cannot use is never replaced


def test_a_missing_command_is_named_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "demo" / "state").mkdir(parents=True)
    out = node(QUERY, _settings(tmp_path, command=str(tmp_path / "no-such-memory-router")))
    assert "not found" in out["error"] and "plugins.entries.memory-router.config.command" in out["error"]


TOOLS = (
    f'import {{ MemoryRouterPlugin }} from "{LIB}/manager.js";'
    f'import {{ createSearchTool, createGetTool }} from "{LIB}/tools.js";'
    "const api = { pluginConfig: input, config: {}, logger: { info() {}, warn() {} } };"
    "const plugin = new MemoryRouterPlugin(api);"
    "const search = await createSearchTool(plugin, {}).execute('t1', { query: 'auth' });"
    "const get = await createGetTool(plugin, {}).execute('t2', { path: '/etc/passwd' });"
    "const runtime = (await import(`${input.lib}/manager.js`)).memoryRuntime(plugin);"
    "const { manager } = await runtime.getMemorySearchManager({ cfg: {}, agentId: 'main' });"
    "let thrown = null; try { await manager.search('auth'); } catch (e) { thrown = e.message; }"
    "plugin.closeAll();"
    "output = { search: search.details, text: search.content[0].text, get: get.details, thrown };"
)


def test_a_router_failure_is_an_answer_not_a_crash(tmp_path: Path) -> None:
    """No backends.json: memory-router's own error (code and fix) reaches the tool's unavailable
    payload and the manager's rejection (the Gateway turns it into UNAVAILABLE)."""
    (tmp_path / "state").mkdir()
    (tmp_path / "ws").mkdir()
    cfg = {"stateDir": str(tmp_path / "state"), "memoryRoot": str(tmp_path / "ws"), "lib": str(LIB)}
    cfg["command"] = str(memory_router_bin())
    try:
        out = node(TOOLS.replace("pluginConfig: input", "pluginConfig: { ...input, lib: undefined }"), cfg)
    finally:
        stop_daemon(tmp_path / "state")  # the plugin started one (it answers with the error)
    search = out["search"]
    assert search["results"] == [] and search["disabled"] is True and search["unavailable"] is True
    assert "BACKENDS_JSON_MISSING" in search["error"] and "backends.json" in search["error"]
    assert "memory-router query" in search["action"]
    assert json.loads(out["text"]) == search  # the model reads the same payload as text
    assert out["get"]["status"] == "error" and "relative to the memory root" in out["get"]["error"]
    assert out["thrown"] and "BACKENDS_JSON_MISSING" in out["thrown"]


def test_a_daemon_that_dies_at_start_is_reported_and_not_restarted_per_query(tmp_path: Path) -> None:
    """A `memory-router` that cannot serve (here `false`): the plugin does not wait out the start
    timeout, says why in its status, and does not start another daemon for the next query."""
    (tmp_path / "demo" / "state").mkdir(parents=True)
    script = (
        f"{ROUTER} const c = new RouterClient(input, {{ info() {{}}, warn() {{}} }});"
        "const errors = [];"
        "for (const q of ['a', 'b']) { try { await c.query(q); } catch (e) { errors.push(e.message); } }"
        "output = { errors, d: c.describe() }; c.close();"
    )
    out = node(script, _settings(tmp_path, command=shutil.which("false")))
    assert "the daemon exited (1) before listening" in out["d"]["fallbackReason"]
    assert out["d"]["spawns"] == 1 and out["d"]["execQueries"] == 2
    assert all("exited 1 without an envelope" in e for e in out["errors"])


def test_the_prompt_section_tells_the_agent_when_to_search() -> None:
    script = (
        f'import {{ memoryPromptSection }} from "{LIB}/prompt.js";'
        "output = input.map(([tools, citationsMode]) =>"
        " memoryPromptSection({ availableTools: new Set(tools), citationsMode }));"
    )
    both, none, off = node(
        script, [[["memory_search", "memory_get"], None], [["exec"], None], [["memory_search"], "off"]]
    )
    assert both[0] == "## Memory Recall" and "run memory_search" in both[1] and "memory_get" in both[1]
    assert none == []  # without the tools (a policy removed them) the section is left out
    assert "Citations are disabled" in off[-2] and "memory_get" not in off[1]
