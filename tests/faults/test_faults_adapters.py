"""Faults of each shipped adapter's own transport, through the CLI, with a healthy command backend
to fall back to: qmd (a fake ``qmd`` executable: the fault program impersonating it), Cognee
(fake HTTP servers on localhost: a closed port, a black hole, a 500, garbage), Lossless (a
missing file, a file that is not a database, a database locked by another process) and Total
Recall (a missing memory root). The fakes are named as such; the real qmd and Cognee are tested
by their own adapter tests. Each row: the right status and router.log line, the CLI back within
its timeout (not the adapter's internal one), and no process left behind.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ..support.faults import (
    FAULT_PROGRAM,
    CliRun,
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    log_lines,
    report,
    run_cli,
    wait_no_leftovers,
    write_setup,
)

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

TIMEOUT_MS = 800
QUERY = "how is the session token refreshed"


def ask(
    tmp_path: Path, spec: dict[str, Any], *, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str, CliRun]:
    state, config = write_setup(
        tmp_path, {"adapter": spec, "good": command_backend("ok")}, ["adapter", "good"], timeout_ms=TIMEOUT_MS
    )
    run = run_cli(
        ["query", QUERY, "--state-dir", str(state), "--config", str(config)], env={**os.environ, **(env or {})}
    )
    assert run.returncode == 0, run.stderr
    data = run.envelope
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == ("success", "good", 1)
    [line] = log_lines(state)
    return data["attempts"][0], line, run


def check_and_report(
    key: str, adapter: str, fault: str, attempt: dict, line: str, run: CliRun, code: str, fragment: str
) -> None:
    assert attempt["error_code"] == code, attempt
    assert fragment in attempt["error_message"], attempt["error_message"]
    kind = "TIMEOUT" if code == "QUERY_TIMEOUT" else "FALLBACK"
    assert f'] {kind} query="{QUERY}" backend=adapter ' in line and line.endswith(" next=good")
    if code == "QUERY_TIMEOUT":
        assert TIMEOUT_MS <= attempt["duration_ms"] <= TIMEOUT_MS + 100, attempt
    report(
        "adapters",
        key,
        adapter=adapter,
        fault=fault,
        status="success (fallback)",
        log=f"{kind} {code}",
        adapter_ms=attempt["duration_ms"],
        cli_wall_ms=f"{run.wall_ms:.0f}",
        message=attempt["error_message"][:110],
    )


# --------------------------------------------------------------------------- qmd (fake executable)


@pytest.mark.parametrize(
    ("fault", "code", "fragment"),
    [
        ("hang", "QUERY_TIMEOUT", "no answer within 800 ms"),
        ("crash", "BACKEND_ERROR", "index file is corrupt"),
        ("garbage", "BACKEND_ERROR", "qmd search"),
        ("huge", "BACKEND_ERROR", "exceeded 8388608 bytes"),
    ],
)
def test_qmd_adapter_faults(tmp_path: Path, fault: str, code: str, fragment: str) -> None:
    piddir = tmp_path / "pids"
    piddir.mkdir()
    spec = {"type": "qmd", "qmd": str(FAULT_PROGRAM), "index_path": str(tmp_path / "index.sqlite")}
    state_cfg = {"FAULT_MODE": fault, "FAULT_PIDDIR": str(piddir)}
    # rule 7's chain is adapter (mode none) -> good; qmd needs a mode: give the step "search".
    attempt, line, run = ask_mode(tmp_path, spec, "search", env=state_cfg)
    check_and_report(f"qmd-{fault}", "qmd (fake qmd executable)", fault, attempt, line, run, code, fragment)
    if fault != "garbage":
        assert list(piddir.glob("*.pids"))
    assert wait_no_leftovers(piddir) == []


def ask_mode(
    tmp_path: Path, spec: dict[str, Any], mode: str, *, env: dict[str, str]
) -> tuple[dict[str, Any], str, CliRun]:
    import orjson

    good = command_backend("ok", env={"FAULT_MODE": ""})  # FAULT_MODE is for the fake qmd only
    state, config = write_setup(tmp_path, {"adapter": spec, "good": good}, ["adapter", "good"], timeout_ms=TIMEOUT_MS)
    cfg = orjson.loads(config.read_bytes())
    cfg["rules"][0]["chain"][0]["mode"] = mode
    config.write_bytes(orjson.dumps(cfg))
    run = run_cli(["query", QUERY, "--state-dir", str(state), "--config", str(config)], env={**os.environ, **env})
    assert run.returncode == 0, run.stderr
    data = run.envelope
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == ("success", "good", 1), data["attempts"]
    [line] = log_lines(state)
    return data["attempts"][0], line, run


def test_qmd_missing(tmp_path: Path) -> None:
    spec = {"type": "qmd", "qmd": str(tmp_path / "no-qmd" / "qmd.js")}
    attempt, line, run = ask_mode(tmp_path, spec, "search", env={})
    check_and_report("qmd-missing", "qmd", "qmd not installed", attempt, line, run, "BACKEND_UNAVAILABLE", "qmd")


# --------------------------------------------------------------------------- Cognee (fake HTTP servers)


class _Handler(BaseHTTPRequestHandler):
    behaviour = "500"

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.server.behaviour == "blackhole":  # type: ignore[attr-defined]
            self.server.release.wait(30)  # type: ignore[attr-defined]
            return
        body = (
            b"<html>Internal Server Error</html>"
            if self.server.behaviour == "500"  # type: ignore[attr-defined]
            else b"this is not json"
        )
        self.send_response(500 if self.server.behaviour == "500" else 200)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "text/html" if self.server.behaviour == "500" else "application/json")  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST


@pytest.fixture
def fake_cognee() -> Iterator[Callable[[str], str]]:
    """``start(behaviour)``: a FAKE Cognee HTTP server misbehaving as named (``_Handler``); its base URL."""
    servers = []

    def start(behaviour: str) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.behaviour = behaviour  # type: ignore[attr-defined]
        server.release = threading.Event()  # type: ignore[attr-defined]
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("fault", "code", "fragment"),
    [
        ("closed_port", "BACKEND_UNAVAILABLE", "cannot connect to Cognee"),
        ("blackhole", "QUERY_TIMEOUT", "no answer within 800 ms"),
        ("500", "BACKEND_ERROR", "500"),
        ("garbage", "BACKEND_ERROR", ""),
    ],
)
def test_cognee_adapter_faults(
    tmp_path: Path, fake_cognee: Callable[[str], str], fault: str, code: str, fragment: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}" if fault == "closed_port" else fake_cognee(fault)
    attempt, line, run = ask(tmp_path, {"type": "cognee", "base_url": url})
    names = {
        "closed_port": "service unreachable (closed port)",
        "blackhole": "accepts, never answers",
        "500": "HTTP 500 with an HTML page",
        "garbage": "HTTP 200, body not JSON",
    }
    check_and_report(f"cognee-{fault}", "cognee (fake HTTP server)", names[fault], attempt, line, run, code, fragment)


# --------------------------------------------------------------------------- Lossless


def test_lossless_missing_database(tmp_path: Path) -> None:
    attempt, line, run = ask(tmp_path, {"type": "lossless", "db_path": str(tmp_path / "nope" / "lcm.db")})
    check_and_report(
        "lossless-missing", "lossless", "database file missing", attempt, line, run, "BACKEND_UNAVAILABLE", "lcm.db"
    )
    assert not (tmp_path / "nope").exists()  # read-only: never creates a database


def test_lossless_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "lcm.db"
    db.write_bytes(b"this is not an SQLite file " * 100)
    attempt, line, run = ask(tmp_path, {"type": "lossless", "db_path": str(db)})
    assert attempt["error_code"] in ("BACKEND_ERROR", "BACKEND_UNAVAILABLE")
    check_and_report(
        "lossless-garbage",
        "lossless",
        "file is not a database",
        attempt,
        line,
        run,
        attempt["error_code"],
        "not a database",
    )


def test_lossless_locked_database_is_abandoned_at_the_timeout(tmp_path: Path) -> None:
    """Another process holds an exclusive lock (rollback journal), and busy_timeout_ms is 20 s.
    SQLite's lock wait cannot be interrupted, so before the fix the CLI printed its answer only
    when the worker thread gave up, 20 s later; now the wait is capped by the router's timeout
    and the CLI does not wait for abandoned threads."""
    db = tmp_path / "lcm.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE summaries (summary_id TEXT, content TEXT, created_at TEXT)")
    conn.commit()
    conn.close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(db)!r}, isolation_level=None); c.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        attempt, line, run = ask(tmp_path, {"type": "lossless", "db_path": str(db), "busy_timeout_ms": 20000})
    finally:
        holder.kill()
        holder.wait()
    assert run.wall_ms < 8000, run.wall_ms  # not the 20 s busy timeout
    check_and_report(
        "lossless-locked",
        "lossless",
        "database locked by another process (busy_timeout_ms 20000)",
        attempt,
        line,
        run,
        "QUERY_TIMEOUT",
        "",
    )


# --------------------------------------------------------------------------- Total Recall


def test_totalrecall_missing_root(tmp_path: Path) -> None:
    attempt, line, run = ask(tmp_path, {"type": "totalrecall", "root": str(tmp_path / "no-such-project")})
    check_and_report(
        "totalrecall-missing",
        "totalrecall",
        "memory root missing",
        attempt,
        line,
        run,
        attempt["error_code"],
        "no-such-project",
    )
    assert attempt["error_code"] in ("BACKEND_UNAVAILABLE", "BACKEND_ERROR")
