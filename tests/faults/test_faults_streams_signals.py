"""Broken characters, slow readers, signals and a replaced index (issue 22, items 1-5), through the
real parts: the real qmd (``.tools``), the real CLI, ``serve`` and the thin client as subprocesses.
A FAKE program only where qmd cannot be made to misbehave on demand (an answer line that cannot be
read), named as a fake. Each test adds a row to the "Broken characters, slow readers, signals, a
replaced index" section of tests/FAULTS.md; docs/reliability.md (*Audited defects*) explains each
item, its fix and its test."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.config.installed import load_installed
from memory_router.config.router_config import load_config
from memory_router.routing.router import Router

from ..support.client import wait_for_socket
from ..support.faults import (
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
    run_cli,
    write_setup,
)
from ..support.qmd import needs_qmd, qmd_backend, warm_engine

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

ENV = {k: v for k, v in os.environ.items() if k != "CI"}
CLI_ENV = {**ENV, "MEMORY_ROUTER_DAEMON": "off"}
QUERY = "leader election"
REPLACEMENT = "\ufffd"


def row(key: str, item: int, fault: str, transport: str, outcome: str, measured: str = "") -> None:
    report("signals", key, item=item, fault=fault, transport=transport, outcome=outcome, measured=measured)


# --------------------------------------------------------------------------- the emoji index


def emoji_note() -> str:
    """A note whose snippet qmd cuts inside an emoji: qmd's snippet is the matching line and the
    one before it, cut at 297 UTF-16 units (300 minus "..."); the emoji's high surrogate is unit
    296 of it, so qmd prints a lone ``\\ud83d`` in its JSON."""
    title = "# Emoji\n"
    head = "Leader election uses randomized timeouts "
    return title + head + "a" * (296 - len(title) - len(head)) + "\U0001f600 and then the rest of the line\n"


@pytest.fixture(scope="module")
def emoji_index(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("round3-emoji")
    notes = base / "notes"
    notes.mkdir()
    (notes / "emoji.md").write_text(emoji_note())
    (notes / "raft.md").write_text("# Raft\n\nLeader election in raft uses terms.\n")
    (notes / "ledger.md").write_text("# Ledger\n\nThe billing ledger closes monthly.\n")
    settings = {"index_path": str(base / "index.sqlite"), "config_dir": str(base / "cfg"), "collections": ["kb"]}
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base))
    build_collection(backend.transport(), notes, "kb", "**/*.md", base / "lock")
    return {"settings": settings, "base": base, "notes": notes}


def qmd_setup(tmp_path: Path, settings: dict[str, Any], timeout_ms: int = 8000) -> tuple[Path, Path]:
    """State dir + config: the chain [qmd (search), good]; good answers at 0.9 when qmd fails."""
    good = command_backend("ok", env={"FAULT_MODE": ""})
    state, config = write_setup(
        tmp_path, {"qmd": {"type": "qmd", **settings}, "good": good}, ["qmd", "good"], timeout_ms=timeout_ms
    )
    cfg = orjson.loads(config.read_bytes())
    cfg["rules"][0]["chain"][0]["mode"] = "search"
    config.write_bytes(orjson.dumps(cfg))
    return state, config


def warm_router(tmp_path: Path, settings: dict[str, Any], timeout_ms: int = 8000) -> tuple[Router, Any]:
    state, config = qmd_setup(tmp_path, settings, timeout_ms)
    context = BackendContext(state_dir=state, environ=ENV, long_lived=True)
    return Router(load_config(config), context=context), load_installed(state / "backends.json")


def the_emoji_hit(envelope: dict[str, Any]) -> dict[str, Any]:
    hits = [r for r in envelope["results"] if r.get("path") == "emoji.md"]
    assert len(hits) == 1, envelope
    return hits[0]


# --------------------------------------------------------------------------- item 1


@needs_qmd
def test_1_a_split_emoji_in_qmds_json_is_replaced_not_a_lost_query_cli(
    emoji_index: dict[str, Any], tmp_path: Path
) -> None:
    state, config = qmd_setup(tmp_path, emoji_index["settings"])
    run = run_cli(["query", QUERY, "--state-dir", str(state), "--config", str(config)], env=CLI_ENV)
    assert run.returncode == 0, run.stderr
    envelope = run.envelope
    assert envelope["routed_to"] == "qmd" and envelope["attempts"][0]["status"] == "success", envelope["attempts"]
    assert {r["path"] for r in envelope["results"]} == {"emoji.md", "raft.md"}
    content = the_emoji_hit(envelope)["content"]
    assert content.endswith("a" + REPLACEMENT + "..."), content[-20:]
    row(
        "1-cli",
        1,
        "real qmd cuts a snippet inside an emoji: a lone \\ud83d in its --json",
        "cli",
        f"exit 0, routed_to qmd, {envelope['result_count']} hits; the broken character is U+FFFD",
        f"{run.wall_ms:.0f} ms wall",
    )


@needs_qmd
def test_1_a_split_emoji_keeps_the_warm_engine_up(emoji_index: dict[str, Any], tmp_path: Path) -> None:
    r, installed = warm_router(tmp_path, emoji_index["settings"])

    async def main() -> None:
        try:
            answers = [(await r.route(q, installed)).as_dict() for q in (QUERY, QUERY, "billing ledger")]
        finally:
            engine = warm_engine(r.backend("qmd"))
            starts = engine.starts
            await qmd_backend(r.backend("qmd")).aclose()
        assert [a["routed_to"] for a in answers] == ["qmd", "qmd", "qmd"], [a["attempts"] for a in answers]
        for answer in answers[:2]:
            assert the_emoji_hit(answer)["content"].endswith("a" + REPLACEMENT + "...")
        assert starts == 1  # never killed as a protocol violation, never restarted
        row(
            "1-engine",
            1,
            "real qmd engine answers with a lone \\ud83d in a snippet",
            "engine (serve/socket/MCP)",
            "3 queries answered by qmd, U+FFFD in the hit, the engine started once and never killed",
        )

    asyncio.run(main())


FAKE_ENGINE = """#!{python}
# A FAKE node (test double) standing in for the qmd engine: it speaks the engine's protocol
# (a ready line, then one answer line per request, {{"id": N, "ok": ...}}), but its answer to
# the first request is a line that cannot be read (cut short), something real qmd cannot be
# made to print on demand. Every later request gets a good answer with one hit.
import json, sys
if sys.argv[1:] == ["--version"]:
    print("v22.0.0")
    sys.exit(0)
