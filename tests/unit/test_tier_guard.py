"""The fast tier's guard (tests/support/tier_guard.py): a test not marked slow that starts a program fails
and is told to mark itself slow; a slow test may start programs. These tests run in the fast tier
themselves, so the guard is on while they run."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ..support.tier_guard import GUARD, SubprocessInFastTier, guarded_phase


@contextmanager
def provoked() -> Iterator[list[str]]:
    """Starts provoked on purpose here: checked, then not held against this test by the hook
    (which looks at the end of the call phase)."""
    try:
        yield GUARD.seen
    finally:
        GUARD.seen.clear()


def test_subprocess_run_is_refused_with_the_fix() -> None:
    with provoked() as seen:
        with pytest.raises(SubprocessInFastTier, match=r"pytest\.mark\.slow"):
            subprocess.run(["true"], check=True)
        assert seen and "'true'" in seen[0]


def test_asyncio_subprocesses_are_refused() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec("true")

    with provoked() as seen:
        with pytest.raises(SubprocessInFastTier):
            asyncio.run(start())
        assert seen


def test_posix_spawn_and_os_system_are_refused() -> None:
    with provoked() as seen:
        with pytest.raises(SubprocessInFastTier):
            os.posix_spawn("/bin/true", ["true"], dict(os.environ))
        with pytest.raises(SubprocessInFastTier):
            os.system("true")
        assert len(seen) == 2


class _Item:
    def __init__(self, *, slow: bool) -> None:
        self.slow = slow

    def get_closest_marker(self, name: str) -> object | None:
        return object() if self.slow and name == "slow" else None


def test_a_refused_start_fails_the_test_even_when_the_code_swallowed_the_error() -> None:
    """A fallback chain catches a backend's failure and answers from the next backend; the test
    must still fail, naming the program and the fix."""
    phase = guarded_phase(_Item(slow=False))  # type: ignore[arg-type]
    next(phase)
    try:
        subprocess.run(["true"])
    except Exception:
        pass  # what an adapter would do
    with pytest.raises(pytest.fail.Exception, match=r"started a subprocess .*'true'.*Mark it `@pytest.mark.slow`"):
        phase.send(None)
    GUARD.active = True  # back to this (fast) test's own phase


def test_a_slow_phase_turns_the_guard_off() -> None:
    phase = guarded_phase(_Item(slow=True))  # type: ignore[arg-type]
    next(phase)
    assert GUARD.active is False
    with pytest.raises(StopIteration):
        phase.send(None)
    GUARD.active = True


@pytest.mark.slow
def test_a_slow_test_may_start_programs() -> None:
    assert subprocess.run(["true"]).returncode == 0
    assert asyncio.run(_exit_code_of_true()) == 0


async def _exit_code_of_true() -> int:
    proc = await asyncio.create_subprocess_exec("true")
    return await proc.wait()
