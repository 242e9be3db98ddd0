"""``memory-router mcp``: the router as an MCP server over stdio (the official ``mcp`` SDK).

Two tools:

* ``memory_query(query, limit?, timeout_ms?, scope?, min_relevance?, max_chars?, since?, until?)`` routes the
  query and returns the router envelope (the same JSON ``memory-router query`` prints) as
  structured content and as JSON text;
* ``memory_route(query)`` is the dry run: the rule that matched, the planned and usable chain,
  the skipped steps (and backends in cooldown).

Both are served by the daemon's transport-independent
:class:`~memory_router.daemon.service.Service`, so an MCP session gets what ``serve`` gets: one
warm router (adapters and their caches kept), hot reload of router-config.json and backends.json,
the dead-backend cooldown and the deadline. The service is created when the server starts, and its
backends warmed up in the background (qmd's engine loads its models, so the first semantic query
does not pay for it); when that fails (a broken config) it is created again on each call, so a
broken config or a missing backends.json is answered per call (an error envelope naming the file)
rather than killing the server before the host can show why. stdout belongs to the JSON-RPC
stream, so every diagnostic goes to stderr.

The SDK is an optional extra (``pip install 'memory-router[mcp]'``; pipx and ``uv tool`` installs
are told their own command, :func:`memory_router.config.installation.extra_command`); this module is
imported only when the ``mcp`` subcommand runs.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import click
from pydantic import Field

from memory_router import __version__
from memory_router.cli.main import Options, common_options
from memory_router.contract import MAX_CHARS_LIMIT, say
from memory_router.core.errors import RouterError

INSTRUCTIONS = (
    "memory_query answers questions about the user's project memory (past decisions, earlier "
    "conversation, code symbols, concepts, recent changes) by routing them to QMD, Total Recall, "
    "Cognee or Lossless with fallback. Read `status`: success = use `results`; partial = weak hints "
    "(relevance < 0.4); empty = memory has nothing; error = see `error_code`. memory_route shows "
    "which rule and backend chain a phrasing would use without calling any backend."
)


def build_server(opts: Options) -> Any:  # noqa: C901 - registers each MCP tool as a closure over one router
    """The MCPServer with both tools, bound to one Service for ``opts``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    from memory_router.core.envelope import error_envelope
    from memory_router.daemon.service import Service

    state: dict[str, Service] = {}

    async def service() -> Service:
        if "service" not in state:
            created = Service.from_options(
                state_dir=opts.state_dir, backends_json=opts.backends_json, config=opts.config
            )
            await created.start()  # hot reload for the rest of the session
            state["service"] = created
        return state["service"]

    @asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            (await service()).warm_up()
        except RouterError as exc:
            say(str(exc), who="memory-router mcp")  # each call answers it
        try:
            yield {}
        finally:
            if "service" in state:
                await state["service"].aclose()  # qmd's engine stops with the session

    server = MCPServer(
        name="memory-router", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING", lifespan=lifespan
    )
    # Both tools only read memory: hosts (OpenClaw's `mcp doctor`, approval postures) may run them
    # without asking. The world is closed: the configured memory backends, nothing else.
    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @server.tool(
        annotations=read_only,
        description=(
            "Route a memory query to the right OpenClaw memory backend (with fallback) and return "
            "the router envelope: status, results (content, relevance, source, timestamp, path, "
            "line...), routed_to, fallback_chain, fallbacks_used, error_code, rule, attempts."
        ),
    )
    async def memory_query(
        query: Annotated[str, Field(description="The question, in the user's words (max 4096 characters).")],
        limit: Annotated[
            int | None, Field(ge=1, le=1000, description="Results per backend (default from router-config.json).")
        ] = None,
        timeout_ms: Annotated[
            int | None, Field(ge=1, le=600_000, description="Per-backend timeout in ms (default 5000).")
        ] = None,
        scope: Annotated[
            dict[str, str] | None,
            Field(
                description='Answer as one OpenClaw agent: {"agent": "<id>", "session_key": "agent:<id>:..."} '
                "(both optional); only that agent's memory is read. Omitted: unscoped."
            ),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Abstain below this relevance (0..1): an answer whose best hit is under it has no "
                "results and `abstained` says why (best relevance, hits dropped); one that reaches it is whole.",
            ),
        ] = None,
        max_chars: Annotated[
            int | None,
            Field(
                ge=1,
                le=MAX_CHARS_LIMIT,
                description="Budget of the hits' total text in characters: hits kept whole in rank order while "
                "they fit (a first hit alone larger is cut to it); `budget` says what was cut.",
            ),
        ] = None,
        since: Annotated[
            str | None,
            Field(
                description="Only memory written from then on: an ISO date or date-time, today, yesterday, "
                "last week, last month, N days ago (local days). Undated memory is left out under a window.",
            ),
        ] = None,
        until: Annotated[
            str | None,
            Field(description="Only memory written up to then (a date: to its end); the same forms as since."),
        ] = None,
    ) -> dict[str, Any]:
        # The SDK validates the bounds above against the input schema before this runs.
        try:
            current = await service()
        except RouterError as exc:
            say(str(exc), who="memory-router mcp")
            return error_envelope(query, exc.error_code, str(exc)).as_dict()
        request: dict[str, Any] = {"query": query}
        if limit is not None:
            request["limit"] = limit
        if timeout_ms is not None:
            request["timeout_ms"] = timeout_ms
        if scope is not None:
            request["scope"] = scope  # checked by the request parser, as serve's (INVALID_SCOPE)
        if min_relevance is not None:
            request["min_relevance"] = min_relevance
        if max_chars is not None:
            request["max_chars"] = max_chars
        if since:
            request["since"] = since  # checked by the request parser, as serve's (INVALID_TIME_RANGE)
        if until:
            request["until"] = until
        response = await current.handle(request)
        response.pop("id", None)
        return response

    @server.tool(
        annotations=read_only,
        description=(
            "Dry run: which routing rule QUERY matches (rule number, id, the signal and the matched "
            "text), the planned backend chain, which steps backends.json removes and which backends "
            "are cooling down. Calls no backend."
        ),
    )
    async def memory_route(query: Annotated[str, Field(description="The question to plan.")]) -> dict[str, Any]:
        try:
            current = await service()
        except RouterError as exc:
            raise ToolError(f"{exc.error_code}: {exc}") from None
        response = await current.handle({"query": query, "explain": True})
        if response.get("status") != "plan":
            raise ToolError(f"{response.get('error_code')}: {response.get('error_message')}")
        for key in ("id", "status", "error_code", "error_message"):
            response.pop(key, None)
        return response

    return server


@click.command("mcp")
@common_options
def mcp_command(**kw: Any) -> None:
    """Serve memory_query and memory_route as an MCP server over stdio."""
    try:
        server = build_server(Options(**kw))
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mcp", "mcp_types"):
            from memory_router.config.installation import extra_command

            say(f"the MCP server needs the mcp SDK: {extra_command('mcp')} (missing module {exc.name!r}).")
            sys.exit(2)
        raise
    server.run("stdio")
