"""``memory-router serve``: the JSON-lines daemon over stdin/stdout."""

from __future__ import annotations

import sys
from typing import Any

import click

from memory_router.cli.main import common_options
from memory_router.contract import say
from memory_router.core.errors import RouterError
from memory_router.daemon.lifecycle import GRACE_S
from memory_router.daemon.service import DEFAULT_CONCURRENCY, DEFAULT_MAX_LINE_BYTES, Service


def build_service(*, concurrency: int, max_line_bytes: int, **kw: Any) -> Service:
    """The Service for the CLI's options; exits 2 with the reason if router-config.json is bad."""
    try:
        return Service.from_options(
            state_dir=kw.get("state_dir"),
            backends_json=kw.get("backends_json"),
            config=kw.get("config"),
            concurrency=concurrency,
            max_line_bytes=max_line_bytes,
        )
    except RouterError as exc:
        say(str(exc), who="memory-router serve")
        sys.exit(exc.exit_code)


@click.command("serve")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 4096),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Requests routed at once.",
)
@click.option("--ordered", is_flag=True, help="Write responses in input order (default: as they complete).")
@click.option(
    "--max-line-bytes",
    type=click.IntRange(256, 1 << 30),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    help="Longer request lines are answered REQUEST_TOO_LARGE.",
)
@click.option(
    "--grace-ms",
    type=click.IntRange(0, 600_000),
    default=int(GRACE_S * 1000),
    show_default=True,
    help="On SIGTERM/SIGINT (or `daemon stop`), how long in-flight requests may finish before they are cancelled; "
    "a second signal cancels them at once.",
)
@click.option(
    "--write-timeout-ms",
    type=click.IntRange(1, 3_600_000),
    default=30_000,
    show_default=True,
    help="stdin mode: how long a slow reader of stdout may take no data before serve gives up on it (exit 1).",
)
@click.option("--no-reload", is_flag=True, help="Do not watch router-config.json and backends.json for changes.")
@click.option(
    "--socket",
    "socket_path",
    metavar="[PATH]",
    is_flag=False,
    flag_value="",
    default=None,
    help="Serve clients on a Unix socket instead of stdin/stdout (PATH default: $MEMORY_ROUTER_SOCKET, "
    "else <state dir>/router.sock); `memory-router query` uses it when it answers.",
)
@click.option(
    "--idle-exit",
    type=click.FloatRange(0),
    default=0,
    show_default=True,
    help="With --socket: exit after this many seconds without clients or requests (0: never).",
)
@common_options
def serve(
    ordered: bool,
    grace_ms: int,
    write_timeout_ms: int,
    no_reload: bool,
    concurrency: int,
    max_line_bytes: int,
    socket_path: str | None,
    idle_exit: float,
    **kw: Any,
) -> None:
    """Answer JSON-lines queries on stdin, one response line each.

    A request is {"id": ..., "query": "...", "timeout_ms": N, "limit": N, "deadline_ms": N,
    "explain": false}, or a bare JSON string; {"op": "stats"} returns counters. Responses are the
    query's envelope plus the request's "id". Diagnostics go to stderr. EOF drains and exits 0;
    a stdout that cannot be written (reader gone, or no data taken for --write-timeout-ms) stops
    it with exit 1.
    """
    from memory_router.daemon.stdio import serve_stdio

    if socket_path is None and idle_exit:
        raise click.UsageError("--idle-exit applies to --socket")
    if socket_path is not None and ordered:
        raise click.UsageError("--ordered applies to stdin mode; socket clients match responses by id")
    service = build_service(concurrency=concurrency, max_line_bytes=max_line_bytes, **kw)
    if socket_path is not None:
        from pathlib import Path

        from memory_router.client.wire import socket_path as default_socket_path
        from memory_router.daemon.socket_server import serve_socket

        path = Path(socket_path) if socket_path else Path(default_socket_path(str(service.state_dir)))
        sys.exit(serve_socket(service, path, idle_exit_s=idle_exit, grace_s=grace_ms / 1000, reload=not no_reload))
    sys.exit(
        serve_stdio(
            service,
            ordered=ordered,
            grace_s=grace_ms / 1000,
            reload=not no_reload,
            write_timeout_s=write_timeout_ms / 1000,
        )
    )
