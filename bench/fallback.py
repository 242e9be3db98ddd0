"""Fallback cost: a chain whose primary times out costs the timeout plus the fallback, no more.

In-process Router, per-backend timeout T; the answering backend is instant (mock). Scenarios:

* primary fails at once (error) -> fallback: the floor;
* primary hangs in-process (mock ``hang()``) -> cancelled at T -> fallback;
* primary is a real program that hangs (the command adapter running ``sleep 60``): at T the
  router cancels, ``_process`` kills the process group and reaps it -> fallback;
* two hanging primaries (rule 2: cognee -> qmd -> totalrecall): 2 T + fallback.

Then the daemon's dead-backend cooldown (``memory_router.core.cooldown``, as ``serve`` configures it
from router-config.json ``"cooldown": {"failures": 3, "seconds": 30}``): consecutive queries
against a hanging primary pay T until the third failure, then none while it cools down.

``excess`` = wall time - (timeouts x T): what a timeout costs beyond the budget itself.

    python bench/fallback.py [--quick] [--timeout-ms 200]
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from _common import environment_line, fmt, median, parser, repeats, scratch_dir, table, verdict

from memory_router.backends import BackendContext
from memory_router.backends.base import Backend
from memory_router.backends.command import adapter as command
from memory_router.backends.mock import MockBackend, answer, fail, hang
from memory_router.config.installed import Installed, parse_installed
from memory_router.config.router_config import load_config
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import Envelope
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

DEFAULT_QUERY = "database"  # rule 7 (Pro tier): qmd/query -> lossless -> totalrecall
RELATION_QUERY = "how does the auth middleware relate to the session store"  # rule 2: cognee -> qmd -> totalrecall
EXCESS_BOUND_MS = 20.0  # what we call "not more": scheduling + kill/reap, well under a timeout


def sleeper(name: str, state: Path) -> command.CommandBackend:
    settings = command.Settings(argv=("sleep", "60"))
    return command.create(name, settings, BackendContext(state_dir=state))


async def timed_route(router: Router, query: str, installed: Installed, timeout_ms: int) -> tuple[float, Envelope]:
    t0 = time.perf_counter()
    envelope = await router.route(query, installed, timeout_ms=timeout_ms)
    return (time.perf_counter() - t0) * 1000, envelope


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--timeout-ms", type=int, default=None, help="per-backend timeout (default 200; --quick 50)")
    args = p.parse_args()
    timeout_ms = args.timeout_ms or (50 if args.quick else 200)
    reps = repeats(args, 7)
    state = scratch_dir("mr-bench-fb-")
    installed = parse_installed(["qmd", "totalrecall", "cognee", "lossless"], state / "backends.json")
    config = load_config()
    ok = MockBackend("totalrecall", answer(0.9))

    # (label, query, primaries that time out, backends replaced, the step that answers)
    scenarios: list[tuple[str, str, int, dict[str, Backend], str]] = [
        (
            "primary errors at once -> fallback",
            DEFAULT_QUERY,
            0,
            {"qmd": MockBackend("qmd", fail("BACKEND_ERROR", "exit 1"))},
            "lossless",
        ),
        ("primary hangs (in-process) -> fallback", DEFAULT_QUERY, 1, {"qmd": MockBackend("qmd", hang())}, "lossless"),
        (
            "primary hangs (real process, killed) -> fallback",
            DEFAULT_QUERY,
            1,
            {"qmd": sleeper("qmd", state)},
            "lossless",
        ),
        (
            "two primaries hang (in-process) -> fallback",
            RELATION_QUERY,
            2,
            {"cognee": MockBackend("cognee", hang()), "qmd": MockBackend("qmd", hang())},
            "totalrecall",
        ),
        (
            "two primaries hang (real processes) -> fallback",
            RELATION_QUERY,
            2,
            {"cognee": sleeper("cognee", state), "qmd": sleeper("qmd", state)},
            "totalrecall",
        ),
    ]
    rows = []
    for label, query, timeouts, overrides, fallback in scenarios:
        backends: dict[str, Backend] = {"totalrecall": ok, "lossless": ok, "cognee": ok, "qmd": ok, **overrides}
        router = Router(config, context=BackendContext(state_dir=state), log=RouterLog(None), backends=backends)

        async def run_all(router: Router, query: str, label: str, fallback: str) -> list[float]:
            await timed_route(router, query, installed, timeout_ms)  # warm-up
            walls = []
            for _ in range(reps):
                wall, envelope = await timed_route(router, query, installed, timeout_ms)
                if envelope.routed_to != fallback or envelope.status != "success":
                    raise SystemExit(f"{label}: unexpected envelope {envelope.status} via {envelope.routed_to}")
                walls.append(wall)
            return walls

        walls = asyncio.run(run_all(router, query, label, fallback))
        wall = median(walls)
        excess = wall - timeouts * timeout_ms
        rows.append([label, timeouts, fmt(wall), fmt(max(walls)), fmt(excess), verdict(excess, EXCESS_BOUND_MS)])
    # Cooldown: a fresh router per series, one hanging primary, queries one after another.
    cooldown_rows = []
    series_len = 6
    walls_by_query: list[list[float]] = [[] for _ in range(series_len)]
    skipped_by_query: list[int] = [0] * series_len
    for _ in range(max(1, min(reps, 3))):
        backends = {"totalrecall": ok, "lossless": ok, "cognee": ok, "qmd": MockBackend("qmd", hang())}
        router = Router(
            config,
            context=BackendContext(state_dir=state),
            log=RouterLog(None),
            backends=backends,
            cooldown=Cooldown(failures=3, seconds=30),
        )

        async def run_series(router: Router) -> None:
            for n in range(series_len):
                wall, envelope = await timed_route(router, DEFAULT_QUERY, installed, timeout_ms)
                walls_by_query[n].append(wall)
                skipped_by_query[n] += any(a.get("error_code") == "COOLDOWN" for a in envelope.attempts)

        asyncio.run(run_series(router))
    for n in range(series_len):
        wall = median(walls_by_query[n])
        cooling = skipped_by_query[n] > 0
        cooldown_rows.append(
            [
                f"query {n + 1}",
                "skipped (COOLDOWN)" if cooling else "called, timed out",
                fmt(wall),
                "ok" if (wall < EXCESS_BOUND_MS) == cooling else "MISSED",
            ]
        )

    print(f"fallback cost: timeout {timeout_ms} ms, {reps} repeats; {environment_line()}")
    table(
        f"Fallback cost, ms (timeout T = {timeout_ms} ms, fallback backend instant)",
        ["scenario", "timeouts", "wall median", "wall max", "excess over n x T", f"excess < {EXCESS_BOUND_MS:.0f} ms"],
        rows,
        note="excess = wall - timeouts x T: the cost of timing out beyond the budget itself.",
    )
    table(
        f"Cooldown on (failures=3, seconds=30): dead primary qmd, T = {timeout_ms} ms, fallback instant",
        ["", "primary", "wall median ms", "no timeout once cooling"],
        cooldown_rows,
        note="After the third consecutive failure the primary is skipped: no timeout is paid at all.",
    )


if __name__ == "__main__":
    main()