print(json.dumps({{"event": "ready", "pid": 1}}), flush=True)
count = 0
for line in sys.stdin:
    req = json.loads(line)
    count += 1
    if count == 1:
        sys.stdout.write('{{"id":%d,"ok":true,"hits":[{{"file":"qmd://kb/x.md","snippet":"cut' % req["id"] + "\\n")
    else:
        hit = {{"file": "qmd://kb/raft.md", "score": 0.9, "line": 3, "snippet": "@@ -3,1 @@\\nLeader election"}}
        sys.stdout.write(json.dumps({{"id": req["id"], "ok": True, "hits": [hit], "warnings": []}}) + "\\n")
    sys.stdout.flush()
"""


@needs_qmd  # the FAKE engine stands in for qmd's engine, but the backend still resolves qmd.js
def test_1_an_unreadable_engine_line_fails_only_its_own_call(emoji_index: dict[str, Any], tmp_path: Path) -> None:
    fake = tmp_path / "fake-node-unreadable-line"
    fake.write_text(FAKE_ENGINE.format(python=sys.executable))
    fake.chmod(0o755)
    r, installed = warm_router(tmp_path, {**emoji_index["settings"], "node": str(fake)})

    async def main() -> None:
        try:
            first = (await r.route(QUERY, installed)).as_dict()
            second = (await r.route(QUERY, installed)).as_dict()
            engine = warm_engine(r.backend("qmd"))
            starts, pid = engine.starts, engine._proc.pid if engine._proc else None
        finally:
            await qmd_backend(r.backend("qmd")).aclose()
        attempt = first["attempts"][0]
        assert first["routed_to"] == "good" and attempt["error_code"] == "BACKEND_ERROR", first["attempts"]
        assert "could not be read" in attempt["error_message"], attempt["error_message"]
        assert second["routed_to"] == "qmd", second["attempts"]
        assert starts == 1 and pid is not None  # the same engine answered the next call
        row(
            "1-unreadable",
            1,
            "FAKE engine: one answer line cut short (cannot be read)",
            "engine (serve/socket/MCP)",
            "that call fails (BACKEND_ERROR, falls back); the next call is answered by the same engine",
            attempt["error_message"][:90],
        )

    asyncio.run(main())


# --------------------------------------------------------------------------- item 4


@needs_qmd
def test_4_a_replaced_index_restarts_the_engine_once_for_concurrent_queries(
    emoji_index: dict[str, Any], tmp_path: Path
) -> None:
    import shutil
    import time

    settings = {**emoji_index["settings"], "index_path": str(tmp_path / "index.sqlite")}
    shutil.copy(emoji_index["settings"]["index_path"], settings["index_path"])
    timeout_ms = 5000
    r, installed = warm_router(tmp_path, settings, timeout_ms=timeout_ms)

    async def main() -> None:
        backend = qmd_backend(r.backend("qmd"))
        try:
            assert (await r.route(QUERY, installed)).routed_to == "qmd"
            engine = warm_engine(backend)
            assert engine._proc is not None  # it answered
            old_pid = engine._proc.pid
            # A fresh index file in its place (new inode), as `qmd collection add` after deleting it.
            fresh = tmp_path / "index.sqlite.new"
            shutil.copy(settings["index_path"], fresh)
            os.replace(fresh, settings["index_path"])
            started = time.monotonic()
            answers = await asyncio.gather(*(r.route(q, installed) for q in [QUERY, "billing ledger"] * 3))
            wall_ms = (time.monotonic() - started) * 1000
            starts, new_pid = engine.starts, engine._proc.pid if engine._proc else None
        finally:
            await backend.aclose()
        routed = [a.routed_to for a in answers]
        assert routed == ["qmd"] * 6, [a.as_dict()["attempts"] for a in answers]
        assert starts == 2 and new_pid not in (None, old_pid)  # restarted exactly once
        slowest = max(a.as_dict()["attempts"][0]["duration_ms"] for a in answers)
        assert slowest < timeout_ms
        row(
            "4-replaced-index",
            4,
            "index file replaced (new inode), then 6 concurrent queries",
            "engine (serve/socket/MCP)",
            "engine restarted once; all 6 answered by qmd",
            f"slowest qmd call {slowest} ms, all 6 in {wall_ms:.0f} ms (timeout {timeout_ms} ms)",
        )

    asyncio.run(main())


# --------------------------------------------------------------------------- items 2 and 3: stdout

BIG_ENV = {f"ECHO_BIG_{i}": f"{i}" * 80_000 for i in range(4)}  # the echo backend returns each as a result


def big_setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A chain of one command backend whose answer makes a ~320 KB envelope (5x a pipe's 64 KiB)."""
    state, config = write_setup(tmp_path, {"big": command_backend("echo", env=BIG_ENV)}, ["big"], timeout_ms=8000)
    env = {**ENV, "OPENCLAW_STATE_DIR": str(state), "MEMORY_ROUTER_CONFIG": str(config)}
    for key in ("MEMORY_ROUTER_DAEMON", "MEMORY_ROUTER_SOCKET", "MEMORY_ROUTER_SPAWN"):
        env.pop(key, None)
    return state, config, env


