"""Ctrl-C, ``kill`` and a closed terminal during a one-shot ``query``: what cancelling it does.

Backend programs run in sessions of their own (``backends/common/process.py``), so SIGINT from the
terminal, or SIGTERM/SIGHUP to the router, never reaches them: without a handler the router
died (or unwound with ``KeyboardInterrupt``) and left them running. The console script
(:func:`memory_router.cli.entry.cancel_on_signals`) makes each of the three signals call
:func:`cancel` instead: every live backend process group is killed
(``backends/common/groups.py``), one line goes to stderr, and the process exits at once with
``128 + the signal's number``: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP), the shell's convention.
Nothing is printed on stdout: the query was abandoned, not answered. In-process backends
(threads: Total Recall, Lossless) end with the process.

This module is loaded only when a signal arrives: a query nobody interrupts never imports it.
"""

import os
import sys


def cancel(signum: int) -> None:
    """Cancel the query for signal ``signum`` as the module docstring says: the process exits now,
    or, while a backend program is being started, as soon as its process group is known."""
    groups = sys.modules.get("memory_router.backends.common.groups")
    if groups is None:  # no backend program was ever started here
        _leave(signum)
    else:  # a program being started right now is killed too, as soon as its group is known
        groups.when_settled(lambda: _leave(signum))


def _leave(signum: int) -> None:
    groups = sys.modules.get("memory_router.backends.common.groups")
    if groups is not None:
        groups.kill_all()
    try:
        import signal

        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    try:
        from memory_router.contract import say

        say(f"{name}: query cancelled, its backend processes stopped")
    except (OSError, ValueError):
        pass
    os._exit(128 + signum)
