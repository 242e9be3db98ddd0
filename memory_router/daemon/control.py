"""``memory-router daemon status|stop|start``: the socket daemon, for humans.

``status`` asks the daemon itself (handshake and counters), ``stop`` asks it to shut down and
waits until its socket is gone (falling back to SIGTERM to the pid in the lock file if it does
not answer), ``start`` launches one detached, like ``query --spawn``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import click
import orjson

from .. import client
from ..cli import common_options


def _socket_option(func: Any) -> Any:
    return click.option(
        "--socket",
        "socket",
        metavar="PATH",
        help="The daemon's socket (default: $MEMORY_ROUTER_SOCKET, else <state dir>/router.sock).",
    )(func)


def _path(kw: dict[str, Any]) -> str:
    return client.socket_path(client.resolve_state_dir(kw.get("state_dir")), kw.get("socket"))


@click.group("daemon")
def daemon() -> None:
    """The warm query daemon behind `serve --socket`: status, stop, start."""


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
    state = client.resolve_state_dir(kw.get("state_dir"))
    mine = client.context(
        cwd=os.getcwd(),
        environ=os.environ,
        state_dir=state,
        backends_json=client.resolve_backends_json(state, kw.get("backends_json")),
        config=client.resolve_config(kw.get("config")),
    )
    diff = client.context_diff(mine, hello.get("context"))
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
    """Stop the daemon serving this state dir (exit 0 also if none runs)."""
    path = _path(kw)
    pid = None
    try:
        with client.Connection(path) as conn:
            pid = conn.hello().get("pid")
            conn.request({"op": "shutdown"}, timeout=5.0)
    except client.ProtocolMismatch as exc:
        pid = _lock_holder(path)
        click.echo(f"memory-router: {exc}", err=True)
        if pid:
            os.kill(pid, signal.SIGTERM)
    except client.DaemonError as exc:
        pid = _lock_holder(path)
        if pid is None:
            click.echo(f"not running ({exc})")
            return
        click.echo(f"the daemon (pid {pid}) does not answer ({exc}); sending SIGTERM", err=True)
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while os.path.exists(path) or (pid is not None and _lock_holder(path) == pid):
        if time.monotonic() > deadline:
            click.echo(f"memory-router: the daemon (pid {pid}) has not exited after {timeout_s:g} s", err=True)
            sys.exit(1)
        time.sleep(0.05)
    click.echo(f"stopped (pid {pid})")


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
    state = client.resolve_state_dir(kw.get("state_dir"))
    path = client.socket_path(state)
    try:
        with client.Connection(path) as conn:
            click.echo(f"already running: pid {conn.hello().get('pid')}")
            return
    except client.DaemonError:
        pass
    pid = client.spawn_daemon(
        state_dir=kw.get("state_dir"),
        backends_json=kw.get("backends_json"),
        config=kw.get("config"),
        idle_exit=idle_exit,
    )
    if pid is None:
        click.echo(
            f"memory-router: the state directory {state} does not exist; run the stack's installer or pass --state-dir",
            err=True,
        )
        sys.exit(2)
    try:
        client.wait_for_daemon(path).close()
    except client.DaemonError as exc:
        click.echo(f"memory-router: {exc}; see {os.path.join(state, 'daemon.log')}", err=True)
        sys.exit(1)
    click.echo(f"started: pid {pid}, socket {path}")


def _lock_holder(path: str) -> int | None:
    """The pid in ``<socket>.lock`` if that lock is held (a daemon is alive), else None."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDONLY)
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


def describe_runtime(facts: Any) -> str:
    """One line for a backend's runtime facts (qmd's warm engine) in ``daemon status``/``backends``."""
    if not isinstance(facts, dict):
        return "?"
    if facts.get("transport") == "http":
        return f"answered by the qmd server at {facts.get('url')}"
    engine = facts.get("engine")
    if facts.get("transport") != "engine" or not isinstance(engine, dict):
        return f"transport {facts.get('transport')}" + (f" ({facts['error']})" if facts.get("error") else "")
    if engine.get("state") != "running":
        text = f"engine {engine.get('state')}"
        return text + (f" (last failure: {engine['last_failure']})" if engine.get("last_failure") else "")
    loaded = [role for role, on in (engine.get("models") or {}).items() if on]
    return (
        f"engine running: pid {engine.get('pid')}, RSS {engine.get('rss_mib')} MiB, up {engine.get('uptime_s')} s, "
        f"{engine.get('served')} served, {engine.get('starts')} start(s), models loaded: {', '.join(loaded) or 'none'}"
    )
