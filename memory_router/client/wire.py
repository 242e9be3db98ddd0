"""What the daemon and its clients share on the wire: the protocol version, the socket's name and
path, the *context* a daemon must share with a client to answer it, the client connection (with
its handshake), and the JSON-lines splitter both transports (stdin and the Unix socket) read
requests with. Standard library only: the thin client imports it on every query.
"""

# The C module behind `socket`: importing `socket` itself builds its enums, a quarter of the
# thin client's own import time. Only AF_UNIX stream sockets are used here.
import _socket
import os
import stat

from memory_router import __version__
from memory_router.config import envvars
from memory_router.output.jsonout import compact
from memory_router.output.jsonout import loads as loads  # the client's reader (re-exported)

TYPE_CHECKING = False  # not typing's: importing typing would cost the thin client ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    class _Digest(Protocol):  # what _sha256_hex needs of a hash object (its module is found at run time)
        def hexdigest(self) -> str: ...


PROTOCOL = 1
SOCKET_NAME = "router.sock"
SNIFF_BYTES = 512  # how much of an oversized line is kept, to find its "id"


class Oversized:
    """A line longer than the splitter's ``max_line``: its first bytes and its full length."""

    __slots__ = ("prefix", "length")

    def __init__(self, prefix: bytes, length: int) -> None:
        self.prefix, self.length = prefix, length

    def __repr__(self) -> str:
        return f"Oversized({self.prefix[:20]!r}..., {self.length})"


class LineSplitter:
    """Split a byte stream into lines (without their ``\\n``), never holding more than
    ``max_line`` bytes of one: a longer line becomes an :class:`Oversized` and the rest of it is
    skipped as it arrives. Feed it chunks as they are read, then call :meth:`end` at EOF."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._skipping: Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines that ``chunk`` completes, in order."""
        out: list[bytes | Oversized] = []
        buf = self._buf
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            end = nl if nl >= 0 else len(chunk)
            if self._skipping is not None:
                self._skipping.length += end - start
            else:
                buf += chunk[start:end]
                if len(buf) > self.max_line:
                    self._skipping = Oversized(bytes(buf[:SNIFF_BYTES]), len(buf))
                    buf.clear()
            if nl < 0:
                return out
            out.append(self._skipping if self._skipping is not None else bytes(buf))
            self._skipping = None
            buf.clear()
            start = nl + 1

    def end(self) -> list[bytes | Oversized]:
        """At EOF: a last line without a newline is still a line."""
        if self._skipping is not None:
            last: list[bytes | Oversized] = [self._skipping]
        else:
            last = [bytes(self._buf)] if self._buf else []
        self._skipping = None
        self._buf.clear()
        return last


# ---------------------------------------------------------------------- JSON on the client's side


def dumps(value: object) -> bytes:
    """``value`` as one line of compact JSON, non-ASCII as UTF-8: ``json.dumps(value,
    ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` (the bytes orjson writes for the
    same value, floats aside), without importing ``json`` (:func:`memory_router.output.jsonout.compact`).
    A lone surrogate (argv bytes that are not UTF-8) is written as such; the daemon refuses it as
    ``INVALID_UTF8``."""
    return compact(value).encode("utf-8", "surrogatepass")


class DaemonError(Exception):
    """The daemon could not be used (not there, wrong owner, wrong protocol, broken connection)."""


_MAX_RESPONSE = 64 << 20
# The handshake's line: this client's protocol and version.
HELLO = dumps({"op": "hello", "protocol": PROTOCOL, "version": __version__})

# ---------------------------------------------------------------------- paths and context


def socket_path(state_dir: str, flag: str | None = None) -> str:
    """``flag``, else ``$MEMORY_ROUTER_SOCKET``, else ``<state dir>/router.sock``."""
    chosen = flag or os.environ.get("MEMORY_ROUTER_SOCKET")
    return os.path.expanduser(chosen) if chosen else os.path.join(state_dir, SOCKET_NAME)


def context(
    *,
    cwd: str,
    environ: dict[str, str] | os._Environ[str],
    state_dir: str,
    backends_json: str,
    config: str,
    names: frozenset[str] | set[str] = envvars.ALL,
    salt: str = "",
) -> "dict[str, Any]":
    """What must be equal for a daemon's answer to be the answer this process would compute.

    Environment values are never carried (a context is printed by ``daemon status --json`` and
    may hold ``COGNEE_API_KEY``): each of ``names`` maps to a salted hash of its value (``None``
    when unset). The daemon picks the salt; a client hashes its own values with it to compare."""

    def absolute(path: str) -> str:
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))

    return {
        "cwd": os.path.normpath(cwd),
        "state_dir": absolute(state_dir),
        "backends_json": absolute(backends_json),
        "config": absolute(config),
        "env_salt": salt,
        "env": {name: env_digest(salt, name, environ.get(name)) for name in sorted(names)},
    }


def env_digest(salt: str, name: str, value: str | None) -> str | None:
    """A salted SHA-256 of one variable's value (``None`` if unset): equal values compare equal
    under one salt, and the value cannot be read back from it."""
    if value is None:
        return None
    data = "\0".join((salt, name, value)).encode("utf-8", "surrogatepass")
    return _sha256_hex(data)[:32]


_SHA256: "list[Callable[[bytes], _Digest]]" = []  # the constructor, found once


