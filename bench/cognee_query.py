"""Latency of relationship queries answered by a REAL Cognee 1.6.5 server (medians).

    .venv/bin/python bench/cognee_query.py [--quick] [--repeat N]

Starts the same real server as tests/adapters/test_cognee_server.py (Cognee's own API app from
.tools/cognee-venv, access control on, the test graph loaded with add_data_points, the FAKE
hashed bag-of-words embeddings endpoint standing in for a model), then times, per mode:

  http     one POST /api/v1/search (urllib, same body the adapter sends): Cognee itself
  adapter  CogneeBackend.search() in-process: + httpx, auth header, parsing, relevance
  router   Router.route() in-process: + rules, plan, envelope
  cli      `memory-router query` in a fresh process (MEMORY_ROUTER_DAEMON=off): + start-up

Needs the Cognee venv (`bash .ci/setup.d/40-cognee.sh`); exits 0 with a note if it is absent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, environment_line, fmt, median, parser, repeats, table  # noqa: E402

sys.path.insert(0, str(REPO))  # the tests' Cognee harness, tests/support/cognee/
from tests.support.cognee import cognee_server as harness  # noqa: E402

QUERIES = {"graph": "what depends on Postgres", "cypher": "how does ApiGateway relate to AuthService"}


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = repeats(args, 15)
    python = harness.cognee_python()
    if python is None:
        print("no Cognee venv (.tools/cognee-venv): run `bash .ci/setup.d/40-cognee.sh`", file=sys.stderr)
        return 0
    from memory_router.backends import BackendContext
    from memory_router.backends.base import BackendRequest
    from memory_router.backends.cognee import adapter
    from memory_router.config.installed import parse_installed
    from memory_router.config.paths import packaged_config
    from memory_router.config.router_config import parse_config
    from memory_router.routing.router import Router

    srv = harness.start(python)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cognee-"))
    try:
        env = {"COGNEE_BASE_URL": srv.base_url, "COGNEE_API_KEY": srv.api_key}
        config = json.loads(packaged_config().read_text())
        config["backends"]["cognee"] = {"type": "cognee", "datasets": [harness.DATASET]}
        config_path = tmp / "router-config.json"
        config_path.write_text(json.dumps(config))
        backends_path = tmp / "backends.json"
        backends_path.write_text(json.dumps({"tier": "pro", "backends": ["cognee", "totalrecall"]}))
        cfg = parse_config(config, config_path)
        installed = parse_installed(json.loads(backends_path.read_text()), backends_path)
        context = BackendContext(state_dir=tmp / "state", environ=env)
        backend = adapter.create("cognee", cfg.backends["cognee"].settings, context)
        rows = []
        for mode, query in QUERIES.items():
            body, _ = backend._body(mode, query)
            headers = {"X-Api-Key": srv.api_key}
            http = []
            for _ in range(n):
                t = time.perf_counter()
                status, _ = harness.http_json("POST", srv.base_url + "/api/v1/search", body=body, headers=headers)
                http.append((time.perf_counter() - t) * 1000)
                assert status == 200, status

            async def timed_adapter(query: str, mode: str) -> list[float]:
                out = []
                for _ in range(n):
                    t = time.perf_counter()
                    r = await backend.search(BackendRequest(query, mode))
                    out.append((time.perf_counter() - t) * 1000)
                    assert r.status == "success", r.error_message
                return out

            async def timed_router(query: str, mode: str) -> list[float]:
                config["rules"][1]["chain"][0]["mode"] = mode
                router = Router(parse_config(config, config_path), context=context)
                out = []
                for _ in range(n):
                    t = time.perf_counter()
                    e = await router.route(query, installed)
                    out.append((time.perf_counter() - t) * 1000)
                    assert e.routed_to == "cognee", e.attempts
                return out

            adapter_ms = asyncio.run(timed_adapter(query, mode))
            router_ms = asyncio.run(timed_router(query, mode))
            (tmp / "router-config.json").write_text(json.dumps(config))
            cli = []
            cli_env = {**os.environ, **env, "MEMORY_ROUTER_DAEMON": "off"}
            for _ in range(max(1, n // 3)):
                t = time.perf_counter()
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "memory_router",
                        "query",
                        query,
                        "--config",
                        str(config_path),
                        "--backends-json",
                        str(backends_path),
                        "--state-dir",
                        str(tmp / "state"),
                    ],
                    capture_output=True,
                    env=cli_env,
                )
                cli.append((time.perf_counter() - t) * 1000)
                assert json.loads(proc.stdout)["routed_to"] == "cognee", proc.stdout
            rows.append(
                [mode, query, fmt(median(http)), fmt(median(adapter_ms)), fmt(median(router_ms)), fmt(median(cli))]
            )
        table(
            "Cognee relationship query latency (ms, medians)",
            ["mode", "query", "http", "adapter", "router", "cli"],
            rows,
            note=(
                f"{n} repeats ({max(1, n // 3)} for cli); "
                f"server start-up {srv.timings['total_s']:.1f} s; {environment_line()}"
            ),
        )
    finally:
        srv.stop()
        shutil.rmtree(srv.root, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
