"""Queries per second through `memory-router serve` (JSON lines on stdin/stdout), with 1, 4 and
32 requests in flight.

Two daemons, each a real ``memory-router serve`` process fed by this script over its pipes:

* ``instant`` - every backend is an instant in-process adapter (``bench/_instant_adapter.py``,
  registered by a two-line launcher), so the figures are the daemon's and the router's own
  cost: request parsing, routing, envelope, JSON, pipes. Target: over 5,000 queries/s.
* ``demo`` - the demo workspace as ``memory-router demo`` builds it (Total Recall and Lossless
  on their real data; backends that cannot run here are skipped by the plan).

The client keeps N requests outstanding (a new one is written as soon as an answer arrives);
latency is from writing a request to reading its answer. ``--concurrency`` of the daemon is set
to the number in flight.

    python bench/serve_throughput.py [--quick] [--queries 5000]
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
from _common import environment_line, fmt, median, parser, percentile, repeats, scratch_dir, table, verdict
from corpus import generate

from memory_router.config.paths import packaged_config

TARGET_QPS = 5000.0
BENCH = Path(__file__).resolve().parent
LAUNCHER = f"""
import sys
sys.path.insert(0, {str(BENCH)!r})
from memory_router.backends import register_adapter
register_adapter("instant", "_instant_adapter")
from memory_router.cli.main import main
main(["serve", *sys.argv[1:]], prog_name="memory-router")
"""


def instant_state(root: Path) -> tuple[Path, Path]:
    state = root / "state"
    state.mkdir(parents=True)
    config = json.loads(packaged_config().read_text(encoding="utf-8"))
    config["backends"] = {name: {"type": "instant"} for name in config["backends"]}
    (state / "router-config.json").write_text(json.dumps(config))
    (state / "backends.json").write_text(json.dumps({"backends": list(config["backends"])}))
    return state, state / "router-config.json"


def demo_state(root: Path) -> tuple[Path, Path]:
    subprocess.run(
        [sys.executable, "-m", "memory_router", "demo", "--dir", str(root)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = root / "state"
    # The demo lists qmd as ready when setup built it (a semantic qmd: seconds per query on two
    # CPUs); this row measures the daemon over the file backends, so backends.json lists those.
    listed = json.loads((state / "backends.json").read_text(encoding="utf-8"))
    for name, entry in listed["backends"].items():
        if name not in ("totalrecall", "lossless"):
            entry.update(status="unavailable", message="left out of this bench row")
    (state / "backends.json").write_text(json.dumps(listed), encoding="utf-8")
    return state, state / "router-config.json"


async def drive(
    argv: list[str], env: dict[str, str], queries: list[str], in_flight: int, expect_success: bool
) -> tuple[float, list[float]]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        limit=16 * 1024 * 1024,
    )
    assert proc.stdin and proc.stdout
    stdout = proc.stdout  # the reader below is its own function: mypy keeps no narrowing into it
    try:
        # Warm-up (also waits for the daemon to be up): one query answered.
        proc.stdin.write(orjson.dumps({"id": -1, "query": queries[0]}) + b"\n")
        await proc.stdin.drain()
        await proc.stdout.readline()
        slots = asyncio.Semaphore(in_flight)
        sent: dict[int, float] = {}
        latencies: list[float] = []

        async def reader() -> None:
            for _ in range(len(queries)):
                line = await stdout.readline()
                if not line:
                    raise SystemExit("serve closed its stdout early")
                answer = orjson.loads(line)
                latencies.append((time.perf_counter() - sent.pop(answer["id"])) * 1000)
                if expect_success and answer.get("status") != "success":
                    raise SystemExit(f"unexpected answer: {line[:300]!r}")
                slots.release()

        reading = asyncio.create_task(reader())
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            await slots.acquire()
            sent[i] = time.perf_counter()
            proc.stdin.write(orjson.dumps({"id": i, "query": q}) + b"\n")
            if i % 64 == 0:
                await proc.stdin.drain()
        await reading
        elapsed = time.perf_counter() - t0
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)
        return len(queries) / elapsed, latencies
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=None, help="queries per run (default 5000; --quick 200)")
    args = p.parse_args()
    n = args.queries or (200 if args.quick else 5000)
    reps = repeats(args, 3)
    queries = [q for _, q in generate(n, seed=23)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_ROUTER_")}
    root = scratch_dir("mr-bench-serve-")
    setups = {
        "instant backends": (instant_state(root / "instant"), [sys.executable, "-c", LAUNCHER], True),
        "demo data (Total Recall, Lossless)": (
            demo_state(root / "demo"),
            [sys.executable, "-m", "memory_router", "serve"],
            False,
        ),
    }
    rows = []
    for label, ((state, config), argv, instant) in setups.items():
        for in_flight in (1, 4, 32):
            full = [
                *argv,
                "--state-dir",
                str(state),
                "--config",
                str(config),
                "--no-reload",
                "--concurrency",
                str(in_flight),
            ]
            runs = [asyncio.run(drive(full, env, queries, in_flight, instant)) for _ in range(reps)]
            qps = median(r[0] for r in runs)
            p50 = median(median(r[1]) for r in runs)
            p99 = median(percentile(r[1], 99) for r in runs)
            rows.append(
                [
                    label,
                    in_flight,
                    fmt(qps, 0),
                    fmt(p50, 2),
                    fmt(p99, 2),
                    verdict(qps, TARGET_QPS, below=False) if instant else "",
                ]
            )
    print(f"serve throughput: {n} queries x {reps} runs per row; {environment_line()}")
    table(
        "`memory-router serve` over stdin/stdout: queries/s and latency (ms, write -> answer)",
        ["backends", "in flight", "queries/s", "p50 ms", "p99 ms", "> 5,000 q/s"],
        rows,
        note="Both ends are Python processes on the same 2 CPUs: the client's own cost is included.",
    )


if __name__ == "__main__":
    main()
