"""qmd's semantic modes warm (the daemon's engine) versus a qmd process per call.

On one index of ``--notes`` markdown notes, embedded with the all-MiniLM-L6-v2 GGUF that
``.ci/setup.d/30-qmd-models.sh`` builds, the same concept query is answered:

* by the router's qmd adapter inside a long-lived router (``serve``/``mcp``): the warm engine;
* by one ``qmd`` process per call doing the same vector search (``qmd query --no-rerank
  -- 'vec: <q>'``: ``qmd vsearch`` itself cannot run here, it always loads the 1.7B expansion
  model first, which no installable package provides);
* by a running ``qmd mcp --http`` (``POST /query``, one vec search): qmd's own warm server;

and a default-rule query (``qmd/query``: lex + vec, no reranker installed) and a keyword search
the same ways. Medians and p95 over ``--repeat`` calls, the first call (model load) apart, the
engine's RSS. Without the model file it says so and exits 0.

    python bench/qmd_engine.py [--quick] [--repeat 20] [--notes 60]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import environment_line, fmt, median, parser, percentile, repeats, table
from _qmd_index import MODEL, embedded_index, qmd_backend

from memory_router.backends.base import BackendRequest
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.keywords import structured_query
from memory_router.backends.qmd.transports import CliTransport

CONCEPT = "how does error handling work in the API layer"
TOPICS = [
    "API error handling: handlers raise typed errors, the middleware maps them to HTTP status codes",
    "gardening: water the tomatoes, prune the roses in March, plant garlic in October",
    "Raft consensus: leader election with randomized timeouts, followers replicate the log",
    "deployment: tag the release, build the image, run migrations, roll out to staging",
    "running plan: easy runs, a long run on Sunday, rest after hard sessions",
    "guitar practice: scales, fingerpicking patterns, restring on the weekend",
    "sourdough: feed the starter, fold four times, proof overnight, bake at 250 degrees",
    "database migration: Alice owns it, the deadline is April 15, Bob benchmarks storage",
]


def build(notes: int) -> tuple[Path, dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="mr-bench-qmd-engine-"))
    texts = (f"# Note {i}\n\n{TOPICS[i % len(TOPICS)]}. Entry {i} of the journal.\n" for i in range(notes))
    return base, embedded_index(base, texts, query_expansion=False)


def per_call(cli: CliTransport, argv_tail: tuple[str, list[str], str]) -> float:
    """One CLI call, ms: ``argv_tail`` is (subcommand, options, query)."""
    t0 = time.perf_counter()
    done = subprocess.run(cli.argv(*argv_tail), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"qmd {argv_tail[0]} failed: {done.stderr.decode()[-400:]}")
    return (time.perf_counter() - t0) * 1000


async def warm_series(backend: QmdBackend, query: str, mode: str, n: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(n + 1):
        t0 = time.perf_counter()
        answer = await backend.search(BackendRequest(query, mode=mode, timeout_s=300))
        times.append((time.perf_counter() - t0) * 1000)
        if answer.status == "error":
            raise SystemExit(f"engine {mode}: {answer.error_message}")
    return times[0], times[1:]


def http_series(cli: CliTransport, n: int) -> tuple[float, list[float]]:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        cli.argv("mcp", ["--http", "--port", str(port)]),
        cwd=cli.cwd,
        env=cli.env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        body = {"searches": [{"type": "vec", "query": CONCEPT}], "limit": 10, "rerank": False}
        times = []
        for _ in range(n + 1):
            t0 = time.perf_counter()
            httpx.post(f"{url}/query", json=body, timeout=300).raise_for_status()
            times.append((time.perf_counter() - t0) * 1000)
        return times[0], times[1:]
    finally:
        os.killpg(server.pid, 9)
        server.wait()


def row(name: str, first: float, rest: list[float]) -> list[object]:
    return [name, fmt(first), fmt(median(rest)), fmt(percentile(rest, 95))]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=60)
    args = p.parse_args()
    n = repeats(args, 20)
    print(environment_line())
    if not MODEL.is_file():
        print(f"\n{MODEL} is absent: run `bash .ci/setup.d/30-qmd-models.sh` first; nothing measured.")
        return
    base, settings = build(8 if args.quick else args.notes)
    try:
        cli = qmd_backend(base, settings).transport()
        vec_doc = f"vec: {CONCEPT}"
        structured = structured_query(CONCEPT)
        rows = []
        calls = {
            "concept (vector search)": ("query", ["--json", "-n", "10", "--no-rerank", "--explain"], vec_doc),
            "default rule (lex + vec)": ("query", ["--json", "-n", "10", "--no-rerank", "--explain"], structured),
            "keyword search": ("search", ["--json", "-n", "10"], "error middleware"),
        }
        cli_medians = {}
        for name, tail in calls.items():
            times = [per_call(cli, tail) for _ in range(1 if args.quick else max(2, n // 4) + 1)]
            cli_medians[name] = median(times[1:] or times)
            rows.append(row(f"per-call CLI: {name}", times[0], times[1:] or times))

        async def engine_rows() -> tuple[list[list[object]], dict[str, float], float | None]:
            backend = qmd_backend(base, settings, long_lived=True)
            out, medians = [], {}
            try:
                for name, (query, mode) in {
                    "concept (vector search)": (CONCEPT, "vsearch"),
                    "default rule (lex + vec)": (CONCEPT, "query"),
                    "keyword search": ("error middleware", "search"),
                }.items():
                    first, rest = await warm_series(backend, query, mode, n)
                    medians[name] = median(rest)
                    out.append(row(f"warm engine: {name}", first, rest))
                rss = (await backend.runtime_facts())["engine"]["rss_mib"]
            finally:
                await backend.aclose()
            return out, medians, rss

        warm_rows, warm_medians, rss = asyncio.run(engine_rows())
        rows += warm_rows
        first, rest = http_series(cli, n)
        rows.append(row("qmd mcp --http: concept (POST /query vec)", first, rest))
        table(
            f"qmd on {8 if args.quick else args.notes} notes, all-MiniLM-L6-v2 (ms)",
            ["path", "first call", "median", "p95"],
            rows,
            note=f"engine RSS after the runs: {rss} MiB",
        )
        table(
            "Warm engine versus a process per call (median ratio)",
            ["query", "per-call / warm"],
            [[name, fmt(cli_medians[name] / warm_medians[name])] for name in calls],
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
