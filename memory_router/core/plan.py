"""Plan: the matched rule's chain, filtered by which backends are usable.

A step whose backend is not usable is dropped silently (no log line): that is how the Starter
tier works. The plan keeps the dropped steps and why, for ``memory-router route``. What is usable
is the caller's to say (the router asks backends.json: ``Installed.unusable_reason``).
"""

from __future__ import annotations

from collections.abc import Callable

from memory_router.core.frozen import Frozen
from memory_router.core.rules import ChainStep, RuleMatch


class SkippedStep(Frozen):
    step: ChainStep
    reason: str


class Plan(Frozen):
    match: RuleMatch
    steps: tuple[ChainStep, ...]
    skipped: tuple[SkippedStep, ...]

    @property
    def fallback_chain(self) -> list[str]:
        """The envelope's ``fallback_chain``: one backend name per planned step."""
        return [step.backend for step in self.steps]

    def as_dict(self) -> dict[str, object]:
        return {
            "rule": self.match.as_dict(),
            "planned": [_step(s) for s in self.match.rule.chain],
            "chain": [_step(s) for s in self.steps],
            "fallback_chain": self.fallback_chain,
            "skipped": [{**_step(s.step), "reason": s.reason} for s in self.skipped],
        }


def _step(step: ChainStep) -> dict[str, str | bool | None]:
    shown: dict[str, str | bool | None] = {"backend": step.backend, "mode": step.mode}
    if step.extension:  # beyond the spec's table: route says so ("table": "spec" turns it off)
        shown["extension"] = True
    return shown


def make_plan(match: RuleMatch, unusable_reason: Callable[[str], str | None]) -> Plan:
    """The plan of a matched rule: each step whose backend is usable (``unusable_reason(name)`` is
    ``None``), in the chain's order, and the others with the reason why not."""
    steps: list[ChainStep] = []
    skipped: list[SkippedStep] = []
    for step in match.rule.chain:
        reason = unusable_reason(step.backend)
        if reason is None:
            steps.append(step)
        else:
            skipped.append(SkippedStep(step, reason))
    return Plan(match, tuple(steps), tuple(skipped))
