"""The warm qmd engine (backends/qmd/qmd_engine.mjs + backends/qmd/engine.py) on the real qmd.

A real index is built with the real qmd CLI; queries go through the long-lived adapter (what
``serve`` and ``mcp`` use). Faults are real too: the engine is SIGKILLed, SIGSTOPped (hung), fed
a corrupt model file, or started through a *fake node* (a Python script, named as a fake) that
prints garbage. The vector-search tests with a real embedding model are in test_qmd_models.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BACKEND_ERROR, BACKEND_UNAVAILABLE, BackendRequest, BackendResponse
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.transports import CliTransport, EngineTransport

from ..support.client import wait_for_socket
from ..support.qmd import needs_qmd, warm_engine

pytestmark = [pytest.mark.slow, needs_qmd]

NOTES = {
    "notes/raft.md": "# Raft\n\nRaft is a consensus algorithm. Leader election uses randomized timeouts.\n",
    "notes/migration.md": "# Migration\n\nAlice owns the database migration; the deadline is April 15.\n",
    "notes/errors.md": "# API errors\n\nEvery handler wraps failures in an ApiError with a status code.\n",
}
ENV = {k: v for k, v in os.environ.items() if k != "CI"}  # qmd refuses model work under CI


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("qmdengine")
    source = base / "ws"
    for rel, text in NOTES.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    settings = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),
        "collections": ["kb"],
    }
    backend = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base / "s")
    )
    build_collection(backend.transport(), source, "kb", "**/*.md", base / "idx" / "index.lock")
    return {"base": base, "source": source, "settings": settings}


def warm(corpus: dict, tmp_path: Path, **overrides: object) -> QmdBackend:
    settings = _settings.validate(qmd_adapter.Settings, {**corpus["settings"], **overrides})
    context = BackendContext(state_dir=tmp_path / "state", environ=ENV, long_lived=True)
    return QmdBackend("qmd", settings, context)


def engine_pid(backend: QmdBackend) -> int:
    assert backend._engine is not None
    proc = backend._engine.engine._proc
    assert proc is not None
    return proc.pid


async def ask(backend: QmdBackend, query: str, mode: str = "search", timeout_s: float = 5.0) -> BackendResponse:
    return await asyncio.wait_for(backend.search(BackendRequest(query, mode=mode, timeout_s=timeout_s)), timeout_s)


# --------------------------------------------------------------------------- behaviour


def test_one_shot_cli_path_keeps_a_process_per_call(corpus: dict, tmp_path: Path) -> None:
    context = BackendContext(state_dir=tmp_path / "s", environ=ENV)  # not long-lived: the CLI
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, corpus["settings"]), context)
    assert isinstance(backend.answering(), CliTransport)
    off = warm(corpus, tmp_path, engine="off")
    assert isinstance(off.answering(), CliTransport)


def test_engine_starts_on_first_call_and_answers_like_the_cli(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        assert (await backend.runtime_facts())["engine"]["state"] == "not started"
        cli = QmdBackend("qmd", backend.settings, BackendContext(state_dir=tmp_path / "cli", environ=ENV))
        try:
            for query in ("leader election", "database migration deadline", "ApiError status", "nothing-matches-this"):
                got, want = await ask(backend, query), await ask(cli, query)
                assert got.status == want.status
                assert [(r.path, r.relevance, r.line) for r in got.results] == [
                    (r.path, r.relevance, r.line) for r in want.results
                ]
                assert [r.content for r in got.results] == [r.content for r in want.results]
            facts = await backend.runtime_facts()
            assert facts["engine"]["state"] == "running" and facts["engine"]["starts"] == 1
            assert facts["engine"]["served"] >= 4 and facts["engine"]["rss_mib"] > 10
        finally:
            await backend.aclose()
        assert not alive(facts["engine"]["pid"])

    asyncio.run(main())


def test_keyword_query_does_not_wait_for_an_engine_still_starting(corpus: dict, tmp_path: Path) -> None:
    """While the daemon's warm-up is starting the engine (here one that never gets ready), a
    keyword query is answered at once by a qmd process, as the CLI would answer it."""

    async def main() -> None:
        backend = warm(corpus, tmp_path)
        transport = backend.answering()
        assert isinstance(transport, EngineTransport)
        transport.engine.argv = [sys.executable, "-c", "import time; time.sleep(60)"]  # never says ready
        transport.cwd.mkdir(parents=True)
        starting = asyncio.ensure_future(transport.engine.request({"op": "health"}))  # as warm() does
        await asyncio.sleep(0.2)
        try:
            assert transport.engine.starting
            cli = QmdBackend("qmd", backend.settings, BackendContext(state_dir=tmp_path / "c", environ=ENV))
            got, want = await ask(backend, "leader election"), await ask(cli, "leader election")
            assert got.status == "success" and [r.path for r in got.results] == [r.path for r in want.results]
            assert transport.engine.starting and transport.engine.health == {}  # the engine never answered it
        finally:
            starting.cancel()
            await backend.aclose()

    asyncio.run(main())


def test_index_updated_by_qmd_update_is_seen_without_restart(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        try:
            assert (await ask(backend, "zeppelin hangar")).status == "empty"
            pid = engine_pid(backend)
            note = corpus["source"] / "notes" / "zeppelin.md"
            note.write_text("# Airships\n\nThe zeppelin hangar lease renews in May.\n")
            build_collection(
                backend.transport(), corpus["source"], "kb", "**/*.md", corpus["base"] / "idx" / "index.lock"
            )
            answer = await ask(backend, "zeppelin hangar")
            assert answer.status == "success" and answer.results[0].path == "notes/zeppelin.md"
            assert engine_pid(backend) == pid  # same engine, no restart
        finally:
            note.unlink()
            await backend.aclose()

    asyncio.run(main())


# --------------------------------------------------------------------------- faults


def test_engine_killed_between_queries_is_restarted_once(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        try:
            assert (await ask(backend, "leader election")).status == "success"
            first = engine_pid(backend)
            os.kill(first, signal.SIGKILL)
            await asyncio.sleep(0.3)
            answer = await ask(backend, "leader election")
            assert answer.status == "success", answer.error_message
            assert engine_pid(backend) != first
            assert (await backend.runtime_facts())["engine"]["starts"] == 2
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_engine_crashing_mid_query_fails_that_query_fast_and_recovers(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        try:
            assert (await ask(backend, "leader election")).status == "success"
            pid = engine_pid(backend)
            os.kill(pid, signal.SIGSTOP)  # the query below is in flight when the engine dies
            pending = asyncio.create_task(ask(backend, "database migration"))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            answer = await pending
            assert time.monotonic() - started < 2.0
            assert answer.status == "error" and answer.error_code == BACKEND_ERROR
            assert answer.error_message is not None
            assert "qmd engine stopped" in answer.error_message and "-9" in answer.error_message
            assert (await ask(backend, "database migration")).status == "success"
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_hung_engine_is_detected_killed_and_replaced(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        try:
            assert (await ask(backend, "leader election")).status == "success"
            hung = engine_pid(backend)
            os.kill(hung, signal.SIGSTOP)
            with pytest.raises(asyncio.TimeoutError):  # the router's timeout cancels the call
                await ask(backend, "leader election", timeout_s=0.5)
            started = time.monotonic()
            answer = await ask(backend, "leader election")
            assert answer.status == "success", answer.error_message
            assert time.monotonic() - started < 4.0  # a 2 s health check, then a fresh engine
            assert engine_pid(backend) != hung and wait_gone(hung)
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_two_crashes_in_a_row_leave_the_engine_down_until_the_backoff(corpus: dict, tmp_path: Path) -> None:
    fake = fake_node(tmp_path, "crash")

    async def main() -> None:
        backend = warm(corpus, tmp_path, node=str(fake))
        try:
            for _ in range(2):  # the first start and its one restart both die
                answer = await ask(backend, "leader election")
                assert answer.error_message is not None
                assert answer.error_code == BACKEND_ERROR and "exited with code 3" in answer.error_message
                assert answer.error_message is not None
                assert "boom" in answer.error_message  # the engine's stderr tail
            answer = await ask(backend, "leader election")
            assert answer.status == "error" and answer.error_code == BACKEND_UNAVAILABLE
            assert answer.error_message is not None
            assert "crashed twice in a row" in answer.error_message
            assert warm_engine(backend).starts == 2  # refused without starting a third
            warm_engine(backend).clock = lambda: time.monotonic() + 3600  # the backoff has passed
            await ask(backend, "leader election")
            assert warm_engine(backend).starts == 3
        finally:
            await backend.aclose()

    asyncio.run(main())


FAKE_NODE = """#!{python}
# A FAKE node (test double): reports a Node 22 version, then misbehaves instead of running the
# engine, as a broken engine or a wrong binary would.
import sys, time
if sys.argv[1:] == ["--version"]:
    print("v22.0.0")
    sys.exit(0)
