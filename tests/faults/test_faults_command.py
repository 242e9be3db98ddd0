"""The generic command adapter (backends/command/adapter.py), against a real program: tests/support/faultbackend.py,
which speaks the stack's wrapper.sh contract and misbehaves on request."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.base import BACKEND_ERROR, BACKEND_UNAVAILABLE, BackendRequest, BackendResponse
from memory_router.backends.command.adapter import (
    CommandBackend,
    ContractError,
    Settings,
    build_argv,
    create,
    parse_contract,
)
from memory_router.backends.common import settings as _settings
from memory_router.config.installed import parse_installed
from memory_router.config.router_config import parse_config
from memory_router.core.errors import InvalidConfig
from memory_router.routing.router import Router

from ..support.faults import (
    FAULT_PROGRAM,
    fault_argv,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    live_leftovers,
    wait_no_leftovers,
)

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


def backend(tmp_path: Path, argv: list[Any], **settings: object) -> CommandBackend:
    context = BackendContext(state_dir=tmp_path / "state", environ={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    return create("fx", _settings.validate(Settings, {"argv": argv, **settings}), context)


def search(
    b: CommandBackend, query: str = "auth middleware", mode: str | None = None, timeout_s: float = 10.0
) -> BackendResponse:
    async def go() -> BackendResponse:
        return await asyncio.wait_for(b.search(BackendRequest(query, mode, limit=7, timeout_s=timeout_s)), timeout_s)

    return asyncio.run(go())


def by_source(response: BackendResponse, source: str) -> list[str]:
    return [r.content for r in response.results if r.source == source]


# --------------------------------------------------------------------------- argv templates


def test_template_fills_placeholders_and_drops_groups_without_a_value() -> None:
    template = ("wrapper.sh", "--adapter", "{query}", ("--hint", "{mode}"), "--limit={limit}", "{{literal}}")
    values = {"query": "a b", "mode": None, "limit": "5", "timeout_ms": "800"}
    assert build_argv(template, values) == ["wrapper.sh", "--adapter", "a b", "--limit=5", "{literal}"]
    assert build_argv(template, {**values, "mode": "vsearch"}) == [
        "wrapper.sh",
        "--adapter",
        "a b",
        "--hint",
        "vsearch",
        "--limit=5",
        "{literal}",
    ]
    # Outside a group a missing value is the empty string, still exactly one argument.
    assert build_argv(("p", "--hint", "{mode}"), values) == ["p", "--hint", ""]


@given(st.text())
def test_the_query_is_always_exactly_one_argument(query: str) -> None:
    template = ("prog", "--adapter", "{query}", ("--hint", "{mode}"), "q={query}")
    argv = build_argv(template, {"query": query, "mode": None, "limit": "1", "timeout_ms": "1"})
    assert argv == ["prog", "--adapter", query, f"q={query}"]


@pytest.mark.parametrize(
    ("argv", "where", "problem"),
    [
        (["prog", "--q", "{qeury}"], "backends.fx.argv", "unknown placeholder {qeury}"),
        ([], "backends.fx.argv", "at least 1 item"),
        ([["--hint", "{mode}"]], "backends.fx.argv", "argv[0] must be the program"),
        (["{query}"], "backends.fx.argv", "cannot contain placeholders"),
        (["prog", []], "backends.fx.argv", "empty group"),
    ],
)
def test_bad_argv_templates_are_refused_when_the_config_loads(
    tmp_path: Path, argv: list[Any], where: str, problem: str
) -> None:
    data = {
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "fx"}]}],
        "backends": {"fx": {"type": "command", "argv": argv}},
    }
    with pytest.raises(InvalidConfig) as err:
        parse_config(data, tmp_path / "router-config.json")
    assert where in str(err.value) and problem in str(err.value)
    assert "router-config.json" in str(err.value)


def test_unknown_setting_and_undeclared_mode_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "router-config.json"
    base = {"rules": [{"number": 1, "id": "default", "chain": [{"backend": "fx", "mode": "graph"}]}]}
    with pytest.raises(InvalidConfig, match=r"backends\.fx\.timeout: unknown key"):
        parse_config({**base, "backends": {"fx": {"type": "command", "argv": ["p"], "timeout": 5}}}, path)
    with pytest.raises(InvalidConfig, match=r"chain\[0\]\.mode: command has no mode 'graph'.*Use one of: deep, fast"):
        parse_config({**base, "backends": {"fx": {"type": "command", "argv": ["p"], "modes": ["fast", "deep"]}}}, path)
    # Without a modes list any mode is passed through to the program.
    config = parse_config({**base, "backends": {"fx": {"type": "command", "argv": ["p"]}}}, path)
    assert config.backends["fx"].settings.argv == ("p",)


# --------------------------------------------------------------------------- a real program


def test_answers_with_the_programs_contract(tmp_path: Path) -> None:
    response = search(backend(tmp_path, fault_argv("ok", "--relevance", "0.75")), "auth middleware")
    assert response.status == "success" and response.error_code is None
    assert response.backend == "fx" and response.result_count == 1
    assert response.normalized_relevance == 0.75
    hit = response.results[0]
    assert hit.content == "answer to auth middleware" and hit.relevance == 0.75
    assert hit.extra == {"path": "memory/fault.md", "line": 1}  # extra keys survive


def test_runs_an_executable_script_directly_like_a_skills_wrapper(tmp_path: Path) -> None:
    """argv[0] is the script itself (shebang, x bit), as with a stack skill's wrapper.sh."""
    response = search(
        backend(tmp_path, [str(FAULT_PROGRAM), "--fault", "ok", "--adapter", "{query}", ["--hint", "{mode}"]]),
        "auth middleware",
        mode="fast",
    )
    assert response.status == "success" and response.results[0].content == "answer to auth middleware"


