"""The thin client: answer ``memory-router query`` from a warm daemon over its Unix socket.

This module is on the hot path of every query an agent makes, so it imports only the standard
library (and orjson, for ``--pretty`` only): no click, no pydantic, no regex, no router. If a
daemon answers, the envelope it returns is printed and the process exits; otherwise
:func:`route_via_daemon` returns ``None`` and the caller routes in-process exactly as before.

Wire protocol (JSON lines over a stream socket, the same lines as ``serve`` on stdin)::

    -> {"op": "hello", "protocol": 1, "version": "0.1.0"}
    <- {"op": "hello", "protocol": 1, "version": "0.1.0", "pid": 123, "context": {...}}
    -> {"query": "auth", "limit": 5}
    <- {"id": null, "query_echo": "auth", ...the envelope...}

The daemon answers a client only with the same *context*: state dir, backends.json,
router-config.json, working directory and the environment variables the router and its adapters
read (:mod:`memory_router.config.envvars`, plus the names the daemon's configuration adds), compared
as salted hashes, never as values (:func:`context`). Anything else would let a daemon started
elsewhere answer with other memory, so a mismatch routes in-process. A daemon speaking another
protocol version is skipped with a warning on stderr. A daemon that accepts and closes, or fails
in any other way before answering, routes in-process with a one-line warning.

``MEMORY_ROUTER_DAEMON`` (or ``query --daemon``): ``auto`` (default) uses a daemon when one
answers, ``off`` never tries, ``require`` fails (exit 2, ``DAEMON_UNAVAILABLE``) rather than
route in-process.
"""

from __future__ import annotations

import os
import sys

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
from memory_router.config.paths import resolve_backends_json, resolve_config, resolve_state_dir
from memory_router.contract import (
    COMMON_OPTIONS,
    DAEMON_MODES,
    DAEMON_UNAVAILABLE,
    RETRY_IN_PROCESS,
    error_fields,
    exit_code,
    say,
)
from memory_router.contract import parse_query_args as parse_query_args

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------- query


def _emit(envelope_line: bytes, pretty: bool) -> None:
    if pretty:
        import orjson

        envelope_line = orjson.dumps(orjson.loads(envelope_line), option=orjson.OPT_INDENT_2)
    from memory_router.output.outwrite import emit  # whole, even to a non-blocking pipe; else exit 1 with the reason

    emit(envelope_line + b"\n")


def _error_envelope(query: str, code: str, message: str) -> bytes:
    """The error envelope as the in-process CLI prints it (orjson's compact form), without orjson."""
    import json

    if not (query.isascii() and message.isascii()):  # a path that is not UTF-8: escaped, as in-process
        from memory_router.output.jsonout import printable

        query, message = printable(query), printable(message)
    fields = error_fields(query, code, message)
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def daemon_mode(flag: str | None = None) -> str:
    mode = flag or os.environ.get("MEMORY_ROUTER_DAEMON") or "auto"
    if mode not in DAEMON_MODES:
        say(f"MEMORY_ROUTER_DAEMON must be one of {', '.join(DAEMON_MODES)}, not {mode!r}; using auto")
        return "auto"
    return mode


