"""``memory-router query`` in-process, without click: what runs when no daemon answers.

The console script (:mod:`.entry`) parses ``query``'s arguments with the parser built from the
option table in :mod:`memory_router.contract` (click's options come from the same table) and,
when no daemon answers, calls :func:`run_query` directly, so a cold query never imports click;
the click command in :mod:`.main` calls the same function. Exit codes: :mod:`memory_router.contract`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory_router.config import paths
from memory_router.contract import COMMON_OPTIONS, EXIT_OK, INVALID_UTF8, exit_code, say
from memory_router.core.errors import InvalidQuery, RouterError, check_state_dir
from memory_router.core.frozen import Frozen

if TYPE_CHECKING:  # imported when the backends are first read
    from memory_router.config.installed import Installed


class Options(Frozen):
    """The files a command reads: ``contract.COMMON_OPTIONS``' values (``None``: the default)."""

    state_dir: str | None
    backends_json: str | None
    config: str | None


def write_json(data: bytes) -> None:
    from memory_router.output.outwrite import emit  # whole, even to a non-blocking pipe; else exit 1 with the reason

    emit(data + b"\n")


class Session:
    """Everything one CLI invocation loads: config, state dir, backends.json path, router.

    ``cached``: read router-config.json through the compiled cache in the state dir (the query
    path); ``config check`` passes False and validates the file in full."""

    def __init__(self, opts: Options, *, cached: bool = True) -> None:
        from memory_router.core.router import Router, default_context

        self.state_dir = paths.state_dir(opts.state_dir)
        check_state_dir(self.state_dir)
        self.backends_path = paths.backends_json(self.state_dir, opts.backends_json)
        if cached:
            from memory_router.config.cache import load_config_cached

            self.config = load_config_cached(paths.config_file(opts.config, self.state_dir), self.state_dir)
        else:
            from memory_router.config.router_config import load_config

            self.config = load_config(paths.config_file(opts.config, self.state_dir))
        self.router = Router(self.config, context=default_context(self.state_dir))

    def installed(self) -> Installed:
        from memory_router.config.installed import load_installed

        return load_installed(self.backends_path)


def read_query(query: str) -> str:
    if query != "-":
        if not query.isascii():
            try:
                query.encode("utf-8")
            except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
                start = len(os.fsencode(query[: _first_surrogate(query)]))
                raise InvalidQuery(
                    INVALID_UTF8, f"the query argument is not valid UTF-8 (byte {start}); pass UTF-8 text"
                ) from None
        return query
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidQuery(
            INVALID_UTF8, f"standard input is not valid UTF-8 (byte {exc.start}); send UTF-8 text"
        ) from None


def _first_surrogate(text: str) -> int:
    return next(i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff")


def _printable_echo(text: str) -> str:
    """``text`` for an envelope's ``query_echo``: argv bytes that are not UTF-8 become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "replace")


def run_query(
    query: str,
    opts: Options,
    *,
    pretty: bool = False,
    timeout_ms: int | None = None,
    limit: int | None = None,
    min_relevance: float | None = None,
    max_chars: int | None = None,
    via_daemon: Callable[[str], int | None] | None = None,
    agent: str | None = None,
    session_key: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> None:
    """Read QUERY ('-': stdin), let ``via_daemon`` answer it if it can, else route it in this
    process; print the envelope and exit with the documented code. Never returns. ``agent`` and
    ``session_key``: the query's scope (:mod:`memory_router.core.scope`), checked before anything
    is read, so a bad one is refused (``INVALID_SCOPE``, exit 2) whichever path would answer.
    ``min_relevance`` and ``max_chars``: the caller's floor and budget (:mod:`memory_router.core.trim`);
    ``since``/``until``: its time window (:mod:`memory_router.core.window`), checked as the scope is."""
    from memory_router.core.envelope import error_envelope
    from memory_router.core.scope import parse_scope

    text = query
    try:
        scope = parse_scope(agent, session_key)
        window = None
        if since or until:
            from memory_router.core.window import parse_window

            window = parse_window(since, until)
        text = read_query(query)
        if via_daemon is not None and (code := via_daemon(text)) is not None:
            sys.exit(code)
        session = Session(opts)
        installed = session.installed()
        envelope = session.router.route_blocking(
            text, installed, timeout_ms=timeout_ms, limit=limit, scope=scope, window=window
        )
        if min_relevance is not None or max_chars is not None:
            from memory_router.core.trim import Trim, apply

            envelope = apply(envelope, Trim(min_relevance=min_relevance, max_chars=max_chars))
    except RouterError as exc:
        say(str(exc))
        echo = _printable_echo(text) if text != "-" else ""
        write_json(error_envelope(echo, exc.error_code, str(exc)).to_json(pretty=pretty))
        sys.exit(exc.exit_code)
    write_json(envelope.to_json(pretty=pretty))
    if envelope.status == "error":
        say(envelope.error_message or "all backends failed")
        _leave(exit_code(envelope.error_code))
    _leave(EXIT_OK)


def main(opts: dict[str, Any]) -> None:
    """The console script's in-process ``query`` (``opts`` from :func:`memory_router.contract.parse_query_args`),
    with click's standalone handling of Ctrl-C and a closed stdout."""
    import errno

    try:
        run_query(
            opts["query"],
            Options(**{option.dest: opts.get(option.dest) for option in COMMON_OPTIONS}),
            pretty=opts.get("pretty", False),
            timeout_ms=opts.get("timeout_ms"),
            limit=opts.get("limit"),
            min_relevance=opts.get("min_relevance"),
            max_chars=opts.get("max_chars"),
            agent=opts.get("agent"),
            session_key=opts.get("session_key"),
            since=opts.get("since"),
            until=opts.get("until"),
        )
    except (KeyboardInterrupt, EOFError):
        print("\nAborted!", file=sys.stderr, flush=True)
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stderr.flush()
        os._exit(1)


def _leave(code: int) -> None:
    """Exit as soon as the answer is out, without the interpreter's teardown.

    Finalising the ~300 modules a query imported costs 20-30 ms, a fifth of a cold query
    (docs/benchmarks.md, *Cold start*), and nothing here needs it: router.log is written with ``os.write``,
    the config cache is renamed into place before routing, SQLite is opened read-only, and
    subprocess backends are reaped or killed by the time the envelope exists. Abandoned backend
    threads are not joined either: the caller waits for our exit, not for work the router has
    already given up on. So: flush what the caller reads, then ``os._exit``."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
