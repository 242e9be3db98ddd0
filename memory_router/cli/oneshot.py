"""``memory-router query`` in-process, without click: what runs when no daemon answers.

A query is resolved once (:func:`memory_router.client.invocation.answer`: the arguments parsed from the option table in
:mod:`memory_router.contract` into a ``QueryArgs``, the files, the text; see
:mod:`memory_router.client.invocation`) and, when no daemon answers, the same three values come to
:func:`run_query`, so a cold query from the console script never imports click; click's command
in :mod:`.main` goes the same way. Exit codes: :mod:`memory_router.contract`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

from memory_router.client.invocation import read_query as read_query
from memory_router.config import paths
from memory_router.config.paths import Resolved
from memory_router.contract import EXIT_OK, exit_code, say
from memory_router.core.errors import InvalidQuery, RouterError, UnsafeStateDir
from memory_router.core.frozen import Frozen
from memory_router.output.outwrite import emit, leave

if TYPE_CHECKING:  # imported when the backends are first read
    from memory_router.client.invocation import QueryArgs
    from memory_router.config.installed import Installed
    from memory_router.config.paths import FileOptions


class Options(Frozen):
    """The files a command reads: ``contract.COMMON_OPTIONS``' values (``None``: the default),
    which :func:`memory_router.config.paths.resolve` resolves."""

    state_dir: str | None = None
    backends_json: str | None = None
    config: str | None = None


def write_json(data: bytes) -> None:
    emit(data + b"\n")  # whole, even to a non-blocking pipe; else exit 1 with the reason


class Session:
    """Everything one CLI invocation loads: config, state dir, backends.json path, router.

    ``where``: the command's ``--state-dir``/``--backends-json``/``--config`` (:class:`Options`),
    or the files they resolved to already (:class:`~memory_router.config.paths.Resolved`: the
    query path resolves once, for the daemon attempt and for this). ``cached``: read
    router-config.json through the compiled cache in the state dir (the query path); ``config
    check`` passes False and validates the file in full."""

    def __init__(self, where: FileOptions | Resolved, *, cached: bool = True) -> None:
        from pathlib import Path

        from memory_router.routing.router import Router, default_context

        files = where if isinstance(where, Resolved) else paths.resolve(where)
        if files.state_dir_problem:
            raise UnsafeStateDir(files.state_dir_problem)
        self.state_dir = Path(files.state_dir)
        self.backends_path = Path(files.backends_json)
        if cached:
            from memory_router.config.cache import load_config_cached

            self.config = load_config_cached(Path(files.config), self.state_dir)
        else:
            from memory_router.config.router_config import load_config

            self.config = load_config(Path(files.config))
        self.router = Router(self.config, context=default_context(self.state_dir))

    def installed(self) -> Installed:
        from memory_router.config.installed import load_installed

        return load_installed(self.backends_path)


def _printable_echo(text: str) -> str:
    """``text`` for an envelope's ``query_echo``: argv bytes that are not UTF-8 become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "replace")


def run_query(args: QueryArgs, files: Resolved, text: str | InvalidQuery) -> NoReturn:
    """Route the query in this process (``files``: ``args``' files, resolved once; ``text``: the
    query's text, read once, or why it could not be read), print the envelope and exit with the
    documented code. ``args.agent`` and ``args.session_key``: the query's scope
    (:mod:`memory_router.core.scope`), checked before anything else, so a bad one is refused
    (``INVALID_SCOPE``, exit 2) whichever path would answer; ``since``/``until``: its time window
    (:mod:`memory_router.core.window`), checked next; then the text. ``min_relevance`` and
    ``max_chars``: the caller's floor and budget (:mod:`memory_router.core.trim`)."""
    from memory_router.core.envelope import error_envelope
    from memory_router.core.scope import parse_scope

    echo = args.query  # what an error envelope echoes: the argument, until the text is the query's
    try:
        scope = parse_scope(args.agent, args.session_key)
        window = None
        if args.since or args.until:
            from memory_router.core.window import parse_window

            window = parse_window(args.since, args.until)
        if isinstance(text, InvalidQuery):
            raise text
        echo = text
        session = Session(files)
        installed = session.installed()
        envelope = session.router.route_blocking(
            text, installed, timeout_ms=args.timeout_ms, limit=args.limit, scope=scope, window=window
        )
        if args.min_relevance is not None or args.max_chars is not None:
            from memory_router.core.trim import Trim, apply

            envelope = apply(envelope, Trim(min_relevance=args.min_relevance, max_chars=args.max_chars))
    except RouterError as exc:
        say(str(exc))
        shown = _printable_echo(echo) if echo != "-" else ""
        write_json(error_envelope(shown, exc.error_code, str(exc)).to_json(pretty=args.pretty))
        sys.exit(exc.exit_code)
    write_json(envelope.to_json(pretty=args.pretty))
    if envelope.status == "error":
        say(envelope.error_message or "all backends failed")
        leave(exit_code(envelope.error_code))
    leave(EXIT_OK)


def main(args: QueryArgs, files: Resolved, text: str | InvalidQuery) -> NoReturn:
    """:func:`run_query`, with click's standalone handling of Ctrl-C and a closed stdout."""
    import errno

    try:
        run_query(args, files, text)
    except (KeyboardInterrupt, EOFError):
        print("\nAborted!", file=sys.stderr, flush=True)
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stderr.flush()
        os._exit(1)
