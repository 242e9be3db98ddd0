"""Signals to a real ``memory-router serve`` process, each behaviour asserted over both transports
(stdin/stdout, and ``--socket`` with a client connected), since both run the one lifecycle
(memory_router/daemon/lifecycle.py):

* a first SIGTERM/SIGINT drains: requests in flight finish with their real answers;
* requests still running when the grace period ends are cancelled, answered ``SHUTTING_DOWN``,
  and their backend process groups killed;
* a second signal cancels at once, still answering every request read;
* the exit code is 0, the backends are closed, no backend process is left;
* SIGHUP re-reads the config and the daemon goes on serving.

The backends are test_daemon_serve.py's: the real Total Recall adapter and FAKE ``testfake``
adapters whose ``hang`` runs a real ``sleep`` child, so cancellation must kill a real process.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from .test_daemon_serve import Daemon, serve_argv, setup_state, sleepers, unique_sleep

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

TRANSPORTS = ("stdio", "socket")
DRAINED = "slowpath database schema UUID primary keys"  # qmd (fake, sleeps then fails) -> Total Recall
HANGS = "hangpath"  # qmd only: its sleep outlives every test


class SocketDaemon(Daemon):
    """``serve --socket`` with one client connected: the same calls as :class:`Daemon`."""

    def __init__(self, argv: list[str], marker: str, path: Path) -> None:
        self.marker = marker
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()
        self.wait_for_stderr("listening on", timeout=30)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rb")

    def send(self, request: object) -> None:
        self.sock.sendall(orjson.dumps(request) + b"\n")

    def ask(self, request: object) -> dict[str, Any]:
        self.send(request)
        return orjson.loads(self.file.readline())

    def read_all(self, timeout: float) -> bytes:
        """Every answer left, up to the daemon closing the connection."""
        self.sock.settimeout(timeout)
        return self.file.read()

    def close(self) -> None:
        self.file.close()
        self.sock.close()
        super().close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A private folder with a path short enough for a Unix socket (tmp_path may be too long)."""
    folder = Path(tempfile.mkdtemp(prefix="mr-sig-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def start(transport: str, tmp_path: Path, short_dir: Path, marker: str, *extra: str, **config: Any) -> Daemon:
    state, config_path = setup_state(tmp_path, marker, **config)
    argv = serve_argv(tmp_path, state, config_path, "--concurrency", "4", *extra)
    if transport == "stdio":
        daemon = Daemon(argv, marker)
        daemon.wait_for_stderr("ready")
        return daemon
    path = short_dir / "r.sock"
    return SocketDaemon([*argv, "--socket", str(path)], marker, path)


def wait_for_sleepers(marker: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(sleepers(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)
    assert len(sleepers(marker)) == count  # the concurrency limit: the rest wait for a slot


def closed_backends(tmp_path: Path) -> list[str]:
    path = tmp_path / "closed"
    return sorted(path.read_text().split()) if path.exists() else []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_first_signal_lets_in_flight_requests_finish_with_their_real_answers(
    transport: str, tmp_path: Path, short_dir: Path
) -> None:
    marker = f"0.8{secrets.randbelow(10**9):09d}1"  # the fake qmd sleeps 0.8 s, then fails over
    daemon = start(transport, tmp_path, short_dir, marker, "--grace-ms", "30000", cooldown=None, timeout_ms=60_000)
    try:
        for i in range(4):
            daemon.send({"id": i, "query": DRAINED})
        wait_for_sleepers(marker, 4)
        started = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        out = daemon.read_all(timeout=20)
        assert daemon.proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 10  # done when the requests were, not at the 30 s grace
        answers = [orjson.loads(line) for line in out.splitlines()]
        assert sorted(a["id"] for a in answers) == list(range(4))
        assert {(a["status"], a["routed_to"]) for a in answers} == {("success", "totalrecall")}
        assert [a["attempts"][0]["error_code"] for a in answers] == ["BACKEND_ERROR"] * 4  # qmd ran to its end
        daemon.wait_for_stderr("SIGTERM: stopping; 4 request(s) in flight get 30 s to finish")
        assert closed_backends(tmp_path) == ["cognee", "qmd"]
        assert sleepers(marker) == []
    finally:
        daemon.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_requests_still_running_after_the_grace_period_are_cancelled_answered_and_their_processes_killed(
    transport: str, tmp_path: Path, short_dir: Path
) -> None:
    marker = unique_sleep()
    daemon = start(transport, tmp_path, short_dir, marker, "--grace-ms", "300", cooldown=None, timeout_ms=60_000)
    try:
        assert daemon.ask({"id": "warm", "query": "database schema"})["status"] == "success"
        for i in range(10):
            daemon.send({"id": i, "query": HANGS})
        wait_for_sleepers(marker, 4)
        started = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        out = daemon.read_all(timeout=15)
        assert daemon.proc.wait(timeout=5) == 0
        assert time.monotonic() - started < 5
        answers = [orjson.loads(line) for line in out.splitlines()]
        assert sorted(a["id"] for a in answers) == list(range(10))
        assert {(a["status"], a["error_code"]) for a in answers} == {("error", "SHUTTING_DOWN")}
        assert sleepers(marker) == []
        daemon.wait_for_stderr("SIGTERM: stopping; 10 request(s) in flight get 0.3 s to finish")
        assert closed_backends(tmp_path) == ["cognee", "qmd"]
    finally:
        daemon.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("first", "second"), [("SIGTERM", "SIGINT"), ("SIGINT", "SIGINT")])
def test_a_second_signal_cancels_at_once_answers_every_request_and_kills_the_processes(
    transport: str, first: str, second: str, tmp_path: Path, short_dir: Path
) -> None:
    marker = unique_sleep()
    daemon = start(transport, tmp_path, short_dir, marker, "--grace-ms", "60000", cooldown=None, timeout_ms=60_000)
    try:
        for i in range(6):
            daemon.send({"id": i, "query": HANGS})
        wait_for_sleepers(marker, 4)
        daemon.proc.send_signal(getattr(signal, first))
        daemon.wait_for_stderr(f"{first}: stopping; 6 request(s) in flight get 60 s to finish")
        time.sleep(0.3)
        assert daemon.proc.poll() is None  # the grace period runs: 60 s
        started = time.monotonic()
        daemon.proc.send_signal(getattr(signal, second))
        out = daemon.read_all(timeout=15)
        assert daemon.proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        answers = [orjson.loads(line) for line in out.splitlines()]
        assert sorted(a["id"] for a in answers) == list(range(6))
        assert {(a["status"], a["error_code"]) for a in answers} == {("error", "SHUTTING_DOWN")}
        daemon.wait_for_stderr(f"{second} again: cancelling")
        assert sleepers(marker) == []
        assert closed_backends(tmp_path) == ["cognee", "qmd"]
    finally:
        daemon.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sighup_rereads_the_config_and_the_daemon_goes_on_serving(
    transport: str, tmp_path: Path, short_dir: Path
) -> None:
    marker = unique_sleep()
    daemon = start(transport, tmp_path, short_dir, marker, "--no-reload", cooldown=None)
    try:
        query = "database schema UUID primary keys, and soft deletes"  # 51 characters
        assert daemon.ask({"id": 1, "query": query})["status"] == "success"
        config = tmp_path / "state" / "router-config.json"
        data = orjson.loads(config.read_bytes())
        config.write_bytes(orjson.dumps({**data, "max_query_chars": 20}))
        assert daemon.ask({"id": 2, "query": query})["status"] == "success"  # --no-reload: not seen yet
        daemon.proc.send_signal(signal.SIGHUP)
        daemon.wait_for_stderr("SIGHUP: {'router-config.json': 'reloaded'}")
        assert daemon.ask({"id": 3, "query": query})["error_code"] == "QUERY_TOO_LONG"
        daemon.proc.send_signal(signal.SIGTERM)
        daemon.read_all(timeout=15)
        assert daemon.proc.wait(timeout=10) == 0
        if transport == "socket":
            assert not os.path.exists(short_dir / "r.sock")  # removed on the way out
    finally:
        daemon.close()
