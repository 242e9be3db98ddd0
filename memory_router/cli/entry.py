"""The ``memory-router`` console script.

``memory-router query ...`` is what an agent runs for every memory lookup, so the console script
answers it before it imports anything heavy: the arguments parsed once into a ``QueryArgs``, then
:func:`memory_router.client.invocation.answer` resolves the files and reads the text once each
and first asks the warm daemon (:mod:`memory_router.client.thin`, which imports only the standard
library: no click, no pydantic, no router); when a daemon answers, that is all this process
imports. When none answers, :func:`memory_router.cli.oneshot.main` routes the same three values
in-process, still without click. ``memory-router --help`` prints the pre-rendered text in
:mod:`memory_router.cli.help_text`, also without click, when the terminal is wide enough for it to
equal click's own. Every other command runs the click application in :mod:`memory_router.cli.main`;
so do ``query`` arguments the client's parser leaves to click (``--help``, bad values, values only
click accepts), and then the daemon is not tried again: the query routes in-process.

**Signals during a query.** SIGINT, SIGTERM and SIGHUP cancel a one-shot ``query``: its backend
programs are killed and the process exits 130/143/129 (:mod:`memory_router.cli.interrupt` does
that, loaded only when a signal arrives). :func:`cancel_on_signals` installs the handlers here,
with ``_signal`` (the built-in module under ``signal``, without its enum classes) and nothing else:
each module on a warm query's path costs the process ~0.1 ms to find and load, about 1% of the
interpreter's own start (docs/benchmarks.md, *the warm half, fifth round*).

The commands that answer once and exit (``query``, ``route``, help) run without the cyclic
garbage collector. Their imports alone allocate enough objects to trigger ~50 collections, ~10%
of a cold query (docs/benchmarks.md, *Cold start*); reference counting still frees everything acyclic, and
the process ends after one answer. Long-lived commands (``serve``, ``mcp``, the daemon) keep it.
"""

import gc
import sys

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import NoReturn

    from memory_router.client.invocation import QueryArgs
    from memory_router.config.paths import Resolved
    from memory_router.core.errors import InvalidQuery

# Commands whose process answers once and exits: they run without the cyclic collector.
ONE_SHOT = frozenset({"query", "route", "--help", "-h", "--version"})
# The signals that cancel a one-shot query (exit 128 + the signal's number: 130, 143, 129 on Linux).
CANCELLING = ("SIGINT", "SIGTERM", "SIGHUP")


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] in ONE_SHOT:
        gc.disable()
    if argv and argv[0] == "query":
        cancel_on_signals()  # whichever path then answers: the thin client, in-process, click's parser
        from memory_router.client.invocation import answer, parse_query_args

        args = parse_query_args(argv[1:])
        if args is not None:
            answer(args, _in_process, _via_daemon)  # never returns
        from memory_router.cli.main import IN_PROCESS
        from memory_router.cli.main import main as click_main

        # The arguments need click's parser: the click command routes in-process.
        click_main(obj=IN_PROCESS)
    if len(argv) == 1 and argv[0] in ("--help", "-h", "--version"):
        from memory_router.cli.help_text import static_answer

        text = static_answer(argv[0])
        if text is not None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
    from memory_router.cli.main import main as click_main

    click_main()


def _via_daemon(args: "QueryArgs", files: "Resolved", text: str) -> "int | None":
    from memory_router.client.thin import route_via_daemon  # not with MEMORY_ROUTER_DAEMON=off

    return route_via_daemon(args, files, text)


def _in_process(args: "QueryArgs", files: "Resolved", text: "str | InvalidQuery") -> "NoReturn":
    from memory_router.cli.oneshot import main as in_process  # only when no daemon answered

    in_process(args, files, text)


def cancel_on_signals() -> None:
    """Handle :data:`CANCELLING` as the module docstring says (main thread only; idempotent)."""
    import _signal  # type: ignore[import-not-found]  # `signal` without its enums (cold start)

    for name in CANCELLING:
        number = getattr(_signal, name, None)
        if number is not None:
            _signal.signal(number, _cancelled)


def _cancelled(signum: int, frame: object) -> None:
    from memory_router.cli.interrupt import cancel  # only now: a query nobody interrupts never loads it

    cancel(signum)


if __name__ == "__main__":  # pragma: no cover
    main()
