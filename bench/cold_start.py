"""CLI cold start: `memory-router query` end to end on the demo data, cold and warm, and `memory-router --help`.

Each command runs in a fresh process, ``--repeat`` times (interleaved, so load drifts hit every
row alike); the table shows median and min wall time, the median CPU time (user + system of
the child, which other jobs on a shared machine inflate far less than wall time) and each row's
ratio to the interpreter floor (``python -c pass`` of the same environment), taken pair by pair:
each run of a command follows a run of the floor, and the ratio is the median of those pairs'
ratios. ``query`` runs twice: in-process (``MEMORY_ROUTER_DAEMON=off``, the cold path) and warm,
answered by a ``serve --socket`` daemon the script starts on the same data
(``MEMORY_ROUTER_DAEMON=require``: a run the daemon does not answer fails the script). The query,
"what did we decide about the database schema", is the spec's decision-recall phrasing: rule 3
routes it to the demo's "fill" chain, Lossless and Total Recall asked at once and merged (qmd is
not installed in a plain venv, so the chain skips it), the answer its ten results (~6 KB).

The commands of ours run through a console script of the kind installers write, one per
template, so a row does not depend on the pip that installed the environment: pip >= 25 and uv
write a script that imports only ``sys`` (the rows without a note); pip < 25 (the pip that
Python 3.11-3.13's ``venv`` bundles) writes distlib's, which imports ``re`` before any code of
ours runs (~0.6x the floor in instructions: one warm row shows it). Rows with the compiled config
cache off and with the click application show what those two means are worth. ``--against
OTHER_VENV`` runs the same commands with another environment's interpreter (e.g. a plain venv
with an older commit installed) in the same loop, on a demo that version wrote: before and after in
one run.
``--instructions`` also counts each command's instructions once under callgrind (valgrind),
which the machine's load does not change, with its ratio to the floor's. Then, for `query`: where
the time goes inside the process (phases timed in a fresh interpreter) and ``python -X
importtime`` summed by module (self time, median over repeats).

Targets (issue 32): the warm query at most 1.5x the floor, the cold one at most 5x.

    python bench/cold_start.py [--quick] [--repeat 30] [--top 15] [--against /path/to/venv] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import environment_line, fmt, median, parser, repeats, table

QUERY = "what did we decide about the database schema"

# Timed phases of one `query`, run with `python -c` in a fresh interpreter: the same calls the
# CLI makes without a daemon (entry -> invocation parser -> oneshot.run_query -> Session -> route).
PHASES = r"""
import json, sys, time
t = [time.perf_counter()]
import gc; gc.disable()  # as the console script runs a query
from memory_router.cli import oneshot
from memory_router.client import thin as client
t.append(time.perf_counter())
from memory_router.core.envelope import error_envelope
from memory_router.routing.router import Router
t.append(time.perf_counter())
session = oneshot.Session(oneshot.Options(state_dir=sys.argv[1], config=sys.argv[2]))
t.append(time.perf_counter())
installed = session.installed()
t.append(time.perf_counter())
env = session.router.route_blocking(sys.argv[3], installed)
t.append(time.perf_counter())
env.to_json()
t.append(time.perf_counter())
names = ["import memory_router.client.thin, .oneshot", "import the query path (envelope, router, rules)",
         "router-config.json (compiled cache), Router", "read backends.json",
         "route (incl. adapter import + its Settings, Lossless query)", "envelope to_json"]
print(json.dumps({n: (b - a) * 1000 for n, a, b in zip(names, t, t[1:])}))
"""

CLICK_APP = "from memory_router.cli.main import main; main(prog_name='memory-router')"
# The console script as installers write it for `memory-router = memory_router.cli.entry:main`:
# pip >= 25 (uv's differs only in how it strips a Windows suffix), and pip < 25 (distlib's
# template), whose `import re` runs before any code of ours.
CONSOLE_SCRIPTS = {
    "pip25": (
        "import sys\n"
        "from memory_router.cli.entry import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = sys.argv[0].removesuffix('.exe')\n"
        "    sys.exit(main())\n"
    ),
    "pip24": (
        "# -*- coding: utf-8 -*-\n"
        "import re\n"
        "import sys\n"
        "from memory_router.cli.entry import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(main())\n"
    ),
}


def console_script(python: str, template: str, where: Path) -> list[str]:
    """``memory-router`` written as an installer writes it (``template``: a key of
    :data:`CONSOLE_SCRIPTS`) for ``python``'s environment, in ``where``: its command line."""
    folder = where / template
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "memory-router"
    script.write_text(f"#!{python}\n{CONSOLE_SCRIPTS[template]}")
    script.chmod(0o755)
    return [str(script)]


def config_cache_name() -> str:
    from memory_router.config.cache import CACHE_NAME

    return CACHE_NAME


def cli_command(python: str = sys.executable) -> list[str]:
    script = Path(python).with_name("memory-router")
    return [str(script)] if script.exists() else [python, "-m", "memory_router"]


