"""The thin client: answer ``memory-router query`` from a warm daemon over its Unix socket.

This module is on the hot path of every query an agent makes, so it imports only the standard
library (and orjson, for ``--pretty`` only): no click, no pydantic, no ``json`` (nor the ``re`` it
imports), no ``typing``, no router, and no ``__future__`` (0.7M instructions): no module on this
path says ``from __future__ import annotations``, so their annotations that name what only type
checkers import are quoted (``tests/unit/test_cold_start.py`` pins the path's modules).
It takes the invocation as the console script resolved it once
(:mod:`memory_router.client.invocation`: the arguments, the files, the text) and
:func:`route_via_daemon` answers it in two steps: :func:`connect_or_spawn`, then
:func:`ask_at_once` (the handshake and the query in one write; where the daemon cannot tell that
it serves this context, :func:`handshake` compares the contexts here and :func:`ask` asks again).
If a daemon answers, the envelope it returns is printed and the process exits; otherwise
:func:`route_via_daemon` returns ``None`` and the caller routes in-process with the same three
values.

Wire protocol (JSON lines over a stream socket, the same lines as ``serve`` on stdin, answered in
order)::

    -> {"op": "hello", "protocol": 1, "version": "0.1.0"}
    -> {"query": "auth", "limit": 5, "context": {...this process's, hashed with its own salt...}}
    <- {"op": "hello", "protocol": 1, "version": "0.1.0", "pid": 123, "context": {...}}
    <- {"id": null, "query_echo": "auth", ...the envelope...}

The daemon answers a client only with the same *context*: state dir, backends.json,
router-config.json, working directory and the environment variables the router and its adapters
read (:mod:`memory_router.config.envvars`, plus the names the daemon's configuration adds), compared
as salted hashes, never as values (:func:`context`). Anything else would let a daemon started
elsewhere answer with other memory, so a mismatch routes in-process; the daemon compares the
query's ``context`` before it routes anything, so a daemon of another context never runs the
query (no router.log line, no backend call). A daemon speaking another
protocol version is skipped with a warning on stderr. A daemon that accepts and closes, or fails
in any other way before answering, routes in-process with a one-line warning.

``MEMORY_ROUTER_DAEMON`` (or ``query --daemon``): ``auto`` (default) uses a daemon when one
answers, ``off`` never tries, ``require`` fails (exit 2, ``DAEMON_UNAVAILABLE``) rather than
route in-process.
"""

import os
import sys

from memory_router.client.wire import HELLO, dumps, loads

# The wire module is the client's API, re-exported (the `x as x` form marks it for mypy).
from memory_router.client.wire import PROTOCOL as PROTOCOL
from memory_router.client.wire import SOCKET_NAME as SOCKET_NAME
from memory_router.client.wire import Connection as Connection
from memory_router.client.wire import DaemonError as DaemonError
from memory_router.client.wire import ProtocolMismatch as ProtocolMismatch
from memory_router.client.wire import context as context
from memory_router.client.wire import context_diff as context_diff
from memory_router.client.wire import context_for as context_for
from memory_router.client.wire import env_digest as env_digest
from memory_router.client.wire import socket_path as socket_path
from memory_router.config import statedir
from memory_router.query_options import COMMON_OPTIONS, DAEMON_MODES

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import Any

    from memory_router.client.invocation import QueryArgs
    from memory_router.config.paths import FileOptions, Resolved

# ---------------------------------------------------------------------- query

# memory_router.contract (its error codes, exit codes, the error envelope, say) is imported only
# where an answer carries an error code or there is something to say: a warm answer needs none of
# it, and its tables cost the client 2M instructions (docs/benchmarks.md, *the warm half, third
# round*).


def say(message: str) -> None:
    """One diagnostic line on stderr (:func:`memory_router.contract.say`)."""
    from memory_router.contract import say

    say(message)


def _emit(envelope_line: bytes, pretty: bool) -> None:
    if pretty:
        import orjson

        envelope_line = orjson.dumps(orjson.loads(envelope_line), option=orjson.OPT_INDENT_2)
    from memory_router.output.outwrite import emit  # whole, even to a non-blocking pipe; else exit 1 with the reason

    emit(envelope_line + b"\n")


