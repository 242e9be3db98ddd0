"""backends.json: which backends the installer says are present, and whether each is usable.

The router only reads this file (the installer owns it). Accepted shapes::

    {"tier": "pro", "backends": {"qmd": {"status": "ready", ...}, ...}}   # the stack's own
    {"backends": {"qmd": "ready"}}                                        # status as a string
    {"backends": ["qmd", "totalrecall"]}  or  ["qmd", "totalrecall"]      # names only: ready

``ready`` and ``degraded`` are usable; every other status (``installed``, ``unavailable``,
``failed``, anything unknown) is not. A backend with no status is taken as ``ready``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from memory_router.config.router_config import read_json
from memory_router.core.errors import BackendsFileMissing, InvalidBackendsFile

USABLE_STATUSES = frozenset({"ready", "degraded"})
KNOWN_STATUSES = frozenset({"ready", "degraded", "installed", "unavailable", "failed"})


class Installed(NamedTuple):
    path: Path
    tier: str | None
    statuses: Mapping[str, str]

    def unusable_reason(self, backend: str) -> str | None:
        """Why ``backend`` cannot be used, or ``None`` if it can."""
        status = self.statuses.get(backend)
        if status is None:
            return f"not listed in {self.path.name}"
        if status in USABLE_STATUSES:
            return None
        if status not in KNOWN_STATUSES:
            return f"unknown status {status!r} in {self.path.name} (usable: ready, degraded)"
        return f"status {status!r} in {self.path.name} (usable: ready, degraded)"

    @property
    def usable(self) -> list[str]:
        return [name for name, status in self.statuses.items() if status in USABLE_STATUSES]


def load_installed(path: Path) -> Installed:
    if not path.exists():
        raise BackendsFileMissing(path)
    data = read_json(path, error=InvalidBackendsFile)
    return parse_installed(data, path)


def parse_installed(data: Any, path: Path) -> Installed:
    tier: str | None = None
    backends: Any = data
    if isinstance(data, dict):
        if "backends" not in data:
            raise InvalidBackendsFile(path, "", 'no "backends" key')
        backends = data["backends"]
        raw_tier = data.get("tier")
        if raw_tier is not None and not isinstance(raw_tier, str):
            raise InvalidBackendsFile(path, "tier", f"must be a string, got {raw_tier!r}")
        tier = raw_tier
    elif not isinstance(data, list):
        raise InvalidBackendsFile(path, "", f"the top level must be an object or a list, got {type(data).__name__}")

    return Installed(path, tier, MappingProxyType(_statuses(backends, path)))


def _statuses(backends: Any, path: Path) -> dict[str, str]:
    """``"backends"`` as a list of names (all ready) or an object of statuses -> name: status."""
    statuses: dict[str, str] = {}
    if isinstance(backends, list):
        for i, name in enumerate(backends):
            if not isinstance(name, str) or not name:
                raise InvalidBackendsFile(path, f"backends[{i}]", f"must be a backend name, got {name!r}")
            statuses[name] = "ready"
        return statuses
    if not isinstance(backends, dict):
        raise InvalidBackendsFile(path, "backends", f"must be an object or a list, got {type(backends).__name__}")
    for name, entry in backends.items():
        if isinstance(entry, str):
            statuses[name] = entry
        elif isinstance(entry, dict):
            status = entry.get("status", "ready")
            if not isinstance(status, str):
                raise InvalidBackendsFile(path, f"backends.{name}.status", f"must be a string, got {status!r}")
            statuses[name] = status
        else:
            raise InvalidBackendsFile(
                path, f"backends.{name}", f'must be an object with a "status" or a status string, got {entry!r}'
            )
    return statuses
