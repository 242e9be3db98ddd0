"""Backend adapters, one module per backend type, behind the seam in :mod:`.base`.

Installed as ``memory_router.backends``. Each adapter module defines:

* ``Settings``: a frozen pydantic model of its keys in ``router-config.json``
  (``backends.<name>``, minus ``type``), with ``extra="forbid"`` so typos are caught at load;
* ``create(name, settings, context) -> Backend``.

Modules are imported lazily by type name, so the CLI pays only for the adapters it uses.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

# type name in router-config.json -> module implementing it
ADAPTER_MODULES: dict[str, str] = {
    "totalrecall": "memory_router.backends.totalrecall",
    "qmd": "memory_router.backends.qmd",
    "lossless": "memory_router.backends.lossless",
    "cognee": "memory_router.backends.cognee",
    "command": "memory_router.backends.command",
}


@dataclass(frozen=True)
class BackendContext:
    """What an adapter may know about its surroundings when it is created.

    ``environ`` and ``cwd`` are passed in (not read from ``os``) so tests and the daemon control
    them; adapters resolve their paths from settings first, then these, then defaults.
    """

    state_dir: Path
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path = field(default_factory=Path.cwd)
    long_lived: bool = False
    """True in ``serve``/``mcp``: adapters may keep warm helper processes (qmd's engine)."""


def adapter_module(type_name: str) -> ModuleType:
    """The module for an adapter type. Raises ``KeyError`` for an unknown type."""
    return importlib.import_module(ADAPTER_MODULES[type_name])


class DemoUnavailable(Exception):
    """Raised by an adapter's ``demo_setup`` when its backend cannot run on this machine."""
