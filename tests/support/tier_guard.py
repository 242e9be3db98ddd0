"""The fast tier's guard: a test not marked ``slow`` may not start a subprocess.

The fast tier (``python3 -m pytest -q -m "not slow"``) is everything that runs in-process and must
stay under 30 s; anything that starts a program (the CLI, ``serve``, qmd/node, Cognee, OpenClaw,
bench scripts, import timing, wheel builds) belongs to the slow tier. tests/conftest.py turns the
guard on around each phase (setup, call, teardown) of every test without the marker, so a
fixture that spawns counts against the tests that use it.

Every way the tests could start a process funnels through one of these: ``subprocess.Popen``
(``run``, ``check_output`` and asyncio's ``create_subprocess_exec``/``_shell`` all build a Popen),
``os.fork`` (``multiprocessing``, ``os.spawn*``), ``os.posix_spawn[p]`` and ``os.system``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Generator
from typing import Any

import pytest

MARK_IT_SLOW = (
    "this test is not marked slow but started a subprocess ({what}); the fast tier runs in-process only. "
    "Mark it `@pytest.mark.slow` (or the module: `pytestmark = pytest.mark.slow`), "
    "or test the same behaviour without starting a program"
)


class SubprocessInFastTier(RuntimeError):
    """Raised instead of starting a program while the guard is on."""


class SpawnGuard:
    """While ``active``, every attempt to start a process is refused and remembered (a test that
    catches the error broadly still fails: the hook checks ``seen`` after each phase)."""

    def __init__(self) -> None:
        self.active = False
        self.seen: list[str] = []

    def refuse(self, what: str) -> None:
        if self.active:
            self.seen.append(what)
            raise SubprocessInFastTier(MARK_IT_SLOW.format(what=what))

    def message(self) -> str:
        return MARK_IT_SLOW.format(what="; ".join(self.seen))


GUARD = SpawnGuard()


def _wrap(original: Callable[..., Any], describe: Callable[..., str]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        GUARD.refuse(describe(*args, **kwargs))
        return original(*args, **kwargs)

    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    return guarded


def install() -> None:
    """Wrap the process-starting functions once per session; the wrappers are inert while the
    guard is off (slow tests, collection, session start and finish)."""
    if getattr(subprocess.Popen._execute_child, "__wrapped__", None) is not None:  # type: ignore[attr-defined]
        return
    subprocess.Popen._execute_child = _wrap(  # type: ignore[attr-defined]
        subprocess.Popen._execute_child,  # type: ignore[attr-defined]
        lambda self, args, *rest, **kw: f"subprocess {args!r}",
    )
    for name in ("fork", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            setattr(os, name, _wrap(getattr(os, name), lambda *a, _n=name, **kw: f"os.{_n}{a[:1]!r}"))


def guarded_phase(item: pytest.Item) -> Generator[None, Any, Any]:
    """The body of the setup, call and teardown hook wrappers: the guard is on for the phase when
    the test is not marked slow, and a refused start fails the test even if the code under test
    caught the error and carried on (a fallback chain would)."""
    GUARD.active = item.get_closest_marker("slow") is None
    GUARD.seen.clear()
    try:
        return (yield)
    finally:
        GUARD.active = False
        if GUARD.seen:
            message = GUARD.message()
            GUARD.seen.clear()
            pytest.fail(message, pytrace=False)
