"""Cold start: `--help` lists lazy commands without importing them, and says what they say."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from memory_router.cli import LAZY_COMMANDS, main


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
@pytest.mark.parametrize("limit", [20, 45, 60, 80, 200])
def test_the_static_short_help_is_the_commands_own(name, limit):
    real = main.get_command(click.Context(main), name)
    stub = click.Command(name, help=LAZY_COMMANDS[name][1])
    assert stub.get_short_help_str(limit) == real.get_short_help_str(limit)


def test_help_lists_every_command_without_importing_the_lazy_ones():
    code = (
        "import sys\n"
        "from memory_router.cli import main\n"
        "try:\n"
        "    main(['--help'], prog_name='memory-router')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('memory_router.daemon', "
        "'memory_router.mcp_server', 'pydantic', 'asyncio'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("LOADED []")
    for name in ("backends", "config", "daemon", "demo", "mcp", "query", "route", "serve"):
        assert f"\n  {name} " in out
    assert "Serve memory_query and memory_route as an MCP server over stdio." in out