def test_mode_limit_env_cwd_and_stdin_reach_the_program(tmp_path: Path) -> None:
    workdir = tmp_path / "skill"
    workdir.mkdir()
    argv = [*fault_argv("echo"), "--limit", "{limit}"]
    b = backend(tmp_path, argv, env={"ECHO_TOKEN": "s3cret"}, cwd="skill", stdin="json")
    response = search(b, "why did we pick sqlite", mode="deep")
    args = by_source(response, "argv")
    assert args[args.index("--adapter") + 1] == "why did we pick sqlite"
    assert args[args.index("--hint") + 1] == "deep" and args[args.index("--limit") + 1] == "7"
    assert by_source(response, "cwd") == [str(workdir)]
    assert by_source(response, "env") == ["ECHO_TOKEN=s3cret"]
    assert orjson.loads(by_source(response, "stdin")[0]) == {
        "query": "why did we pick sqlite",
        "mode": "deep",
        "limit": 7,
        "timeout_ms": 10000,
    }
    # No mode and no default_mode: the optional --hint group disappears; default_mode fills it.
    assert "--hint" not in by_source(search(b), "argv")
    with_default = backend(tmp_path, argv, default_mode="fast", cwd="skill")
    args = by_source(search(with_default), "argv")
    assert args[args.index("--hint") + 1] == "fast"


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(["'''", "$(touch PWNED)", "`touch PWNED`", "a\nb", '"; rm -rf ~ #', "--fault", "x' OR '1'='1"])
    | st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=40)
)
def test_hostile_queries_are_one_verbatim_argument_and_run_nothing(
    tmp_path_factory: pytest.TempPathFactory, query: str
) -> None:
    tmp_path = tmp_path_factory.mktemp("hostile")
    b = backend(tmp_path, fault_argv("echo"), stdin="query")
    response = search(b, query)
    args = by_source(response, "argv")
    assert args == ["--fault", "echo", "--adapter", query]
    assert by_source(response, "stdin") == [query]
    assert not list(tmp_path.glob("PWNED")) and not list(Path.cwd().glob("PWNED"))


# --------------------------------------------------------------------------- every way to fail