def nonblocking_pipe() -> tuple[int, int]:
    """A pipe whose write end is O_NONBLOCK, as Node's child_process hands a child its stdout."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    return read_end, write_end


def read_slowly(fd: int, *, until_eof: bool, first_wait_s: float = 1.0, within_s: float = 30.0) -> bytes:
    """A slow reader: nothing for ``first_wait_s``, then 8 KiB every 10 ms."""
    import select
    import time

    time.sleep(first_wait_s)
    deadline = time.monotonic() + within_s
    data = b""
    while until_eof or b"\n" not in data:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 8192)
        if not chunk:
            break
        data += chunk
        time.sleep(0.01)
    return data


def assert_whole_big_envelope(data: bytes) -> dict[str, Any]:
    assert data.endswith(b"\n"), f"truncated: {len(data)} bytes, ends {data[-40:]!r}"
    envelope = orjson.loads(data)
    contents = {r["content"] for r in envelope["results"]}
    assert {f"ECHO_BIG_{i}={str(i) * 80_000}" for i in range(4)} <= contents
    return envelope


def test_2_query_writes_its_whole_answer_to_a_slow_nonblocking_reader(tmp_path: Path) -> None:
    import subprocess

    state, config, env = big_setup(tmp_path)
    read_end, write_end = nonblocking_pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "query", "auth", "--limit", "50", "--daemon", "off"],
        stdin=subprocess.DEVNULL,
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(write_end)
    try:
        data = read_slowly(read_end, until_eof=True)
        code = proc.wait(30)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    envelope = assert_whole_big_envelope(data)
    assert code == 0, stderr
    row(
        "2-cli",
        2,
        "stdout an O_NONBLOCK pipe, reader idle 1 s then slow",
        "cli (in-process)",
        f"exit 0, the whole envelope ({envelope['result_count']} results)",
        f"{len(data)} bytes",
    )


def test_2_the_thin_client_writes_its_whole_answer_to_a_slow_nonblocking_reader(tmp_path: Path) -> None:
    import subprocess

    state, config, env = big_setup(tmp_path)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "serve", "--socket", "--no-reload"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )
    read_end, write_end = nonblocking_pipe()
    try:
        wait_for_socket(state / "router.sock", daemon)
        proc = subprocess.Popen(
            [sys.executable, "-m", "memory_router", "query", "auth", "--limit", "50", "--daemon", "require"],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        os.close(write_end)
        write_end = -1
        data = read_slowly(read_end, until_eof=True)
        code = proc.wait(30)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        daemon.terminate()
        daemon.wait(30)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    envelope = assert_whole_big_envelope(data)
    assert code == 0, stderr
    assert "routing in-process" not in stderr  # the daemon answered
    row(
        "2-client",
        2,
        "stdout an O_NONBLOCK pipe, reader idle 1 s then slow",
        "thin client (daemon answers)",
        f"exit 0, the whole envelope ({envelope['result_count']} results)",
        f"{len(data)} bytes",
    )


def start_serve(env: dict[str, str], stdout: int, stderr: int, *extra: str) -> Any:
    import subprocess

    return subprocess.Popen(
        [sys.executable, "-m", "memory_router", "serve", "--no-reload", *extra],
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=stderr,
        env=env,
    )


def test_2_serve_waits_for_a_slow_nonblocking_reader(tmp_path: Path) -> None:
    import subprocess

    state, config, env = big_setup(tmp_path)
    read_end, write_end = nonblocking_pipe()
    proc = start_serve(env, write_end, subprocess.PIPE)
    os.close(write_end)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b'{"id": 1, "query": "auth", "limit": 50}\n{"id": 2, "query": "auth", "limit": 50}\n')
        proc.stdin.flush()
        first = read_slowly(read_end, until_eof=False)
        proc.stdin.close()
        rest = read_slowly(read_end, until_eof=True, first_wait_s=0.5)
        code = proc.wait(30)
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    lines = (first + rest).splitlines(keepends=True)
    assert len(lines) == 2, (len(first + rest), stderr)
    ids = sorted(assert_whole_big_envelope(line)["id"] for line in lines)
    assert ids == [1, 2] and code == 0, stderr
    row(
        "2-serve",
        2,
        "stdout an O_NONBLOCK pipe, reader idle 1 s then slow",
        "serve (stdin)",
        "both ~320 KB responses whole; EOF then exit 0",
        f"{len(first + rest)} bytes",
    )


def test_2_serve_gives_up_on_a_reader_that_takes_nothing_within_the_write_timeout(tmp_path: Path) -> None:
    import subprocess
    import time

    state, config, env = big_setup(tmp_path)
    read_end, write_end = nonblocking_pipe()
    proc = start_serve(env, write_end, subprocess.PIPE, "--write-timeout-ms", "1000")
    os.close(write_end)
    try:
        assert proc.stdin is not None
        proc.stdin.write(b'{"id": 1, "query": "auth", "limit": 50}\n')
        proc.stdin.flush()
        started = time.monotonic()
        code = proc.wait(30)  # stdin still open: it stops by itself
        waited = time.monotonic() - started
    finally:
        os.close(read_end)
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 1 and "took no data for 1 s" in stderr, stderr
    row(
        "2-serve-stalled",
        2,
        "stdout an O_NONBLOCK pipe nobody reads (--write-timeout-ms 1000)",
        "serve (stdin)",
        "exit 1 with 'cannot write to standard output: its reader took no data for 1 s'",
        f"exited {waited:.1f} s after the request",
    )


# --------------------------------------------------------------------------- item 3


def engine_pids(marker: str) -> list[int]:
    """Live qmd engine processes (node qmd_engine.mjs) whose command line names ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"qmd_engine.mjs" in cmdline and marker.encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def wait_for(predicate: Any, within_s: float) -> Any:
    import time

    deadline = time.monotonic() + within_s
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def serve_qmd(emoji_index: dict[str, Any], tmp_path: Path) -> tuple[list[str], str]:
    """serve's arguments for the chain [qmd (warm engine), good], and the marker of its engine."""
    import shutil

    index = tmp_path / "index.sqlite"
    shutil.copy(emoji_index["settings"]["index_path"], index)
    state, config = qmd_setup(tmp_path, {**emoji_index["settings"], "index_path": str(index)})
    return ["--state-dir", str(state), "--config", str(config)], str(index)


