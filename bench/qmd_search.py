"""Median latency of real `qmd search` calls: the bare CLI vs. through the router.

    .venv/bin/python bench/qmd_search.py [--repeats 15]

Builds the demo workspace's qmd collection in a temp dir, then times (wall clock, medians):
  cli     `node qmd.js --index index search --json -n 10 -c demo -- <keywords>` via subprocess
  router  Router.route(<natural query>) end to end (rules, keyword rewrite, qmd, envelope)
Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory_router.backends import BackendContext
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.config.installed import load_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config
from memory_router.demo import WORKSPACE
from memory_router.routing.router import Router

QUERIES = {
    "symbol": "find the function parseAuthToken",
    "path": "search in src/models/*.ts",
    "usages": "find all usages of UserService",
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="qmd-bench-"))
    try:
        shutil.copytree(WORKSPACE, tmp / "ws")
        settings = qmd_adapter.demo_setup(tmp / "ws", tmp / "state")
        config = json.loads(packaged_config().read_text())
        config["backends"]["qmd"] = {"type": "qmd", **settings}
        (tmp / "rc.json").write_text(json.dumps(config))
        (tmp / "backends.json").write_text(json.dumps({"tier": "starter", "backends": {"qmd": {"status": "ready"}}}))
        context = BackendContext(state_dir=tmp / "state", cwd=tmp)
        router = Router(load_config(tmp / "rc.json"), context=context)
        installed = load_installed(tmp / "backends.json")
        backend = router.backend("qmd")
        if not isinstance(backend, QmdBackend):
            raise SystemExit(f"qmd cannot run here: {backend.probe().detail}")
        transport = backend.transport()

        cli_ms = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            subprocess.run(
                transport.argv("search", ["--json", "-n", "10", "-c", "demo"], "parseAuthToken"),
                cwd=transport.cwd,
                env=transport.env,
                capture_output=True,
                check=True,
            )
            cli_ms.append((time.perf_counter() - started) * 1000)

        async def routed(query: str) -> list[float]:
            out = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                env = await router.route(query, installed)
                assert env.routed_to == "qmd", env.to_json()
                out.append((time.perf_counter() - started) * 1000)
            return out

        report = {"repeats": args.repeats, "cli_search_ms": round(statistics.median(cli_ms), 1)}
        for name, query in QUERIES.items():
            report[f"router_{name}_ms"] = round(statistics.median(asyncio.run(routed(query))), 1)
        print(json.dumps(report))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
