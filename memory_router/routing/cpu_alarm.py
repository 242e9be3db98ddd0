"""``re`` searches stopped after a budget of CPU time: how a one-shot query matches the rules'
signals without ``regex`` (:meth:`memory_router.core.rules.RuleTable.match`'s ``interrupt``).

``regex`` takes a match timeout; ``re`` does not, but its matcher checks for signals as it goes
(every few thousand steps), so a Python signal handler that raises ends a search that would
backtrack for ever. A ``SIGPROF`` timer (``ITIMER_PROF``: CPU time of the process, user and
system, as ``regex`` measures its timeout) is set to the budget before each search and cleared
after it. Python runs signal handlers in the main thread only, and only the main thread may set
one: :func:`interrupter` is ``None`` anywhere else (the daemon matches with ``regex``, in
worker threads too), and where ``setitimer`` does not exist.

The handler raises only while a search is armed: a timer that fires as its search returns is
ignored (the search did finish), never an exception somewhere later. It stays installed once set
(the one-shot process ends after its one query); nothing else here uses ``SIGPROF``.

Cold start: ``_signal`` (the built-in module under ``signal``, without its enums), as
:mod:`memory_router.cli.interrupt`.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False  # not typing's: a one-shot query needs none of it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from memory_router.core.rules import Interrupt

    _T = TypeVar("_T")

_armed = False


def _on_alarm(signum: int, frame: object) -> None:
    if _armed:
        raise TimeoutError("the rules' match budget is spent")


def _within(seconds: float, search: Callable[..., _T], *args: Any) -> _T:
    """``search(*args)``, or ``TimeoutError`` after ``seconds`` of this process's CPU time."""
    import _signal  # type: ignore[import-not-found]  # `signal` without its enums (cold start)

    global _armed
    _armed = True
    _signal.setitimer(_signal.ITIMER_PROF, max(seconds, 1e-6))
    try:
        return search(*args)
    finally:
        _armed = False  # first: a signal handled from here on finds the search over, and is ignored
        _signal.setitimer(_signal.ITIMER_PROF, 0)


_installed = False


def interrupter() -> Interrupt | None:
    """The ``interrupt`` for :meth:`~memory_router.core.rules.RuleTable.match` in this thread
    (installing the ``SIGPROF`` handler the first time), or ``None`` where it cannot run: not the
    main thread, no ``setitimer``, or ``SIGPROF`` already handled by someone else (a profiler)."""
    global _installed
    if threading.current_thread() is not threading.main_thread():
        return None
    if not _installed:
        import _signal

        if not hasattr(_signal, "setitimer") or _signal.getsignal(_signal.SIGPROF) not in (
            _signal.SIG_DFL,
            _signal.SIG_IGN,
            None,
        ):
            return None
        _signal.signal(_signal.SIGPROF, _on_alarm)
        _installed = True
    return _within
