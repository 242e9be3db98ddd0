"""Trust boundaries and long-run memory, through real CLI and daemon processes.

Each test plays another user (the tests run as root here, so "another user" is a file or folder
chowned to an unused uid) or a long-running user, and asserts what the victim sees:

* a state dir another user owns or can write is refused with a clear error; router.log is never
  written through a planted symlink; ``$``/backtick in a logged backend message cannot run in a
  shell that reads the log;
* the daemon's lock file is never written through a symlink, and a sticky shared dir is refused;
* ``daemon stop`` signals only a pid verified to be this user's daemon holding the lock;
* a daemon answers only shells whose adapter variables (``LCM_DATABASE_PATH``, ...) are equal;
* a secret in the environment appears in no output;
* a daemon that accepts and closes never crashes the client;
* oversized backend output does not grow the daemon's memory call after call.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ..support.client import wait_for_socket
from ..support.faults import (
    cli_base,
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    run_cli,
    run_daemon,
    write_setup,
)
from ..support.faults import report as _report

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

OTHER_UID = 54321  # no such account: stands for "another user"
PY = sys.executable


def report(key: str, item: str, attack: str, outcome: str) -> None:
    _report("trust", key, item=item, attack=attack, outcome=outcome)


def _setup(tmp_path: Path, *extra: tuple[str, dict]) -> tuple[Path, Path, list[str]]:
    backends = {"broken": command_backend("crash"), "good": command_backend("ok"), **dict(extra)}
    state, config = write_setup(tmp_path, backends, ["broken", "good"])
    state.chmod(0o700)
    return state, config, ["--state-dir", str(state), "--config", str(config)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_"))}
    return {**env, "MEMORY_ROUTER_DAEMON": "off", **extra}


# --------------------------------------------------------------------------- 1. state dir, router.log


@pytest.mark.parametrize("case", ["other_owner", "world_writable", "sticky_shared", "group_writable"])
def test_a_state_dir_others_control_is_refused(tmp_path: Path, case: str) -> None:
    state, config, args = _setup(tmp_path)
    if case == "other_owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another uid needs root")
        os.chown(state, OTHER_UID, OTHER_UID)
    else:
        state.chmod({"world_writable": 0o777, "sticky_shared": 0o1777, "group_writable": 0o770}[case])
    victim = tmp_path / "bashrc"
    victim.write_text("# the victim's shell start-up\n")
    (state / "router.log").symlink_to(victim)  # what the other user planted
    for command in (["query", "auth"], ["route", "auth"], ["backends"]):
        run = run_cli([*command, *args], env=_env())
        assert run.returncode == 2, (command, run.stderr)
        err = run.stderr.decode()
        assert str(state) in err and ("belongs to uid" in err or "chmod go-w" in err), err
    envelope = orjson.loads(run_cli(["query", "auth", *args], env=_env()).stdout)
    assert envelope["error_code"] == "STATE_DIR_UNSAFE" and envelope["results"] == []
    assert victim.read_text() == "# the victim's shell start-up\n"
    serve = run_cli(["serve", "--no-reload", *args], stdin=b'"auth"\n', env=_env())
    assert serve.returncode == 2 and str(state) in serve.stderr.decode()
    report(
        f"state-dir-{case}",
        "1",
        {
            "other_owner": "state dir owned by another uid, router.log -> victim's ~/.bashrc",
            "world_writable": "state dir mode 0777, router.log -> victim's file",
            "sticky_shared": "state dir mode 1777 (like /tmp), router.log -> victim's file",
            "group_writable": "state dir mode 0770",
        }[case],
        f"query/route/backends/serve exit 2, STATE_DIR_UNSAFE: "
        f"{err.strip()[len('memory-router: ') :].replace(str(state), '<state dir>')[:150]}...; "
        "victim's file untouched",
    )


def test_router_log_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    state, config, args = _setup(tmp_path)
    victim = tmp_path / "bashrc"
    victim.write_text("# victim\n")
    (state / "router.log").symlink_to(victim)  # planted before the dir became private
    run = run_cli(["query", "auth", *args], env=_env())
    assert run.returncode == 0 and orjson.loads(run.stdout)["status"] == "success"
    err = run.stderr.decode()
    assert err.count("warning:") == 1 and "is a symbolic link; not following it" in err
    assert victim.read_text() == "# victim\n"
    (state / "router.log").unlink()
    os.link(victim, state / "router.log")  # a hard link to the victim's file
    run = run_cli(["query", "auth", *args], env=_env())
    assert run.returncode == 0 and "hard links" in run.stderr.decode()
    assert victim.read_text() == "# victim\n"
    report(
        "router-log-symlink",
        "1",
        "router.log is a symlink (or a hard link) to the victim's file",
        "answered (exit 0); one warning (`router.log is a symbolic link; not following it`); file untouched",
    )


def test_a_backend_message_in_router_log_cannot_run_in_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = f'boom $(touch {marker}-dollar) `touch {marker}-tick` "$(touch {marker}-quoted)"'
    crash = [PY, "-c", f"import sys; sys.stderr.write({payload!r}); sys.exit(3)"]
    state, config, args = _setup(tmp_path, ("broken", {"type": "command", "argv": crash}))
    run = run_cli(["query", "auth", *args], env=_env())
    assert run.returncode == 0
    log = (state / "router.log").read_text()
    assert "FALLBACK" in log and "boom" in log and "$" not in log and "`" not in log
    # What the attack needs: a shell reading the log (as a planted ~/.bashrc would make it).
    subprocess.run(["sh", str(state / "router.log")], capture_output=True, timeout=30, cwd=tmp_path)
    subprocess.run(["bash", str(state / "router.log")], capture_output=True, timeout=30, cwd=tmp_path)
    assert not list(tmp_path.glob("pwned*"))
    report(
        "router-log-shell",
        "1",
        "a backend error message with `$(...)`, backticks and quotes, router.log run by sh and bash",
        "logged as \\x24(...) and \\x60...\\x60; nothing ran",
    )


# --------------------------------------------------------------------------- 2. the lock file


def _serve_socket(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*cli_base(), "serve", "--socket", "--no-reload", *args],
        env=env or _env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err.decode()


def test_the_lock_file_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    state, config, args = _setup(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("the victim's own file\n")
    (state / "router.sock.lock").symlink_to(victim)
    proc = _serve_socket(args)
    proc.wait(timeout=30)
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.returncode == 2 and "is a symbolic link; not following it" in err, err
    assert victim.read_text() == "the victim's own file\n"
    assert not (state / "router.sock").exists()
    report(
        "lock-symlink",
        "2",
        "<socket>.lock planted as a symlink to the victim's file (fs.protected_symlinks=0 here)",
        "serve --socket exits 2 (`... is a symbolic link; not following it; not serving`); file untouched",
    )


def test_daemon_log_is_never_written_through_a_symlink(tmp_path: Path) -> None:
    state, config, args = _setup(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("the victim's own file\n")
    (state / "daemon.log").symlink_to(victim)
    spawn = run_cli(["query", "auth", "--spawn", *args], env=_env(MEMORY_ROUTER_DAEMON="auto"))
    assert spawn.returncode == 0 and orjson.loads(spawn.stdout)["status"] == "success"
    assert b"Traceback" not in spawn.stderr and b"is a symbolic link; not following it" in spawn.stderr
    start = run_cli(["daemon", "start", *args], env=_env())
    assert start.returncode == 2 and b"is a symbolic link" in start.stderr, start.stderr
    assert victim.read_text() == "the victim's own file\n" and not (state / "router.sock").exists()
    report(
        "daemon-log-symlink",
        "2",
        "<state dir>/daemon.log planted as a symlink; `query --spawn`, `daemon start`",
        "query answered in-process with one warning, no daemon started; daemon start exit 2; file untouched",
    )


def test_a_sticky_shared_socket_dir_is_refused(tmp_path: Path) -> None:
    state, config, args = _setup(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    proc = _serve_socket(["--socket", str(shared / "r.sock"), *args])
    proc.wait(timeout=30)
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert proc.returncode == 2 and "writable by everyone (a shared directory)" in err, err
    assert not list(shared.iterdir())
    report(
        "sticky-socket-dir",
        "2",
        "serve --socket in a sticky world-writable dir (mode 1777)",
        "exit 2: `the socket's directory ... is writable by everyone (a shared directory)`; nothing created",
    )


# --------------------------------------------------------------------------- #17 item 6: daemon stop


@pytest.fixture
def victim_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _hold_lock(lock: Path, pid: int) -> subprocess.Popen[bytes]:
    """Another process holding ``lock`` with ``pid`` written in it (what an attacker can do)."""
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.pwrite(fd, (sys.argv[2] + '\\n').encode(), 0)\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen([PY, "-c", code, str(lock), str(pid)], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_daemon_stop_signals_only_a_verified_daemon(tmp_path: Path, victim_process: subprocess.Popen[bytes]) -> None:
    state, config, args = _setup(tmp_path)
    holder = _hold_lock(state / "router.sock.lock", victim_process.pid)
    try:
        run = run_cli(["daemon", "stop", "--timeout", "1", *args], env=_env())
        time.sleep(0.2)
        assert victim_process.poll() is None, "daemon stop killed an unrelated process"
        err = run.stderr.decode()
        assert run.returncode == 1 and f"not signalling pid {victim_process.pid}" in err, err
        assert "not a memory-router daemon" in err
    finally:
        holder.kill()
        holder.wait()
    # The same lock file in a sticky shared dir: refused before anything is read from it.
    state.chmod(0o1777)
    holder = _hold_lock(state / "router.sock.lock", victim_process.pid)
    try:
        shared = run_cli(["daemon", "stop", "--timeout", "1", *args], env=_env())
        assert shared.returncode == 2 and "writable by everyone" in shared.stderr.decode()
        assert victim_process.poll() is None
    finally:
        holder.kill()
        holder.wait()
    report(
        "daemon-stop-pid",
        "#17.6",
        "<socket>.lock held by another process, naming a victim's pid; no daemon answers",
        "daemon stop exit 1, `not signalling pid N: it is not a memory-router daemon`; victim alive. "
        "In a mode-1777 dir: exit 2, refused",
    )


def test_the_real_daemon_is_verified(tmp_path: Path) -> None:
    from memory_router.daemon.control import _verify_daemon

    state, config, args = _setup(tmp_path)
    proc = _serve_socket(args)
    try:
        hello = wait_for_socket(state / "router.sock", proc)
        assert _verify_daemon(hello["pid"], str(state / "router.sock")) is None
        (tmp_path / "other.sock.lock").write_text(f"{hello['pid']}\n")  # names it, but it holds another
        assert "does not hold" in (_verify_daemon(hello["pid"], str(tmp_path / "other.sock")) or "")
        assert "not a memory-router daemon" in (_verify_daemon(os.getpid(), str(state / "router.sock")) or "")
    finally:
        _stop(proc)


# --------------------------------------------------------------------------- 3, 4. context and secrets


def _lossless_db(path: Path, text: str) -> None:
    """A lossless-claw database (the real schema) holding one summary with ``text``."""
    from datetime import datetime, timezone

    from memory_router.backends.lossless.schema import LcmWriter, create_lcm_db

    conn = create_lcm_db(path)
    try:
        writer = LcmWriter(conn)
        conn.execute("BEGIN")
        conv = writer.conversation("sess-1", session_key="agent:main:main", title="t")
        now = datetime.now(timezone.utc)
        message = writer.message(conv, "user", text, at=now)
        writer.summary(conv, text, earliest=now, latest=now, message_ids=[message])
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_daemon_answers_only_shells_with_the_same_adapter_variables(tmp_path: Path) -> None:
    state, config, args = _setup(tmp_path)
    cfg = json.loads(config.read_text())
    cfg["backends"]["lossless"] = {"type": "lossless"}
    cfg["rules"][0]["chain"] = [{"backend": "lossless"}]
    config.write_text(json.dumps(cfg))
    (state / "backends.json").write_text(json.dumps({"backends": {"lossless": {"status": "ready"}}}))
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _lossless_db(a, "alpha conversation about deployment")
    _lossless_db(b, "beta conversation about deployment")
    env_a = _env(LCM_DATABASE_PATH=str(a), MEMORY_ROUTER_DAEMON="auto")
    proc = _serve_socket(args, env=env_a)
    try:
        wait_for_socket(state / "router.sock", proc)
        env_b = {**env_a, "LCM_DATABASE_PATH": str(b)}
        got_b = run_cli(["query", "deployment conversation", *args], env=env_b)
        got_a = run_cli(["query", "deployment conversation", *args], env=env_a)
    finally:
        _stop(proc)
    content_b = " ".join(r["content"] for r in orjson.loads(got_b.stdout)["results"])
    content_a = " ".join(r["content"] for r in orjson.loads(got_a.stdout)["results"])
    assert "beta" in content_b and "alpha" not in content_b
    assert "alpha" in content_a
    report(
        "context-env",
        "3",
        "daemon started with LCM_DATABASE_PATH=a.db; a shell with LCM_DATABASE_PATH=b.db queries",
        "the shell gets b.db's answer (in-process: context differs in env.LCM_DATABASE_PATH); a.db's shell, a's",
    )


def test_a_secret_appears_in_no_output(tmp_path: Path) -> None:
    secret = "sk-planted-7c1f3e9a0b2d4c6e"
    state, config, args = _setup(tmp_path)
    cfg = json.loads(config.read_text())
    with socket.socket() as s:  # a closed port: Cognee unreachable, so its error is logged
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg["backends"]["cognee"] = {"type": "cognee", "base_url": f"http://127.0.0.1:{port}"}
    cfg["rules"][0]["chain"] = [{"backend": "cognee"}, {"backend": "good"}]
    config.write_text(json.dumps(cfg))
    (state / "backends.json").write_text(
        json.dumps({"backends": {"cognee": {"status": "ready"}, "good": {"status": "ready"}}})
    )
    env = _env(COGNEE_API_KEY=secret, COGNEE_PASSWORD=secret + "-pw", MEMORY_ROUTER_DAEMON="auto")
    outputs: list[bytes] = []
    log_fd = os.open(state / "daemon.log", os.O_WRONLY | os.O_CREAT, 0o600)
    proc = subprocess.Popen(
        [*cli_base(), "serve", "--socket", "--no-reload", *args], env=env, stdin=subprocess.DEVNULL, stderr=log_fd
    )
    os.close(log_fd)
    try:
        wait_for_socket(state / "router.sock", proc)
        for command in (
            ["daemon", "status", "--json"],
            ["daemon", "status"],
            ["backends", "--json"],
            ["backends"],
            ["query", "auth"],
            ["route", "auth", "--json"],
        ):
            run = run_cli([*command, *args], env=env)
            outputs += [run.stdout, run.stderr]
        assert orjson.loads(outputs[0])["serves_this_shell"] is True
        offline = run_cli(["query", "auth", *args], env={**env, "MEMORY_ROUTER_DAEMON": "off"})
        outputs += [offline.stdout, offline.stderr]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    outputs += [(state / "router.log").read_bytes(), (state / "daemon.log").read_bytes()]
    assert b"FALLBACK" in outputs[-2] and b"cognee" in outputs[-2]
    leaks = [i for i, out in enumerate(outputs) if secret.encode() in out]
    assert not leaks, [outputs[i][:300] for i in leaks]
    report(
        "secret",
        "4",
        "COGNEE_API_KEY and COGNEE_PASSWORD planted; daemon status (--json), backends (--json), query, route, "
        "router.log, daemon.log",
        "the secret appears nowhere; the context carries salted hashes (the status still says it serves the shell)",
    )


# --------------------------------------------------------------------------- 5. the thin client


class _FakeDaemon:
    """A fake of the daemon at its connection cap (the real one needs 256 clients to get there):
    it accepts each connection and closes it, either at once or after the FORBIDDEN line the
    real daemon writes."""

    def __init__(self, path: Path, *, forbidden: bool) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.forbidden = forbidden
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.forbidden:
                line = {"id": None, "status": "error", "error_code": "FORBIDDEN", "error_message": "too many clients"}
                conn.sendall(json.dumps(line).encode() + b"\n")
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()  # linger 0: a reset, as when the peer is gone before the client writes

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("forbidden", [False, True], ids=["closes", "forbidden-then-closes"])
def test_a_daemon_that_accepts_and_closes_never_crashes_the_client(tmp_path: Path, forbidden: bool) -> None:
    state, config, args = _setup(tmp_path)
    fake = _FakeDaemon(state / "router.sock", forbidden=forbidden)
    try:
        auto = run_cli(["query", "auth", *args], env=_env(MEMORY_ROUTER_DAEMON="auto"))
        need = run_cli(["query", "auth", *args], env=_env(MEMORY_ROUTER_DAEMON="require"))
    finally:
        fake.close()
    assert fake.accepted >= 2
    direct = run_cli(["query", "auth", *args], env=_env())
    for run in (auto, need):
        assert b"Traceback" not in run.stderr, run.stderr.decode()
    assert auto.returncode == 0 and orjson.loads(auto.stdout)["routed_to"] == orjson.loads(direct.stdout)["routed_to"]
    warnings = [ln for ln in auto.stderr.decode().splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "routing in-process" in warnings[0], auto.stderr.decode()
    assert need.returncode == 2 and orjson.loads(need.stdout)["error_code"] == "DAEMON_UNAVAILABLE"
    report(
        f"client-{'forbidden' if forbidden else 'closes'}",
        "5",
        "the daemon accepts and closes"
        + (" after a FORBIDDEN line (its connection cap)" if forbidden else " at once (reset)"),
        f"auto: answered in-process (exit 0), one warning: "
        f"{warnings[0][len('memory-router: ') :].replace(str(state), '<state dir>')[:120]}; "
        "require: DAEMON_UNAVAILABLE, exit 2",
    )


# --------------------------------------------------------------------------- 6. memory


def test_oversized_backend_output_does_not_grow_the_daemon(tmp_path: Path) -> None:
    calls = 100
    state, config = write_setup(
        tmp_path, {"huge": command_backend("huge"), "good": command_backend("ok")}, ["huge", "good"], cooldown=None
    )
    run = run_daemon(
        ["--state-dir", str(state), "--config", str(config)],
        [{"id": i, "query": "auth"} for i in range(calls)],
        timeout=60,
    )
    assert run.exit_code == 0
    capped = [r for r in run.responses if "more than 8388608 bytes" in (r["attempts"][0].get("error_message") or "")]
    assert len(capped) == calls and all(r["status"] == "success" for r in run.responses)
    after_one, after_all = run.peak_rss_kb[0] / 1024, run.peak_rss_kb[-1] / 1024
    assert after_all - after_one <= 4, [round(p / 1024) for p in run.peak_rss_kb]
    report(
        "memory",
        "6",
        f"{calls} backend calls in a row, each hitting the 8 MiB output cap (serve on stdin, cooldown off)",
        f"daemon peak RSS {after_one:.0f} MiB after 1 call, {after_all:.0f} MiB after {calls} "
        "(was +8 MiB per call: an exception cycle kept each call's buffer)",
    )


def test_lock_holder_reads_no_symlink(tmp_path: Path) -> None:
    from memory_router.daemon.control import _lock_holder

    target = tmp_path / "elsewhere.lock"
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"4242\n")
        (tmp_path / "r.sock.lock").symlink_to(target)
        # flock is per open file: a second open of the target would see this lock held and
        # report pid 4242 (as the old code did, following the symlink).
        assert _lock_holder(str(tmp_path / "r.sock")) is None
    finally:
        os.close(fd)