def route_via_daemon(  # noqa: C901 - the client's one decision tree; each exit is an exit code
    query: str,
    *,
    timeout_ms: int | None = None,
    limit: int | None = None,
    min_relevance: float | None = None,
    max_chars: int | None = None,
    pretty: bool = False,
    state_dir: str | None = None,
    backends_json: str | None = None,
    config: str | None = None,
    spawn: bool = False,
    mode: str | None = None,
    agent: str | None = None,
    session_key: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> int | None:
    """Answer ``query`` through the daemon and return the exit code, or ``None`` to route
    in-process. In ``require`` mode it never returns ``None``. ``agent``/``session_key`` go as the
    request's ``scope``; the daemon checks them as the in-process path does (``INVALID_SCOPE``)."""
    mode = daemon_mode(mode)
    if mode == "off":
        return None
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        return None  # undecodable bytes from argv: the in-process path decides what they mean
    spawn = spawn or os.environ.get("MEMORY_ROUTER_SPAWN", "") not in ("", "0")
    state = resolve_state_dir(state_dir)
    if statedir.problem(state):
        return None  # the in-process path refuses it with STATE_DIR_UNSAFE and says why
    backends = resolve_backends_json(state, backends_json)
    cfg = resolve_config(config, state)
    path = socket_path(state)

    def unavailable(reason: str) -> int | None:
        if mode != "require":
            return None
        say(f"{reason} (MEMORY_ROUTER_DAEMON=require)")
        _emit(_error_envelope(query, DAEMON_UNAVAILABLE, reason), pretty)
        return exit_code(DAEMON_UNAVAILABLE)

    try:
        conn = Connection(path)
    except DaemonError as exc:
        if not spawn:
            return unavailable(str(exc))
        try:
            spawned = spawn_daemon(state_dir=state_dir, backends_json=backends_json, config=config)
        except DaemonError as refused:
            if mode != "require":
                say(f"warning: not starting a daemon: {refused}")
            return unavailable(f"{exc}; not starting a daemon: {refused}")
        if spawned is None:
            return unavailable(f"{exc}; not starting a daemon: the state directory {state} does not exist")
        if mode != "require":
            return None  # this query runs in-process; the next one finds the daemon warm
        try:
            conn = wait_for_daemon(path)
        except DaemonError as exc2:
            return unavailable(str(exc2))
    with conn:
        try:
            hello = conn.hello()
        except ProtocolMismatch as exc:
            say(f"warning: {exc}")
            return unavailable(str(exc))
        except DaemonError as exc:
            if mode != "require":
                say(f"warning: {exc}; routing in-process")
            return unavailable(str(exc))
        theirs = hello.get("context")
        mine = context_for(
            theirs, cwd=os.getcwd(), environ=os.environ, state_dir=state, backends_json=backends, config=cfg
        )
        diff = context_diff(mine, theirs)
        if diff:
            return unavailable(
                f"the daemon at {path} (pid {hello.get('pid')}) serves another context (differs in "
                f"{', '.join(diff)}); routing in-process"
            )
        request: dict[str, Any] = {"query": query}
        if timeout_ms is not None:
            request["timeout_ms"] = timeout_ms
        if limit is not None:
            request["limit"] = limit
        if min_relevance is not None:
            request["min_relevance"] = min_relevance
        if max_chars is not None:
            request["max_chars"] = max_chars
        if since:
            request["since"] = since  # as typed: the daemon reads "yesterday" when it answers, now
        if until:
            request["until"] = until
        if agent or session_key:
            request["scope"] = {k: v for k, v in (("agent", agent), ("session_key", session_key)) if v}
        # A backend may take timeout_ms per step; leave the daemon's own deadline room to answer.
        wait = max(60.0, 8 * (timeout_ms or 5000) / 1000)
        try:
            import json

            conn.send(json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            raw = conn.receive(wait)
        except (DaemonError, UnicodeEncodeError) as exc:
            say(f"warning: {exc}; routing in-process")
            return unavailable(str(exc))
    # The daemon echoes our (absent) id first: {"id":null,<the envelope's fields>}. Dropping
    # that member leaves exactly the bytes the in-process CLI prints.
    prefix = b'{"id":null,'
    if not raw.startswith(prefix):
        say("warning: unexpected response from the daemon; routing in-process")
        return unavailable("unexpected response from the daemon")
    envelope_line = b"{" + raw[len(prefix) :]
    import json

    try:
        envelope = json.loads(envelope_line)
    except ValueError:
        say("warning: the daemon sent invalid JSON; routing in-process")
        return unavailable("the daemon sent invalid JSON")
    code = envelope.get("error_code")
    if code in RETRY_IN_PROCESS:  # not an answer to the query (contract.ERROR_CODES' retry column)
        say(f"warning: the daemon answered {code}: {envelope.get('error_message')}; routing in-process")
        return unavailable(f"the daemon answered {code}")
    _emit(envelope_line, pretty)
    if envelope.get("status") == "error":
        say(envelope.get("error_message") or "all backends failed")
        return exit_code(code)
    return 0


# ---------------------------------------------------------------------- spawning


def spawn_daemon(
    *, state_dir: str | None, backends_json: str | None, config: str | None, idle_exit: float | None = None
) -> int | None:
    """Start ``memory-router serve --socket`` detached (own session, no terminal), with this
    process's working directory, environment and flags, so that it serves this context. Returns
    its pid, or ``None`` when the state directory does not exist (there is nothing to serve, and
    creating the user's state directory is the installer's business). Raises
    :class:`DaemonError` when the state dir is not this user's alone
    (:func:`memory_router.config.statedir.problem`) or ``daemon.log`` is not a regular file of ours (it
    is never opened through a symlink). Its stderr goes to ``<state dir>/daemon.log``."""
    import subprocess

    state = resolve_state_dir(state_dir)
    if not os.path.isdir(state):
        return None
    reason = statedir.problem(state)
    if reason:
        raise DaemonError(reason)
    if idle_exit is None:
        idle_exit = float(os.environ.get("MEMORY_ROUTER_IDLE_EXIT") or 600)
    argv = [sys.executable, "-m", "memory_router", "serve", "--socket", "--idle-exit", f"{idle_exit:g}"]
    given = {"state_dir": state_dir, "backends_json": backends_json, "config": config}
    for option in COMMON_OPTIONS:  # the daemon serves this process's context: the same files
        value = given[option.dest]
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


# ---------------------------------------------------------------------- argv fast path


def fast_query(args: list[str]) -> int | None:
    """The console script's fast path for ``memory-router query ARGS``: the exit code if a
    daemon answered (or ``require`` failed), else ``None`` (the click app runs the query)."""
    opts = parse_query_args(args)
    if opts is None or (opts.get("mode") or os.environ.get("MEMORY_ROUTER_DAEMON")) == "off":
        return None
    query = opts.pop("query")
    if query == "-":
        raw = sys.stdin.buffer.read()
        try:
            query = raw.decode("utf-8")
        except UnicodeDecodeError:
            _restore_stdin(raw)  # the in-process path reports INVALID_UTF8 exactly as before
            return None
        _restore_stdin(raw)
    return route_via_daemon(query, **opts)


def _restore_stdin(raw: bytes) -> None:
    """Put what was read back on sys.stdin, for the in-process path to read again."""
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
