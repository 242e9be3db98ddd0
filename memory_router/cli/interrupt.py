"""Ctrl-C, ``kill`` and a closed terminal during a one-shot ``query``.

Backend programs run in sessions of their own (``backends/common/process.py``), so SIGINT from the
terminal, or SIGTERM/SIGHUP to the router, never reaches them: without a handler the router
died (or unwound with ``KeyboardInterrupt``) and left them running. :func:`install` makes each
of the three signals cancel the query instead: every live backend process group is killed
(``backends/common/groups.py``), one line goes to stderr, and the process exits at once with
``128 + the signal's number``: 130 (SIGINT), 143 (SIGTERM), 129 (SIGHUP), the shell's convention.
Nothing is printed on stdout: the query was abandoned, not answered. In-process backends
(threads: Total Recall, Lossless) end with the process.

Cold start: ``_signal`` (the built-in module under ``signal``, without its enum classes) and
nothing else (not even ``typing``) is imported until a signal arrives.
"""

import os
import sys

_HANDLED = ("SIGINT", "SIGTERM", "SIGHUP")  # exit 128 + number: 130, 143, 129 on Linux
_by_number: dict[int, str] = {}  # filled by install()


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP as above (main thread only; idempotent). The console
    script calls it for ``query`` (:mod:`.entry`), whichever path then answers: the thin client,
    the in-process route, or click's parser."""
    if _by_number:
        return
    import _signal  # type: ignore[import-not-found]  # `signal` without its enums (cold start)

    for name in _HANDLED:
        number = getattr(_signal, name, None)
        if number is not None:
            _by_number[number] = name
            _signal.signal(number, _on_signal)


def _on_signal(signum: int, frame: object) -> None:
    groups = sys.modules.get("memory_router.backends.common.groups")
    if groups is None:  # no backend program was ever started here
        _leave(signum)
    else:  # a program being started right now is killed too, as soon as its group is known
        groups.when_settled(lambda: _leave(signum))


def _leave(signum: int) -> None:
    groups = sys.modules.get("memory_router.backends.common.groups")
    if groups is not None:
        groups.kill_all()
    name = _by_number.get(signum, f"signal {signum}")
    try:
        from memory_router.contract import say  # only now: a warm query never loads the contract's tables

        say(f"{name}: query cancelled, its backend processes stopped")
    except (OSError, ValueError):
        pass
    os._exit(128 + signum)