mode = {mode!r}
if mode == "crash":
    sys.stderr.write("boom: cannot start\\n")
    sys.exit(3)
if mode == "garbage-after-ready":
    print('{{"event": "ready", "pid": 1}}', flush=True)
    sys.stdin.readline()
print("GARBAGE Segmentation fault? not JSON", flush=True)
time.sleep(30)
"""


def fake_node(tmp_path: Path, mode: str) -> Path:
    fake = tmp_path / f"fake-node-{mode}"
    fake.write_text(FAKE_NODE.format(python=sys.executable, mode=mode))
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("mode", ["garbage-at-start", "garbage-after-ready"])
def test_engine_printing_garbage_is_a_clear_error_and_killed(corpus: dict, tmp_path: Path, mode: str) -> None:
    fake = fake_node(tmp_path, mode)

    async def main() -> None:
        backend = warm(corpus, tmp_path, node=str(fake))
        try:
            answer = await ask(backend, "leader election")
            assert answer.status == "error" and answer.error_code == BACKEND_ERROR
            assert answer.error_message is not None
            assert "not a protocol line" in answer.error_message and "GARBAGE" in answer.error_message
            proc = warm_engine(backend)._proc
            assert proc is None or wait_gone(proc.pid)
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_index_without_embeddings_is_unavailable_with_the_fix(corpus: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = warm(corpus, tmp_path)
        models = Path(corpus["settings"]["cache_dir"]) / "qmd" / "models"
        models.mkdir(parents=True, exist_ok=True)
        stand_in = models / "embeddinggemma-300M-Q8_0.gguf"  # present, so the pre-check passes
        stand_in.write_bytes(b"GGUF")
        try:
            answer = await ask(backend, "leader election", mode="vsearch")
            assert answer.status == "error" and answer.error_code == BACKEND_UNAVAILABLE
            assert answer.error_message is not None
            assert "no embeddings yet" in answer.error_message and "qmd embed" in answer.error_message
            again = await ask(backend, "leader election")
            assert again.status == "success", again.error_message  # the engine is fine
        finally:
            stand_in.unlink()
            await backend.aclose()

    asyncio.run(main())


def test_unreadable_index_yml_is_a_clear_error_naming_it(corpus: dict, tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "index.yml").write_text("collections:\n  kb: [unclosed\n")

    async def main() -> None:
        backend = warm(corpus, tmp_path, config_dir=str(config_dir))
        try:
            answer = await ask(backend, "leader election")
            assert answer.status == "error" and answer.error_code == BACKEND_ERROR
            assert answer.error_message is not None
            assert "could not open qmd's index or config" in answer.error_message
            assert answer.error_message is not None
            assert "at Module" not in answer.error_message  # the reason, not a stack trace
        finally:
            await backend.aclose()

    asyncio.run(main())


# --------------------------------------------------------------------------- the daemon


def serve(tmp_path: Path, corpus: dict, name: str) -> tuple[subprocess.Popen, Path]:
    state = tmp_path / name
    state.mkdir()
    config = json.loads((Path(__file__).parents[2] / "router-config.json").read_text())
    config["backends"]["qmd"] = {"type": "qmd", **corpus["settings"]}
    (state / "router-config.json").write_text(json.dumps(config))
    (state / "backends.json").write_text(json.dumps({"backends": {"qmd": {"status": "ready"}}}))
    return start_serve(state), state


def start_serve(state: Path) -> subprocess.Popen[bytes]:
    """`memory-router serve` on stdin/stdout over ``state`` (its router-config.json inside)."""
    argv = ["-m", "memory_router", "serve", "--state-dir", str(state), "--config", str(state / "router-config.json")]
    return subprocess.Popen(
        [sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV
    )


def request(proc: subprocess.Popen[bytes], payload: dict) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(payload).encode() + b"\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def test_daemons_own_their_engines_and_take_them_down_when_they_exit(corpus: dict, tmp_path: Path) -> None:
    one, _ = serve(tmp_path, corpus, "one")
    two, _ = serve(tmp_path, corpus, "two")
    try:
        for proc in (one, two):
            qmd = request(proc, {"id": 0, "op": "stats"})["stats"]["runtime"]["qmd"]
            # no qmd call yet and no embedding model to warm up: no engine process at daemon start
            assert qmd["engine"]["state"] == "not started" and qmd["engine"]["pid"] is None
            assert qmd.get("warmup", {}).get("state") in (None, "skipped")
            answer = request(proc, {"id": 1, "query": "find the function leader election"})
            assert answer["attempts"][0]["backend"] == "qmd"
        pids = []
        for proc in (one, two):
            engine = request(proc, {"id": 2, "op": "stats"})["stats"]["runtime"]["qmd"]["engine"]
            assert engine["state"] == "running" and engine["rss_mib"] > 10
            pids.append(engine["pid"])
        assert pids[0] != pids[1]
        one.kill()  # SIGKILL: no cleanup code runs; the engine sees its stdin close
        one.wait(10)
        assert wait_gone(pids[0]), "the killed daemon's engine outlived it"
        assert alive(pids[1])
        assert request(two, {"id": 3, "query": "find the function leader election"})["status"] == "success"
        assert two.stdin is not None
        two.stdin.close()  # EOF: a clean exit stops the engine too
        two.wait(15)
        assert wait_gone(pids[1])
    finally:
        for proc in (one, two):
            if proc.poll() is None:
                proc.kill()


# --------------------------------------------------------------------------- http_url


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_url_uses_a_running_qmd_server_and_reports_rank_scores_as_weak(corpus: dict, tmp_path: Path) -> None:
    port = free_port()
    cli = QmdBackend(
        "qmd",
        _settings.validate(qmd_adapter.Settings, corpus["settings"]),
        BackendContext(state_dir=tmp_path / "s", environ=ENV),
    ).transport()
    cli.cwd.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        cli.argv("mcp", ["--http", "--port", str(port)]),
        cwd=cli.cwd,
        env=cli.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://user:s3cret@127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)

        async def main() -> None:
            backend = warm(corpus, tmp_path, http_url=url)
            answer = await ask(backend, "leader election")
            assert answer.status == "success" and answer.results[0].path == "notes/raft.md"
            # /query scores are positions (the top hit is always 1.0): never a usable relevance alone
            assert answer.results[0].qmd_score == 1.0
            assert all(r.relevance <= 0.35 for r in answer.results)
            assert backend._engine is None  # no engine started when a server answers
            facts = await backend.runtime_facts()
            assert facts == {"transport": "http", "url": f"http://127.0.0.1:{port}"}  # no password shown

        asyncio.run(main())
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(5)

    async def down() -> None:
        answer = await ask(warm(corpus, tmp_path, http_url=url), "leader election")
        assert answer.status == "error" and answer.error_code == BACKEND_UNAVAILABLE
        assert answer.error_message is not None
        assert "qmd mcp --http" in answer.error_message and "s3cret" not in answer.error_message

    asyncio.run(down())


def test_socket_daemon_shows_its_engine_in_status_and_backends_and_stops_it(corpus: dict, tmp_path: Path) -> None:

    proc, state = serve(tmp_path, corpus, "sock")  # a stdin daemon we do not use: just the files
    proc.kill()
    proc.wait(10)
    env = {**ENV, "MEMORY_ROUTER_STATE_DIR": str(state), "MEMORY_ROUTER_CONFIG": str(state / "router-config.json")}
    for key in ("MEMORY_ROUTER_DAEMON", "MEMORY_ROUTER_SOCKET"):
        env.pop(key, None)
    cli = [sys.executable, "-m", "memory_router"]
    daemon = subprocess.Popen(
        [*cli, "serve", "--socket"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_socket(state / "router.sock", daemon)
        status = subprocess.run([*cli, "daemon", "status"], env=env, capture_output=True, text=True, timeout=30)
        # no engine before the first qmd call: no embedding model here, so nothing to warm up
        assert "qmd: engine not started" in status.stdout and "engine running" not in status.stdout
        answer = subprocess.run(
            [*cli, "query", "find the function leader election"], env=env, capture_output=True, timeout=60
        )
        assert json.loads(answer.stdout)["routed_to"] == "qmd"
        as_json = subprocess.run([*cli, "daemon", "status", "--json"], env=env, capture_output=True, timeout=30)
        engine = json.loads(as_json.stdout)["stats"]["runtime"]["qmd"]["engine"]
        assert engine["state"] == "running" and engine["rss_mib"] > 10 and alive(engine["pid"])
        text = subprocess.run([*cli, "daemon", "status"], env=env, capture_output=True, text=True, timeout=30)
        assert f"qmd: engine running: pid {engine['pid']}, RSS " in text.stdout
        listing = subprocess.run([*cli, "backends"], env=env, capture_output=True, text=True, timeout=30)
        assert f"in the daemon: engine running: pid {engine['pid']}" in listing.stdout
        rows = json.loads(
            subprocess.run([*cli, "backends", "--json"], env=env, capture_output=True, timeout=30).stdout
        )["backends"]
        assert next(r for r in rows if r["backend"] == "qmd")["daemon"]["engine"]["pid"] == engine["pid"]
        stop = subprocess.run([*cli, "daemon", "stop"], env=env, capture_output=True, timeout=30)
        assert stop.returncode == 0, stop.stderr
        assert wait_gone(engine["pid"]), "daemon stop left the engine running"
    finally:
        if daemon.poll() is None:
            daemon.kill()
