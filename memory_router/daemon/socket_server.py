"""The Unix-socket transport of ``memory-router serve --socket [PATH]``.

Same JSON-lines protocol as ``serve`` on stdin (each line a request, each answered by one line,
matched by ``id``), one connection per client, many clients at once, all served by one warm
:class:`~memory_router.daemon.service.Service`. Two transport-level ops are answered here and
never reach the service:

* ``{"op": "hello", "protocol": 1, ...}``: the handshake. The reply carries this daemon's
  protocol and version, its pid and its *context* (state dir, config, backends.json, working
  directory, relevant environment; see :func:`memory_router.client.wire.context`), which the client
  compares with its own before trusting the daemon's answers.
* ``{"op": "shutdown"}``: ``memory-router daemon stop``.

And one key only this transport reads: a request's ``"context"``, the asking client's context in
the handshake's terms but hashed with the client's own salt (the thin client sends its ``hello``
and its query in one write, :func:`memory_router.client.thin.ask_at_once`). Such a request is
routed only if that context is this daemon's; otherwise it is answered ``CONTEXT_MISMATCH``
without being routed (no backend call, no router.log line), and the client compares the contexts
from the ``hello`` reply instead. Over stdin ``"context"`` is an unknown key, as before.

Safety:

* The socket is created ``0600`` (under a ``0177`` umask, so it is never reachable by others even
  for an instant) in the state directory, which must belong to this user and be writable by no
  one else (a sticky shared directory such as /tmp is refused too). The lock file is opened with
  ``O_NOFOLLOW`` and must be a regular file of ours
  (:func:`memory_router.config.statedir.open_private`). A peer whose uid (``SO_PEERCRED``) is not
  ours is refused before anything is read.
* One daemon per socket: an exclusive ``flock`` on ``<socket>.lock`` (which holds the pid) is taken
  before binding and held for the daemon's life. If it is held, a live daemon owns the socket and
  this one refuses to start; if it is free, a leftover socket file is stale and is removed (only a
  socket, never another kind of file).
* A client cannot take the daemon down: lines are capped at the service's ``max_line_bytes``
  (the rest of a longer line is skipped and answered ``REQUEST_TOO_LARGE``), every exception in a
  connection ends that connection only, connections are capped, and a client's in-flight requests
  are cancelled when it disconnects (noticed at its EOF, or within :data:`HANGUP_POLL_S` if it
  closes later; a client that only shuts down its writing side still gets its answers).
* Startup, draining and shutdown are :mod:`.lifecycle`'s, shared with the stdin transport:
  SIGTERM/SIGINT, ``shutdown`` or idle timeout stop accepting (lines a connection already read
  are answered ``SHUTTING_DOWN``); in-flight requests get the grace period, the rest are
  cancelled (adapters kill their process groups) and answered ``SHUTTING_DOWN``; the socket is
  removed; exit 0. A second signal cancels at once. SIGHUP re-reads both config files.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import secrets
import socket
import stat
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from memory_router import __version__, contract
from memory_router.backends import adapter_env_vars
from memory_router.client.wire import PROTOCOL, LineSplitter, Oversized, context, context_diff
from memory_router.config import envvars, statedir
from memory_router.contract import say
from memory_router.daemon.lifecycle import CLEANUP_S, GRACE_S, Lifecycle, shutting_down
from memory_router.daemon.service import Service

_TRANSPORT_OPS = (b'"hello"', b'"shutdown"')
MAX_CLIENTS = 256
PER_CONNECTION_IN_FLIGHT = 64
# After a client's EOF, how often to check whether it hung up (so its requests can be cancelled).
HANGUP_POLL_S = 0.05


class SocketInUse(Exception):
    """Another live daemon holds the socket, or the path is not ours to take."""


def _say(message: str) -> None:
    say(message, who="memory-router serve")


class SocketServer:
    def __init__(
        self,
        service: Service,
        lifecycle: Lifecycle,
        path: Path,
        *,
        idle_exit_s: float = 0.0,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.service = service
        self.lifecycle = lifecycle
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.idle_exit_s = idle_exit_s
        self.max_clients = max_clients
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.connections: set[asyncio.Task[None]] = set()
        self.in_flight: set[asyncio.Task[None]] = set()
        self._lock_fd: int | None = None
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._salt = secrets.token_hex(8)
        self._context: tuple[object, dict[str, Any]] | None = None  # (the config it is for, the context)

    @property
    def context(self) -> dict[str, Any]:
        """This daemon's context for the handshake, worked out once per configuration (a reload
        may add names; the rest was fixed when the daemon started): hashing every variable's value
        again was a third of each ``hello``'s time in the daemon."""
        config = self._config()
        if self._context is None or self._context[0] is not config:
            self._context = (config, self._context_with(env_names(config), self._salt))
        return self._context[1]

    def _config(self) -> object:
        """The service's router configuration (None before it has one)."""
        return getattr(getattr(self.service, "router", None), "config", None)

    def _context_with(self, names: set[str], salt: str) -> dict[str, Any]:
        """This daemon's context over the variables ``names``, hashed with ``salt``."""
        service: Any = self.service  # its context's environ is a Mapping; wire.context only reads it
        return context(
            cwd=str(service.context.cwd),
            environ=service.context.environ,
            state_dir=str(service.state_dir),
            backends_json=str(service.backends_path),
            config=str(service.config_path),
            names=names,
            salt=salt,
        )

    # ------------------------------------------------------------------ claiming the socket

    def claim(self) -> None:
        """Take the lock and clear a stale socket; raise :class:`SocketInUse` if not ours."""
        folder = self.path.parent
        if not folder.is_dir():
            raise SocketInUse(f"{folder} does not exist; create the state directory first (or pass --socket PATH)")
        reason = statedir.problem(str(folder), what="the socket's directory")
        if reason:
            raise SocketInUse(f"{reason}; refusing to serve from it")
        if len(os.fsencode(self.path)) > 107:
            raise SocketInUse(
                f"the socket path {self.path} is longer than a Unix socket path may be (107 bytes); "
                "pass a shorter --socket PATH"
            )
        try:
            fd = statedir.open_private(str(self.lock_path), os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise SocketInUse(f"{statedir.describe_open_error(str(self.lock_path), exc)}; not serving") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise SocketInUse(
                f"another memory-router daemon (pid {holder}) is serving {self.path}; "
                "stop it first: memory-router daemon stop"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        try:
            existing = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(existing.st_mode):
            self.release()
            raise SocketInUse(f"{self.path} exists and is not a socket; not replacing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(self.path))
        except OSError:
            os.unlink(self.path)  # stale: nothing listens, and we hold the lock
            _say(f"removed a stale socket at {self.path}")
        else:
            self.release()
            raise SocketInUse(f"something is already listening on {self.path}; not replacing it")
        finally:
            probe.close()

    def release(self) -> None:
        if self._inode is not None:
            try:  # remove the socket only if it is still the one we bound
                if os.lstat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
            self._inode = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    # ------------------------------------------------------------------ serving (driven by Lifecycle)

    def ready_message(self) -> str:
        return (
            f"listening on {self.path} (pid {os.getpid()}, protocol {PROTOCOL}, memory-router {__version__}"
            + (f", exits after {self.idle_exit_s:g} s idle" if self.idle_exit_s else "")
            + ")"
        )

    async def open(self) -> None:
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._connection, path=str(self.path))
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        self._inode = os.lstat(self.path).st_ino

    async def serve(self) -> None:
        idle = asyncio.create_task(self._idle_watch()) if self.idle_exit_s else None
        try:
            await self.lifecycle.exiting.wait()
        finally:
            if idle:
                idle.cancel()

    def stop_accepting(self) -> None:
        """No new clients; each connection reads no more requests once its current chunk is
        answered (its complete lines already read get ``SHUTTING_DOWN``, see :meth:`_connection`)."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        for conn in list(self.connections):
            conn.cancel()  # its requests are done (answered or cancelled): it writes its last answers and closes
        if self.connections:
            await asyncio.wait(set(self.connections), timeout=CLEANUP_S)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), CLEANUP_S)
            except asyncio.TimeoutError:
                pass
        self.release()

    def stop(self, reason: str) -> None:
        """A graceful exit for a reason other than a signal (``daemon stop``, idle)."""
        self.lifecycle.request_exit(reason)

    async def _idle_watch(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.idle_exit_s))
            if (
                not self.connections
                and not self.in_flight
                and time.monotonic() - self.last_activity >= self.idle_exit_s
            ):
                self.stop(f"idle for {self.idle_exit_s:g} s")
                return

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        self.last_activity = time.monotonic()
        mine: set[asyncio.Task[None]] = set()
        try:
            refusal = self._refusal(writer)
            if refusal:
                writer.write(self.service.dumps(self.service.error_response(None, contract.FORBIDDEN, refusal)) + b"\n")
                await writer.drain()
                return
            slots = asyncio.Semaphore(PER_CONNECTION_IN_FLIGHT)
            async for chunk in _chunks(reader, self.service.max_line_bytes):
                self.last_activity = time.monotonic()
                await self._take(chunk, writer, slots, mine)
                if self.lifecycle.should_exit:
                    break
            if mine:  # EOF: let this client's requests finish before closing, unless it is gone
                await _until_done_or_hung_up(writer, mine)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # one broken connection must never take the daemon down
            _say(f"connection error: {exc!r}")
        finally:
            for request in mine:
                request.cancel()  # the client is gone: stop its backends
            self.connections.discard(task)
            self.last_activity = time.monotonic()
            try:
                writer.close()
            except Exception:
                pass

    async def _take(
        self,
        chunk: list[bytes | Oversized],
        writer: asyncio.StreamWriter,
        slots: asyncio.Semaphore,
        mine: set[asyncio.Task[None]],
    ) -> None:
        """Start a request for each line of ``chunk``; once the daemon is stopping, answer the
        rest ``SHUTTING_DOWN`` (they were read: answered, not dropped)."""
        for item in chunk:
            if not self.lifecycle.should_exit:
                await slots.acquire()
                if not self.lifecycle.should_exit:  # it may have begun stopping while this waited for a slot
                    request = asyncio.create_task(self._answer(item, writer, slots))
                    mine.add(request)
                    self.in_flight.add(request)
                    request.add_done_callback(mine.discard)
                    request.add_done_callback(self.in_flight.discard)
                    continue
                slots.release()
            writer.write(shutting_down(self.service, item) + b"\n")

    def _refusal(self, writer: asyncio.StreamWriter) -> str | None:
        if len(self.connections) > self.max_clients:
            return f"too many clients (limit {self.max_clients}); retry later"
        sock = writer.get_extra_info("socket")
        if sock is not None and hasattr(socket, "SO_PEERCRED"):
            try:
                _pid, uid, _gid = struct.unpack(
                    "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                )
            except OSError:
                return "could not identify the connecting user"
            if uid != os.getuid():
                return "this daemon serves only its own user"
        return None

    async def _answer(self, item: bytes | Oversized, writer: asyncio.StreamWriter, slots: asyncio.Semaphore) -> None:
        written = False
        try:
            if isinstance(item, Oversized):
                response = self.service.oversized_line(item.prefix, item.length)
            else:
                response = await self.respond(item)
            writer.write(response + b"\n")
            written = True
            await writer.drain()
        except asyncio.CancelledError:
            # Cancelled by the shutdown: still answered. (Cancelled because its client hung up:
            # nobody to answer.)
            if not written and self.lifecycle.should_exit and isinstance(item, bytes):
                try:
                    writer.write(shutting_down(self.service, item) + b"\n")
                except (ConnectionError, RuntimeError):
                    pass
        except (ConnectionError, RuntimeError):
            pass  # the client went away; nothing to answer
        finally:
            slots.release()

    async def respond(self, line: bytes) -> bytes:
        """The response to one request line as this transport answers it: its own ops
        (``hello``, ``shutdown``), a query carrying its client's context, else the service's."""
        return self._transport_op(line) or await self._guarded(line) or await self.service.handle_line(line)

    async def _guarded(self, line: bytes) -> bytes | None:
        """The response to a request carrying its client's ``"context"`` (see the module
        docstring): routed without that key when it is this daemon's context, else
        ``CONTEXT_MISMATCH`` naming the difference; ``None`` for any other line."""
        if b'"context"' not in line:
            return None
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(data, dict) or "context" not in data:
            return None
        diff = self._context_diff(data.pop("context"))
        if not diff:
            return self.service.dumps(await self.service.handle(data))
        self.service.stats.request("invalid", contract.CONTEXT_MISMATCH)
        query = data.get("query")
        message = f"this daemon serves another context (differs in {', '.join(diff)}); the query was not routed"
        return self.service.dumps(
            self.service.error_response(
                data.get("id"), contract.CONTEXT_MISMATCH, message, query if isinstance(query, str) else ""
            )
        )

    def _context_diff(self, theirs: object) -> list[str]:
        """The keys on which a client's context (hashed with its salt) differs from this
        daemon's, taken over both sides' variables: a variable this daemon's config adds that the
        client did not send differs too (the client cannot know it before the ``hello``)."""
        if not isinstance(theirs, dict) or not isinstance(theirs.get("env_salt"), str):
            return ["context"]
        their_env = theirs.get("env")
        sent = {n for n in their_env if isinstance(n, str)} if isinstance(their_env, dict) else set()
        mine = self._context_with(env_names(self._config()) | sent, theirs["env_salt"])
        return context_diff(mine, theirs)

    def _transport_op(self, line: bytes) -> bytes | None:
        if len(line) > 4096 or not any(op in line for op in _TRANSPORT_OPS):
            return None
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(data, dict):
            return None
        op = data.get("op")
        if op == "hello":
            return orjson.dumps(
                {
                    "id": data.get("id"),
                    "op": "hello",
                    "protocol": PROTOCOL,
                    "version": __version__,
                    "pid": os.getpid(),
                    "socket": str(self.path),
                    "started": self.started,
                    "uptime_s": round(time.time() - self.started, 3),
                    "clients": len(self.connections),
                    "context": self.context,
                    "error_codes": contract.hello_codes(),
                }
            )
        if op == "shutdown":
            self.stop("shutdown requested by a client")
            return orjson.dumps({"id": data.get("id"), "op": "shutdown", "status": "ok", "pid": os.getpid()})
        return None


def env_names(config: Any) -> set[str]:
    """The environment variables the answers of ``config`` (a RouterConfig) depend on: every
    adapter's and the router's (:mod:`memory_router.config.envvars`), plus names a backend's settings
    add (an adapter's ``config_env_vars(settings)``, e.g. ``$NAME`` in Lossless's db_path)."""
    names = set(envvars.ALL)
    for spec in getattr(config, "backends", {}).values():
        try:
            names |= adapter_env_vars(spec.type, spec.settings)
        except (KeyError, ImportError, TypeError):
            continue
    return names


async def _until_done_or_hung_up(writer: asyncio.StreamWriter, requests: set[asyncio.Task[Any]]) -> None:
    """Wait for ``requests`` after the client's EOF, returning early if it has hung up.

    EOF alone does not say which: a client that shut down only its writing side (``SHUT_WR``, "no
    more requests") still reads its answers, while one that closed or died never will, and its
    backends would run on to their timeout. A Unix socket tells them apart: only a peer that has
    closed both directions makes ours report ``POLLHUP``. Checked every :data:`HANGUP_POLL_S`
    while the requests run; the caller cancels what is left (adapters kill their process groups)."""
    import select

    sock = writer.get_extra_info("socket")
    poller = None
    if sock is not None:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLHUP)  # POLLERR/POLLNVAL are always reported too
    while requests:
        if poller is not None and poller.poll(0):
            return
        await asyncio.wait(set(requests), timeout=HANGUP_POLL_S)


async def _chunks(reader: asyncio.StreamReader, max_line: int) -> AsyncIterator[list[bytes | Oversized]]:
    """The lines of each chunk read (bytes, without its newline and a ``\r`` before it), or an
    :class:`Oversized` for a line longer than ``max_line`` (never buffered whole). A last line
    without a newline is still a line (taken as it is). One list per read, so a caller that stops
    reading knows every line it has already taken off the socket."""
    splitter = LineSplitter(max_line)
    while True:
        chunk = await reader.read(1 << 16)
        if not chunk:
            yield list(splitter.end())
            return
        yield [item[:-1] if isinstance(item, bytes) and item.endswith(b"\r") else item for item in splitter.feed(chunk)]


async def _lines(reader: asyncio.StreamReader, max_line: int) -> AsyncIterator[bytes | Oversized]:
    """Each line of :func:`_chunks`, one at a time."""
    async for chunk in _chunks(reader, max_line):
        for item in chunk:
            yield item


def serve_socket(
    service: Service, path: Path, *, idle_exit_s: float = 0.0, grace_s: float = GRACE_S, reload: bool = True
) -> int:
    """Run the socket daemon until stopped; the exit code (2 if the socket is not ours)."""

    async def main() -> int:
        lifecycle = Lifecycle(service, grace_s=grace_s, reload=reload)
        server = SocketServer(service, lifecycle, path, idle_exit_s=idle_exit_s)
        servers.append(server)
        try:
            server.claim()
        except SocketInUse as exc:
            _say(str(exc))
            return 2
        return await lifecycle.serve(server)

    servers: list[SocketServer] = []
    try:
        return asyncio.run(main())
    finally:
        for server in servers:
            server.release()