@needs_qmd
def test_3_serve_exits_after_a_failed_stdout_write_and_closes_its_engine(
    emoji_index: dict[str, Any], tmp_path: Path
) -> None:
    import subprocess
    import time

    args, marker = serve_qmd(emoji_index, tmp_path)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader of serve's stdout is gone
    proc = start_serve(ENV, write_end, subprocess.PIPE, *args)
    os.close(write_end)
    try:
        assert proc.stdin is not None
        proc.stdin.write(orjson.dumps({"id": 1, "query": QUERY}) + b"\n")
        proc.stdin.flush()
        engines = wait_for(lambda: engine_pids(marker), 20)
        assert engines, "the qmd engine never started"
        started = time.monotonic()
        code = proc.wait(20)  # stdin still open: the write error alone stops it
        waited = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 1 and "cannot write to standard output: its reader is gone" in stderr, stderr
    assert wait_for(lambda: not engine_pids(marker), 5)  # the engine was closed, not left running
    row(
        "3-stdout-gone",
        3,
        "serve's stdout reader gone (EPIPE) while its qmd engine runs",
        "serve (stdin)",
        "exit 1 without waiting for stdin EOF; 'cannot write to standard output' on stderr; engine closed",
        f"exited {waited:.1f} s after the engine started",
    )


