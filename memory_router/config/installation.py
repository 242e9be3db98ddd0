"""How this copy of memory-router was installed, so that its hints name commands that work here.

A source checkout (editable install, or run from the repository) has ``.tools/`` and the
``.ci/setup.d`` scripts; an installed wheel has neither, and a pipx or ``uv tool`` environment
cannot be changed with a plain ``pip install``. Standard library only, evaluated on demand.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Literal

Kind = Literal["checkout", "pipx", "uv", "pip"]
PACKAGE = "memory-router"


@lru_cache(maxsize=1)
def checkout_root() -> Path | None:
    """The repository this package runs from, or ``None`` for an installed copy."""
    root = Path(__file__).resolve().parents[2]  # memory_router/config/installation.py
    markers = (root / "pyproject.toml", root / ".ci", root / "tests")
    if markers[0].is_file() and all(path.is_dir() for path in markers[1:]):
        return root
    return None


@lru_cache(maxsize=1)
def kind(prefix: str | None = None) -> Kind:
    """``checkout``, ``pipx`` (its venvs hold ``pipx_metadata.json``), ``uv`` (``uv tool install``
    venvs hold ``uv-receipt.toml``), else ``pip``."""
    if checkout_root() is not None:
        return "checkout"
    venv = prefix or sys.prefix
    if os.path.isfile(os.path.join(venv, "pipx_metadata.json")):
        return "pipx"
    if os.path.isfile(os.path.join(venv, "uv-receipt.toml")):
        return "uv"
    return "pip"


def extra_command(extra: str, how: Kind | None = None) -> str:
    """The command that adds the optional dependencies ``extra`` (pyproject's extras) here."""
    how = how or kind()
    if how == "pipx":
        return f"pipx inject {PACKAGE} {_extra_packages(extra)}"
    if how == "uv":
        return f"uv tool install --reinstall '{PACKAGE}[{extra}]'"
    if how == "checkout":
        return f"pip install -e '{checkout_root() or '.'}[{extra}]'"
    return f"pip install '{PACKAGE}[{extra}]'"


def _extra_packages(extra: str) -> str:
    """What pipx must inject for ``extra`` (pipx injects packages, not extras), as this
    distribution's metadata declares it; the extra's name when the metadata is not there."""
    import re
    from importlib import metadata

    try:
        requires = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        requires = []
    marker = re.compile(r";\s*extra\s*==\s*['\"]" + re.escape(extra) + r"['\"]\s*$")
    found = [marker.sub("", r).strip() for r in requires if marker.search(r)]
    return " ".join(f"'{r}'" for r in found) or extra