def _error_envelope(query: str, code: str, message: str) -> bytes:
    """The error envelope as the in-process CLI prints it (orjson's compact form), without orjson."""
    if not (query.isascii() and message.isascii()):  # a path that is not UTF-8: escaped, as in-process
        from memory_router.output.jsonout import printable

        query, message = printable(query), printable(message)
    from memory_router.contract import error_fields

    return dumps(error_fields(query, code, message))


def daemon_mode(flag: str | None = None) -> str:
    mode = flag or os.environ.get("MEMORY_ROUTER_DAEMON") or "auto"
    if mode not in DAEMON_MODES:
        say(f"MEMORY_ROUTER_DAEMON must be one of {', '.join(DAEMON_MODES)}, not {mode!r}; using auto")
        return "auto"
    return mode


class Unavailable(Exception):
    """No daemon answer for this query: ``reason`` is the error envelope's message under
    ``require``; ``warning``, if any, goes to stderr first: always, or with ``unless_required``
    only when the query then routes in-process (``require`` says the reason instead)."""

    def __init__(self, reason: str, warning: str | None = None, *, unless_required: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.warning, self.unless_required = reason, warning, unless_required


def route_via_daemon(args: "QueryArgs", files: "Resolved", text: str) -> int | None:
    """Answer the query (``text``, read once from ``args.query``) through a daemon serving
    ``files``' context, print its envelope and return the exit code; ``None``: route in-process.
    In ``require`` mode it never returns ``None``. ``args.agent``/``args.session_key`` go as the
    request's ``scope``; the daemon checks them as the in-process path does (``INVALID_SCOPE``)."""
    mode = daemon_mode(args.mode)
    if mode == "off" or files.state_dir_problem:
        return None  # (an unsafe state dir: the in-process path refuses it with STATE_DIR_UNSAFE)
    try:
        with connect_or_spawn(args, files, mode) as conn:
            envelope_line, envelope = ask_at_once(conn, args, files, text)
    except Unavailable as no:
        if no.warning and not (no.unless_required and mode == "require"):
            say(f"warning: {no.warning}")
        if mode != "require":
            return None
        from memory_router.contract import DAEMON_UNAVAILABLE, exit_code

        say(f"{no.reason} (MEMORY_ROUTER_DAEMON=require)")
        _emit(_error_envelope(text, DAEMON_UNAVAILABLE, no.reason), args.pretty)
        return exit_code(DAEMON_UNAVAILABLE)
    _emit(envelope_line, args.pretty)
    if envelope.get("status") == "error":
        from memory_router.contract import exit_code

        say(envelope.get("error_message") or "all backends failed")
        return exit_code(envelope.get("error_code"))
    return 0


def connect_or_spawn(args: "QueryArgs", files: "Resolved", mode: str) -> Connection:
    """A connection to the daemon of ``files``' state dir. With none there and ``--spawn`` (or
    ``$MEMORY_ROUTER_SPAWN``), one is started for the next queries: under ``require`` this query
    waits for it; else this query routes in-process (raises :class:`Unavailable`)."""
    path = socket_path(files.state_dir)
    try:
        return Connection(path)
    except DaemonError as exc:
        absent = str(exc)
    if not (args.spawn or os.environ.get("MEMORY_ROUTER_SPAWN", "") not in ("", "0")):
        raise Unavailable(absent)
    try:
        spawned = spawn_daemon(args, files)
    except DaemonError as refused:
        raise Unavailable(
            f"{absent}; not starting a daemon: {refused}", f"not starting a daemon: {refused}", unless_required=True
        ) from None
    if spawned is None:
        raise Unavailable(f"{absent}; not starting a daemon: the state directory {files.state_dir} does not exist")
    if mode != "require":
        raise Unavailable(f"{absent}; a daemon is starting")  # this query in-process, the next one warm
    try:
        return wait_for_daemon(path)
    except DaemonError as exc:
        raise Unavailable(str(exc)) from None


def ask_at_once(conn: Connection, args: "QueryArgs", files: "Resolved", text: str) -> "tuple[bytes, dict[str, Any]]":
    """``hello`` and the query in one write, the query carrying this process's context (hashed
    with a salt of its own), so the daemon routes it only if it serves that context: one round
    trip where :func:`handshake` then :func:`ask` take two. Returns what :func:`ask` returns.

    A daemon that does not route it answers ``CONTEXT_MISMATCH`` (its context differs, or holds
    names this process did not send: variables its config adds), or ``INVALID_REQUEST`` if it
    predates the ``context`` key; then the two contexts are compared here from its ``hello``, as
    :func:`handshake` does, and the query is asked again without the key if they are the same."""
    guard = context(
        cwd=os.getcwd(),
        environ=os.environ,
        state_dir=files.state_dir,
        backends_json=files.backends_json,
        config=files.config,
        salt=os.urandom(8).hex(),
    )
    request = query_request(args, text)
    try:
        conn.send(HELLO + b"\n" + dumps({**request, "context": guard}))
    except DaemonError as exc:  # it accepted and closed (its connection cap)
        raise Unavailable(str(exc), f"{exc}; routing in-process", unless_required=True) from None
    hello = _hello_reply(conn)
    envelope_line, envelope = _decode(_receive(conn, args))
    if envelope.get("error_code") is not None:
        from memory_router.contract import CONTEXT_MISMATCH, INVALID_REQUEST

        # A guarded query's answers that say it was not routed: the daemon serves another
        # context (or could not tell), or it is older than the ``context`` key.
        if envelope["error_code"] in (CONTEXT_MISMATCH, INVALID_REQUEST):
            same_context(conn, hello, files)
            return ask(conn, args, text)
    return _answered(envelope_line, envelope)


def handshake(conn: Connection, files: "Resolved") -> "dict[str, Any]":
    """``hello``, and the daemon's context compared with this process's (:func:`context_for`):
    its reply, or :class:`Unavailable` (another protocol, a refusal, another context)."""
    try:
        conn.send(HELLO)
    except DaemonError as exc:
        raise Unavailable(str(exc), f"{exc}; routing in-process", unless_required=True) from None
    hello = _hello_reply(conn)
    same_context(conn, hello, files)
    return hello


def _hello_reply(conn: Connection) -> "dict[str, Any]":
    try:
        return conn.hello_reply()
    except ProtocolMismatch as exc:
        raise Unavailable(str(exc), str(exc)) from None
    except DaemonError as exc:
        raise Unavailable(str(exc), f"{exc}; routing in-process", unless_required=True) from None


def same_context(conn: Connection, hello: "dict[str, Any]", files: "Resolved") -> None:
    """:class:`Unavailable` unless the daemon's context (its ``hello``) is this process's."""
    theirs = hello.get("context")
    mine = context_for(
        theirs,
        cwd=os.getcwd(),
        environ=os.environ,
        state_dir=files.state_dir,
        backends_json=files.backends_json,
        config=files.config,
    )
    diff = context_diff(mine, theirs)
    if diff:
        raise Unavailable(
            f"the daemon at {conn.path} (pid {hello.get('pid')}) serves another context (differs in "
            f"{', '.join(diff)}); routing in-process"
        )


def ask(conn: Connection, args: "QueryArgs", text: str) -> "tuple[bytes, dict[str, Any]]":
    """Send the query, read the daemon's answer: the envelope line exactly as the in-process CLI
    prints it, and the envelope; :class:`Unavailable` when it is not an answer to the query."""
    try:
        conn.send(dumps(query_request(args, text)))
    except DaemonError as exc:
        raise Unavailable(str(exc), f"{exc}; routing in-process") from None
    return _answered(*_decode(_receive(conn, args)))


def query_request(args: "QueryArgs", text: str) -> "dict[str, Any]":
    """The request line's object for the query ``text`` and ``args``' options."""
    request: dict[str, Any] = {"query": text}
    for field in ("timeout_ms", "limit", "min_relevance", "max_chars"):
        if (value := getattr(args, field)) is not None:
            request[field] = value
    if args.since:
        request["since"] = args.since  # as typed: the daemon reads "yesterday" when it answers, now
    if args.until:
        request["until"] = args.until
    if args.agent or args.session_key:
        request["scope"] = {k: v for k, v in (("agent", args.agent), ("session_key", args.session_key)) if v}
    return request


def _receive(conn: Connection, args: "QueryArgs") -> bytes:
    """The daemon's answer line to the query."""
    # A backend may take timeout_ms per step; leave the daemon's own deadline room to answer.
    wait = max(60.0, 8 * (args.timeout_ms or 5000) / 1000)
    try:
        return conn.receive(wait)
    except DaemonError as exc:
        raise Unavailable(str(exc), f"{exc}; routing in-process") from None


def _decode(raw: bytes) -> "tuple[bytes, dict[str, Any]]":
    """The answer line as the in-process CLI prints it, and the envelope; :class:`Unavailable`
    when it is not an envelope."""
    # The daemon echoes our (absent) id first: {"id":null,<the envelope's fields>}. Dropping
    # that member leaves exactly the bytes the in-process CLI prints.
    prefix = b'{"id":null,'
    if not raw.startswith(prefix):
        unexpected = "unexpected response from the daemon"
        raise Unavailable(unexpected, f"{unexpected}; routing in-process")
    envelope_line = b"{" + raw[len(prefix) :]
    try:
        envelope = loads(envelope_line)
    except ValueError:
        raise Unavailable("the daemon sent invalid JSON", "the daemon sent invalid JSON; routing in-process") from None
    return envelope_line, envelope


def _answered(envelope_line: bytes, envelope: "dict[str, Any]") -> "tuple[bytes, dict[str, Any]]":
    """``envelope_line`` and ``envelope``, or :class:`Unavailable` when it is not an answer to
    the query."""
    code = envelope.get("error_code")
    if code is None:  # an answer (whatever its status, an error has a code)
        return envelope_line, envelope
    from memory_router.contract import RETRY_IN_PROCESS

    if code in RETRY_IN_PROCESS:  # not an answer to the query (contract.ERROR_CODES' retry column)
        raise Unavailable(
            f"the daemon answered {code}",
            f"the daemon answered {code}: {envelope.get('error_message')}; routing in-process",
        )
    return envelope_line, envelope


# ---------------------------------------------------------------------- spawning


def spawn_daemon(opts: "FileOptions", files: "Resolved | None" = None, *, idle_exit: float | None = None) -> int | None:
    """Start ``memory-router serve --socket`` detached (own session, no terminal), with this
    process's working directory, environment and ``opts`` (``--state-dir``, ``--backends-json``,
    ``--config`` as given; ``files``: what they resolve to, when the caller has it already), so
    that it serves this context. Returns its pid, or ``None`` when the state directory does not
    exist (there is nothing to serve, and creating the user's state directory is the installer's
    business). Raises :class:`DaemonError` when the state dir is not this user's alone
    (:func:`memory_router.config.statedir.problem`) or ``daemon.log`` is not a regular file of ours (it
    is never opened through a symlink). Its stderr goes to ``<state dir>/daemon.log``."""
    import subprocess

    if files is None:
        from memory_router.config.paths import resolve

        files = resolve(opts)
    state = files.state_dir
    if not os.path.isdir(state):
        return None
    if files.state_dir_problem:
        raise DaemonError(files.state_dir_problem)
    if idle_exit is None:
        idle_exit = float(os.environ.get("MEMORY_ROUTER_IDLE_EXIT") or 600)
    argv = [sys.executable, "-m", "memory_router", "serve", "--socket", "--idle-exit", f"{idle_exit:g}"]
    for option in COMMON_OPTIONS:  # the daemon serves this process's context: the same files
        value = getattr(opts, option.dest)
        if value:
            argv += [option.flag, value]
    log_path = os.path.join(state, "daemon.log")
    try:
        log_fd = statedir.open_private(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError as exc:
        raise DaemonError(statedir.describe_open_error(log_path, exc)) from None
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    return proc.pid


def wait_for_daemon(path: str, timeout: float = 15.0) -> Connection:
    """Connect to a daemon that is starting up."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            return Connection(path)
        except DaemonError:
            if time.monotonic() > deadline:
                raise DaemonError(f"the daemon did not start listening on {path} within {timeout:.0f} s") from None
            time.sleep(0.05)