def _sha256_hex(data: bytes) -> str:
    """SHA-256 from CPython's builtin module (``hashlib`` would load OpenSSL on the warm path)."""
    if not _SHA256:
        import sys

        # Python >= 3.12 has _sha2, 3.11 _sha256: asking for the other first costs a search of
        # every sys.path folder (0.5M instructions) on each query.
        try:
            _SHA256.append(__import__("_sha2" if sys.version_info >= (3, 12) else "_sha256").sha256)
        except ImportError:  # an interpreter built without them
            import hashlib

            _SHA256.append(hashlib.sha256)
    return _SHA256[0](data).hexdigest()


def context_for(theirs: object, **kw: object) -> "dict[str, Any]":
    """This process's context in the terms of a daemon's: its salt, and the names it depends on
    together with the ones this client always compares."""
    their: dict[str, Any] = theirs if isinstance(theirs, dict) else {}
    salt = their.get("env_salt") if isinstance(their.get("env_salt"), str) else ""
    env = their.get("env")
    their_env: dict[str, Any] = env if isinstance(env, dict) else {}
    names = set(envvars.ALL) | {n for n in their_env if isinstance(n, str)}
    return context(names=names, salt=salt, **kw)  # type: ignore[arg-type]


def context_diff(mine: "dict[str, Any]", theirs: object) -> list[str]:
    """The keys (``env.NAME`` for variables) on which two contexts differ."""
    if not isinstance(theirs, dict):
        return ["context"]
    diff = [k for k in ("cwd", "state_dir", "backends_json", "config") if mine.get(k) != theirs.get(k)]
    env = theirs.get("env")
    their_env: dict[str, Any] = env if isinstance(env, dict) else {}
    for name in sorted(set(mine["env"]) | set(their_env)):
        if name not in their_env or mine["env"].get(name) != their_env.get(name):
            diff.append(f"env.{name}")
    return diff


# ---------------------------------------------------------------------- the connection


class Connection:
    """One client connection: send a JSON line, read a JSON line."""

    def __init__(self, path: str, *, timeout: float = 2.0) -> None:
        self.path = path
        try:
            st = os.stat(path)
        except OSError as exc:
            raise DaemonError(f"no daemon socket at {path}") from exc
        # Never talk to a socket another user could have planted (the state dir is ours).
        if not stat.S_ISSOCK(st.st_mode):
            raise DaemonError(f"{path} is not a socket")
        if st.st_uid != os.getuid():
            raise DaemonError(f"{path} belongs to uid {st.st_uid}, not to this user; not using it")
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as exc:
            self.sock.close()
            raise DaemonError(f"no daemon answers at {path} ({exc.strerror or exc})") from exc
        self._buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, line: bytes) -> None:
        try:
            self.sock.sendall(line + b"\n")
        except OSError as exc:  # EPIPE/ECONNRESET: it accepted and closed (its connection cap)
            raise DaemonError(f"the connection to {self.path} failed: {exc.strerror or exc}") from exc

    def receive(self, timeout: float | None) -> bytes:
        self.sock.settimeout(timeout)
        while b"\n" not in self._buf:
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError as exc:
                raise DaemonError(f"the daemon at {self.path} did not answer within {timeout:.0f} s") from exc
            except OSError as exc:
                raise DaemonError(f"the connection to {self.path} failed: {exc}") from exc
            if not chunk:
                raise DaemonError(f"the daemon at {self.path} closed the connection")
            self._buf += chunk
            if len(self._buf) > _MAX_RESPONSE:
                raise DaemonError("the daemon's response is too large")
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def request(self, obj: "dict[str, Any]", timeout: float | None = 10.0) -> "dict[str, Any]":
        self.send(dumps(obj))
        return self.receive_object(timeout)

    def receive_object(self, timeout: float | None) -> "dict[str, Any]":
        """The next line, which must be a JSON object."""
        raw = self.receive(timeout)
        try:
            data = loads(raw)
        except ValueError as exc:
            raise DaemonError(f"the daemon at {self.path} sent invalid JSON") from exc
        if not isinstance(data, dict):
            raise DaemonError(f"the daemon at {self.path} sent {type(data).__name__}, not an object")
        return data

    def hello(self) -> "dict[str, Any]":
        """The handshake; raises :class:`ProtocolMismatch` for a daemon of another version."""
        self.send(HELLO)
        return self.hello_reply()

    def hello_reply(self) -> "dict[str, Any]":
        """The daemon's reply to :data:`HELLO`, sent already (alone, or with the query in the
        same write: :func:`memory_router.client.thin.ask_at_once`); raises as :meth:`hello`."""
        reply = self.receive_object(5.0)
        if reply.get("op") != "hello" and isinstance(reply.get("error_code"), str):
            # A refusal before the handshake (FORBIDDEN: its connection cap, another user).
            raise DaemonError(f"the daemon at {self.path} refused the connection: {reply.get('error_message')}")
        if reply.get("op") != "hello" or reply.get("protocol") != PROTOCOL:
            raise ProtocolMismatch(self.path, reply)
        return reply


class ProtocolMismatch(DaemonError):
    def __init__(self, path: str, reply: "dict[str, Any]") -> None:
        self.reply = reply
        theirs = reply.get("protocol") if reply.get("op") == "hello" else None
        version = reply.get("version") if isinstance(reply.get("version"), str) else "an older version"
        super().__init__(
            f"the daemon at {path} ({version}, protocol {theirs if theirs is not None else 'unknown'}) "
            f"does not speak this client's protocol {PROTOCOL} (memory-router {__version__}); "
            "routing in-process. Restart it: memory-router daemon stop"
        )
