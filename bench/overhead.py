"""Router overhead: what the router adds to a query beyond the backend's own time.

In-process, one event loop, every configured backend replaced by an instant in-process backend
(``backends/mock.py``'s ``MockBackend`` returning a prepared response). Per query::

    overhead = wall time of Router.route() - time spent inside backend.search()

and, separately, the envelope's JSON serialisation (what the CLI or the daemon writes). The
table shows the median over repeats of p50/p99. Target: overhead p99 under 1 ms.

    python bench/overhead.py [--quick]
"""

from __future__ import annotations

import asyncio
import gc
import math
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from _common import environment_line, fmt, median, parser, percentile, repeats, scratch_dir, table, verdict
from corpus import generate

from memory_router.backends.base import BackendRequest, BackendResponse, Probe, Result
from memory_router.backends.mock import Handler, MockBackend, fail
from memory_router.config.installed import Installed, parse_installed
from memory_router.config.router_config import load_config
from memory_router.routing.router import Router, default_context
from memory_router.routing.routerlog import RouterLog

if TYPE_CHECKING:  # main() imports it for the daemon's row only
    from memory_router.daemon.service import Service

TARGET_P99_US = 1000.0
Figures = tuple[float, float, float, float, float, float]
"""Medians over the repeats, us: overhead p50 and p99, its CPU p50 and p99, serialising p50, total p50."""


