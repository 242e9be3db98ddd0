"""The OpenClaw plugin's cost per query inside Node, against the skill's exec path and the full
`openclaw memory search` round trip.

1. *Inside Node*: openclaw-plugin's search manager (lib/manager.js) answering ``--repeat`` warm
   queries over memory-router's daemon, every backend an instant in-process adapter
   (``_instant_adapter.py``), so the figure is the plugin plus the daemon's routing, not a
   backend's work. Also the plugin's own share: the envelope-to-OpenClaw mapping alone.
2. *The skill's exec path*: what an agent pays without the plugin, one ``memory-router query``
   process per query, in-process (no daemon) and as the thin client of a warm daemon.
3. *Through OpenClaw* (real OpenClaw from .tools/openclaw; left out when absent or with
   ``--skip-openclaw``), the plugin installed in a scratch HOME on the demo workspace: the whole
   `openclaw memory search --json` round trip (mostly OpenClaw's own start-up), and the
   memory_search tool through a running Gateway's ``POST /tools/invoke``.

    python bench/openclaw_plugin.py [--quick] [--repeat 200]
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import REPO, environment_line, fmt, median, parser, percentile, repeats, scratch_dir, table, verdict

from memory_router.config.paths import packaged_config

sys.path.insert(0, str(REPO))  # where OpenClaw is and how to run it: the OpenClaw tests' own support
from tests.openclaw._support import (  # noqa: E402
    NODE24,
    OPENCLAW_MJS,
    PLUGIN_DIR,
    any_node,
    memory_router_bin,
    openclaw_missing,
    scratch_env,
    shipped_plugin,
)

TARGET_P50_MS = 5.0
BENCH = Path(__file__).resolve().parent
QUERIES = ["auth", "find the function parseAuthToken", "what did we decide about the schema", "database"]


def instant_setup(root: Path) -> tuple[Path, Path, Path]:
    """A state dir whose backends all answer at once, and a memory-router command that knows the
    instant adapter type (benchmarks only)."""
    state = root / "state"
    state.mkdir(parents=True)
    (root / "ws").mkdir()
    config = json.loads(packaged_config().read_text(encoding="utf-8"))
    config["backends"] = {name: {"type": "instant"} for name in config["backends"]}
    (state / "router-config.json").write_text(json.dumps(config))
    (state / "backends.json").write_text(json.dumps({"backends": list(config["backends"])}))
    command = root / "memory-router-instant"
    command.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(BENCH)!r})\n"
        "from memory_router.backends import register_adapter\n"
        'register_adapter("instant", "_instant_adapter")\n'
        "from memory_router.cli.entry import main\n"
        "main()\n"
    )
    command.chmod(0o755)
    return state, root / "ws", command


NODE_BENCH = """
import { MemoryRouterPlugin } from "%(lib)s/manager.js";
import { toSearchResults } from "%(lib)s/mapping.js";
const cfg = JSON.parse(process.argv[1]);
const api = { pluginConfig: cfg.plugin, config: {}, logger: { info() {}, warn: (m) => console.error(m) } };
const plugin = new MemoryRouterPlugin(api);
const queries = cfg.queries;
const t0 = performance.now();
let m = plugin.manager({}, "main");
await m.search(queries[0], { maxResults: 3 });  // connects, and starts the daemon
const first = performance.now() - t0;
await m.close();
for (let i = 0; i < 20; i++) await plugin.manager({}, "main").search(queries[i %% queries.length]);
const times = [];
let envelope;
for (let i = 0; i < cfg.n; i++) {
  const s = performance.now();
  m = plugin.manager({}, "main");  // as the Gateway does: a manager per search, closed after it
  await m.search(queries[i %% queries.length], { maxResults: 3 });
  await m.close();
  times.push(performance.now() - s);
}
({ envelope } = await plugin.clientFor(m.settings).query(queries[0], { limit: 3 }));
const mapTimes = [];
for (let i = 0; i < cfg.n; i++) {
  const s = performance.now();
  toSearchResults(envelope, { maxResults: 3, cache: plugin.cache });
  mapTimes.push(performance.now() - s);
}
const d = m.status().custom.memoryRouter;
plugin.closeAll();
process.stdout.write(JSON.stringify({ first, times, mapTimes, spawns: d.spawns, connections: d.connections,
  daemonQueries: d.daemonQueries, execQueries: d.execQueries }));