@needs_qmd
def test_3_sigterm_is_honoured_with_stderr_broken_and_the_engine_is_closed(
    emoji_index: dict[str, Any], tmp_path: Path
) -> None:
    import select
    import signal
    import subprocess
    import time

    args, marker = serve_qmd(emoji_index, tmp_path)
    err_read, err_write = os.pipe()
    proc = start_serve(ENV, subprocess.PIPE, err_write, *args)
    os.close(err_write)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        ready = b""
        while b"ready" not in ready and select.select([err_read], [], [], 30)[0]:
            ready += os.read(err_read, 4096)
        assert b"ready" in ready
        os.close(err_read)  # now its stderr is broken too
        proc.stdin.write(orjson.dumps({"id": 1, "query": QUERY}) + b"\n")
        proc.stdin.flush()
        assert select.select([proc.stdout], [], [], 30)[0]
        answer = orjson.loads(proc.stdout.readline())
        assert answer["routed_to"] == "qmd", answer["attempts"]
        assert engine_pids(marker)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(20)
        waited = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0
    assert wait_for(lambda: not engine_pids(marker), 5)
    row(
        "3-sigterm-stderr-broken",
        3,
        "SIGTERM to serve whose stderr reader is gone, qmd engine running",
        "serve (stdin)",
        "exit 0 (a signal's stop); engine closed",
        f"exited {waited:.2f} s after SIGTERM",
    )


# --------------------------------------------------------------------------- item 5


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_5_a_signal_to_a_one_shot_query_kills_the_backends_process_group(tmp_path: Path, name: str, code: int) -> None:
    import signal
    import subprocess
    import time

    from ..support.faults import wait_no_leftovers

    piddir = tmp_path / "pids"
    piddir.mkdir()
    # The backend hangs (it ignores SIGTERM and has a grandchild) in its own session.
    state, config = write_setup(tmp_path, {"hang": command_backend("hang", piddir=piddir)}, ["hang"], timeout_ms=60_000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "query", "auth", "--state-dir", str(state), "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=CLI_ENV,
    )
    try:
        deadline = time.monotonic() + 30
        while not list(piddir.glob("*.pids")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert list(piddir.glob("*.pids")), "the backend never started"
        started = time.monotonic()
        proc.send_signal(getattr(signal, name))
        returncode = proc.wait(20)
        waited_ms = (time.monotonic() - started) * 1000
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
    left = wait_no_leftovers(piddir)
    assert returncode == code, err.decode()
    assert left == [], f"backend processes still running after {name}: {left}"
    assert f"{name}" in err.decode() and "Traceback" not in err.decode(), err.decode()
    row(
        f"5-{name}",
        5,
        f"{name} to a one-shot query while its backend hangs (own session, grandchild, ignores SIGTERM)",
        "cli (in-process)",
        f"exit {code}; the backend's whole process group killed, 0 left",
        f"exited {waited_ms:.0f} ms after the signal",
    )
