"""One ``memory-router query`` invocation, resolved once and answered.

Its arguments are parsed once (:func:`parse_query_args`, into a :class:`QueryArgs`), its files
resolved and the state dir checked once (:func:`memory_router.config.paths.resolve`), and its text
read once (:func:`read_query`: standard input for ``-``, checked for UTF-8 once). :func:`answer`
does the last two and hands the three values to the two routes its caller gives: the daemon
attempt (:func:`memory_router.client.thin.route_via_daemon`) and, when no daemon answers, the
in-process route (:func:`memory_router.cli.oneshot.main`), so the two paths cannot read the
invocation differently (``tests/unit/test_contract.py`` holds click's command, the
console script and the thin client to one meaning).

The thin client imports this module on every query: standard library only, no ``typing``.
"""

import os
import sys

from memory_router.query_options import QUERY_OPTIONS

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from memory_router.config.paths import Resolved
    from memory_router.core.errors import InvalidQuery

    # The in-process route: the invocation's three values answered in this process, then exit.
    InProcess = Callable[["QueryArgs", Resolved, "str | InvalidQuery"], NoReturn]
    # The daemon attempt: its exit code once its envelope is out, or None (no daemon answered).
    ViaDaemon = Callable[["QueryArgs", Resolved, str], "int | None"]

_BY_FLAG = {o.flag: o for o in QUERY_OPTIONS}


class QueryArgs:
    """``query``'s arguments: QUERY (``-``: standard input) and one field per option of
    :data:`memory_router.query_options.QUERY_OPTIONS` (named by its ``dest``, in the table's order; ``None``
    or ``False``: not given). A test holds the fields to the table.

    Immutable, slotted, equal only to a ``QueryArgs`` with equal fields, hashed and shown by them, as
    a ``Frozen`` value is, but written out rather than a :class:`~memory_router.core.frozen.Frozen`
    subclass: the thin client builds one on every query, and importing ``core.frozen`` (with the
    ``core`` package) cost it 1.9M instructions, ~4% of its process (docs/benchmarks.md, *the warm
    half, third round*); ``contract.ErrorCode`` is written out for the same reason."""

    _FIELDS = (
        "query",
        "pretty",
        "timeout_ms",
        "limit",
        "min_relevance",
        "max_chars",
        "mode",
        "spawn",
        "agent",
        "session_key",
        "since",
        "until",
        "state_dir",
        "backends_json",
        "config",
    )
    __slots__ = _FIELDS

    query: str
    pretty: bool
    timeout_ms: int | None
    limit: int | None
    min_relevance: float | None
    max_chars: int | None
    mode: str | None
    spawn: bool
    agent: str | None
    session_key: str | None
    since: str | None
    until: str | None
    state_dir: str | None
    backends_json: str | None
    config: str | None

    def __init__(
        self,
        query: str,
        pretty: bool = False,
        timeout_ms: int | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
        max_chars: int | None = None,
        mode: str | None = None,
        spawn: bool = False,
        agent: str | None = None,
        session_key: str | None = None,
        since: str | None = None,
        until: str | None = None,
        state_dir: str | None = None,
        backends_json: str | None = None,
        config: str | None = None,
    ) -> None:
        values = locals()
        for name in self._FIELDS:
            object.__setattr__(self, name, values[name])

    def _values(self) -> "tuple[Any, ...]":
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"QueryArgs is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"QueryArgs is immutable: cannot delete {name}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not QueryArgs:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"QueryArgs({', '.join(f'{name}={getattr(self, name)!r}' for name in self._FIELDS)})"


def parse_query_args(args: list[str]) -> QueryArgs | None:
    """``query``'s arguments as the click command reads them, or ``None`` for anything this
    parser does not handle exactly (help, bad values, unknown flags): click then parses them and
    reports the error."""
    opts: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    only_args = False
    while i < len(args):
        arg = args[i]
        i += 1
        if only_args or arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        if arg == "--":
            only_args = True
            continue
        name, eq, given_text = arg.partition("=")
        given: str | None = given_text
        option = _BY_FLAG.get(name)
        if option is None or (eq and option.kind == "flag"):
            return None
        if option.kind == "flag":
            opts[option.dest] = True
            continue
        if not eq:  # "--limit 5": the value is the next argument (missing: None, click reports it)
            given, i = (args[i] if i < len(args) else None), i + 1
        value = option.value(given)
        if value is None:
            return None
        opts[option.dest] = value
    if len(positional) != 1:
        return None
    return QueryArgs(positional[0], **opts)


def answer(args: "QueryArgs", in_process: "InProcess", via_daemon: "ViaDaemon | None") -> "NoReturn":
    """Answer one ``query`` and exit: its files resolved and its text read once each, then
    ``via_daemon`` asked (:func:`memory_router.client.thin.route_via_daemon`; ``None``: the
    console script handed click arguments its own parser declined, having decided for
    in-process), else ``in_process`` called with the same values. Text that is not UTF-8 is
    reported in-process, after the scope and the time window (the order of the checks there).
    The two routes are the caller's: this module imports neither."""
    from memory_router.config.paths import resolve

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
    mode = args.mode or os.environ.get("MEMORY_ROUTER_DAEMON")
    if via_daemon is not None and isinstance(text, str) and mode != "off":
        code = via_daemon(args, files, text)
        if code is not None:
            from memory_router.output.outwrite import leave

            leave(code)  # the daemon's envelope is out: no teardown (outwrite.leave says why)
    in_process(args, files, text)


def read_query(query: str) -> str:
    """The query's text: ``query`` itself, or standard input for ``-``, read whole. Raises
    :class:`~memory_router.core.errors.InvalidQuery` (``INVALID_UTF8``) when it is not UTF-8; the
    caller reports it where the in-process path would (after the scope and the time window)."""
    if query != "-":
        if not query.isascii():
            try:
                query.encode("utf-8")
            except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as lone surrogates
                from memory_router.contract import INVALID_UTF8  # only now: a warm query never loads these
                from memory_router.core.errors import InvalidQuery

                start = len(os.fsencode(query[: _first_surrogate(query)]))
                raise InvalidQuery(
                    INVALID_UTF8, f"the query argument is not valid UTF-8 (byte {start}); pass UTF-8 text"
                ) from None
        return query
    raw = sys.stdin.buffer.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        from memory_router.contract import INVALID_UTF8
        from memory_router.core.errors import InvalidQuery

        raise InvalidQuery(
            INVALID_UTF8, f"standard input is not valid UTF-8 (byte {exc.start}); send UTF-8 text"
        ) from None


def _first_surrogate(text: str) -> int:
    return next(i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff")
