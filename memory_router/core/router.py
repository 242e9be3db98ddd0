"""The router: wires query -> rules -> plan -> attempts -> envelope.

A :class:`Router` holds one validated :class:`RouterConfig` and the backend instances it has
created (lazily, one per configured name, kept so that adapters with caches stay warm in the
daemon). It is cheap to call many times; the CLI makes one per process.

Tests and embedders can pass ``backends={"qmd": MockBackend(...)}`` to replace any adapter.

:meth:`Router.route` (the daemon, ``serve``, MCP) and :meth:`Router.route_blocking` (the one-shot
CLI: no event loop, so a cold query does not import asyncio) build the same plan and the same
fallback machine (:class:`~.fallback.Fallback`, which makes every decision); only the driver that
makes the calls differs (:mod:`.attempts`).

The rule match is bounded by one budget per query (see :mod:`.rules`), at most half the query's
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
from typing import TYPE_CHECKING

from memory_router.backends import BackendContext, adapter_module
from memory_router.backends.base import Backend, BackendResponse
from memory_router.config.installed import Installed
from memory_router.config.router_config import RouterConfig
from memory_router.core.attempts import Policy, drive, drive_blocking
from memory_router.core.calibration import Calibration
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import NO_BACKEND_AVAILABLE, Envelope, error_envelope
from memory_router.core.errors import InvalidQuery
from memory_router.core.fallback import Calibrate, Fallback
from memory_router.core.plan import Plan, make_plan
from memory_router.core.query import check_query
from memory_router.core.routerlog import RouterLog
from memory_router.core.rules import RuleMatch, Step

if TYPE_CHECKING:  # the daemon's executor; the one-shot CLI never imports concurrent.futures
    from concurrent.futures import Executor

ON_LOOP_MATCH_S = 0.005  # with a match_executor: the most a match may hold the event loop


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
            from memory_router.core.calibration import load

            self._calibration = load(self.config.calibration, self.config.path)
        return self._calibration

    def _calibrate(self, query: str) -> Calibrate | None:
        """The walk's calibration step for one query: each answer is mapped by the calibration key
        its adapter names (an adapter without one, such as a command program, keeps its own)."""
        calibration = self.calibration
        if not calibration.active:
            return None

        def calibrate(step: Step, response: BackendResponse) -> BackendResponse:
            key_of = getattr(self.backend(step.backend), "calibration_key", None)
            return response if key_of is None else calibration.apply(key_of(step.mode), query, response)

        return calibrate

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

    def plan(self, query: str, installed: Installed, *, deadline_ms: int | None = None) -> Plan:
        """The dry run: which rule, which chain. Raises :class:`InvalidQuery`."""
        clean = check_query(query, self.config.max_query_chars)
        return make_plan(self.config.rules.match(clean, self._match_budget(deadline_ms)), installed)

    async def aplan(self, query: str, installed: Installed, *, deadline_ms: int | None = None) -> Plan:
        """:meth:`plan`, with the match off the event loop when there is a ``match_executor``."""
        clean = check_query(query, self.config.max_query_chars)
        return make_plan(await self.match(clean, deadline_ms), installed)

    def _match_budget(self, deadline_ms: int | None) -> float | None:
        deadline_ms = deadline_ms or self.config.deadline_ms
        return deadline_ms / 2000 if deadline_ms else None  # half the deadline (capped by the rules)

    async def match(self, clean: str, deadline_ms: int | None = None) -> RuleMatch:
        """The rule a normalised query matches, within its budget."""
        budget = self._match_budget(deadline_ms)
        rules = self.config.rules
        if self.match_executor is None:
            return rules.match(clean, budget)
        started = time.perf_counter()
        total = rules.regex_timeout_s if budget is None else min(budget, rules.regex_timeout_s)
        quick = rules.match(clean, min(ON_LOOP_MATCH_S, total))
        if not quick.timed_out or total <= ON_LOOP_MATCH_S:
            return quick
        left = total - (time.perf_counter() - started)  # a regex needs longer: finish off the loop
        import asyncio

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.match_executor, lambda: rules.match(clean, left, concurrent=True))

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

    async def route(
        self,
        query: str,
        installed: Installed,
        *,
        timeout_ms: int | None = None,
        limit: int | None = None,
        deadline_ms: int | None = None,
    ) -> Envelope:
        """Route one query and return its envelope. Never raises for bad input or backends."""
        started = time.perf_counter()
        try:
            clean = check_query(query, self.config.max_query_chars)
        except InvalidQuery as exc:
            return error_envelope(query, exc.error_code, str(exc))
        plan = make_plan(await self.match(clean, deadline_ms), installed)
        machine = self._machine(query, clean, plan, installed, started, timeout_ms, limit, deadline_ms)
        if isinstance(machine, Envelope):
            return machine
        await drive(machine, self.backend)
        return self._finish(query, machine, started)

    def route_blocking(
        self,
        query: str,
        installed: Installed,
        *,
        timeout_ms: int | None = None,
        limit: int | None = None,
        deadline_ms: int | None = None,
    ) -> Envelope:
        """:meth:`route` without an event loop (the one-shot CLI): the same machine, its calls made
        by :func:`~.attempts.drive_blocking`."""
        started = time.perf_counter()
        try:
            clean = check_query(query, self.config.max_query_chars)
        except InvalidQuery as exc:
            return error_envelope(query, exc.error_code, str(exc))
        plan = make_plan(self.config.rules.match(clean, self._match_budget(deadline_ms)), installed)
        machine = self._machine(query, clean, plan, installed, started, timeout_ms, limit, deadline_ms)
        if isinstance(machine, Envelope):
            return machine
        drive_blocking(machine, self.backend)
        return self._finish(query, machine, started)

    def _machine(
        self,
        query: str,
        clean: str,
        plan: Plan,
        installed: Installed,
        started: float,
        timeout_ms: int | None,
        limit: int | None,
        deadline_ms: int | None,
    ) -> Fallback | Envelope:
        """The query's fallback machine, or the error envelope of a plan with no usable step."""
        if not plan.steps:
            reasons = "; ".join(f"{s.step.backend}: {s.reason}" for s in plan.skipped)
            return error_envelope(
                query,
                NO_BACKEND_AVAILABLE,
                f"rule {plan.match.rule.number} ({plan.match.rule.id}) has no usable backend ({reasons}). "
                f"Install one of them or mark it ready in {installed.path}.",
                plan=plan,
                router_ms=_ms(started),
            )
        return Fallback(
            clean,
            plan,
            self.policy(timeout_ms=timeout_ms, limit=limit, deadline_ms=deadline_ms),
            now=started,  # the deadline counts from the start of the query, its rule match included
            echo=query,
            strategy=self.config.strategy_for(plan.match.rule.id),
            cooldown=self.cooldown,
            calibrate=self._calibrate(clean),
        )

    def _finish(self, query: str, machine: Fallback, started: float) -> Envelope:
        """Write what the machine asks router.log to say, and build the envelope."""
        for event in machine.events:
            event.write(self.log, query)
        return machine.envelope(_ms(started), str(self.log.path) if self.log.path else None)


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def default_context(state_dir: Path) -> BackendContext:
    return BackendContext(state_dir=state_dir)