def run_ms(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = (time.perf_counter() - t0) * 1000
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{argv} exited {code}")
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1000


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
    p.add_argument("--against", metavar="VENV", help="also run every command with this environment (before/after)")
    p.add_argument(
        "--instructions", action="store_true", help="also count each command's instructions once under callgrind"
    )
    args = p.parse_args()
    reps = repeats(args, 15)
    # .pyc files must be written on the warm-up run (PYTHONDONTWRITEBYTECODE=<anything> stops it);
    # no daemon may answer the in-process rows.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MEMORY_ROUTER_CONFIG")}
    env["MEMORY_ROUTER_DAEMON"] = "off"
    cli = cli_command()

    with tempfile.TemporaryDirectory(prefix="mr-bench-demo-") as tmp:
        demo = Path(tmp)
        subprocess.run(
            [*cli, "demo", "--dir", str(demo)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        state, config = demo / "state", demo / "state" / "router-config.json"
        where = ["--state-dir", str(state), "--config", str(config)]
        demos = {"": (sys.executable, demo)}
        if args.against:
            # The other version on a demo it wrote itself: a newer demo's config may use keys an
            # older version refuses (and an older one's, keys a newer one has dropped).
            python = str(Path(args.against) / "bin" / "python")
            other = Path(tmp) / "against"
            subprocess.run(
                [*cli_command(python), "demo", "--dir", str(other)],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            demos[f" [{Path(args.against).name}]"] = (python, other)
        print(
            f"cold start: {reps} runs per command; demo data in {', '.join(str(d) for _, d in demos.values())}; "
            f"{environment_line()}"
        )
        cli_table(demos, reps, env, demo / "scripts")
        if args.instructions:
            instructions_table(demos, env, demo / "scripts")
        phases_table(reps, env, state, config)
        importtime_table(args, reps, env, [*cli, "query", QUERY, *where][len(cli) :])


FLOOR = "python -c pass (interpreter floor)"
WARM = "memory-router query QUERY, warm (a serve --socket daemon answers)"
WARM_PIP24 = "  warm, console script as pip < 25 writes it (import re)"
COLD = "memory-router query QUERY, cold (in-process, demo data)"
Commands = dict[str, tuple[list[str], dict[str, str]]]


def start_daemon(python: str, state: Path, config: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``serve --socket`` of ``python``'s environment on ``state``, answering ``hello`` before it returns."""
    cmd = cli_command(python)
    proc = subprocess.Popen(
        [*cmd, "serve", "--socket", "--idle-exit", "0", "--state-dir", str(state), "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    socket = state / "router.sock"
    deadline = time.monotonic() + 60
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"serve --socket of {python} did not start listening on {socket}")
        time.sleep(0.05)
    return proc


def commands(python: str, state: Path, config: Path, env: dict[str, str], scripts: Path) -> Commands:
    """Each row's command line and environment, for ``python``'s environment on ``state``."""
    cmd = console_script(python, "pip25", scripts)
    old = console_script(python, "pip24", scripts)
    where = ["--state-dir", str(state), "--config", str(config)]
    warm = {**env, "MEMORY_ROUTER_DAEMON": "require"}
    return {
        FLOOR: ([python, "-c", "pass"], env),
        WARM: ([*cmd, "query", QUERY, *where], warm),
        WARM_PIP24: ([*old, "query", QUERY, *where], warm),
        COLD: ([*cmd, "query", QUERY, *where], env),
        "  cold, config cache off": ([*cmd, "query", QUERY, *where], {**env, "MEMORY_ROUTER_CONFIG_CACHE": "off"}),
        "  cold, through the click app": ([python, "-c", CLICK_APP, "query", QUERY, *where], env),
        "memory-router --help": ([*cmd, "--help"], env),
        "memory-router route QUERY": ([*cmd, "route", QUERY, *where], env),
    }


Demos = dict[str, tuple[str, Path]]  # tag -> (interpreter, the demo its version wrote)


@contextmanager
def serving(envs: dict[str, tuple[str, Path, Path]], env: dict[str, str]) -> Iterator[None]:
    """A ``serve --socket`` daemon per environment (see :func:`setups`) while the block runs; each
    one started is stopped after it, also when a later one fails to start."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for python, state, config in envs.values():
            started.append(start_daemon(python, state, config, env))
        yield
    finally:
        for daemon in started:
            daemon.terminate()
            daemon.wait(30)


def setups(demos: Demos, suffix: str = "") -> dict[str, tuple[str, Path, Path]]:
    """The environments measured (tag -> interpreter, state dir, config): this one and
    ``--against``'s, each on its own copy of its demo's state dir (``suffix`` names the copies)."""
    out: dict[str, tuple[str, Path, Path]] = {}
    for tag, (python, demo) in demos.items():
        # Its own state dir: a config cache written by another run (valgrind's, the other table's)
        # would not be this one's; its own daemon too.
        state = demo / "state"
        copy = state.with_name(f"{state.name}{suffix}-{len(out)}")
        shutil.copytree(state, copy, ignore=shutil.ignore_patterns(config_cache_name(), "router.sock*"))
        out[tag] = (python, copy, state / "router-config.json")
    return out


def cli_table(demos: Demos, reps: int, env: dict[str, str], scripts: Path) -> dict[str, float]:
    """The wall-time table; returns each row's median ratio to the floor."""
    envs = setups(demos)
    with serving(envs, env):
        rounds = {
            tag: commands(python, where, config, env, scripts / str(i))
            for i, (tag, (python, where, config)) in enumerate(envs.items())
        }
        runs = [
            (label + tag, tag, argv, run_env) for tag, cmds in rounds.items() for label, (argv, run_env) in cmds.items()
        ]
        for _, _, argv, run_env in runs:  # warm the page cache, the .pyc files and the config cache
            run_ms(argv, run_env)
        wall: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, list[float]] = defaultdict(list)
        ratio: dict[str, list[float]] = defaultdict(list)
        floors = {tag: argv for label, tag, argv, _ in runs if label == FLOOR + tag}
        for _ in range(reps):
            for label, tag, argv, run_env in runs:
                # Paired: the floor of the same environment right before each command, so the
                # ratio holds while the machine's speed drifts.
                floor, _ = run_ms(floors[tag], env) if label != FLOOR + tag else (0.0, 0.0)
                w, c = run_ms(argv, run_env)
                wall[label].append(w)
                cpu[label].append(c)
                ratio[label].append(w / floor if floor else 1.0)

    def row(label: str) -> list[str]:
        return [
            label,
            fmt(median(wall[label])),
            fmt(min(wall[label])),
            fmt(median(cpu[label])),
            f"{median(ratio[label]):.2f}",
        ]

    table(
        f"CLI cold start, ms (fresh process each run; load average {load_average()}); x floor: median ratio "
        "to a floor run just before each",
        ["command", "median", "min", "CPU median", "x floor"],
        [row(label) for label, _, _, _ in runs],
        note="Targets: warm at most 1.5x the floor, cold at most 5x.",
    )
    return {label: median(ratio[label]) for label, _, _, _ in runs}


def load_average() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """Instructions of one run of ``argv`` under callgrind (its whole process, interpreter included)."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        check=False,
    )
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            if proc.returncode not in (0, 1):
                raise SystemExit(f"{argv} exited {proc.returncode} under valgrind: {proc.stderr[-1000:]}")
            return int(line.rsplit(":", 1)[1])
    raise SystemExit(f"valgrind did not count {argv}: {proc.stderr[-1000:]}")


def instructions_table(demos: Demos, env: dict[str, str], scripts: Path) -> None:
    """Each row once under callgrind. valgrind hands its program an LD_LIBRARY_PATH of its own,
    a variable the daemon's context compares (qmd reads it): the daemon of these rows is started
    with the value valgrind gives, else the client would rightly route in-process. Hash
    randomisation off, so a run counts the same each time."""
    env = {**env, "PYTHONHASHSEED": "0"}
    probe = subprocess.run(
        ["valgrind", "--tool=none", sys.executable, "-c", "import os; print(os.environ.get('LD_LIBRARY_PATH', ''))"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    as_valgrind = {**env, "LD_LIBRARY_PATH": probe.stdout.strip()}
    envs = setups(demos, "-vg")
    counts: dict[str, int] = {}
    with serving(envs, as_valgrind):
        for i, (tag, (python, where, config)) in enumerate(envs.items()):
            rows = commands(python, where, config, env, scripts / f"vg{i}")
            for argv, run_env in rows.values():  # .pyc files and the config cache, as valgrind's program sees them
                run_ms(argv, {**run_env, "LD_LIBRARY_PATH": as_valgrind["LD_LIBRARY_PATH"]})
            for label, (argv, run_env) in rows.items():
                counts[label + tag] = instructions(argv, run_env)
    floors = {tag: counts[FLOOR + tag] for tag in envs}
    table(
        "Instructions (callgrind, one run each; the machine's load does not change them), millions",
        ["command", "instructions", "x floor"],
        [
            [label, fmt(n / 1e6), f"{n / floors[tag]:.2f}"]
            for tag in envs
            for label, n in counts.items()
            if label.endswith(tag) and (tag or not any(label.endswith(t) for t in envs if t))
        ],
    )


def phases_table(reps: int, env: dict[str, str], state: Path, config: Path) -> None:
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


def importtime_table(args: argparse.Namespace, reps: int, env: dict[str, str], query_args: list[str]) -> None:
    per_group: dict[str, list[int]] = defaultdict(list)
    passes = max(3, reps // 3) if not args.quick else 1
    totals = []
    for _ in range(passes):
        grouped: dict[str, int] = defaultdict(int)
        raw = importtime(["-m", "memory_router", *query_args], env)
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
