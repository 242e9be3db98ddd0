"""Cold start: `--help` lists lazy commands without importing them, and says what they say; what a
warm and a cold `query` may import (the floor a regression must not cross)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import orjson
import pytest

from memory_router.cli.main import LAZY_COMMANDS, main

from ..support.client import assert_same_answer


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
@pytest.mark.parametrize("limit", [20, 45, 60, 80, 200])
def test_the_static_short_help_is_the_commands_own(name, limit):
    real = main.get_command(click.Context(main), name)
    assert real is not None
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

    from memory_router.cli import entry, help_text
    from memory_router.cli import main as cli
    from memory_router.client import invocation

    seen: list[bool] = []

    def record(*args, **kwargs):
        seen.append(gc.isenabled())
        raise SystemExit(0)

    monkeypatch.setattr(sys, "argv", ["memory-router", *argv])
    monkeypatch.setattr(entry, "cancel_on_signals", lambda: None)  # keep pytest's own Ctrl-C handling
    monkeypatch.setattr(invocation, "answer", record)
    monkeypatch.setattr(cli, "main", record)
    monkeypatch.setattr(help_text, "static_answer", lambda option: record())
    assert gc.isenabled()
    try:
        with pytest.raises(SystemExit):
            entry.main()
        assert seen == [collecting]
    finally:
        gc.enable()


# ------------------------------------------------------------------- what a query may import

# Started with `python -S` and the package's (and its dependencies') folders on sys.path: no site
# and no .pth file imports anything first (an editable install's finder and some environments'
# .pth files import re, typing and pathlib before any code of ours runs), so what a query imports is
# exactly what its own code asks for. The console script pip writes imports `re` itself, before
# any of ours (docs/benchmarks.md, *Cold start*); that is not ours to pin.
_NO_SITE_MAIN = (
    "import os, sys; sys.path[:0] = sys.argv.pop(1).split(os.pathsep); sys.argv[0] = 'memory-router'\n"
    # An atexit hook runs in the interpreter's teardown, which a query skips once its answer is out
    # (memory_router.output.outwrite.leave): the teardown of even the thin client's modules costs a
    # fifth of the interpreter's start.
    "import atexit; atexit.register(lambda: sys.stderr.write('TEARDOWN\\n'))\n"
    "from memory_router.cli.entry import main\n"
    "main()\n"
)

# The warm path: a daemon answers. The standard library's C halves only (no re, json, typing,
# collections, enum, pathlib, types, nor __future__: no module on the path imports it), and these
# modules of ours.
WARM_STDLIB = frozenset("_collections_abc _json _sha2 _sha256 _socket _stat gc genericpath os posixpath stat".split())
WARM_OURS = frozenset(
    f"memory_router{name}"
    for name in (
        "",
        ".cli",
        ".cli.entry",
        ".client",
        ".client.invocation",
        ".client.thin",
        ".client.wire",
        ".config",
        ".config.envvars",
        ".config.paths",
        ".config.statedir",
        ".output",
        ".output.jsonout",
        ".output.outwrite",
        ".query_options",
    )
)
# The cold path (in-process; Total Recall, Lossless and a qmd that cannot run here, as the demo's
# "fill" chain on a machine without qmd): none of these. asyncio (and ssl, subprocess, socket,
# selectors, concurrent.futures and logging with it) is a fifth of a cold process; orjson (with
# uuid, platform and json) 12M instructions of it: the envelope and the config files are written and
# read by json's C half where the two agree (memory_router/output/jsonout.py).
# regex (a fifth of a cold query): an ASCII query's signals are matched with re where the two read
# them alike (every packaged one; memory_router/core/rules.py); dataclasses (with inspect, ast,
# dis, tokenize): the adapters' Settings are Frozen values (memory_router/backends/common/settings.py).
COLD_NEVER = frozenset(
    "asyncio ssl subprocess socket selectors concurrent logging signal shutil click pydantic tempfile "
    "zipfile bz2 lzma orjson json uuid platform regex dataclasses inspect ast dis tokenize".split()
)
COLD_MAX_OURS = 62  # modules of memory_router a cold query imports (63 when its signals were first matched with re;
# 64 since query's options have a module of their own, which the warm path reads without the contract; 62 since
# the console script answers a query itself and loads cli.interrupt only when a signal arrives)


def _query_imports(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set]:
    import orjson
    import regex

    import memory_router

    files = [m.__file__ for m in (memory_router, orjson, regex)]
    assert None not in files, files  # packages on disk, each in its site folder
    folders = {str(Path(f).resolve().parents[1]) for f in files if f is not None}
    proc = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", _NO_SITE_MAIN, os.pathsep.join(sorted(folders)), *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    base = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", "pass"], capture_output=True, text=True)
    return proc, _imported(proc.stderr) - _imported(base.stderr) - {"atexit"}  # (the harness's own)


@pytest.mark.slow
def test_a_warm_query_imports_only_the_thin_clients_modules(demo, tmp_path):
    from ..support.client import wait_for_socket

    where = ["--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "require"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "serve", "--socket", *where],
        cwd=demo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_socket(demo.state_dir / "router.sock", daemon)
        query = ["query", "what did we decide about the database schema", *where]
        proc, imported = _query_imports(query, env, demo.root)
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert proc.returncode == 0 and orjson.loads(proc.stdout)["status"] == "success", proc.stderr[-2000:]
    assert "TEARDOWN" not in proc.stderr  # it leaves with os._exit once the envelope is out
    ours = {name for name in imported if name.startswith("memory_router")}
    assert ours <= WARM_OURS, f"the warm path now imports {sorted(ours - WARM_OURS)}"
    others = {name.split(".")[0] for name in imported - ours}
    assert others <= WARM_STDLIB, f"the warm path now imports {sorted(others - WARM_STDLIB)}"


@pytest.mark.slow
def test_a_cold_query_imports_no_event_loop_no_processes_and_no_click(demo, tmp_path):
    where = ["--state-dir", str(demo.state_dir), "--config", str(demo.config_path)]
    env = {**os.environ, "MEMORY_ROUTER_DAEMON": "off", "MEMORY_ROUTER_QMD": str(tmp_path / "no-qmd.js")}
    query = ["query", "what did we decide about the database schema", *where]
    subprocess.run([sys.executable, "-m", "memory_router", *query], cwd=demo.root, env=env, capture_output=True)
    proc, imported = _query_imports(query, env, demo.root)  # the config cache is compiled by the run above
    envelope = orjson.loads(proc.stdout)
    assert proc.returncode == 0 and envelope["status"] in ("success", "partial"), proc.stderr[-2000:]
    assert proc.stdout.encode() == orjson.dumps(envelope) + b"\n"  # orjson's bytes, without orjson
    assert "TEARDOWN" not in proc.stderr
    assert {a["backend"] for a in envelope["attempts"]} == {"lossless", "totalrecall", "qmd"}  # the whole chain
    top = {name.split(".")[0] for name in imported}
    assert not top & COLD_NEVER, f"a cold query imports {sorted(top & COLD_NEVER)}"
    ours = sorted(name for name in imported if name.startswith("memory_router"))
    assert len(ours) <= COLD_MAX_OURS, f"a cold query imports {len(ours)} modules of ours: {ours}"