"""


def node_figures(node: str, state: Path, ws: Path, command: Path, n: int) -> dict[str, Any]:
    plugin_cfg = {
        "command": str(command),
        "stateDir": str(state),
        "memoryRoot": str(ws),
        "config": str(state / "router-config.json"),
    }
    script = NODE_BENCH % {"lib": PLUGIN_DIR / "lib"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "MEMORY_ROUTER_"))}
    proc = subprocess.run(
        [
            str(node),
            "--input-type=module",
            "-e",
            script,
            json.dumps({"plugin": plugin_cfg, "queries": QUERIES, "n": n}),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"node benchmark failed: {proc.stderr[-1500:]}")
    figures: dict[str, Any] = json.loads(proc.stdout)
    return figures


def exec_series(argv: list[str], env: dict[str, str], cwd: Path, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        subprocess.run([*argv, "--", QUERIES[i % len(QUERIES)]], env=env, cwd=cwd, capture_output=True, check=True)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def openclaw_round_trips(root: Path, n_cli: int, n_tool: int) -> dict[str, list[float]] | str:
    """`openclaw memory search --json` processes, and the memory_search tool through a running
    Gateway (POST /tools/invoke), on the demo workspace with the plugin installed as the README says."""
    missing = openclaw_missing()
    if missing:
        return missing
    home = root / "home"
    home.mkdir()
    demo = home / "demo"
    script = memory_router_bin()
    env = scratch_env(home)
    run = functools.partial(subprocess.run, env=env, cwd=home, capture_output=True, check=True)
    run([str(script), "demo", "--dir", str(demo)])
    oc = [str(NODE24), str(OPENCLAW_MJS)]
    run([*oc, "plugins", "install", "--force", "--accept-capabilities", str(shipped_plugin(root))])
    state = demo / "state"
    batch = [
        {"path": "plugins.entries.memory-core.enabled", "value": False},
        {"path": "agents.defaults.workspace", "value": str(demo)},
        {
            "path": "plugins.entries.memory-router.config",
            "value": {"stateDir": str(state), "config": str(state / "router-config.json")},
        },
    ]
    run([*oc, "config", "set", "--batch-json", json.dumps(batch), "--strict-json"])
    out: dict[str, list[float]] = {"cli": [], "tool": []}
    try:
        for i in range(n_cli + 1):  # the first one starts the daemon: not counted
            ms = timed(functools.partial(run, [*oc, "memory", "search", "--json", QUERIES[i % len(QUERIES)]]))
            if i:
                out["cli"].append(ms)
        out["tool"] = gateway_tool_series(oc, env, home, n_tool)
    finally:
        subprocess.run([str(script), "daemon", "stop", "--state-dir", str(state)], env=env, capture_output=True)
    return out


def gateway_tool_series(oc: list[str], env: dict[str, str], home: Path, n: int) -> list[float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "bench-token"
    argv = [*oc, "gateway", "run", "--port", str(port), "--bind", "loopback", "--auth", "token", "--token", token]
    gateway = subprocess.Popen(
        [*argv, "--allow-unconfigured"],
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or gateway.poll() is not None:
                    raise SystemExit("the Gateway did not start") from None
                time.sleep(0.5)

        def invoke(query: str) -> None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/tools/invoke",
                data=json.dumps({"tool": "memory_search", "args": {"query": query, "maxResults": 3}}).encode(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                assert json.loads(response.read())["ok"] is True

        invoke(QUERIES[0])  # the Gateway's plugin connects: not counted
        return [timed(functools.partial(invoke, QUERIES[i % len(QUERIES)])) for i in range(n)]
    finally:
        os.killpg(gateway.pid, signal.SIGTERM)
        try:
            gateway.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(gateway.pid, signal.SIGKILL)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--exec-repeat", type=int, default=None, help="memory-router query processes per way (default 20)")
    p.add_argument("--openclaw-repeat", type=int, default=None, help="`openclaw memory search` runs (default 3)")
    p.add_argument(
        "--skip-openclaw", action="store_true", help="leave out the `openclaw memory search` row (~1 min of set-up)"
    )
    args = p.parse_args()
    n = repeats(args, 200)
    n_exec = args.exec_repeat or (2 if args.quick else 20)
    n_oc = args.openclaw_repeat or (1 if args.quick else 3)
    n_tool = 2 if args.quick else 40
    node = any_node()
    if node is None:
        raise SystemExit("no Node >= 22 in .tools (bash .ci/setup.d/20-qmd.sh)")
    print(environment_line())
    root = scratch_dir("mr-bench-openclaw-")
    state, ws, command = instant_setup(root)
    try:
        figures = node_figures(node, state, ws, command, n)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "MEMORY_ROUTER_"))}
        env["OPENCLAW_REPO_ROOT"] = str(ws)
        flags = ["query", "--state-dir", str(state), "--config", str(state / "router-config.json")]
        # Warm: the real console script as a thin client of the daemon the plugin started (same
        # context). In-process: the launcher that knows the instant adapter type.
        warm = exec_series([str(memory_router_bin()), *flags], env, ws, n_exec)
        cold = exec_series([str(command), *flags], {**env, "MEMORY_ROUTER_DAEMON": "off"}, ws, n_exec)
    finally:
        subprocess.run([str(command), "daemon", "stop", "--state-dir", str(state)], capture_output=True, check=False)
    t, mt = figures["times"], figures["mapTimes"]
    p50 = median(t)
    rows = [
        [
            "plugin search over the daemon (warm)",
            len(t),
            fmt(p50, 2),
            fmt(percentile(t, 95), 2),
            verdict(p50, TARGET_P50_MS),
        ],
        [
            "  of which the plugin's mapping",
            len(mt),
            fmt(median(mt) * 1000, 1) + " us",
            fmt(percentile(mt, 95) * 1000, 1) + " us",
            "",
        ],
        ["first search (starts the daemon)", 1, fmt(figures["first"], 0), "", ""],
        [
            "skill exec: memory-router query, daemon warm",
            len(warm),
            fmt(median(warm), 1),
            fmt(percentile(warm, 95), 1),
            "",
        ],
        [
            "skill exec: memory-router query, in-process",
            len(cold),
            fmt(median(cold), 1),
            fmt(percentile(cold, 95), 1),
            "",
        ],
    ]
    oc = "left out (--skip-openclaw)" if args.skip_openclaw else openclaw_round_trips(root, n_oc, n_tool)
    if isinstance(oc, str):
        rows.append(["openclaw memory search --json", 0, oc, "", ""])
    else:
        cli, tool = oc["cli"], oc["tool"]
        rows.append(
            ["openclaw memory search --json (demo)", len(cli), fmt(median(cli), 0), fmt(percentile(cli, 95), 0), ""]
        )
        rows.append(
            [
                "memory_search tool, Gateway HTTP (demo)",
                len(tool),
                fmt(median(tool), 1),
                fmt(percentile(tool, 95), 1),
                "",
            ]
        )
    table(
        "memory query cost: the OpenClaw plugin vs the skill's exec path (ms)",
        ["path", "n", "p50", "p95", f"p50 < {TARGET_P50_MS:g} ms"],
        rows,
        note=(
            f"Instant backends (bench/_instant_adapter.py) except the openclaw row (the demo workspace). "
            f"The plugin used {figures['connections']} connection(s) and started {figures['spawns']} daemon(s) for "
            f"{figures['daemonQueries']} daemon queries ({figures['execQueries']} exec) although every search got "
            "and closed its own manager."
        ),
    )


if __name__ == "__main__":
    main()