@pytest.mark.parametrize(
    ("argv", "settings", "code", "fragments"),
    [
        (
            fault_argv("crash"),
            {},
            BACKEND_ERROR,
            ["exited with code 3 and printed nothing", "stderr:", "RuntimeError: index file is corrupt"],
        ),
        (fault_argv("garbage"), {}, BACKEND_ERROR, ["printed output that is not JSON", "'<html><body>502"]),
        (
            fault_argv("wrong_shape"),
            {},
            BACKEND_ERROR,
            [
                "printed JSON of the wrong shape: status: Input should be 'success', 'empty' or 'error' (got \"ok\")",
                "1 more problem",
            ],
        ),
        (
            fault_argv("huge"),
            {"max_output_bytes": 1 << 20},
            BACKEND_ERROR,
            ["printed more than 1048576 bytes on stdout (backends.fx.max_output_bytes); its process group was killed"],
        ),
        (fault_argv("error"), {}, BACKEND_ERROR, ["index is locked by another writer"]),
        (
            ["/nonexistent/skills/viking/wrapper.sh", "--adapter", "{query}"],
            {},
            BACKEND_UNAVAILABLE,
            [
                "cannot run /nonexistent/skills/viking/wrapper.sh: No such file or directory",
                "backends.fx.argv[0]",
                "install the backend or fix the path",
            ],
        ),
        ([__file__], {}, BACKEND_UNAVAILABLE, ["Permission denied"]),  # a file without the x bit
        (
            [sys.executable, "-c", "import sys; sys.exit(127)"],
            {},
            BACKEND_UNAVAILABLE,
            ["exited with code 127 (a program it runs is missing or not executable)"],
        ),
        (
            [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
            {},
            BACKEND_ERROR,
            ["was killed by SIGKILL"],
        ),
        ([sys.executable, "-c", "pass"], {}, BACKEND_ERROR, ["printed nothing on stdout"]),
        ([sys.executable, "-c", "print('[1, 2]')"], {}, BACKEND_ERROR, ["printed a JSON list, not an object"]),
        (
            [sys.executable, "-c", 'print(\'{"status": "success", "results": [{"content": "x", "relevance": 1.7}]}\')'],
            {},
            BACKEND_ERROR,
            ["wrong shape: results[0].relevance: Input should be less than or equal to 1"],
        ),
        (
            [
                sys.executable,
                "-c",
                'print(\'{"status": "error", "results": [], "error_code": "QUOTA", '
                '"error_message": "quota exceeded"}\'); raise SystemExit(1)',
            ],
            {},
            "QUOTA",
            ["quota exceeded (", "exited with code 1)"],
        ),
    ],
    ids=[
        "crash",
        "garbage",
        "wrong_shape",
        "too_large",
        "error_contract",
        "missing_executable",
        "not_executable",
        "exit_127",
        "signal",
        "no_output",
        "json_list",
        "relevance_range",
        "error_contract_nonzero_exit",
    ],
)
def test_each_failure_is_a_precise_error(
    tmp_path: Path, argv: list[str], settings: dict[str, Any], code: str, fragments: list[str]
) -> None:
    response = search(backend(tmp_path, argv, **settings))
    assert response.status == "error" and response.results == ()
    assert response.error_code == code
    for fragment in fragments:
        assert fragment in (response.error_message or ""), response.error_message
    assert len(response.error_message or "") < 1000  # the stderr tail is bounded


def test_missing_cwd_is_unavailable(tmp_path: Path) -> None:
    response = search(backend(tmp_path, fault_argv("ok"), cwd="gone"))
    assert response.error_code == BACKEND_UNAVAILABLE
    assert f"working directory {tmp_path / 'gone'} does not exist (backends.fx.cwd)" in (response.error_message or "")


def test_stderr_tail_is_bounded(tmp_path: Path) -> None:
    noisy = [sys.executable, "-c", "import sys; sys.stderr.write('x' * 200000 + 'THE END'); sys.exit(2)"]
    message = search(backend(tmp_path, noisy)).error_message or ""
    assert message.endswith("THE END") and len(message) < 500


def test_cancellation_kills_the_whole_process_group(tmp_path: Path) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    b = backend(tmp_path, fault_argv("hang"), env={"FAULT_PIDDIR": str(piddir)})

    async def go() -> None:
        task = asyncio.ensure_future(b.search(BackendRequest("q", timeout_s=0.3)))
        for _ in range(500):  # until the program and its grandchild are up
            if list(piddir.glob("*.pids")):
                break
            await asyncio.sleep(0.01)
        assert live_leftovers(piddir), "the hang program should be running"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert wait_no_leftovers(piddir) == []


def test_probe_reports_whether_the_program_can_run(tmp_path: Path) -> None:
    assert backend(tmp_path, fault_argv("ok")).probe().ok
    missing = backend(tmp_path, ["no-such-wrapper-xyz"]).probe()
    assert not missing.ok and "no-such-wrapper-xyz: not found or not executable" in missing.detail


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )
    | st.fixed_dictionaries(
        {
            "status": st.sampled_from(["success", "empty", "error", "ok"]),
            "results": st.lists(
                st.fixed_dictionaries(
                    {"content": st.text(max_size=5) | st.integers(), "relevance": st.floats(-1, 2, allow_nan=False)}
                ),
                max_size=3,
            ),
        }
    )
)
def test_contract_parser_accepts_only_the_contract(data: dict[str, Any]) -> None:
    """Whatever JSON a program prints, the parser returns a valid contract or a ContractError."""
    try:
        contract = parse_contract(json.dumps(data).encode())
    except ContractError as exc:
        assert str(exc).startswith("print")
        return
    assert contract.status in ("success", "empty", "error")
    assert all(isinstance(r.content, str) and 0 <= r.relevance <= 1 for r in contract.results)


