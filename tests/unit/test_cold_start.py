"""Cold start: `--help` lists lazy commands without importing them, and says what they say."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from memory_router.cli.main import LAZY_COMMANDS, main

from ..support.client import assert_same_answer


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
@pytest.mark.parametrize("limit", [20, 45, 60, 80, 200])
def test_the_static_short_help_is_the_commands_own(name, limit):
    real = main.get_command(click.Context(main), name)
    stub = click.Command(name, help=LAZY_COMMANDS[name][1])
    assert stub.get_short_help_str(limit) == real.get_short_help_str(limit)


@pytest.mark.slow
def test_help_lists_every_command_without_importing_the_lazy_ones():
    code = (
        "import sys\n"
        "from memory_router.cli.main import main\n"
        "try:\n"
        "    main(['--help'], prog_name='memory-router')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('memory_router.daemon', "
        "'memory_router.daemon.mcp', 'pydantic', 'asyncio'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("LOADED []")
    for name in ("backends", "config", "daemon", "demo", "mcp", "query", "route", "serve"):
        assert f"\n  {name} " in out
    assert "Serve memory_query and memory_route as an MCP server over stdio." in out


CLICK_APP = "import sys; from memory_router.cli.main import main; main(prog_name='memory-router')"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from memory_router.demo import materialize

    return materialize(tmp_path_factory.mktemp("demo") / "ws", log=lambda m: None)


def _mask(stdout: bytes) -> bytes:
    """The bytes minus timings; relevance too (recency is measured in seconds: compared with
    assert_same_answer's tolerance)."""
    import re

    stdout = re.sub(rb'"(router_duration_ms|backend_duration_ms|duration_ms)":\s*\d+', rb'"\1":0', stdout)
    return re.sub(rb'"(relevance|normalized_relevance)":\s*[-+.0-9eE]+', rb'"\1":0', stdout)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, stdin",
    [
        (("what did we decide about the database schema",), None),
        (("the middleware issue", "--pretty", "--limit", "2"), None),
        (("-", "--timeout-ms=9000"), b"how does OrderController relate to PaymentService"),
        (("-",), b"caf\xe9"),
        (("   ",), None),
    ],
    ids=["plain", "pretty-limit", "stdin", "bad-utf8", "empty"],
)
def test_the_console_scripts_in_process_query_is_the_click_commands_without_click(demo, args, stdin):
    import os

    common = [*args, "--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "off"}
    kw = dict(input=stdin, capture_output=True, env=env, cwd=demo.root, timeout=120)
    fast = subprocess.run([sys.executable, "-X", "importtime", "-m", "memory_router", "query", *common], **kw)
    slow = subprocess.run([sys.executable, "-c", CLICK_APP, "query", *common], **kw)
    lines = fast.stderr.decode().splitlines()
    assert not [line for line in lines if line.endswith(("| click", "|   click"))]  # no click imported
    fast_stderr = "\n".join(line for line in lines if not line.startswith("import time:"))
    assert (fast.returncode, _mask(fast.stdout), fast_stderr) == (
        slow.returncode,
        _mask(slow.stdout),
        slow.stderr.decode().rstrip("\n"),
    )
    assert_same_answer(json.loads(fast.stdout), json.loads(slow.stdout), "console script vs click app")


# ------------------------------------------------------------------- the pre-rendered --help


@pytest.mark.slow
def test_the_pre_rendered_help_is_what_click_renders_now():
    """Fails after a command's help changed until `python3 -m memory_router.cli.help_text` is run."""
    from memory_router.cli import help_text

    assert help_text.TOP_LEVEL == help_text.render(), "run: python3 -m memory_router.cli.help_text"


def _console(args: list[str], columns: str | None) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    code = "import sys; sys.argv[0] = 'memory-router'; from memory_router.cli.entry import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args], capture_output=True, text=True, env=env
    )


def _click(args: list[str], columns: str | None) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-c", CLICK_APP, *args], capture_output=True, text=True, env=env)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
@pytest.mark.parametrize("columns", [None, "80", "200"])
def test_help_and_version_print_clicks_text_without_importing_click(args, columns):
    fast, slow = _console(args, columns), _click(args, columns)
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout) == (0, fast.stdout)
    assert "memory-router" in fast.stdout
    assert "click" not in _imported(fast.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["60", "79"])
def test_a_narrow_terminal_gets_clicks_own_wrapping(columns):
    fast, slow = _console(["--help"], columns), _click(["--help"], columns)
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout)
    assert fast.stdout != _click(["--help"], None).stdout  # the width did change the text
    assert "click" in _imported(fast.stderr)


# ------------------------------------------------------------------- the cyclic collector


@pytest.mark.parametrize(
    ("argv", "collecting"),
    [
        (["query", "x"], False),
        (["route", "x"], False),
        (["--help"], False),
        (["serve"], True),
        (["mcp"], True),
        (["daemon", "start"], True),
        (["backends"], True),
        ([], True),
    ],
)
def test_only_commands_that_answer_once_run_without_the_cyclic_collector(monkeypatch, argv, collecting):
    """The one-shot commands skip ~50 collections during their imports; a long-lived process
    (serve, mcp, the daemon) must keep collecting or reference cycles would pile up."""
    import gc

    from memory_router.cli import entry, help_text, interrupt, query
    from memory_router.cli import main as cli

    seen: list[bool] = []

    def record(*args, **kwargs):
        seen.append(gc.isenabled())
        raise SystemExit(0)

    monkeypatch.setattr(sys, "argv", ["memory-router", *argv])
    monkeypatch.setattr(interrupt, "install", lambda: None)  # keep pytest's own Ctrl-C handling
    monkeypatch.setattr(query, "answer", record)
    monkeypatch.setattr(cli, "main", record)
    monkeypatch.setattr(help_text, "static_answer", lambda option: record())
    assert gc.isenabled()
    try:
        with pytest.raises(SystemExit):
            entry.main()
        assert seen == [collecting]
    finally:
        gc.enable()
