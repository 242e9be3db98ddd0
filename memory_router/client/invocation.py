"""One ``memory-router query`` invocation, resolved once.

Its arguments are parsed once (:func:`parse_query_args`, into a :class:`QueryArgs`), its files
resolved and the state dir checked once (:func:`memory_router.config.paths.resolve`), and its text
read once (:func:`read_query`: standard input for ``-``, checked for UTF-8 once). The daemon attempt
(:func:`memory_router.client.thin.ask`) and the in-process route
(:func:`memory_router.cli.oneshot.run_query`) both take those three, so the two paths cannot
read the invocation differently (``tests/unit/test_contract.py`` holds click's command, the console
script and the thin client to one meaning).

The thin client imports this module on every query: standard library only, no ``typing``.
"""

import os
import sys

from memory_router.query_options import QUERY_OPTIONS

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import Any

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