class Timed:
    """Wraps a backend and adds up the nanoseconds spent inside its ``search``."""

    def __init__(self, inner: MockBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.ns = 0
        self.cpu_ns = 0

    async def search(self, request: BackendRequest) -> BackendResponse:
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return await self.inner.search(request)
        finally:
            self.ns += time.perf_counter_ns() - t0
            self.cpu_ns += time.thread_time_ns() - c0

    def probe(self) -> Probe:
        return self.inner.probe()


def instant(relevance: float = 0.9, hits: int = 3) -> Handler:
    """A handler answering at once with a prepared response (no per-call construction)."""
    prepared = BackendResponse.from_results(
        "mock", "q", [Result(content=f"hit {i}", relevance=relevance - i * 0.05, source="mock") for i in range(hits)]
    )
    return lambda request: prepared


def build_router(handlers: dict[str, Handler]) -> tuple[Router, dict[str, Timed]]:
    config = load_config()
    timed = {name: Timed(MockBackend(name, handlers.get(name) or instant())) for name in config.backends}
    state = scratch_dir("mr-bench-")
    router = Router(config, context=default_context(state), log=RouterLog(None), backends=timed)
    return router, timed


async def measure_service(service: Service, timed: dict[str, Timed], corpus: list[str], reps: int) -> Figures:
    """The daemon's per-request path: Service.handle_line (parse the JSON line, route, envelope
    to JSON), minus backend time."""
    over_p50, over_p99, cpu_p50, cpu_p99, total_p50 = [], [], [], [], []
    clock, cpu = time.perf_counter_ns, time.thread_time_ns
    lines = [orjson.dumps({"id": i, "query": q}) + b"\n" for i, q in enumerate(corpus)]
    for line in lines[:200]:
        await service.handle_line(line)
    for _ in range(reps):
        overhead, cpu_overhead, total = [], [], []
        for line in lines:
            before = sum(t.ns for t in timed.values())
            before_cpu = sum(t.cpu_ns for t in timed.values())
            c0 = cpu()
            t0 = clock()
            await service.handle_line(line)
            t1 = clock()
            c1 = cpu()
            overhead.append((t1 - t0 - (sum(t.ns for t in timed.values()) - before)) / 1000)
            cpu_overhead.append((c1 - c0 - (sum(t.cpu_ns for t in timed.values()) - before_cpu)) / 1000)
            total.append((t1 - t0) / 1000)
        over_p50.append(median(overhead))
        over_p99.append(percentile(overhead, 99))
        cpu_p50.append(median(cpu_overhead))
        cpu_p99.append(percentile(cpu_overhead, 99))
        total_p50.append(median(total))
    return (median(over_p50), median(over_p99), median(cpu_p50), median(cpu_p99), math.nan, median(total_p50))


async def measure(
    router: Router, timed: dict[str, Timed], installed: Installed, corpus: list[str], reps: int
) -> Figures:
    over_p50, over_p99, cpu_p50, cpu_p99, ser_p50, total_p50 = [], [], [], [], [], []
    clock, cpu = time.perf_counter_ns, time.thread_time_ns
    for q in corpus[:200]:  # warm-up
        (await router.route(q, installed)).to_json()
    for _ in range(reps):
        overhead, cpu_overhead, serial, total = [], [], [], []
        for q in corpus:
            before = sum(t.ns for t in timed.values())
            before_cpu = sum(t.cpu_ns for t in timed.values())
            c0 = cpu()
            t0 = clock()
            envelope = await router.route(q, installed)
            t1 = clock()
            c1 = cpu()
            envelope.to_json()
            t2 = clock()
            backend_ns = sum(t.ns for t in timed.values()) - before
            backend_cpu = sum(t.cpu_ns for t in timed.values()) - before_cpu
            overhead.append((t1 - t0 - backend_ns) / 1000)
            cpu_overhead.append((c1 - c0 - backend_cpu) / 1000)
            serial.append((t2 - t1) / 1000)
            total.append((t2 - t0) / 1000)
        over_p50.append(median(overhead))
        over_p99.append(percentile(overhead, 99))
        cpu_p50.append(median(cpu_overhead))
        cpu_p99.append(percentile(cpu_overhead, 99))
        ser_p50.append(median(serial))
        total_p50.append(median(total))
    return (median(over_p50), median(over_p99), median(cpu_p50), median(cpu_p99), median(ser_p50), median(total_p50))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    n = 200 if args.quick else 2000
    reps = repeats(args, 5)
    corpus = [q for _, q in generate(n, seed=11)]
    installed = parse_installed(
        ["qmd", "totalrecall", "cognee", "lossless"], Path(tempfile.gettempdir()) / "backends.json"
    )

    rows = []
    scenarios: dict[str, dict[str, Handler]] = {
        "first backend answers": {},
        "first fails, second answers": {"qmd": fail("BACKEND_ERROR", "exit 1"), "cognee": fail(), "lossless": fail()},
    }
    gc.disable()
    try:
        for label, handlers in scenarios.items():
            router, timed = build_router(handlers)
            o50, o99, c50, c99, s50, t50 = asyncio.run(measure(router, timed, installed, corpus, reps))
            rows.append(
                [
                    label,
                    fmt(o50),
                    fmt(o99),
                    fmt(c50),
                    fmt(c99),
                    fmt(s50),
                    fmt(t50),
                    f"wall {verdict(o99, TARGET_P99_US)}, cpu {verdict(c99, TARGET_P99_US)}",
                ]
            )
        # The daemon's request path, in-process (no pipes): memory_router.daemon.service.Service.
        from memory_router.daemon.service import Service

        state = scratch_dir("mr-bench-svc-")
        (state / "backends.json").write_bytes(orjson.dumps({"backends": ["qmd", "totalrecall", "cognee", "lossless"]}))
        _, timed = build_router({})
        service = Service(
            state_dir=state, backends_path=state / "backends.json", backends=timed, diagnostics=lambda message: None
        )
        service.log = RouterLog(None)
        service.router.log = service.log
        o50, o99, c50, c99, s50, t50 = asyncio.run(measure_service(service, timed, corpus, reps))
        rows.append(
            [
                "daemon Service.handle_line (JSON in/out)",
                fmt(o50),
                fmt(o99),
                fmt(c50),
                fmt(c99),
                "incl.",
                fmt(t50),
                f"wall {verdict(o99, TARGET_P99_US)}, cpu {verdict(c99, TARGET_P99_US)}",
            ]
        )
    finally:
        gc.enable()
    print(f"router overhead: {n} queries x {reps} repeats, instant in-process backends; {environment_line()}")
    table(
        "Router overhead per query, us (route() minus backend time; to_json separately)",
        ["scenario", "wall p50", "wall p99", "cpu p50", "cpu p99", "to_json p50", "total p50", "p99 < 1 ms"],
        rows,
        note="wall = perf_counter; cpu = this thread's CPU time (immune to preemption by other processes;\n"
        "the clock read itself costs ~1 us). total = route() + to_json, wall, backend time included.",
    )


if __name__ == "__main__":
    main()
