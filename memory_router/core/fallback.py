"""The spec's Fallback Logic as one sans-IO state machine, in the style of h11's ``_state.py``.

Every decision of a routed query lives here: which steps to call and with what timeout (the
per-backend timeout cut by the query's deadline), whether a backend cooling down is skipped,
whether an answer is accepted or the chain moves on, what router.log must say about a failed
call, and the final status of the envelope. Nothing here reads a clock, writes a file, awaits or
starts a thread: the driver tells the machine what time it is and what each call answered, and
carries out what the machine asks for (the calls to make, the log events to write).

    machine = Fallback(query, plan, policy, now=clock(), calibration=calibration)
    while calls := machine.next_calls(clock()):
        outcomes = [make the call(c) for c in calls]   # one call, or all of them (fuse)
        machine.receive(outcomes)   # each with its time and the calibration key its backend names
    for event in machine.events: log.record(event, query)
    envelope = machine.envelope(router_ms)

Three strategies share it. ``sequential`` (the spec's) asks one step at a time and stops at the
first answer that reaches the threshold. ``fuse`` asks every usable step in one batch and merges
the answers (:mod:`.fuse`). ``fill`` asks every step in one batch too, decides exactly as
``sequential`` would over those answers (the same winner, status and relevance), and fills the
winner's result list past its first result with the fused results of every step
(:func:`.fuse.fill_results`): the spec's answer first, more of the evidence after it.
Collaborators are injected and pure for the machine's purposes: a :class:`~.cooldown.Cooldown`
(its own injected clock keeps the backends' health) and a :class:`~.calibration.Calibration` (the
maps, a value). The machine never asks anyone anything: each :class:`Outcome` carries the
calibration key its backend names for the call's mode (the driver reads it off the backend while
:attr:`Fallback.calibrating`), and the machine puts the answer on the one relevance scale itself.

The drivers are in :mod:`memory_router.routing.drivers` (async: the daemon, ``serve``, MCP;
blocking: the one-shot CLI) and differ only in how a call is made and timed out;
:class:`~memory_router.routing.routerlog.RouterLog` writes the :class:`LogEvent` lines.
``tests/unit/test_fallback_machine.py`` drives the machine directly with a fake clock; a property
test holds both drivers equal, router.log lines included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_router.backends.base import BACKEND_ERROR, QUERY_TIMEOUT, BackendRequest, BackendResponse
from memory_router.core.attempts import COOLDOWN, DEADLINE_EXCEEDED, Attempt, Policy
from memory_router.core.cooldown import Cooldown
from memory_router.core.envelope import ALL_BACKENDS_FAILED, ALL_BACKENDS_FAILED_MESSAGE, Envelope, Status
from memory_router.core.frozen import Frozen
from memory_router.core.plan import Plan
from memory_router.core.rules import ChainStep

if TYPE_CHECKING:  # types only: asked is imported on the first answer the machine calibrates
    from memory_router.core.asked import Asked
    from memory_router.core.calibration import Calibration

# The strategies that ask every usable step at once.
BATCHED = frozenset({"fuse", "fill"})


class Call(Frozen):
    """One backend call for the driver to make: the step's backend name, the request, and the
    time it is given (the driver cancels it then and reports ``QUERY_TIMEOUT``)."""

    backend: str
    request: BackendRequest
    timeout_s: float


class Outcome(Frozen):
    """What a call answered (a contract-checked response; see
    :func:`memory_router.routing.drivers.call_backend`), how long it took, measured by the driver,
    and the calibration map its backend names for the call's mode (``None``: the backend names
    none, or the machine is not :attr:`~Fallback.calibrating`)."""

    response: BackendResponse
    elapsed_ms: int
    calibration_key: str | None = None


class LogEvent(Frozen):
    """A router.log line the spec asks for: ``FALLBACK`` for a failed call, ``TIMEOUT`` for one
    that ran out of time; ``next`` is the backend the chain moves on to, if any."""

    kind: str  # "fallback" | "timeout"
    backend: str
    error_code: str
    message: str
    duration_ms: int
    next: str | None


class Fallback:
    """One query's walk down its plan. See the module docstring for the protocol."""

    def __init__(
        self,
        query: str,
        plan: Plan,
        policy: Policy,
        *,
        now: float,
        echo: str | None = None,
        strategy: str = "sequential",
        cooldown: Cooldown | None = None,
        calibration: Calibration | None = None,
        asked: Asked | None = None,
    ) -> None:
        self.query = query  # what the backends are asked (the normalised query)
        self.echo = query if echo is None else echo  # the envelope's query_echo: the user's text
        self.plan = plan
        self.policy = policy
        self.strategy = strategy
        self.cooldown = cooldown
        # The maps, when they apply: what the query asks for is read once, on the first answer,
        # unless the caller read it already (``asked``: the one-shot router, which can read it
        # without regex in its main thread).
        self.calibration = calibration if calibration is not None and calibration.active else None
        self._asked: Asked | None = asked
        self.deadline = None if policy.deadline_s is None else now + policy.deadline_s
        self._attempts: dict[int, Attempt] = {}  # by step index: the chain's order, whatever the strategy
        self.events: list[LogEvent] = []
        self._next = 0  # index of the next step to consider
        self._pending: list[tuple[int, ChainStep, bool]] = []  # (step index, step, cut by the deadline)
        self._done = False

    @property
    def calibrating(self) -> bool:
        """Whether answers are calibrated: the driver then hands each outcome's calibration key in."""
        return self.calibration is not None

    @property
    def attempts(self) -> list[Attempt]:
        """Every step considered so far, in the chain's order."""
        return [self._attempts[i] for i in sorted(self._attempts)]

    # ------------------------------------------------------------------ the protocol

    def next_calls(self, now: float) -> tuple[Call, ...]:
        """The calls to make now; ``()`` when the query is decided. Steps that are not called
        (deadline spent, backend cooling down) are recorded as attempts on the way."""
        if self._pending:
            raise RuntimeError("next_calls() before receive(): the previous calls are still out")
        steps = self.plan.steps
        calls: list[Call] = []
        while not self._done and self._next < len(steps) and not calls:
            batch = range(self._next, len(steps)) if self.strategy in BATCHED else range(self._next, self._next + 1)
            self._next = batch.stop
            for index in batch:
                call = self._admit(index, steps[index], now)
                if call is not None:
                    calls.append(call)
        if not calls:
            self._done = True
        return tuple(calls)

    def receive(self, outcomes: Sequence[Outcome | tuple[BackendResponse, int]]) -> None:
        """The answers to the calls :meth:`next_calls` gave, in their order."""
        if len(outcomes) != len(self._pending):
            raise ValueError(f"expected {len(self._pending)} outcomes, got {len(outcomes)}")
        pending, self._pending = self._pending, []
        for (index, step, cut), outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, Outcome):
                response, elapsed, key = outcome.response, outcome.elapsed_ms, outcome.calibration_key
            else:
                (response, elapsed), key = outcome, None
            response = self._judge(step, response, cut, key)
            accepted = response.status == "success" and (
                self.strategy == "fuse" or response.normalized_relevance >= self.policy.threshold
            )
            self._attempts[index] = Attempt(step, response, elapsed, accepted)
            if response.status == "error":
                self._log_failure(index, response, elapsed)
            if self.strategy == "sequential" and (accepted or response.error_code == DEADLINE_EXCEEDED):
                self._done = True

    def cancel(self) -> None:
        """The driver's own cancellation: the calls out give their cooldown slots back."""
        pending, self._pending = self._pending, []
        if self.cooldown is not None:
            for _, step, _ in pending:
                self.cooldown.release(step.health_key)
        self._done = True

    def envelope(self, router_ms: int, log_hint: str | None = None) -> Envelope:
        """The envelope of the decided query (the spec's Fallback Logic, steps 2-5)."""
        if self.strategy == "fuse":
            return _fused_envelope(self, router_ms, log_hint)
        if self.strategy == "fill":
            return _filled_envelope(self, router_ms, log_hint)
        return _sequential_envelope(self.echo, self.plan, self.attempts, router_ms, log_hint)

    # ------------------------------------------------------------------ the decisions

    def _admit(self, index: int, step: ChainStep, now: float) -> Call | None:
        """The call for ``step``, or ``None`` with the reason recorded as its attempt."""
        timeout_s, cut = self.policy.timeout_s, False
        if self.deadline is not None:
            left = self.deadline - now
            if left <= 0:
                message = f"not tried: the query's {ms(self.policy.deadline_s)} ms deadline was reached"
                self._skip(index, step, DEADLINE_EXCEEDED, message)
                self._done = self.strategy == "sequential"  # nothing later can be tried either
                return None
            if left < timeout_s:
                timeout_s, cut = left, True
        if self.cooldown is not None and (why := self.cooldown.admit(step.health_key)) is not None:
            self._skip(index, step, COOLDOWN, why)
            return None
        self._pending.append((index, step, cut))
        request = BackendRequest(
            query=self.query,
            mode=step.mode,
            limit=self.policy.limit,
            timeout_s=timeout_s,
            signal=self.plan.match.signal,
        )
        return Call(step.backend, request, timeout_s)

    def _skip(self, index: int, step: ChainStep, code: str, message: str) -> None:
        self._attempts[index] = Attempt(
            step, BackendResponse.failure(step.backend, self.query, code, message), 0, False
        )

    def _judge(
        self, step: ChainStep, response: BackendResponse, cut_by_deadline: bool, key: str | None
    ) -> BackendResponse:
        """A call's answer as the router judges it: a deadline's cut named, the relevance
        calibrated by the map ``key`` names, and the outcome counted for the backend's cooldown."""
        if cut_by_deadline and response.error_code == QUERY_TIMEOUT:
            response = response.replace(
                error_code=DEADLINE_EXCEEDED,
                error_message=f"cut short: the query's {ms(self.policy.deadline_s)} ms deadline was reached",
            )
        if self.calibration is not None and key is not None:
            response = self.calibration.apply(key, self._wanted(), response)
        if self.cooldown is not None:
            if response.error_code == DEADLINE_EXCEEDED:  # says nothing about the backend's health
                self.cooldown.release(step.health_key)
            else:
                failed = response.status == "error"
                code, message = response.error_code or BACKEND_ERROR, response.error_message or ""
                self.cooldown.record(step.health_key, failed, code, message)
        return response

    def _wanted(self) -> Asked:
        """What the query asks for, with the words of the rule it matched set aside (read once)."""
        if self._asked is None:
            from memory_router.core.asked import asked

            self._asked = asked(self.query, self.plan.match.rule)
        return self._asked

    def _log_failure(self, index: int, response: BackendResponse, elapsed: int) -> None:
        steps = self.plan.steps
        step = steps[index]
        following = steps[index + 1].backend if index + 1 < len(steps) else None
        code = response.error_code or BACKEND_ERROR
        if code == DEADLINE_EXCEEDED:
            self.events.append(LogEvent("timeout", step.backend, code, "", elapsed, None))
        elif code == QUERY_TIMEOUT:
            self.events.append(LogEvent("timeout", step.backend, code, "", elapsed, following))
        else:
            self.events.append(
                LogEvent("fallback", step.backend, code, response.error_message or "", elapsed, following)
            )


