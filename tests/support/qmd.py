"""Whether this machine has qmd, for the tests that run it (not a test module).

``.ci/setup`` installs qmd and Node 22 into .tools/; without them, a test marked ``needs_qmd``
(or a module whose ``pytestmark`` holds it) is skipped, naming what is missing, rather than failing.
"""

from __future__ import annotations

import os

import pytest

from memory_router.backends.base import Backend
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.engine import QmdEngine
from memory_router.backends.qmd.locate import QmdCommand, QmdNotFound, resolve_command

try:
    QMD: QmdCommand | None = resolve_command(None, None, os.environ)
    QMD_MISSING: str | None = None
except QmdNotFound as exc:  # pragma: no cover - CI installs qmd
    QMD, QMD_MISSING = None, str(exc)

needs_qmd = pytest.mark.skipif(QMD is None, reason=f"qmd not installed: {QMD_MISSING}")


def qmd_backend(backend: Backend) -> QmdBackend:
    """``backend`` as the qmd backend it is (a router hands out every backend as a :class:`Backend`)."""
    assert isinstance(backend, QmdBackend), backend
    return backend


def warm_engine(backend: Backend) -> QmdEngine:
    """The warm engine a qmd backend has started (the test fails when it has none)."""
    engine = qmd_backend(backend)._engine
    assert engine is not None, "qmd's warm engine has not started"
    return engine.engine
