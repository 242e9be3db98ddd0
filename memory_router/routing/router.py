"""The router: wires query -> rules -> plan -> attempts -> envelope.

A :class:`Router` holds one validated :class:`RouterConfig` and the backend instances it has
created (lazily, one per configured name, kept so that adapters with caches stay warm in the
daemon). It is cheap to call many times; the CLI makes one per process.

Tests and embedders can pass ``backends={"qmd": MockBackend(...)}`` to replace any adapter.

Each operation is one pair, named as every sync/async pair is (``backends/base.py``): async ``x``
for the daemon, ``serve`` and MCP, blocking ``x_blocking`` for the one-shot CLI (no event loop,
so a cold query does not import asyncio): :meth:`Router.route`/:meth:`~Router.route_blocking`,
:meth:`~Router.plan`/:meth:`~Router.plan_blocking`, :meth:`~Router.match`/:meth:`~Router.match_blocking`.
A pair is written once, in the style of httpx's auth flow: a generator (:meth:`Router._routing`,
which takes the one preparation path :meth:`Router._planning`, query -> rule -> plan) yields the
work that needs a driver (the rule match; the fallback machine's calls,
:class:`~memory_router.core.fallback.Fallback` making every decision) and returns the answer;
:func:`_run` awaits each piece of work, :func:`_run_blocking` does it in place (:mod:`.drivers`).

The rule match is bounded by one budget per query (see :mod:`memory_router.core.rules`), at most half the query's
deadline so the chain keeps the other half; the deadline counts from the start of :meth:`route`.
The daemon passes ``match_executor``: a match that needs more than :data:`ON_LOOP_MATCH_S` is
then finished in a worker thread with the GIL released, so a slow signal regex holds only its
own query, never the event loop (the common match takes microseconds and stays on the loop: a
thread hop would cost more than the match).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from memory_router.backends import BackendContext, adapter_module
from memory_router.backends.base import Backend
from memory_router.config.installed import Installed
from memory_router.config.router_config import RouterConfig
from memory_router.core.attempts import Policy
from memory_router.core.calibration import Calibration
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import NO_BACKEND_AVAILABLE, Envelope, error_envelope
from memory_router.core.errors import InvalidQuery
from memory_router.core.fallback import Fallback, ms
from memory_router.core.plan import Plan, make_plan
from memory_router.core.query import check_query
from memory_router.core.rules import RuleMatch
from memory_router.routing.drivers import drive, drive_blocking
from memory_router.routing.routerlog import RouterLog

if TYPE_CHECKING:  # types only: the one-shot CLI never imports concurrent.futures (the daemon's executor)
    from collections.abc import Awaitable, Callable, Generator
    from concurrent.futures import Executor

    from memory_router.core.asked import Asked
    from memory_router.core.rules import Interrupt
    from memory_router.core.scope import Scope
    from memory_router.core.window import Window

ON_LOOP_MATCH_S = 0.005  # with a match_executor: the most a match may hold the event loop

_T = TypeVar("_T")


class Router:
    def __init__(
        self,
        config: RouterConfig,
        *,
        context: BackendContext,
        log: RouterLog | None = None,
        backends: Mapping[str, Backend] | None = None,
        cooldown: Cooldown | None = None,
        match_executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.match_executor = match_executor
        self.cooldown = cooldown  # the daemon passes one; the CLI runs without
        self.context = context
        self.log = log if log is not None else RouterLog(context.state_dir / "router.log")
        self._backends: dict[str, Backend] = dict(backends or {})
        self._calibration: Calibration | None = None

    @property
    def calibration(self) -> Calibration:
        """The relevance calibration the config names, loaded on first use (never raises: a
        missing or bad file means the native scores, and ``backends`` says why)."""
        if self._calibration is None:
            from memory_router.config.calibration import load

            self._calibration = load(self.config.calibration, self.config.path)
        return self._calibration

    def backend(self, name: str) -> Backend:
        """The backend instance for a configured name, created on first use."""
        instance = self._backends.get(name)
        if instance is None:
            spec = self.config.backends[name]
            instance = adapter_module(spec.type).create(name, spec.settings, self.context)
            self._backends[name] = instance
        return instance

    def instances(self) -> Mapping[str, Backend]:
        """The backend instances created so far (the daemon hands unchanged ones to its next
        Router on a config reload, so their caches stay warm)."""
        return dict(self._backends)

    # ------------------------------------------------------------------ the pairs, driven both ways

    async def route(
        self,
        query: str,
        installed: Installed,
        *,
        timeout_ms: int | None = None,
        limit: int | None = None,
        deadline_ms: int | None = None,
        scope: Scope | None = None,
        window: Window | None = None,
    ) -> Envelope:
        """Route one query and return its envelope. Never raises for bad input or backends.
        ``scope``: whose memory the backends may read (:mod:`.scope`); ``None``: unscoped.
        ``window``: when that memory was written (:mod:`.window`); ``None``: any time."""
        return await _run(self._routing(query, installed, timeout_ms, limit, deadline_ms, scope, window))

    def route_blocking(
        self,
        query: str,
        installed: Installed,
        *,
        timeout_ms: int | None = None,
        limit: int | None = None,
        deadline_ms: int | None = None,
        scope: Scope | None = None,
        window: Window | None = None,
    ) -> Envelope:
        """:meth:`route` without an event loop (the one-shot CLI)."""
        return _run_blocking(self._routing(query, installed, timeout_ms, limit, deadline_ms, scope, window))

    async def plan(self, query: str, installed: Installed, *, deadline_ms: int | None = None) -> Plan:
        """The dry run: which rule, which chain. Raises :class:`InvalidQuery`."""
        return (await _run(self._planning(query, installed, deadline_ms)))[1]

    def plan_blocking(self, query: str, installed: Installed, *, deadline_ms: int | None = None) -> Plan:
        """:meth:`plan` without an event loop (``memory-router route``)."""
        return _run_blocking(self._planning(query, installed, deadline_ms))[1]

    async def match(self, clean: str, deadline_ms: int | None = None) -> RuleMatch:
        """The rule a normalised query matches, within its budget; with a ``match_executor``, a
        match that needs longer than :data:`ON_LOOP_MATCH_S` is finished off the event loop."""
        if self.match_executor is None:
            return self.match_blocking(clean, deadline_ms)
        budget = self._match_budget(deadline_ms)
        rules = self.config.rules
        started = time.perf_counter()
        total = rules.regex_timeout_s if budget is None else min(budget, rules.regex_timeout_s)
        quick = rules.match(clean, min(ON_LOOP_MATCH_S, total))
        if not quick.timed_out or total <= ON_LOOP_MATCH_S:
            return quick
        left = total - (time.perf_counter() - started)  # a regex needs longer: finish off the loop
        import asyncio

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.match_executor, lambda: rules.match(clean, left, concurrent=True))

    def match_blocking(self, clean: str, deadline_ms: int | None = None) -> RuleMatch:
        """:meth:`match` in the calling thread. A one-shot router (not ``long_lived``) in the main
        thread matches an ASCII query with ``re`` where a signal reads the same in it, each search
        stopped by a CPU-time alarm (:mod:`.cpu_alarm`): it need not import ``regex``."""
        return self.config.rules.match(clean, self._match_budget(deadline_ms), interrupt=self._interrupter())

    def _interrupter(self) -> Interrupt | None:
        """:func:`.cpu_alarm.interrupter` for a one-shot router; ``None`` for a long-lived one (the
        daemon, ``serve``, MCP match with ``regex``, off their event loop too)."""
        if self.context.long_lived:
            return None
        from memory_router.routing.cpu_alarm import interrupter

        return interrupter()

    def _asked_now(self, clean: str, plan: Plan) -> Asked | None:
        """What the query asks for, read now by a one-shot router in its main thread (the rule's
        words found with ``re`` under the CPU-time alarm, as its rule was matched), for the
        machine's calibration; ``None`` elsewhere: the machine reads it on its first answer."""
        interrupt = self._interrupter() if self.calibration is not None and self.calibration.active else None
        if interrupt is None:
            return None
        from memory_router.core.asked import asked

        return asked(clean, plan.match.rule, interrupt=interrupt)

    def _match_budget(self, deadline_ms: int | None) -> float | None:
        deadline_ms = deadline_ms or self.config.deadline_ms
        return deadline_ms / 2000 if deadline_ms else None  # half the deadline (capped by the rules)

    def policy(
        self, *, timeout_ms: int | None = None, limit: int | None = None, deadline_ms: int | None = None
    ) -> Policy:
        """The chain's policy: the config's values, or the request's where it gives them."""
        deadline_ms = deadline_ms or self.config.deadline_ms
        return Policy(
            threshold=self.config.threshold,
            timeout_s=(timeout_ms or self.config.timeout_ms) / 1000,
            limit=limit or self.config.result_limit,
            deadline_s=deadline_ms / 1000 if deadline_ms else None,
        )

    # ------------------------------------------------------------------ the one path

    def _planning(self, query: str, installed: Installed, deadline_ms: int | None) -> _Flow[tuple[str, Plan]]:
        """query -> rule -> plan, the one preparation path of :meth:`plan` and :meth:`route`:
        the normalised query and its plan. Raises :class:`InvalidQuery`."""
        clean = check_query(query, self.config.max_query_chars)
        match: RuleMatch = yield (self.match, self.match_blocking, (clean, deadline_ms))
        return clean, make_plan(match, installed.unusable_reason)

    def _routing(
        self,
        query: str,
        installed: Installed,
        timeout_ms: int | None,
        limit: int | None,
        deadline_ms: int | None,
        scope: Scope | None = None,
        window: Window | None = None,
    ) -> _Flow[Envelope]:
        """One query from its text to its envelope: the plan, then its fallback machine, whose
        calls the driver makes; then router.log's lines and the envelope."""
        started = time.perf_counter()  # the deadline counts from here, the rule match included
        try:
            clean, plan = yield from self._planning(query, installed, deadline_ms)
        except InvalidQuery as exc:
            return error_envelope(query, exc.error_code, str(exc))
        if not plan.steps:
            reasons = "; ".join(f"{s.step.backend}: {s.reason}" for s in plan.skipped)
            return error_envelope(
                query,
                NO_BACKEND_AVAILABLE,
                f"rule {plan.match.rule.number} ({plan.match.rule.id}) has no usable backend ({reasons}). "
                f"Install one of them or mark it ready in {installed.path}.",
                plan=plan,
                router_ms=ms(time.perf_counter() - started),
            )
        machine = Fallback(
            clean,
            plan,
            self.policy(timeout_ms=timeout_ms, limit=limit, deadline_ms=deadline_ms),
            now=started,
            echo=query,
            strategy=self.config.strategy_for(plan.match.rule.id),
            cooldown=self.cooldown,
            calibration=self.calibration,
            asked=self._asked_now(clean, plan),
        )
        yield (drive, drive_blocking, (machine, self.backend, scope, window))
        for event in machine.events:
            self.log.record(event, query)
        envelope = machine.envelope(ms(time.perf_counter() - started), str(self.log.path) if self.log.path else None)
        return envelope if window is None else envelope.replace(window=window.as_dict())