# ---------------------------------------------------------------------- the final status


def _sequential_envelope(
    query: str, plan: Plan, attempts: list[Attempt], router_ms: int, log_hint: str | None
) -> Envelope:
    winner = next((a for a in attempts if a.accepted), None)
    status: Status
    if winner is not None:
        status = "success"
    else:
        with_results = [a for a in attempts if a.response.results]
        if with_results:
            # Best across all attempts; the earliest wins a tie (it was planned first).
            winner = max(with_results, key=lambda a: a.response.normalized_relevance)
            status = "partial"
        elif attempts and all(a.failed for a in attempts):
            status = "error"
        else:
            status = "empty"
    error_code, error_message = _error(status, attempts, log_hint)
    response = winner.response if winner else None
    return Envelope(
        query_echo=query,
        routed_to=winner.step.backend if winner else None,
        routed_mode=winner.step.mode if winner else None,
        fallback_chain=plan.fallback_chain,
        fallbacks_used=sum(1 for a in attempts if not a.accepted),
        results=list(response.results) if response else [],
        result_count=response.result_count if response else 0,
        normalized_relevance=response.normalized_relevance if response else 0.0,
        status=status,
        error_code=error_code,
        error_message=error_message,
        router_duration_ms=max(router_ms, winner.duration_ms if winner else 0),
        backend_duration_ms=winner.duration_ms if winner else 0,
        rule=plan.match.as_dict(),
        attempts=[a.as_dict() for a in attempts],
    )


