"""The process groups of the backend programs running right now, for whoever must end them all
at once: the one-shot CLI on SIGINT/SIGTERM/SIGHUP (:mod:`memory_router.cli.interrupt`).

A backend program runs in its own session (:mod:`.common.process`), so a signal to the router's own
process group never reaches it: the router must kill each group itself. Standard library only,
and nothing here is imported by the signal handler's module: the handler finds this module in
``sys.modules`` (if no backend process was ever started, there is nothing to kill).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator

LIVE: set[int] = set()
"""Process group ids (= the leader's pid) of backend programs not yet reaped."""

_spawning = 0
_deferred: list[Callable[[], None]] = []


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around starting a program until its group is in :data:`LIVE`: a termination requested
    meanwhile (:func:`when_settled`) waits until then, so the new group is killed too."""
    global _spawning
    _spawning += 1
    try:
        yield
    finally:
        _spawning -= 1
        if not _spawning and _deferred:
            _deferred.pop()()


def when_settled(action: Callable[[], None]) -> None:
    """Run ``action`` now, or, while a program is being started, as soon as its group is known."""
    if _spawning:
        _deferred.append(action)
    else:
        action()


def kill_all() -> None:
    """SIGKILL every live backend process group."""
    for pgid in list(LIVE):
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
        LIVE.discard(pgid)
