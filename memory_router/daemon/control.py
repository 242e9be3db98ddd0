"""``memory-router daemon status|stop|start``: the socket daemon, for humans.

``status`` asks the daemon itself (handshake and counters), ``stop`` asks it to shut down and
waits until its socket is gone (falling back to SIGTERM to the pid in the lock file if it does
not answer, once that pid is verified to be this user's daemon holding the lock), ``start``
launches one detached, like ``query --spawn``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import click
import orjson

from memory_router.cli.main import common_options
from memory_router.cli.oneshot import Options
from memory_router.client import thin as client
from memory_router.config import paths, statedir
from memory_router.contract import say
from memory_router.daemon.describe import describe_runtime


def _socket_option(func: Any) -> Any:
    return click.option(
        "--socket",
        "socket",
        metavar="PATH",
        help="The daemon's socket (default: $MEMORY_ROUTER_SOCKET, else <state dir>/router.sock).",
    )(func)


def _path(kw: dict[str, Any]) -> str:
    return client.socket_path(paths.resolve_state_dir(kw.get("state_dir")), kw.get("socket"))


@click.group("daemon")
def daemon() -> None:
    """The warm daemon behind `serve --socket`: status, stop, start."""


@daemon.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_socket_option
@common_options
def status(as_json: bool, **kw: Any) -> None:
    """Is a daemon serving this state dir? Exit 0 if one answers, 1 if not."""
    path = _path(kw)
    try:
        with client.Connection(path) as conn:
            hello = conn.hello()
            stats = conn.request({"op": "stats"}, timeout=5.0).get("stats")
    except client.DaemonError as exc:
        if as_json:
            sys.stdout.buffer.write(orjson.dumps({"running": False, "socket": path, "reason": str(exc)}) + b"\n")
        else:
            click.echo(f"not running: {exc}")
        sys.exit(1)
    state = paths.resolve_state_dir(kw.get("state_dir"))
    theirs = hello.get("context")
    mine = client.context_for(
        theirs,
        cwd=os.getcwd(),
        environ=os.environ,
        state_dir=state,
        backends_json=paths.resolve_backends_json(state, kw.get("backends_json")),
        config=paths.resolve_config(kw.get("config"), state),
    )
    diff = client.context_diff(mine, theirs)
    if as_json:
        sys.stdout.buffer.write(
            orjson.dumps(
                {
                    "running": True,
                    "socket": path,
                    "hello": hello,
                    "stats": stats,
                    "serves_this_shell": not diff,
                    "context_differs_in": diff,
                }
            )
            + b"\n"
        )
        return
    click.echo(
        f"running: pid {hello.get('pid')}, memory-router {hello.get('version')}, protocol {hello.get('protocol')}, "
        f"up {hello.get('uptime_s', 0):.0f} s, socket {path}"
    )
    if isinstance(stats, dict):
        click.echo(
            f"requests: {orjson.dumps(stats.get('requests')).decode()}  "
            f"latency_ms: {orjson.dumps(stats.get('latency_ms')).decode()}"
        )
    runtime = stats.get("runtime") if isinstance(stats, dict) else None
    for name, facts in (runtime or {}).items():
        click.echo(f"{name}: {describe_runtime(facts)}")
    if diff:
        click.echo(f"note: queries from this shell route in-process: its context differs in {', '.join(diff)}")
    else:
        click.echo("queries from this shell are answered by this daemon")


@daemon.command("stop")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(0.1, 600),
    default=10.0,
    show_default=True,
    help="Seconds to wait for it to exit.",
)
@_socket_option
@common_options
def stop(timeout_s: float, **kw: Any) -> None:
    """Stop the daemon serving this state dir (exit 0 also if none runs).

    It is asked to shut down over its socket. Only if it does not answer is it sent SIGTERM, and
    only once the pid in ``<socket>.lock`` is verified to be a memory-router daemon of this user
    holding that lock (:func:`_verify_daemon`); a socket in a directory others can write is
    refused outright (exit 2), since anyone could have put the lock file there."""
    path = _path(kw)
    reason = statedir.problem(os.path.dirname(os.path.abspath(path)), what="the socket's directory")
    if reason:
        say(f"{reason}; not stopping anything there")
        sys.exit(2)
    pid = None
    try:
        with client.Connection(path) as conn:
            pid = conn.hello().get("pid")
            conn.request({"op": "shutdown"}, timeout=5.0)
    except client.ProtocolMismatch as exc:
        say(f"{exc}")
        pid = _lock_holder(path)
        if pid:
            _terminate(pid, path)
    except client.DaemonError as exc:
        pid = _lock_holder(path)
        if pid is None:
            click.echo(f"not running ({exc})")
            return
        click.echo(f"the daemon (pid {pid}) does not answer ({exc})", err=True)
        _terminate(pid, path)
    deadline = time.monotonic() + timeout_s
    while os.path.exists(path) or (pid is not None and _lock_holder(path) == pid):
        if time.monotonic() > deadline:
            say(f"the daemon (pid {pid}) has not exited after {timeout_s:g} s")
            sys.exit(1)
        time.sleep(0.05)
    click.echo(f"stopped (pid {pid})")


def _terminate(pid: int, path: str) -> None:
    """SIGTERM ``pid`` if it is verified to be the daemon serving ``path``; else exit 1 saying why."""
    reason = _verify_daemon(pid, path)
    if reason:
        say(f"not signalling pid {pid}: {reason}")
        sys.exit(1)
    click.echo(f"sending SIGTERM to the daemon (pid {pid})", err=True)
    os.kill(pid, signal.SIGTERM)


def _verify_daemon(pid: int, path: str) -> str | None:
    """Why ``pid`` must not be signalled as the daemon of socket ``path``, or ``None``: it must be
    this user's process, running ``memory_router serve --socket``, and hold ``<socket>.lock``
    open (the very file, by device and inode). Needs /proc; without it nothing is signalled."""
    proc = f"/proc/{pid}"
    try:
        owner = os.stat(proc).st_uid
        with open(f"{proc}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError as exc:
        return f"cannot inspect it ({exc.strerror or exc})"
    if owner != os.getuid():
        return f"it belongs to uid {owner}, not to this user"
    if not any(a.endswith((b"memory_router", b"memory-router")) for a in argv) or b"serve" not in argv:
        return "it is not a memory-router daemon (its command line is not `memory-router serve`)"
    if b"--socket" not in argv:
        return "it is a memory-router serve without --socket"
    try:
        lock = os.lstat(path + ".lock")
        fds = os.listdir(f"{proc}/fd")
    except OSError as exc:
        return f"cannot check its lock ({exc.strerror or exc})"
    for fd in fds:
        try:
            st = os.stat(f"{proc}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (lock.st_dev, lock.st_ino):
            return None
    return f"it does not hold {path}.lock open, so it is not the daemon serving {path}"


@daemon.command("start")
@click.option(
    "--idle-exit",
    type=click.FloatRange(0),
    default=None,
    help="Exit after this many idle seconds (0: never; default $MEMORY_ROUTER_IDLE_EXIT, else 600).",
)
@common_options
def start(idle_exit: float | None, **kw: Any) -> None:
    """Start a daemon in the background for this shell's context, unless one answers already."""
    state = paths.resolve_state_dir(kw.get("state_dir"))
    path = client.socket_path(state)
    try:
        with client.Connection(path) as conn:
            click.echo(f"already running: pid {conn.hello().get('pid')}")
            return
    except client.DaemonError:
        pass
    try:
        pid = client.spawn_daemon(Options(**kw), idle_exit=idle_exit)
    except client.DaemonError as exc:
        say(f"not starting a daemon: {exc}")
        sys.exit(2)
    if pid is None:
        say(f"the state directory {state} does not exist; run the stack's installer or pass --state-dir")
        sys.exit(2)
    try:
        client.wait_for_daemon(path).close()
    except client.DaemonError as exc:
        say(f"{exc}; see {os.path.join(state, 'daemon.log')}")
        sys.exit(1)
    click.echo(f"started: pid {pid}, socket {path}")


def _lock_holder(path: str) -> int | None:
    """The pid in ``<socket>.lock`` if that lock is held (a daemon is alive), else None."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