def _filled_envelope(machine: Fallback, router_ms: int, log_hint: str | None) -> Envelope:
    """The sequential decision over every step's answer, its results filled from the others."""
    from memory_router.core.fuse import fill_results

    attempts = machine.attempts
    decided = _decided(attempts)  # what the walk would have asked: up to its winner
    envelope = _sequential_envelope(machine.echo, machine.plan, decided, router_ms, log_hint)
    if not envelope.results:
        return envelope.replace(attempts=[a.as_dict() for a in attempts])
    contributed = [a for a in attempts if a.response.status == "success" and a.response.results]
    results = fill_results(envelope.results[0], contributed, machine.policy.limit)
    return envelope.replace(
        results=results,
        result_count=len(results),
        attempts=[a.as_dict() for a in attempts],
        backend_duration_ms=max((a.duration_ms for a in contributed), default=envelope.backend_duration_ms),
    )


def _decided(attempts: list[Attempt]) -> list[Attempt]:
    """The attempts the sequential walk would have made: up to the first accepted one, or all."""
    for index, attempt in enumerate(attempts):
        if attempt.accepted:
            return attempts[: index + 1]
    return attempts


def _fused_envelope(machine: Fallback, router_ms: int, log_hint: str | None) -> Envelope:
    """How a fused envelope's fields read is documented in :mod:`.fuse`."""
    from memory_router.core.fuse import fuse_results

    attempts = machine.attempts
    contributed = [a for a in attempts if a.accepted]
    results, top = fuse_results(contributed, machine.policy.limit)
    if top is None:  # nothing to merge: the sequential rules say empty or error
        return _sequential_envelope(machine.echo, machine.plan, attempts, router_ms, log_hint)
    best = max(r.relevance for r in results)
    return Envelope(
        query_echo=machine.echo,
        routed_to=top.step.backend,
        routed_mode=top.step.mode,
        fallback_chain=machine.plan.fallback_chain,
        fallbacks_used=len(attempts) - len(contributed),
        results=results,
        result_count=len(results),
        normalized_relevance=best,
        status="success" if best >= machine.policy.threshold else "partial",
        router_duration_ms=router_ms,
        backend_duration_ms=max(a.duration_ms for a in contributed),
        rule=machine.plan.match.as_dict(),
        attempts=[a.as_dict() for a in attempts],
    )


def _error(status: Status, attempts: list[Attempt], log_hint: str | None) -> tuple[str | None, str | None]:
    if status != "error":
        return None, None
    last = attempts[-1].response
    if last.error_code == DEADLINE_EXCEEDED:
        # The chain was stopped by the overall deadline, not exhausted: say so.
        return DEADLINE_EXCEEDED, (
            f"No backend answered before the query's deadline ({last.error_message}). "
            "Raise deadline_ms, or see attempts for where the time went."
        )
    if log_hint is None:
        return ALL_BACKENDS_FAILED, ALL_BACKENDS_FAILED_MESSAGE
    return ALL_BACKENDS_FAILED, f"All backends in the fallback chain failed. Check {log_hint} for details."


def ms(seconds: float | None) -> int:
    """A duration in seconds (``None``: none) as whole milliseconds, the envelope's unit."""
    return int(round((seconds or 0) * 1000))
