"""``memory-router serve`` as a subprocess: 10,000 mixed lines, exactly 10,000 answers with the
right ids and statuses; EOF drains; stdout carries only responses. (Signals, over both
transports: test_daemon_signals.py.)

Backends: the real Total Recall adapter over a small memory tree (answers) and over a missing
folder (BACKEND_UNAVAILABLE), and two FAKE adapters defined below because nothing real here
fails or hangs on demand: ``fail`` returns BACKEND_ERROR, ``hang`` starts a real ``sleep`` child
through backends/common/process.py (so cancellation must kill it) and never answers in time. The fakes
are registered by a small wrapper that then runs the real CLI entry point with ``serve``.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

FAKES = '''
"""FAKE backends for the daemon tests: one that fails, one that hangs in a real child process.
Each notes its closing (the daemon closes its backends when it stops) in the file ``closed``."""
from typing import Literal
from memory_router.backends import register_adapter
from memory_router.backends.common import process as _process
from memory_router.backends.base import BackendResponse, Probe
from memory_router.backends.common.settings import AdapterSettings

MODES = frozenset({"search", "vsearch", "query"})
ENV_VARS = frozenset()
demo_setup = None

class Settings(AdapterSettings):
    behaviour: Literal["fail", "hang"]
    sleep: str = "97.5"
    closed: str = ""

class Fake:
    def __init__(self, name, settings):
        self.name, self.settings = name, settings
    async def search(self, request):
        if self.settings.behaviour == "hang":
            await _process.run(["sleep", self.settings.sleep])
        return BackendResponse.failure(self.name, request.query, "BACKEND_ERROR", "fake backend: exit 1")
    async def aclose(self):
        if self.settings.closed:
            with open(self.settings.closed, "a") as f:
                f.write(self.name + "\\n")
    def probe(self):
        return Probe(True, "fake")

def create(name, settings, context):
    return Fake(name, settings)

register_adapter("testfake", __name__)
'''

MEMORY = """# Working memory

- The database schema uses UUID v7 primary keys and soft deletes on orders.
- slowpath hangpath failpath: the words our test rules route on, so Total Recall finds them.
"""

MAX_QUERY_CHARS = 200
MAX_LINE_BYTES = 4096


def rules() -> list[dict[str, Any]]:
    return [
        {
            "number": 1,
            "id": "fail_only",
            "strong": ["\\bfailpath\\b"],
            "chain": [{"backend": "cognee"}, {"backend": "lossless"}],
        },
        {"number": 2, "id": "hang_only", "strong": ["\\bhangpath\\b"], "chain": [{"backend": "qmd", "mode": "search"}]},
        {
            "number": 3,
            "id": "hang_then_recall",
            "strong": ["\\bslowpath\\b"],
            "chain": [{"backend": "qmd", "mode": "query"}, {"backend": "totalrecall"}],
        },
        {"number": 4, "id": "default", "chain": [{"backend": "totalrecall"}]},
    ]


def setup_state(tmp_path: Path, sleep: str, **config: Any) -> tuple[Path, Path]:
    (tmp_path / "CLAUDE.local.md").write_text(MEMORY)
    (tmp_path / "mr_test_fakes.py").write_text(FAKES)
    state = tmp_path / "state"
    state.mkdir()
    data = {
        "timeout_ms": 150,
        "max_query_chars": MAX_QUERY_CHARS,
        "rules": rules(),
        "cooldown": {"failures": 3, "seconds": 0.5},
        "backends": {
            "qmd": {"type": "testfake", "behaviour": "hang", "sleep": sleep, "closed": str(tmp_path / "closed")},
            "cognee": {"type": "testfake", "behaviour": "fail", "closed": str(tmp_path / "closed")},
            "lossless": {"type": "totalrecall", "root": str(tmp_path / "no-such-dir")},  # BACKEND_UNAVAILABLE
            "totalrecall": {"type": "totalrecall", "root": str(tmp_path)},
        },
        **config,
    }
    (state / "router-config.json").write_bytes(orjson.dumps(data))
    (state / "backends.json").write_bytes(
        orjson.dumps({"tier": "pro", "backends": ["qmd", "cognee", "lossless", "totalrecall"]})
    )
    return state, state / "router-config.json"


def serve_argv(tmp_path: Path, state: Path, config: Path, *extra: str) -> list[str]:
    wrapper = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import mr_test_fakes; "
        "from memory_router.cli.main import main; main(prog_name='memory-router')"
    )
    return [
        sys.executable,
        "-c",
        wrapper,
        "serve",
        "--state-dir",
        str(state),
        "--config",
        str(config),
        "--max-line-bytes",
        str(MAX_LINE_BYTES),
        *extra,
    ]


def unique_sleep() -> str:
    """A ``sleep`` duration no other test run uses (other checkouts may run this suite at the
    same time), so its processes can be told apart in /proc."""
    return f"{90 + secrets.randbelow(9)}.{secrets.randbelow(10**9):09d}1"


def sleepers(marker: str) -> list[int]:
    """PIDs of the fake hang backend's ``sleep`` children still alive."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline == b"sleep\0" + marker.encode() + b"\0":
                pids.append(int(entry))
    return pids


