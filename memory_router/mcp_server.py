"""``memory-router mcp``: the router as an MCP server over stdio (the official ``mcp`` SDK).

Two tools:

* ``memory_query(query, limit?, timeout_ms?)`` routes the query and returns the router envelope
  (the same JSON ``memory-router query`` prints) as structured content and as JSON text;
* ``memory_route(query)`` is the dry run: the rule that matched and the chain that would run.

One router (config loaded once, adapters kept warm) serves the whole session; backends.json is
re-read on every call so the installer's changes apply without a restart. Bad input and missing
state never raise out of ``memory_query``: like the CLI it answers with an error envelope.
stdout belongs to the JSON-RPC stream, so every diagnostic goes to stderr.

The SDK is an optional extra (``pip install 'memory-router[mcp]'``); this module is imported only
when the ``mcp`` subcommand runs.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import click
from pydantic import Field

from . import __version__
from .cli import Options, Session, common_options
from .errors import RouterError

INSTRUCTIONS = (
    "memory_query answers questions about the user's project memory (past decisions, earlier "
    "conversation, code symbols, concepts, recent changes) by routing them to QMD, Total Recall, "
    "Cognee or Lossless with fallback. Read `status`: success = use `results`; partial = weak hints "
    "(relevance < 0.4); empty = memory has nothing; error = see `error_code`. memory_route shows "
    "which rule and backend chain a phrasing would use without calling any backend."
)


def build_server(opts: Options) -> Any:
    """The MCPServer with both tools, bound to one router for ``opts``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from .envelope import error_envelope

    state: dict[str, Session] = {}

    def session() -> Session:
        # Created on first use so that a broken config is reported per call (as an error
        # envelope) instead of killing the server before the client can see why.
        if "session" not in state:
            state["session"] = Session(opts)
        return state["session"]

    server = MCPServer(name="memory-router", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(
        description=(
            "Route a memory query to the right OpenClaw memory backend (with fallback) and return "
            "the router envelope: status, results (content, relevance, source, timestamp, path, "
            "line...), routed_to, fallback_chain, fallbacks_used, error_code, rule, attempts."
        ),
    )
    async def memory_query(
        query: Annotated[str, Field(description="The question, in the user's words (max 4096 characters).")],
        limit: Annotated[int | None, Field(ge=1, le=1000, description="Results per backend (default from router-config.json).")] = None,
        timeout_ms: Annotated[int | None, Field(ge=1, le=600_000, description="Per-backend timeout in ms (default 5000).")] = None,
    ) -> dict[str, Any]:
        # The SDK validates the bounds above against the input schema before this runs.
        try:
            current = session()
            envelope = await current.router.route(query, current.installed(), timeout_ms=timeout_ms, limit=limit)
        except RouterError as exc:
            print(f"memory-router mcp: {exc}", file=sys.stderr)
            envelope = error_envelope(query, exc.error_code, str(exc))
        return envelope.model_dump(mode="json")

    @server.tool(
        description=(
            "Dry run: which routing rule QUERY matches (rule number, id, the signal and the matched "
            "text), the planned backend chain and which steps backends.json removes. Calls no backend."
        ),
    )
    def memory_route(query: Annotated[str, Field(description="The question to plan.")]) -> dict[str, Any]:
        try:
            current = session()
            return current.router.plan(query, current.installed()).as_dict()
        except RouterError as exc:
            raise ToolError(f"{exc.error_code}: {exc}") from None

    return server


@click.command("mcp")
@common_options
def mcp_command(**kw: Any) -> None:
    """Serve memory_query and memory_route as an MCP server over stdio."""
    try:
        server = build_server(Options(**kw))
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mcp", "mcp_types"):
            click.echo(
                "memory-router: the MCP server needs the mcp SDK: pip install 'memory-router[mcp]' "
                f"(missing module {exc.name!r}).",
                err=True,
            )
            sys.exit(2)
        raise
    server.run("stdio")