def test_routes_through_a_command_backend_end_to_end(tmp_path: Path) -> None:
    data = {
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "broken"}, {"backend": "viking"}]}],
        "backends": {
            "broken": {"type": "command", "argv": fault_argv("garbage")},
            "viking": {"type": "command", "argv": fault_argv("ok")},
        },
    }
    config = parse_config(data, tmp_path / "router-config.json")
    router = Router(config, context=BackendContext(state_dir=tmp_path / "state", cwd=tmp_path))
    installed = parse_installed({"backends": ["broken", "viking"]}, tmp_path / "backends.json")
    envelope = asyncio.run(router.route("the viking notes", installed))
    assert envelope.status == "success" and envelope.routed_to == "viking" and envelope.fallbacks_used == 1
    assert envelope.results[0].content == "answer to the viking notes"
    log = (tmp_path / "state" / "router.log").read_text()
    assert 'FALLBACK query="the viking notes" backend=broken error_code=BACKEND_ERROR' in log and "next=viking" in log


def test_oversized_output_is_abandoned_at_once_not_after_the_reap_timeout() -> None:
    """Regression: with a paused stdout pipe, asyncio's wait() never returned until the 2 s reap
    timeout, so 50 MB of output cost a whole router timeout instead of a fallback."""
    from memory_router.backends.common.process import OutputTooLarge, run

    async def once() -> float:
        started = time.perf_counter()
        with pytest.raises(OutputTooLarge):
            await run([sys.executable, "-I", "-S", str(FAULT_PROGRAM), "--fault", "huge"], max_stdout=8 << 20)
        return time.perf_counter() - started

    durations = [asyncio.run(once()) for _ in range(6)]
    assert max(durations) < 1.5, durations


def test_large_stdin_and_large_stdout_do_not_deadlock(tmp_path: Path) -> None:
    """A program that prints 1 MB before reading its 1 MB stdin: both pipes must flow at once."""
    program = [
        sys.executable,
        "-c",
        "import json, sys\n"
        "sys.stdout.write(' ' * 1_000_000)\n"
        "q = sys.stdin.read()\n"
        "json.dump({'status': 'success', 'results': [{'content': str(len(q)), 'relevance': 0.9}]}, sys.stdout)",
    ]
    response = search(backend(tmp_path, program, stdin="query"), "x" * 1_000_000, timeout_s=20)
    assert response.status == "success" and response.results[0].content == "1000000"


def test_a_program_that_ignores_stdin_still_answers(tmp_path: Path) -> None:
    program = [sys.executable, "-c", 'print(\'{"status": "empty", "results": []}\')']
    assert search(backend(tmp_path, program, stdin="query"), "y" * 300_000).status == "empty"


def test_a_programs_error_code_and_message_cannot_forge_log_lines_or_flood(tmp_path: Path) -> None:
    forged = (
        'X\n[2026-01-01T00:00:00Z] FALLBACK query="forged" backend=qmd error_code=BACKEND_ERROR '
        'error_message="x" next=none'
    )
    program = [
        sys.executable,
        "-c",
        "import json; print(json.dumps({'status': 'error', 'results': [], "
        f"'error_code': {forged!r}, 'error_message': 'boom ' * 50000}}))",
    ]
    data = {
        "rules": [{"number": 1, "id": "default", "chain": [{"backend": "evil"}, {"backend": "good"}]}],
        "backends": {
            "evil": {"type": "command", "argv": program},
            "good": {"type": "command", "argv": fault_argv("ok")},
        },
    }
    router = Router(
        parse_config(data, tmp_path / "router-config.json"),
        context=BackendContext(state_dir=tmp_path / "state", cwd=tmp_path),
    )
    envelope = asyncio.run(
        router.route("q", parse_installed({"backends": ["evil", "good"]}, tmp_path / "backends.json"))
    )
    assert envelope.routed_to == "good"
    attempt = envelope.attempts[0]
    assert (
        attempt["error_code"] == "BACKEND_ERROR"
        and "its error_code was not a code: 'X\\n[2026" in attempt["error_message"]
    )
    assert len(attempt["error_message"]) < 1200 and "(250000 characters)" in attempt["error_message"]
    lines = (tmp_path / "state" / "router.log").read_text().splitlines()
    assert len(lines) == 1 and lines[0].count("FALLBACK") == 1 + 1  # the forged text stays inside the quoted message


def test_router_log_quotes_any_unusual_token() -> None:
    from memory_router.routing.routerlog import token

    assert token("BACKEND_ERROR") == "BACKEND_ERROR" and token("qmd") == "qmd"
    assert token('X\nnext=none "') == '"X\\nnext=none \\""'
