"""CLI cold start: `memory-router query` end to end on the demo data, and `memory-router --help`.

Each command runs in a fresh process, ``--repeat`` times; the table shows median and min wall
time. Then, for `query`: where the time goes inside the process (phases timed in a fresh
interpreter) and ``python -X importtime`` summed by module (self time, median over repeats).

    python bench/cold_start.py [--quick] [--top 15]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import environment_line, fmt, median, parser, repeats, table

QUERY = "what did we decide about the database schema"

# Timed phases of one `query`, run with `python -c` in a fresh interpreter: the same calls the
# CLI makes (cli.query -> Session -> load_installed -> Router.route -> to_json).
PHASES = r"""
import json, sys, time
t = [time.perf_counter()]
import asyncio
from memory_router import cli
t.append(time.perf_counter())
from memory_router.envelope import error_envelope
t.append(time.perf_counter())
session = cli.Session(cli.Options(state_dir=sys.argv[1], backends_json=None, config=sys.argv[2]))
t.append(time.perf_counter())
installed = session.installed()
t.append(time.perf_counter())
env = asyncio.run(session.router.route(sys.argv[3], installed))
t.append(time.perf_counter())
env.to_json()
t.append(time.perf_counter())
names = ["import memory_router.cli (click, asyncio)", "import the query path (envelope, pydantic, backends.base)",
         "load + compile router-config.json, Router", "read backends.json",
         "route (incl. adapter import, Total Recall parse)", "envelope to_json"]
print(json.dumps({n: (b - a) * 1000 for n, a, b in zip(names, t, t[1:])}))
"""


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("memory-router")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memory_router"]


def run_ms(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def importtime(argv: list[str], env: dict[str, str]) -> dict[str, int]:
    """Self import time (us) per module for one run of ``python -X importtime ...``."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    out: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:") :].split("|")
        out[name.strip()] = int(self_us)
    return out


def group(name: str) -> str:
    """memory_router.* by module; third-party and stdlib by top-level package."""
    if name.startswith("memory_router"):
        return name
    return name.split(".")[0]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=15, help="modules to show in the import-time table")
    args = p.parse_args()
    reps = repeats(args, 15)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    env.pop("MEMORY_ROUTER_CONFIG", None)
    cli = cli_command()

    demo = Path(tempfile.mkdtemp(prefix="mr-bench-demo-"))
    subprocess.run(
        [*cli, "demo", "--dir", str(demo)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    state, config = demo / "state", demo / "state" / "router-config.json"
    query_argv = [*cli, "query", QUERY, "--state-dir", str(state), "--config", str(config)]
    commands = {
        "python -c pass (interpreter floor)": [sys.executable, "-c", "pass"],
        "python -c 'import memory_router.cli'": [sys.executable, "-c", "import memory_router.cli"],
        "memory-router --help": [*cli, "--help"],
        "memory-router route QUERY": [*cli, "route", QUERY, "--state-dir", str(state), "--config", str(config)],
        "memory-router query QUERY (demo data)": query_argv,
    }
    for argv in commands.values():  # warm the page cache and .pyc files
        run_ms(argv, env)
    rows = []
    for label, argv in commands.items():
        times = [run_ms(argv, env) for _ in range(reps)]
        rows.append([label, fmt(median(times)), fmt(min(times))])
    print(f"cold start: {reps} runs per command; demo data in {demo}; {environment_line()}")
    table("CLI cold start, ms (fresh process each run)", ["command", "median", "min"], rows)

    phases: dict[str, list[float]] = defaultdict(list)
    for _ in range(reps):
        out = subprocess.run(
            [sys.executable, "-c", PHASES, str(state), str(config), QUERY],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        for name, ms in json.loads(out.stdout).items():
            phases[name].append(ms)
    table(
        "Inside one `query` process, ms (median)",
        ["phase", "ms"],
        [[name, fmt(median(v), 2)] for name, v in phases.items()],
        note="The interpreter floor above (python -c pass, site imports included) comes on top.",
    )

    per_group: dict[str, list[int]] = defaultdict(list)
    runs = max(3, reps // 3) if not args.quick else 1
    totals = []
    for _ in range(runs):
        grouped: dict[str, int] = defaultdict(int)
        raw = importtime(["-m", "memory_router", *query_argv[len(cli) :]], env)
        for name, us in raw.items():
            grouped[group(name)] += us
        totals.append(sum(raw.values()))
        for name, us in grouped.items():
            per_group[name].append(us)
    ranked = sorted(((median(v), k) for k, v in per_group.items()), reverse=True)[: args.top]
    total = median(totals)
    table(
        f"python -X importtime, `query`: self time by module, ms (all imports: {total / 1000:.1f} ms)",
        ["module (third-party/stdlib: top-level package)", "ms", "share"],
        [[k, fmt(us / 1000, 2), f"{us / total:.0%}"] for us, k in ranked],
    )


if __name__ == "__main__":
    main()
