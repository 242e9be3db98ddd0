"""One ``memory-router query``, resolved once and answered: by a warm daemon, else in this process.

The console script (:mod:`.entry`) and click's ``query`` command (:mod:`.main`) both end here with
the arguments parsed into a :class:`~memory_router.client.invocation.QueryArgs`. :func:`answer`
resolves the files once (:func:`memory_router.config.paths.resolve`, with the state dir's trust
check) and reads the text once (:func:`~memory_router.client.invocation.read_query`), asks the
daemon with those (:func:`memory_router.client.thin.route_via_daemon`) and, when none answers,
routes the same three values in-process (:func:`memory_router.cli.oneshot.run_query`).

Imported on every query: standard library only until a path is chosen (the daemon's needs no
more; the in-process one imports the router).
"""

import os

from memory_router.client.invocation import read_query
from memory_router.config.paths import resolve

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import NoReturn

    from memory_router.client.invocation import QueryArgs
    from memory_router.core.errors import InvalidQuery


def answer(args: "QueryArgs", *, ask_daemon: bool = True) -> "NoReturn":
    """Answer one ``query`` and exit: its files resolved and its text read once each, a daemon
    asked (unless ``ask_daemon`` is false: the console script handed click arguments its own
    parser declined, having decided for in-process), else routed in this process with the same
    values. Text that is not UTF-8 is reported in-process, after the scope and the time window
    (the order of the checks there)."""
    files = resolve(args)
    text: str | InvalidQuery
    try:
        text = read_query(args.query)
    except Exception as exc:  # InvalidQuery, imported only then: a warm query never loads core.errors
        from memory_router.core import errors

        if not isinstance(exc, errors.InvalidQuery):
            raise
        text = exc
    # MEMORY_ROUTER_DAEMON=off (or --daemon off): not even the thin client is imported.
    if ask_daemon and isinstance(text, str) and (args.mode or os.environ.get("MEMORY_ROUTER_DAEMON")) != "off":
        from memory_router.client.thin import route_via_daemon

        code = route_via_daemon(args, files, text)
        if code is not None:
            from memory_router.output.outwrite import leave

            leave(code)  # the daemon's envelope is out: no teardown (outwrite.leave says why)
    from memory_router.cli.oneshot import main as in_process

    in_process(args, files, text)
