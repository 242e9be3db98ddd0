"""Plan: the matched rule's chain, filtered by what backends.json says is installed.

A step whose backend is not usable is dropped silently (no log line): that is how the Starter
tier works. The plan keeps the dropped steps and why, for ``memory-router route``.
"""

from __future__ import annotations

from memory_router.config.installed import Installed
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


def make_plan(match: RuleMatch, installed: Installed) -> Plan:
    steps: list[ChainStep] = []
    skipped: list[SkippedStep] = []
    for step in match.rule.chain:
        reason = installed.unusable_reason(step.backend)
        if reason is None:
            steps.append(step)
        else:
            skipped.append(SkippedStep(step, reason))
    return Plan(match, tuple(steps), tuple(skipped))