def build_lines(n: int) -> tuple[bytes, dict[int, tuple[str, str | None]], Counter[tuple[str, str | None]]]:  # noqa: C901 - a test generator: one branch per kind of line
    """n request lines; the expected (status, error_code) per id, and for id-less lines."""
    lines: list[bytes] = []
    expect: dict[int, tuple[str, str | None]] = {}
    anonymous: Counter[tuple[str, str | None]] = Counter()
    for i in range(n):
        kind = i % 10
        if kind == 0:
            lines.append(orjson.dumps({"id": i, "query": "database schema UUID primary keys"}))
            expect[i] = ("success", None)
        elif kind == 1:  # hang (timeout or cooldown), then Total Recall answers
            lines.append(orjson.dumps({"id": i, "query": "slowpath database schema UUID primary keys"}))
            expect[i] = ("success", None)
        elif kind == 2:  # fail + unavailable
            lines.append(orjson.dumps({"id": i, "query": "failpath"}))
            expect[i] = ("error", "ALL_BACKENDS_FAILED")
        elif kind == 3:  # hang only
            lines.append(orjson.dumps({"id": str(i), "query": "hangpath"}))
            expect[i] = ("error", "ALL_BACKENDS_FAILED")
        elif kind == 4:
            lines.append(b'{"id": %d, "query": "database sch' % i)
            expect[i] = ("error", "INVALID_JSON")
        elif kind == 5:
            lines.append(b'{"id": %d, "query": "caf\xe9 \xff"}' % i)
            expect[i] = ("error", "INVALID_UTF8")
        elif kind == 6:
            lines.append(orjson.dumps({"id": i, "query": " \t "}))
            expect[i] = ("error", "EMPTY_QUERY")
        elif kind == 7:
            lines.append(orjson.dumps({"id": i, "query": "x" * (MAX_QUERY_CHARS + 1)}))
            expect[i] = ("error", "QUERY_TOO_LONG")
        elif kind == 8:
            lines.append(orjson.dumps({"id": i, "query": "y " * MAX_LINE_BYTES}))
            expect[i] = ("error", "REQUEST_TOO_LARGE")
        else:
            variant = (i // 10) % 4
            if variant == 0:
                lines.append(b'"database schema UUID primary keys"')
                anonymous[("success", None)] += 1
            elif variant == 1:
                lines.append(b"")
                anonymous[("error", "INVALID_REQUEST")] += 1
            elif variant == 2:
                lines.append(orjson.dumps({"id": i, "query": "hangpath", "explain": True}))
                expect[i] = ("plan", None)
            else:
                lines.append(orjson.dumps({"id": i, "op": "stats"}))
                expect[i] = ("ok", None)
    return b"\n".join(lines) + b"\n", expect, anonymous


def test_ten_thousand_mixed_lines_get_ten_thousand_answers(tmp_path: Path) -> None:
    marker = unique_sleep()
    state, config = setup_state(tmp_path, marker)
    payload, expect, anonymous = build_lines(10_000)
    proc = subprocess.run(serve_argv(tmp_path, state, config), input=payload, capture_output=True, timeout=180)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out = proc.stdout.split(b"\n")
    assert out[-1] == b"" and len(out) - 1 == 10_000
    responses = [orjson.loads(line) for line in out[:-1]]

    seen_ids: Counter[int] = Counter()
    got_anonymous: Counter[tuple[str, str | None]] = Counter()
    for r in responses:
        assert {"id", "status", "error_code", "error_message"} <= set(r)
        if r["id"] is None:
            got_anonymous[(r["status"], r["error_code"])] += 1
            continue
        rid = int(r["id"])
        seen_ids[rid] += 1
        assert (r["status"], r["error_code"]) == expect[rid], (rid, r)
        if rid % 10 == 1:
            assert r["routed_to"] == "totalrecall"
            assert r["attempts"][0]["error_code"] in ("QUERY_TIMEOUT", "COOLDOWN")
        if rid % 10 == 3:
            assert r["attempts"][0]["error_code"] in ("QUERY_TIMEOUT", "COOLDOWN")
    assert set(seen_ids) == set(expect) and max(seen_ids.values()) == 1
    assert got_anonymous == anonymous
    # Cooldown did its job: most hang attempts were skipped, not waited for.
    hang_codes = Counter(
        r["attempts"][0]["error_code"] for r in responses if r["id"] is not None and int(r["id"]) % 10 in (1, 3)
    )
    assert hang_codes["COOLDOWN"] > hang_codes["QUERY_TIMEOUT"] > 0
    # Nothing but responses on stdout; the hang backend's children were all killed.
    assert b"ready" in proc.stderr
    assert sleepers(marker) == []


def test_ordered_keeps_input_order(tmp_path: Path) -> None:
    state, config = setup_state(tmp_path, unique_sleep())
    lines = []
    for i in range(60):
        query = "hangpath" if i % 3 == 0 else "database schema"  # slow ones first in each triple
        lines.append(orjson.dumps({"id": i, "query": query, "timeout_ms": 60}))
    proc = subprocess.run(
        serve_argv(tmp_path, state, config, "--ordered"), input=b"\n".join(lines), capture_output=True, timeout=60
    )
    assert proc.returncode == 0
    ids = [orjson.loads(line)["id"] for line in proc.stdout.splitlines()]
    assert ids == list(range(60))


class Daemon:
    """A running serve process with stdout read line by line and stderr collected."""

    def __init__(self, argv: list[str], marker: str = "") -> None:
        self.marker = marker
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr: list[str] = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def send(self, request: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(request) + b"\n")
        self.proc.stdin.flush()

    def ask(self, request: object) -> dict[str, Any]:
        self.send(request)
        assert self.proc.stdout is not None
        return orjson.loads(self.proc.stdout.readline())

    def wait_for_stderr(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.stderr):
                return
            time.sleep(0.02)
        raise AssertionError(f"{text!r} not on stderr: {''.join(self.stderr)}")

    def read_all(self, timeout: float) -> bytes:
        """Everything left on stdout, up to EOF (the daemon exiting)."""
        assert self.proc.stdout is not None
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.append(self.proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        assert not reader.is_alive(), "the daemon did not close stdout in time"
        return chunks[0]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for pid in sleepers(self.marker) if self.marker else ():  # only after a failed test
            os.kill(pid, signal.SIGKILL)


def test_eof_finishes_in_flight_requests_then_exits_zero(tmp_path: Path) -> None:
    state, config = setup_state(tmp_path, unique_sleep(), cooldown=None)
    lines = [orjson.dumps({"id": i, "query": "slowpath database schema UUID primary keys"}) for i in range(20)]
    started = time.monotonic()
    proc = subprocess.run(serve_argv(tmp_path, state, config), input=b"\n".join(lines), capture_output=True, timeout=60)
    assert proc.returncode == 0
    responses = [orjson.loads(line) for line in proc.stdout.splitlines()]
    # Each waited out qmd's 150 ms timeout (not cancelled at EOF), then Total Recall answered.
    assert sorted(r["id"] for r in responses) == list(range(20))
    assert all(r["status"] == "success" and r["attempts"][0]["error_code"] == "QUERY_TIMEOUT" for r in responses)
    assert time.monotonic() - started >= 0.15


def test_bad_config_refuses_to_start_with_the_reason(tmp_path: Path) -> None:
    state, config = setup_state(tmp_path, unique_sleep(), cooldown={"failures": "three"})
    proc = subprocess.run(serve_argv(tmp_path, state, config), input=b"", capture_output=True, timeout=30)
    assert proc.returncode == 2 and proc.stdout == b""
    assert "cooldown.failures" in proc.stderr.decode()


@pytest.mark.parametrize("flag", ["--help"])
def test_serve_is_a_registered_command(flag: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "memory_router", "serve", flag], capture_output=True, timeout=30)
    assert proc.returncode == 0 and b"--ordered" in proc.stdout and b"--concurrency" in proc.stdout
