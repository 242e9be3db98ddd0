"""Which configured backends can answer here: backends.json's word and the adapters' own probe().

Shared by ``memory-router init`` (which writes backends.json from the probes), ``config check``
(which fails when a rule has no backend that can run) and ``backends`` (which exits non-zero
when backends.json marks a backend usable that cannot run here). The router itself never
probes: it reads backends.json only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from memory_router.config.installed import Installed
from memory_router.core.frozen import Frozen
from memory_router.core.rules import Rule

if TYPE_CHECKING:
    from memory_router.backends.base import Backend
    from memory_router.config.router_config import RouterConfig


class Configured(Protocol):
    """What probing needs of a router (:class:`memory_router.routing.router.Router`): the config's
    backends and an instance of each."""

    @property
    def config(self) -> RouterConfig: ...

    def backend(self, name: str) -> Backend: ...


class Readiness(Frozen):
    backend: str
    type: str
    runs_here: bool  # the adapter's probe()
    detail: str
    facts: Mapping[str, Any]
    status: str | None  # in backends.json; None when not listed or there is no file
    unusable: str | None  # why backends.json rules it out, None when usable

    @property
    def can_answer(self) -> bool:
        return self.runs_here and self.unusable is None

    @property
    def reason(self) -> str:
        """Why it cannot answer ("" when it can): backends.json's reason first."""
        if self.unusable is not None:
            return self.unusable
        return "" if self.runs_here else f"does not run here: {self.detail}"


def probe_all(router: Configured, installed: Installed | None) -> dict[str, Readiness]:
    """Every configured backend, probed (a probe is cheap and sends no query)."""
    out: dict[str, Readiness] = {}
    for name, spec in router.config.backends.items():
        probe = router.backend(name).probe()
        out[name] = Readiness(
            name,
            spec.type,
            probe.ok,
            probe.detail,
            dict(probe.facts),
            installed.statuses.get(name) if installed else None,
            installed.unusable_reason(name) if installed else "no backends.json",
        )
    return out


def rules_without_an_answer(rules: list[Rule], ready: Mapping[str, Readiness]) -> list[tuple[Rule, list[str]]]:
    """The rules none of whose chain's backends can answer here, each with one line per backend
    saying why (a rule whose queries would always end in ALL_BACKENDS_FAILED)."""
    dead: list[tuple[Rule, list[str]]] = []
    for rule in rules:
        backends = list(dict.fromkeys(step.backend for step in rule.chain))
        if not any(name in ready and ready[name].can_answer for name in backends):
            dead.append(
                (rule, [f"{name}: {ready[name].reason if name in ready else 'not configured'}" for name in backends])
            )
    return dead


def misreported(ready: Mapping[str, Readiness]) -> list[Readiness]:
    """Backends backends.json calls usable (ready/degraded) that cannot run here."""
    return [r for r in ready.values() if r.unusable is None and not r.runs_here]
