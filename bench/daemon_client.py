"""`memory-router query` cold (in-process) versus warm (answered by `serve --socket`).

Builds the demo (`memory-router demo --dir`), then runs the spec's 15 example queries round-robin,
``--repeat`` processes each way: with ``MEMORY_ROUTER_DAEMON=off`` (in-process, as without a
daemon), with ``auto`` and no daemon running (the price of looking for one), and with a daemon
serving the demo. Then ``python -X importtime`` of one warm query: everything the thin client
imports, by module.

    python bench/daemon_client.py [--quick] [--repeat 30]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from _common import environment_line, fmt, median, parser, percentile, repeats, scratch_dir, table

from memory_router.demo import SPEC_EXAMPLES

QUERIES = [ex.query for ex in SPEC_EXAMPLES]


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("memory-router")
    return [str(script)] if script.exists() else [sys.executable, "-m", "memory_router"]


def run_ms(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def series(cli: list[str], env: dict[str, str], cwd: Path, n: int) -> list[float]:
    return [run_ms([*cli, "query", QUERIES[i % len(QUERIES)]], env, cwd) for i in range(n)]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=12, help="modules to show in the import-time table")
    args = p.parse_args()
    reps = repeats(args, 30)
    cli = cli_command()
    demo = scratch_dir("mr-bench-daemon-")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_ROUTER_")}
    subprocess.run(
        [*cli, "demo", "--dir", str(demo)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base
    )
    env = {
        **base,
        "MEMORY_ROUTER_STATE_DIR": str(demo / "state"),
        "MEMORY_ROUTER_CONFIG": str(demo / "state" / "router-config.json"),
    }
    off = {**env, "MEMORY_ROUTER_DAEMON": "off"}

    for argv_env in (off, env):  # warm the page cache and the .pyc files
        series(cli, argv_env, demo, 2)
    rows = []
    floor = [run_ms([sys.executable, "-c", "pass"], env, demo) for _ in range(reps)]
    rows.append(["python -c pass (interpreter floor)", fmt(median(floor)), fmt(min(floor)), fmt(percentile(floor, 90))])
    cold = series(cli, off, demo, reps)
    rows.append(
        ["cold: MEMORY_ROUTER_DAEMON=off (in-process)", fmt(median(cold)), fmt(min(cold)), fmt(percentile(cold, 90))]
    )
    looking = series(cli, env, demo, reps)
    rows.append(
        ["cold: auto, no daemon running", fmt(median(looking)), fmt(min(looking)), fmt(percentile(looking, 90))]
    )

    daemon = subprocess.Popen(
        [*cli, "serve", "--socket"],
        env=env,
        cwd=demo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (demo / "state" / "router.sock").exists():
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("serve --socket did not start")
            time.sleep(0.05)
        series(cli, env, demo, 2)
        warm = series(cli, env, demo, reps)
        rows.append(
            ["warm: answered by `serve --socket`", fmt(median(warm)), fmt(min(warm)), fmt(percentile(warm, 90))]
        )
        profile = subprocess.run(
            [sys.executable, "-X", "importtime", *cli_module(cli), "query", QUERIES[0]],
            env=env,
            cwd=demo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        subprocess.run(
            [*cli, "daemon", "stop"], env=env, cwd=demo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if daemon.poll() is None:
            daemon.terminate()
        daemon.wait(timeout=30)

    print(
        f"daemon client: {reps} processes per row, the 15 spec queries round-robin; "
        f"demo in {demo}; {environment_line()}"
    )
    table(
        "memory-router query per call, ms (fresh process each run)",
        ["how", "median", "min", "p90"],
        rows,
        note=f"warm/cold speed-up: {median(cold) / median(warm):.1f}x (medians)",
    )

    modules: list[tuple[str, int, int]] = []
    for line in profile.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, cumulative, name = line[len("import time:") :].split("|")
            modules.append((name.rstrip(), int(self_us), int(cumulative)))
    top_level = [(n.strip(), c) for n, _s, c in modules if not n.startswith("  ")]
    total = sum(c for _n, c in top_level)
    rows = [[name, fmt(cum / 1000, 2)] for name, cum in sorted(top_level, key=lambda r: -r[1])[: args.top]]
    rows.append(["(all top-level imports)", fmt(total / 1000, 2)])
    heavy = sorted({n.strip().split(".")[0] for n, _s, _c in modules} & {"click", "pydantic", "regex", "orjson"})
    table(
        "python -X importtime of one warm `query`: top-level imports, cumulative ms",
        ["module", "ms"],
        rows,
        note="heavy packages imported: " + (", ".join(heavy) or "none (no click, pydantic, regex, orjson)"),
    )


def cli_module(cli: list[str]) -> list[str]:
    """The CLI as arguments to ``python``: the console script file, or ``-m memory_router``."""
    return cli[1:] if cli[0] == sys.executable else cli


if __name__ == "__main__":
    main()
