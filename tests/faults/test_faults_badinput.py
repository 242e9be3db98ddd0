"""Bad input, through the real CLI: each gets a precise message and, where the router can still
answer, an answer. Backends are the fault program (tests/support/faultbackend.py) as command backends:
``echo`` returns the argv it was given, so the tests see exactly what reached a backend."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.core.envelope import Envelope

from ..support.faults import (
    CliRun,
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    log_lines,
    report,
    run_cli,
    write_setup,
)

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


def keyed(*cases: tuple) -> list:
    """Parameter sets named by their first element (the report key), not by their payloads."""
    return [pytest.param(*case, id=case[0]) for case in cases]


def setup_dirs(tmp_path: Path, **config: Any) -> tuple[Path, Path]:
    """A crashing primary (so every query writes one FALLBACK line) and an echo fallback."""
    backends = {"primary": command_backend("crash"), "echo": command_backend("echo")}
    return write_setup(tmp_path, backends, ["primary", "echo"], timeout_ms=5000, **config)


def query(
    state: Path, config: Path, text: str | None = None, *, stdin: bytes | None = None, cwd: Path | None = None
) -> tuple[CliRun, dict[str, Any]]:
    run = run_cli(
        ["query", "-" if stdin is not None else text or "", "--state-dir", str(state), "--config", str(config)],
        stdin=stdin,
        cwd=cwd,
    )
    data = run.envelope  # the CLI prints an envelope whatever happens
    Envelope.from_dict(data)
    return run, data


def echoed_query(data: dict) -> str:
    """The query as the echo backend received it (the argument after --adapter)."""
    args = [r["content"] for r in data["results"] if r["source"] == "argv"]
    return args[args.index("--adapter") + 1]


def row(key: str, description: str, run: CliRun, data: dict, answered: bool, note: str = "") -> None:
    message = run.stderr.decode("utf-8", "replace").strip().splitlines()
    report(
        "bad_input",
        key,
        input=description,
        exit=run.returncode,
        status=data["status"],
        error_code=data["error_code"] or "-",
        answered="yes" if answered else "no",
        message=(message[0] if message else note)[:140],
    )


# --------------------------------------------------------------------------- queries


@pytest.mark.parametrize(
    ("key", "description", "argv", "stdin", "code", "fragment"),
    keyed(
        ("empty", "empty query", "", None, "EMPTY_QUERY", "the query is empty or only whitespace"),
        ("blank", "whitespace-only query (spaces, tab, newline)", " \t\n  ", None, "EMPTY_QUERY", "only whitespace"),
        (
            "control_only",
            "only control characters and NULs (stdin)",
            None,
            b"\x00\x01\x1b\x7f",
            "EMPTY_QUERY",
            "only whitespace",
        ),
        (
            "one_mb",
            "1 MB query (stdin)",
            None,
            b"x" * (1 << 20),
            "QUERY_TOO_LONG",
            "the query is 1048576 characters; the limit is 4096 (max_query_chars in router-config.json)",
        ),
        ("hundred_kb", "100 kB query (argv)", "y" * 100_000, None, "QUERY_TOO_LONG", "the query is 100000 characters"),
        (
            "bad_utf8",
            "invalid UTF-8 on stdin",
            None,
            b"caf\xe9 au lait",
            "INVALID_UTF8",
            "standard input is not valid UTF-8 (byte 3)",
        ),
        (
            "bad_utf8_argv",
            "invalid UTF-8 in argv",
            os.fsdecode(b"caf\xe9 schema"),  # how Python hands such bytes over: a lone surrogate
            None,
            "INVALID_UTF8",
            "the query argument is not valid UTF-8 (byte 3)",
        ),
    ),
)
def test_unanswerable_queries_are_exit_2_with_a_precise_message(
    tmp_path: Path, key: str, description: str, argv: str | None, stdin: bytes | None, code: str, fragment: str
) -> None:
    state, config = setup_dirs(tmp_path)
    run, data = query(state, config, argv, stdin=stdin)
    assert run.returncode == 2
    assert (data["status"], data["error_code"]) == ("error", code)
    assert fragment in data["error_message"] and fragment in run.stderr.decode()
    assert data["attempts"] == [] and log_lines(state) == []  # no backend was called
    assert b"Traceback" not in run.stderr
    if argv is not None and key == "bad_utf8_argv":
        assert data["query_echo"] == "caf\ufffd schema"  # the undecodable byte shown as U+FFFD
    row(key, description, run, data, answered=False)


def test_nul_and_control_characters_are_normalised_and_answered(tmp_path: Path) -> None:
    state, config = setup_dirs(tmp_path)
    raw = "auth\x00middle\x07ware\x1b[31m\u2028token\r\n"
    run, data = query(state, config, stdin=raw.encode())
    assert run.returncode == 0 and data["status"] == "success"
    assert data["query_echo"] == raw  # the caller's text, unchanged (JSON-escaped)
    assert echoed_query(data) == "auth middle ware [31m token"  # what a backend gets: no control characters
    [line] = log_lines(state)
    assert "\\x00" in line and "\\x07" in line and "\\u2028" in line and "\\r\\n" in line
    row(
        "control",
        "NUL bytes and control characters (stdin)",
        run,
        data,
        answered=True,
        note="answered; backends get the text with control characters as spaces",
    )


HOSTILE = "it's '''$(touch PWNED)''' and `touch PWNED2` \"quoted\" \\ back\nslash"
FORGED = (
    'x"\n[2026-01-01T00:00:00Z] FALLBACK query="forged" backend=qmd error_code=BACKEND_ERROR '
    'error_message="x" next=none'
)


@pytest.mark.parametrize(("key", "text"), [("shell", HOSTILE), ("forged_log", FORGED)], ids=["shell", "forged_log"])
def test_shell_syntax_runs_nothing_and_cannot_forge_the_log(tmp_path: Path, key: str, text: str) -> None:
    state, config = setup_dirs(tmp_path)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    run, data = query(state, config, text, cwd=workdir)
    assert run.returncode == 0 and data["status"] == "success" and data["query_echo"] == text
    assert echoed_query(data) == " ".join(text.split())  # one argument, verbatim apart from whitespace
    assert not list(workdir.glob("PWNED*")) and not list(tmp_path.rglob("PWNED*"))
    lines = log_lines(state)
    assert len(lines) == 1  # the crashing primary's FALLBACK, nothing forged
    assert re.match(r'^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] FALLBACK query="(?:[^"\\]|\\.)*" backend=primary ', lines[0])
    assert lines[0].count(" backend=") == 1 + text.count(" backend=")
    row(
        key,
        "quotes, ''', $(...), backticks, newlines" if key == "shell" else "a query forging a router.log line",
        run,
        data,
        answered=True,
        note="answered; no code ran; router.log: 1 line, the fake one escaped inside it",
    )


def test_backtracking_query_is_cut_by_the_regex_timeout(tmp_path: Path) -> None:
    """'find ' x 819 makes rule 1's `find.*function` backtrack quadratically; the match timeout
    (regex_timeout_ms: 20) ends it, the rule counts as not matching, and the query is answered."""
    evil = ("find " * 819)[:4096]
    state, config = setup_dirs(tmp_path, regex_timeout_ms=20)
    cfg = orjson.loads(config.read_bytes())
    cfg["rules"].insert(
        0,
        {
            "number": 1,
            "id": "exact_symbol",
            "strong": [r"\bfind\b.*\bfunctions?\b", r"(\w+\s?)+\$"],
            "chain": [{"backend": "echo"}],
        },
    )
    config.write_bytes(orjson.dumps(cfg))
    started = time.perf_counter()
    route = run_cli(["route", evil, "--state-dir", str(state), "--config", str(config)])
    assert route.returncode == 0
    assert "rule 7 (default)" in route.stdout.decode() and "rule(s) 1 hit the match timeout" in route.stdout.decode()
    run, data = query(state, config, evil)
    elapsed = (time.perf_counter() - started) * 1000
    assert run.returncode == 0 and data["status"] == "success" and data["rule"]["id"] == "default"
    row(
        "backtracking",
        "4 kB query built to make rule 1's regex backtrack",
        run,
        data,
        answered=True,
        note=f"rule 1 hit the {20} ms match timeout and counts as no match; answered by the default rule",
    )
    assert elapsed < 20_000  # two CLI runs; unbounded backtracking would take far longer


# --------------------------------------------------------------------------- backends.json


@pytest.mark.parametrize(
    ("key", "description", "content", "exit", "code", "fragment"),
    keyed(
        (
            "bj_string",
            "backends.json is a JSON string",
            b'"qmd"',
            2,
            "BACKENDS_JSON_INVALID",
            "the top level must be an object or a list, got str",
        ),
        ("bj_number", "backends.json is a number", b"42", 2, "BACKENDS_JSON_INVALID", "got int"),
        ("bj_empty_file", "backends.json is an empty file", b"", 2, "BACKENDS_JSON_INVALID", "not valid JSON"),
        ("bj_no_backends", "backends.json is {}", b"{}", 2, "BACKENDS_JSON_INVALID", 'no "backends" key'),
        (
            "bj_empty_backends",
            "backends.json lists no backends",
            b'{"backends": {}}',
            1,
            "NO_BACKEND_AVAILABLE",
            "has no usable backend (primary: not listed in backends.json; echo: not listed in backends.json)",
        ),
        (
            "bj_all_unknown",
            "every status unknown",
            b'{"backends": {"primary": {"status": "bogus"}, "echo": "sleeping"}}',
            1,
            "NO_BACKEND_AVAILABLE",
            "primary: unknown status 'bogus' in backends.json (usable: ready, degraded)",
        ),
        (
            "bj_bad_status_type",
            "a status that is not a string",
            b'{"backends": {"echo": {"status": 1}}}',
            2,
            "BACKENDS_JSON_INVALID",
            "backends.echo.status: must be a string, got 1",
        ),
    ),
)
def test_bad_backends_json(
    tmp_path: Path, key: str, description: str, content: bytes, exit: int, code: str, fragment: str
) -> None:
    state, config = setup_dirs(tmp_path)
    (state / "backends.json").write_bytes(content)
    run, data = query(state, config, "auth middleware")
    assert run.returncode == exit and data["error_code"] == code, run.stderr
    assert fragment in data["error_message"] and fragment in run.stderr.decode()
    if exit == 2:
        assert str(state / "backends.json") in data["error_message"]
    row(key, description, run, data, answered=False)


def test_unknown_status_skips_that_backend_and_still_answers(tmp_path: Path) -> None:
    state, config = setup_dirs(tmp_path)
    (state / "backends.json").write_bytes(
        b'{"backends": {"primary": {"status": "bogus"}, "echo": {"status": "ready"}}}'
    )
    run, data = query(state, config, "auth middleware")
    assert run.returncode == 0 and data["status"] == "success" and data["fallback_chain"] == ["echo"]
    route = run_cli(["route", "auth middleware", "--state-dir", str(state), "--config", str(config)])
    assert (
        "skipped:  primary: unknown status 'bogus' in backends.json (usable: ready, degraded)" in route.stdout.decode()
    )
    row(
        "bj_one_unknown",
        "one backend with an unknown status",
        run,
        data,
        answered=True,
        note="answered by the others; `route` says: unknown status 'bogus' in backends.json",
    )


# --------------------------------------------------------------------------- router-config.json


@pytest.mark.parametrize(
    ("key", "description", "change", "fragment"),
    keyed(
        (
            "cfg_regex",
            "an invalid regex",
            lambda c: c["rules"].insert(
                0, {"number": 1, "id": "broken", "strong": ["(unclosed"], "chain": [{"backend": "echo"}]}
            ),
            "rules[0] (broken).strong[0]: invalid regex '(unclosed'",
        ),
        (
            "cfg_unknown_backend",
            "a rule naming an unknown backend",
            lambda c: c["rules"][0]["chain"].append({"backend": "cogne"}),
            "rules[0] (default).chain[2].backend: names unknown backend 'cogne'. Define it under \"backends\"",
        ),
        (
            "cfg_negative_timeout",
            "a negative timeout",
            lambda c: c.update(timeout_ms=-5),
            "timeout_ms: Input should be greater than 0 (got -5)",
        ),
        (
            "cfg_threshold",
            "a threshold outside 0..1",
            lambda c: c.update(threshold=1.5),
            "threshold: Input should be less than or equal to 1 (got 1.5)",
        ),
        (
            "cfg_not_object",
            "router-config.json is a list",
            lambda c: "LIST",
            "the top level must be a JSON object, got list",
        ),
    ),
)
def test_bad_router_config(
    tmp_path: Path, key: str, description: str, change: Callable[[dict[str, Any]], object], fragment: str
) -> None:
    state, config = setup_dirs(tmp_path)
    cfg = orjson.loads(config.read_bytes())
    if change(cfg) == "LIST":
        cfg = [cfg]
    config.write_bytes(orjson.dumps(cfg))
    run, data = query(state, config, "auth middleware")
    assert run.returncode == 2 and data["error_code"] == "CONFIG_INVALID"
    assert f"{config}: " in data["error_message"] and fragment in data["error_message"], data["error_message"]
    check = run_cli(["config", "check", "--state-dir", str(state), "--config", str(config)])
    assert check.returncode == 2 and fragment in check.stderr.decode()
    row(key, f"router-config.json: {description}", run, data, answered=False)


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["query", "-"], b"", "EMPTY_QUERY"),
        (["query", "-"], b"\xff\xfe", "INVALID_UTF8"),
        (["query", "x", "--config", "{tmp}/missing.json"], None, "CONFIG_INVALID"),
        (["query", "x", "--state-dir", "{tmp}/nowhere"], None, "BACKENDS_JSON_MISSING"),
    ],
)
def test_odd_invocations_get_an_envelope_not_a_traceback(
    tmp_path: Path, args: list[str], stdin: bytes | None, code: str
) -> None:
    state, config = setup_dirs(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    defaults = [] if any(a.startswith("--") for a in args) else ["--state-dir", str(state), "--config", str(config)]
    if "--config" in args:
        defaults = ["--state-dir", str(state)]
    elif "--state-dir" in args:
        defaults = ["--config", str(config)]
    run = run_cli([*args, *defaults], stdin=stdin)
    assert b"Traceback" not in run.stderr and run.returncode == 2
    data = orjson.loads(run.stdout)
    Envelope.from_dict(data)
    assert data["error_code"] == code and run.stderr.decode().startswith("memory-router: ")
