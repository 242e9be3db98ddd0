"""``memory-router query`` answered by ``memory-router serve --socket``: the thin client, the
socket daemon, and the in-process fallback, all through real processes.

Whether a query was answered by the daemon is read from ``python -X importtime``: the client
path never imports the click application (``memory_router.cli.main``), the in-process path always does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_router.client import thin as client
from memory_router.demo import SPEC_EXAMPLES

from ..support.client import assert_same_answer, starter_workspace, wait_for_socket

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

PY = sys.executable


class Workspace:
    """The demo memory (Total Recall) plus two command backends that make the chains interesting:
    cognee always fails (exit 3: a FALLBACK line in router.log) and lossless answers weakly
    (relevance 0.2: a rejected attempt), so fallbacks, partials and log lines are compared too."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state, self.config = starter_workspace(root / "demo")
        config = json.loads(self.config.read_text())
        config["backends"]["cognee"] = {"type": "command", "argv": [PY, "-c", "import sys; sys.exit(3)"]}
        weak = (
            "import json, sys; print(json.dumps({'status': 'success', 'results': "
            "[{'content': 'from the conversation: ' + sys.argv[1], 'relevance': 0.2, "
            "'timestamp': '2026-01-01T00:00:00Z'}]}))"
        )
        config["backends"]["lossless"] = {"type": "command", "argv": [PY, "-c", weak, "{query}"]}
        self.config.write_text(json.dumps(config))
        backends = json.loads((self.state / "backends.json").read_text())
        backends["tier"] = "pro"
        for name in ("cognee", "lossless", "totalrecall"):
            backends["backends"][name] = {"status": "ready"}
        (self.state / "backends.json").write_text(json.dumps(backends))
        self.socket = self.state / "router.sock"
        self.env = {**os.environ, "MEMORY_ROUTER_STATE_DIR": str(self.state), "MEMORY_ROUTER_CONFIG": str(self.config)}
        for key in ("MEMORY_ROUTER_DAEMON", "MEMORY_ROUTER_SOCKET", "MEMORY_ROUTER_SPAWN", "MEMORY_ROUTER_IDLE_EXIT"):
            self.env.pop(key, None)
        self.cwd = root

    def serve_refused(self) -> subprocess.CompletedProcess[bytes]:
        """``serve --socket`` run to its end: for the cases where it must refuse to start."""
        return subprocess.run(
            [PY, "-m", "memory_router", "serve", "--socket"],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    def serve(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [PY, "-m", "memory_router", "serve", "--socket", *args],
            env={**self.env, **(env or {})},
            cwd=cwd or self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_for_socket(self.socket, proc)
        return proc

    def query(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, input: bytes | None = None
    ) -> Answer:
        proc = subprocess.run(
            [PY, "-X", "importtime", "-m", "memory_router", "query", *args],
            env={**self.env, **(env or {})},
            cwd=cwd or self.cwd,
            input=input,
            capture_output=True,
            timeout=120,
        )
        return Answer(proc)


class Answer:
    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout
        lines = proc.stderr.decode("utf-8", "replace").splitlines()
        self.imported = {m.group(1) for line in lines if (m := re.match(r"import time:.*\|\s*(\S+)$", line))}
        self.stderr = "\n".join(line for line in lines if not line.startswith("import time:"))

    @property
    def by_daemon(self) -> bool:
        # The in-process path (with or without click) always runs memory_router.cli.oneshot; the
        # client path never imports it.
        return "memory_router.cli.oneshot" not in self.imported

    @property
    def envelope(self) -> dict:
        return json.loads(self.stdout)


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError("the daemon did not exit on SIGTERM") from exc
    return proc.returncode, err.decode("utf-8", "replace")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


@pytest.fixture
def daemon(ws: Workspace) -> Iterator[subprocess.Popen[bytes]]:
    proc = ws.serve()
    yield proc
    stop(proc)


def log_lines(ws: Workspace) -> list[str]:
    path = ws.state / "router.log"
    text = path.read_text() if path.exists() else ""
    # Timestamps and measured durations differ between runs; the rest must not.
    return [
        re.sub(r"duration_ms=\d+", "duration_ms=N", line.split("] ", 1)[1])
        for line in text.splitlines()
        if " FALLBACK " in line or " TIMEOUT " in line
    ]


def test_the_15_spec_queries_give_identical_envelopes_through_the_daemon_and_in_process(
    ws: Workspace, daemon: subprocess.Popen[bytes]
) -> None:
    warm_answers = []
    for example in SPEC_EXAMPLES:
        before = len(log_lines(ws))
        warm = ws.query(example.query)
        warm_log = log_lines(ws)[before:]
        cold = ws.query(example.query, env={"MEMORY_ROUTER_DAEMON": "off"})
        cold_log = log_lines(ws)[before + len(warm_log) :]
        what = f"example {example.number}: {example.query!r}"
        assert warm.by_daemon, f"{what} was not answered by the daemon: {warm.stderr}"
        assert not cold.by_daemon
        assert_same_answer(warm.envelope, cold.envelope, what)
        # The bytes too, apart from the numbers that are timings.
        assert _mask_numbers(warm.stdout) == _mask_numbers(cold.stdout), what
        assert (warm.code, warm.stderr) == (cold.code, cold.stderr), what
        assert warm_log == cold_log, what  # the same router.log lines
        assert warm.envelope["rule"]["number"] == example.rule
        warm_answers.append((warm, warm_log))
    statuses = {w.envelope["status"] for w, _ in warm_answers}
    assert {"success", "partial"} <= statuses
    assert any(w.envelope["fallbacks_used"] > 0 for w, _ in warm_answers)
    assert any("backend=cognee" in line for _, lines in warm_answers for line in lines)  # failures were logged


def _mask_numbers(stdout: bytes) -> bytes:
    return re.sub(rb'"(\w*duration_ms|relevance|normalized_relevance)":[0-9.e-]+', rb'"\1":0', stdout)


def test_options_errors_stdin_and_pretty_match_in_process(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    cases: list[tuple[tuple[str, ...], bytes | None]] = [
        (("auth", "--limit", "2", "--timeout-ms", "3000"), None),
        (("find the function parseAuthToken", "--pretty"), None),
        (("",), None),  # EMPTY_QUERY, exit 2
        (("x" * 5000,), None),  # QUERY_TOO_LONG, exit 2
        (("-",), b"what did we decide about the database schema\n"),
        (("-",), "caf\xe9 \u2603 tokens".encode()),
        (("--", "--pretty"), None),  # a query that looks like a flag
    ]
    for args, stdin in cases:
        warm = ws.query(*args, input=stdin)
        cold = ws.query(*args, input=stdin, env={"MEMORY_ROUTER_DAEMON": "off"})
        assert warm.by_daemon, args
        assert_same_answer(warm.envelope, cold.envelope, repr(args))
        assert (warm.code, warm.stderr) == (cold.code, cold.stderr), args
        if args == ("find the function parseAuthToken", "--pretty"):
            assert warm.stdout.startswith(b"{\n  ")
    # Invalid UTF-8 on stdin is reported by the in-process path, exactly as without a daemon.
    bad = ws.query("-", input=b"\xff\xfe bad")
    assert bad.code == 2 and bad.envelope["error_code"] == "INVALID_UTF8"


def test_the_client_path_imports_no_click_pydantic_or_router(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    answer = ws.query("find the function parseAuthToken")
    assert answer.code == 0 and answer.envelope["status"] == "success"
    heavy = {
        "click",
        "pydantic",
        "regex",
        "orjson",
        "memory_router.cli.main",
        "memory_router.routing.router",
        "memory_router.config.router_config",
    }
    assert not heavy & answer.imported, heavy & answer.imported
    # --pretty needs orjson (to print exactly what the in-process path prints), nothing more.
    pretty = ws.query("auth", "--pretty")
    assert pretty.by_daemon and not {"click", "pydantic", "regex"} & pretty.imported


def test_socket_is_private_and_a_second_daemon_is_refused(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    mode = ws.socket.lstat().st_mode
    assert oct(mode & 0o777) == "0o600"
    second = ws.serve_refused()
    assert second.returncode == 2
    assert b"another memory-router daemon" in second.stderr and str(daemon.pid).encode() in second.stderr
    assert ws.query("auth").by_daemon  # the first one still serves


def test_stale_socket_is_cleaned_and_a_foreign_file_is_not_replaced(ws: Workspace) -> None:
    proc = ws.serve()
    proc.kill()  # SIGKILL: no clean-up, the socket file stays behind
    proc.wait()
    assert ws.socket.exists()
    stale = ws.query("auth")
    assert not stale.by_daemon and stale.code == 0 and stale.stderr == ""  # silently in-process
    again = ws.serve()
    assert ws.query("auth").by_daemon
    code, err = stop(again)
    assert code == 0 and not ws.socket.exists()
    assert "removed a stale socket" in err
    ws.socket.write_text("not a socket")
    refused = ws.serve_refused()
    assert refused.returncode == 2 and b"is not a socket" in refused.stderr
    assert ws.socket.read_text() == "not a socket"


def test_many_clients_at_once(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    queries = [ex.query for ex in SPEC_EXAMPLES] * 2
    results: dict[int, dict] = {}
    errors: list[BaseException] = []

    def one(i: int, text: str) -> None:
        try:
            with client.Connection(str(ws.socket)) as conn:
                conn.hello()
                results[i] = conn.request({"id": i, "query": text}, timeout=60)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i, q)) for i, q in enumerate(queries)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors
    assert sorted(results) == list(range(len(queries)))
    for i, text in enumerate(queries):
        assert results[i]["id"] == i and results[i]["query_echo"] == text


def test_hostile_clients_cannot_take_the_daemon_down(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    path = str(ws.socket)

    def raw(payload: bytes, *, read: bool = True, shutdown: bool = True) -> list[dict]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(path)
        s.sendall(payload)
        if shutdown:
            s.shutdown(socket.SHUT_WR)
        data = b""
        while read:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        s.close()
        return [json.loads(line) for line in data.splitlines()]

    lines = [
        b'{"id": 1, "query": "auth"',
        b"\xff\xfe{}",
        b"[]",
        b'{"id": 4}',
        b'{"id": 5, "query": "auth", "evil": 1}',
        b'"database"',
        b"",
        b'{"id": 8, "query": "' + b"a" * (2 << 20) + b'"}',
        b'{"id": 9, "query": "auth"}',
    ]
    answers = raw(b"\n".join(lines) + b"\n")
    assert len(answers) == len(lines)  # every line is answered
    by_id = {a.get("id"): a for a in answers}
    assert by_id[9]["status"] == "success"
    assert by_id[8]["error_code"] == "REQUEST_TOO_LARGE"
    assert by_id[5]["error_code"] == "INVALID_REQUEST"
    assert by_id[1]["error_code"] == "INVALID_JSON"  # the id is recovered from the broken line
    assert by_id[4]["error_code"] == "INVALID_REQUEST"
    anonymous = sorted(a["error_code"] or "answered" for a in answers if a.get("id") is None)
    assert anonymous == ["INVALID_REQUEST", "INVALID_REQUEST", "INVALID_UTF8", "answered"]
    # Clients that vanish mid-line or mid-query, and a burst of idle connections.
    raw(b'{"id": 1, "query": "auth"', read=False, shutdown=False)
    raw(b'{"id": 2, "query": "what did we decide"}\n', read=False, shutdown=False)
    idle = []
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        idle.append(s)
    try:
        assert ws.query("auth").by_daemon
    finally:
        for s in idle:
            s.close()
    assert daemon.poll() is None
    assert ws.query("find the function parseAuthToken").by_daemon


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_cannot_connect(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    pid = os.fork()
    if pid == 0:  # the child becomes 'nobody' and tries the socket
        code = 1
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(ws.socket))
            code = 0
        except PermissionError:
            code = 13
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 13
    assert ws.query("auth").by_daemon


def test_a_daemon_with_another_context_is_not_used(
    ws: Workspace, daemon: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = ws.query("auth", cwd=elsewhere)
    assert not moved.by_daemon and moved.code == 0
    other_env = ws.query("auth", env={"OPENCLAW_REPO_ROOT": str(elsewhere)})
    assert not other_env.by_daemon
    required = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "require", "OPENCLAW_REPO_ROOT": str(elsewhere)})
    assert required.code == 2 and required.envelope["error_code"] == "DAEMON_UNAVAILABLE"
    assert "env.OPENCLAW_REPO_ROOT" in required.stderr
    status = subprocess.run(
        [PY, "-m", "memory_router", "daemon", "status"],
        env={**ws.env, "OPENCLAW_REPO_ROOT": "x"},
        cwd=ws.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0 and "env.OPENCLAW_REPO_ROOT" in status.stdout
    # The daemon was sent each query with the client's context and routed none of them.
    stats = daemon_stats(ws)
    assert stats["backends"] == {} and stats["error_codes"] == {"CONTEXT_MISMATCH": 3}


def daemon_stats(ws: Workspace, path: Path | None = None) -> dict:
    with client.Connection(str(path or ws.socket)) as conn:
        conn.hello()
        return conn.request({"op": "stats"}, timeout=5.0)["stats"]


def listening(path: Path) -> socket.socket:
    """A Unix socket listening at ``path``, private to this user as the daemon's is."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(8)
    return sock


class PreContextDaemon:
    """A daemon from before the ``context`` request key, played by the real one behind a proxy on
    another socket that renames the key on the way in: the real daemon then answers such a query
    as an older one did (``INVALID_REQUEST``, unknown key), and everything else as it is."""

    def __init__(self, path: Path, upstream: Path) -> None:
        self.path, self.upstream = path, upstream
        self.sock = listening(path)
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(str(self.upstream))
            threading.Thread(target=self.pump, args=(conn, up, True), daemon=True).start()
            threading.Thread(target=self.pump, args=(up, conn, False), daemon=True).start()

    @staticmethod
    def pump(src: socket.socket, dst: socket.socket, rename: bool) -> None:
        with src, dst:
            while chunk := src.recv(65536):
                dst.sendall(chunk.replace(b'"context":', b'"context_":') if rename else chunk)

    def close(self) -> None:
        self.sock.close()


def test_a_daemon_older_than_the_context_key_still_answers(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    """Against a daemon that refuses the ``context`` key, the client compares the contexts from
    its hello and asks again without it: answered by the daemon, as in-process, without a warning."""
    old = PreContextDaemon(ws.root / "old.sock", ws.socket)
    try:
        answer = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "require", "MEMORY_ROUTER_SOCKET": str(old.path)})
    finally:
        old.close()
    cold = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "off"})
    assert answer.code == 0 and answer.by_daemon and answer.stderr == ""
    assert_same_answer(answer.envelope, cold.envelope)
    assert daemon_stats(ws)["error_codes"] == {"INVALID_REQUEST": 1}


def test_a_variable_the_daemons_config_adds_is_compared_too(ws: Workspace, tmp_path: Path) -> None:
    """A $NAME in a Lossless db_path is a variable the client cannot know before the hello: the
    daemon refuses the query's context for it, the client compares the contexts from the hello
    (with that name) and asks again when they agree; a shell with another value routes in-process."""
    config = json.loads(ws.config.read_text())
    config["backends"]["lcm_elsewhere"] = {"type": "lossless", "db_path": "$MR_TEST_LCM_DIR/lcm.db"}
    ws.config.write_text(json.dumps(config))
    proc = ws.serve(env={"MR_TEST_LCM_DIR": str(tmp_path)})
    try:
        same = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "require", "MR_TEST_LCM_DIR": str(tmp_path)})
        other = ws.query("auth", env={"MR_TEST_LCM_DIR": str(tmp_path / "other")})
    finally:
        stop(proc)
    assert same.code == 0 and same.by_daemon and same.stderr == ""
    assert other.code == 0 and not other.by_daemon


class FakeOldDaemon:
    """A socket server that answers like a daemon of another protocol version would."""

    def __init__(self, path: Path, reply: bytes) -> None:
        self.sock = listening(path)
        self.reply = reply
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(self.reply + b"\n")

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize(
    "reply",
    [
        b'{"op": "hello", "protocol": 0, "version": "0.0.9"}',
        b'{"id": null, "status": "error", "error_code": "INVALID_REQUEST", '
        b'"error_message": "unknown key \'protocol\'"}',
    ],
)
def test_protocol_mismatch_warns_and_routes_in_process(ws: Workspace, reply: bytes) -> None:
    fake = FakeOldDaemon(ws.socket, reply)
    try:
        answer = ws.query("auth")
        cold = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "off"})
        required = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "require"})
    finally:
        fake.close()
    assert not answer.by_daemon and answer.code == 0
    assert "warning:" in answer.stderr and "protocol" in answer.stderr
    assert_same_answer(answer.envelope, cold.envelope)
    assert required.code == 2 and required.envelope["error_code"] == "DAEMON_UNAVAILABLE"


def test_require_without_a_daemon_fails_clearly(ws: Workspace) -> None:
    answer = ws.query("auth", env={"MEMORY_ROUTER_DAEMON": "require"})
    assert answer.code == 2
    assert answer.envelope["status"] == "error" and answer.envelope["error_code"] == "DAEMON_UNAVAILABLE"
    assert str(ws.socket) in answer.stderr
    flag = ws.query("auth", "--daemon", "require")
    assert flag.code == 2 and flag.envelope["error_code"] == "DAEMON_UNAVAILABLE"


def test_spawn_starts_a_daemon_that_serves_the_next_query_and_exits_when_idle(ws: Workspace) -> None:
    env = {"MEMORY_ROUTER_IDLE_EXIT": "3"}
    first = ws.query("auth", "--spawn", env=env)
    assert first.code == 0 and not first.by_daemon  # this one ran in-process while the daemon starts
    client.wait_for_daemon(str(ws.socket), timeout=30).close()
    second = ws.query("auth", env=env)
    assert second.by_daemon
    assert_same_answer(second.envelope, first.envelope)
    deadline = time.monotonic() + 30
    while ws.socket.exists():  # idle exit removes the socket
        assert time.monotonic() < deadline, "the spawned daemon did not exit when idle"
        time.sleep(0.2)
    assert "exits after 3 s idle" in (ws.state / "daemon.log").read_text()


def test_daemon_status_and_stop(ws: Workspace) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "memory_router", "daemon", *args],
            env=ws.env,
            cwd=ws.cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )

    none = run("status")
    assert none.returncode == 1 and "not running" in none.stdout
    proc = ws.serve()
    status = run("status", "--json")
    assert status.returncode == 0
    info = json.loads(status.stdout)
    assert info["running"] and info["hello"]["pid"] == proc.pid and info["serves_this_shell"]
    stopped = run("stop")
    assert stopped.returncode == 0 and f"pid {proc.pid}" in stopped.stdout
    assert proc.wait(timeout=20) == 0
    assert not ws.socket.exists()
    assert run("stop").returncode == 0  # stopping nothing is fine
    started = run("start")
    assert started.returncode == 0 and "started" in started.stdout
    assert run("status").returncode == 0
    assert run("stop").returncode == 0


def test_sigterm_finishes_cleanly(ws: Workspace) -> None:
    proc = ws.serve()
    assert ws.query("auth").by_daemon
    code, err = stop(proc)
    assert code == 0
    assert not ws.socket.exists()


def test_without_a_daemon_auto_is_the_in_process_cli(ws: Workspace) -> None:
    # The console script looked for a daemon (and read stdin for it) before falling back: the
    # in-process path must still see the same query, and answer exactly as with the daemon off.
    for args, stdin in (
        (("-",), b"what did we decide about the database schema"),
        (("-",), b"\xff bad"),
        (("auth", "--pretty"), None),
        (("",), None),
    ):
        auto = ws.query(*args, input=stdin)
        off = ws.query(*args, input=stdin, env={"MEMORY_ROUTER_DAEMON": "off"})
        assert not auto.by_daemon
        assert_same_answer(auto.envelope, off.envelope, repr(args))
        assert (auto.code, auto.stderr) == (off.code, off.stderr)
    assert not ws.socket.exists()  # nothing was spawned without --spawn


def test_spawn_never_creates_a_missing_state_dir(ws: Workspace, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-state"
    answer = ws.query("auth", "--spawn", env={"MEMORY_ROUTER_STATE_DIR": str(missing)})
    assert answer.code == 2 and answer.envelope["error_code"] == "BACKENDS_JSON_MISSING"  # as without --spawn
    assert not missing.exists()
    start = subprocess.run(
        [PY, "-m", "memory_router", "daemon", "start", "--state-dir", str(missing)],
        env=ws.env,
        cwd=ws.cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert start.returncode == 2 and "does not exist" in start.stderr and not missing.exists()


def _daemon_requests(ws: Workspace) -> int:
    with client.Connection(str(ws.socket)) as conn:
        return conn.request({"op": "stats"}, timeout=5.0)["stats"]["requests"]


def test_arguments_the_fast_parser_declines_route_in_process(ws: Workspace, daemon: subprocess.Popen[bytes]) -> None:
    # click reads " 2" as 2; the console script's stdlib parser does not, so click parses the
    # arguments and the query routes in-process, without a second try at the daemon.
    before = _daemon_requests(ws)
    declined = ws.query("auth", "--limit", " 2")
    after = _daemon_requests(ws)
    assert declined.code == 0 and not declined.by_daemon and declined.envelope["status"] == "success"
    accepted = ws.query("auth", "--limit", "2")
    assert accepted.by_daemon
    assert_same_answer(accepted.envelope, declined.envelope, "--limit ' 2' in-process vs --limit 2 by the daemon")
    # The declined query never reached the daemon; the accepted one did (stats count themselves).
    assert after - before == _daemon_requests(ws) - after - 1
