"""The ``memory-router`` console script.

``memory-router query ...`` is what an agent runs for every memory lookup, so it resolves the
invocation once (:mod:`memory_router.cli.query`: the arguments parsed into a ``QueryArgs``, the
files resolved, the text read) and first asks the warm daemon through
:mod:`memory_router.client.thin`, which imports only the standard library (no click, no pydantic,
no router): when a daemon answers, that is all this process imports. When none answers,
:mod:`memory_router.cli.oneshot` routes the same three values in-process, still without click.
``memory-router --help`` prints the pre-rendered text in :mod:`memory_router.cli.help_text`, also
without click, when the terminal is wide enough for it to equal click's own. Every other command
runs the click application in :mod:`memory_router.cli.main`; so do ``query`` arguments the
client's parser leaves to click (``--help``, bad values, values only click accepts), and then the
daemon is not tried again: the query routes in-process.

The commands that answer once and exit (``query``, ``route``, help) run without the cyclic
garbage collector. Their imports alone allocate enough objects to trigger ~50 collections, ~10%
of a cold query (docs/benchmarks.md, *Cold start*); reference counting still frees everything acyclic, and
the process ends after one answer. Long-lived commands (``serve``, ``mcp``, the daemon) keep it.
"""

import gc
import sys

# Commands whose process answers once and exits: they run without the cyclic collector.
ONE_SHOT = frozenset({"query", "route", "--help", "-h", "--version"})


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] in ONE_SHOT:
        gc.disable()
    if argv and argv[0] == "query":
        from memory_router.cli.interrupt import install

        install()  # Ctrl-C/SIGTERM/SIGHUP: cancel the call, kill its backends, exit 130/143/129
        from memory_router.client.invocation import parse_query_args

        args = parse_query_args(argv[1:])
        if args is not None:
            from memory_router.cli.query import answer

            answer(args)  # never returns
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


if __name__ == "__main__":  # pragma: no cover
    main()