if TYPE_CHECKING:  # annotations only: a cold query does not build these types
    # What a path of the router hands its driver: one call it can make either way, ``(x,
    # x_blocking, arguments)``: the async driver awaits ``x(*arguments)``, the blocking one calls
    # ``x_blocking(*arguments)``. A plain tuple: a class instance would cost each query ~1 us.
    _Work = tuple[Callable[..., Awaitable[Any]], Callable[..., Any], tuple[Any, ...]]

    # A path of the router: yields the work it needs done, is sent each result, returns its answer.
    _Flow = Generator[_Work, Any, _T]


async def _run(flow: _Flow[_T]) -> _T:
    """Drive a path on the running event loop (the daemon, ``serve``, MCP)."""
    result: Any = None
    while True:
        try:
            work = flow.send(result)
        except StopIteration as done:
            return cast("_T", done.value)
        run, _, args = work
        result = await run(*args)


def _run_blocking(flow: _Flow[_T]) -> _T:
    """Drive a path without an event loop (the one-shot CLI: a cold query imports no asyncio)."""
    result: Any = None
    while True:
        try:
            work = flow.send(result)
        except StopIteration as done:
            return cast("_T", done.value)
        _, run_blocking, args = work
        result = run_blocking(*args)


def default_context(state_dir: Path) -> BackendContext:
    return BackendContext(state_dir=state_dir)
