"""Names that are not UTF-8, a distrusted config cache, a client that hangs up and a backend that
ignores ``--limit`` (issue 22, items 6-10), through the real CLI and daemon processes:
non-UTF-8 bytes in names, a config cache whose body is bad or huge, a socket client that
disconnects mid-request, and ``--limit`` against a backend that ignores it. (Item 9, the Cognee
path that missed a hop, runs against the real Cognee server in
tests/adapters/test_cognee_relations.py.) Each test adds a row to the "Bounded work" section of
tests/FAULTS.md; docs/reliability.md (*Audited defects*) describes each item."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from memory_router.core.envelope import Envelope

from ..support.client import wait_for_socket
from ..support.faults import (
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
    run_cli,
    run_daemon,
    write_setup,
)

if TYPE_CHECKING:
    from ..support.cognee.cognee_server import CogneeServer

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


def row(key: str, case: str, transport: str, outcome: str, measured: str = "") -> None:
    report("bounded", key, case=case, transport=transport, outcome=outcome, measured=measured)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_"))}
    return {**env, "MEMORY_ROUTER_DAEMON": "off", **extra}


# --------------------------------------------------------------------------- 10. --limit


def test_limit_caps_the_results_of_a_backend_that_ignores_it(tmp_path: Path) -> None:
    state, config = write_setup(tmp_path, {"many": command_backend("many", "--count", "30")}, ["many"])
    args = ["--state-dir", str(state), "--config", str(config)]
    cli = run_cli(["query", "auth", "--limit", "1", *args], env=_env())
    assert cli.returncode == 0, cli.stderr
    envelope = cli.envelope
    Envelope.from_dict(envelope)
    # The backend printed 30 hits, its best one last: the router keeps that one only.
    assert [r["content"] for r in envelope["results"]] == ["hit 30 for auth"]
    assert envelope["result_count"] == 1 and envelope["attempts"][0]["result_count"] == 1
    assert envelope["normalized_relevance"] == envelope["results"][0]["relevance"] == 0.9

    daemon = run_daemon(args, [{"id": 1, "query": "auth", "limit": 3}, {"id": 2, "query": "auth"}])
    capped, default = daemon.responses
    assert [r["relevance"] for r in capped["results"]] == [0.9, 0.8867, 0.8733]
    assert capped["result_count"] == 3 and capped["normalized_relevance"] == 0.9
    # No --limit: the config's result_limit (10 here, the default) caps it.
    assert default["result_count"] == len(default["results"]) == 10
    row(
        "22.10-limit",
        "#22.10: `query auth --limit 1` answered by a command backend that prints 30 results (its best last)",
        "cli, daemon",
        "1 result, the best one (result_count 1, normalized_relevance 0.9); the daemon's `limit: 3` gives the "
        "3 best; no limit: result_limit (10)",
        "was: 30 results, result_count 30",
    )


# --------------------------------------------------------------------------- 6. non-UTF-8 names

BAD = b"bad\xffname.md"
BAD_SHOWN = "memory/registers/bad\\xffname.md"  # the byte escaped, as Python's backslashreplace


def _totalrecall_setup(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A Total Recall tree holding a good note and one whose file name is not UTF-8."""
    registers = tmp_path / "proj" / "memory" / "registers"
    registers.mkdir(parents=True)
    (registers / "good.md").write_text("# auth\n\nauth token rotation notes\n")
    with open(os.path.join(os.fsencode(registers), BAD), "w") as f:
        f.write("# auth\n\nauth middleware notes\n")
    backends = {"totalrecall": {"type": "totalrecall", "root": str(tmp_path / "proj")}}
    state, config = write_setup(tmp_path, backends, ["totalrecall"])
    state.chmod(0o700)
    return state, config, ["--state-dir", str(state), "--config", str(config)]


def _paths(envelope: dict) -> list[str]:
    return sorted(r["path"] for r in envelope["results"])


def test_a_file_name_that_is_not_utf8_is_reported_escaped(tmp_path: Path) -> None:
    state, config, args = _totalrecall_setup(tmp_path)
    cli = run_cli(["query", "auth", *args], env=_env())
    assert cli.returncode == 0 and b"Traceback" not in cli.stderr, cli.stderr
    Envelope.from_dict(cli.envelope)
    assert _paths(cli.envelope) == [BAD_SHOWN, "memory/registers/good.md"]  # the other hit is not lost

    daemon = run_daemon(args, [{"id": 7, "query": "auth"}])
    (answer,) = daemon.responses
    assert (answer["id"], answer["status"], _paths(answer)) == (7, "success", [BAD_SHOWN, "memory/registers/good.md"])
    assert daemon.exit_code == 0 and b"internal error" not in daemon.stderr
    row(
        "22.6-name",
        "#22.6: a Total Recall memory file named `bad\\xffname.md` (not UTF-8) next to a good one",
        "cli, daemon",
        f"exit 0, both hits; the path reads `{BAD_SHOWN}`; `serve` echoes the id",
        "was: traceback (surrogates not allowed), exit 1, no output; serve: INTERNAL_ERROR with id null",
    )


def test_a_name_that_is_not_utf8_through_the_socket_daemon_and_the_thin_client(tmp_path: Path) -> None:
    import signal

    state, config, args = _totalrecall_setup(tmp_path)
    env = _env(MEMORY_ROUTER_DAEMON="require")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "serve", "--socket", "--no-reload", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_socket(state / "router.sock", proc)
        run = run_cli(["query", "auth", *args], env=env)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr
    assert _paths(run.envelope) == [BAD_SHOWN, "memory/registers/good.md"]
    assert b"internal error" not in err
    row(
        "22.6-client",
        "#22.6: the same tree queried through `serve --socket` by the thin client (`--daemon require`)",
        "socket daemon",
        "exit 0, both hits from the daemon (no in-process retry)",
        "was: INTERNAL_ERROR, then the in-process retry crashed",
    )


@pytest.mark.parametrize("flag", ["--config", "--backends-json", "--state-dir"])
def test_a_flag_naming_a_path_that_is_not_utf8_gets_an_envelope(tmp_path: Path, flag: str) -> None:
    state, config = write_setup(tmp_path, {"echo": command_backend("echo")}, ["echo"])
    state.chmod(0o700)
    odd = os.fsdecode(os.fsencode(tmp_path) + b"/odd\xffname")  # does not exist
    given = {"--state-dir": str(state), "--config": str(config), flag: odd}
    args = [a for pair in given.items() for a in pair]
    run = run_cli(["query", "auth", *args], env=_env())
    assert b"Traceback" not in run.stderr, run.stderr
    envelope = run.envelope
    Envelope.from_dict(envelope)
    code = {"--config": "CONFIG_INVALID", "--backends-json": "BACKENDS_JSON_MISSING", "--state-dir": None}[flag]
    if code is None:  # a state dir that does not exist: no backends.json there
        code = "BACKENDS_JSON_MISSING"
    assert (run.returncode, envelope["status"], envelope["error_code"]) == (2, "error", code)
    assert "odd\\xffname" in envelope["error_message"]
    outcome = f"exit 2, {code} envelope naming `.../odd\\xffname`"
    if flag == "--state-dir":  # the thin client's own envelope (no daemon at that path) too
        client = run_cli(["query", "auth", *args], env=_env(MEMORY_ROUTER_DAEMON="require"))
        refused = client.envelope  # valid UTF-8 JSON (was: the surrogate written as CESU bytes)
        assert (client.returncode, refused["error_code"]) == (2, "DAEMON_UNAVAILABLE")
        assert "odd\\xffname" in refused["error_message"]
        outcome += "; `--daemon require`: DAEMON_UNAVAILABLE, valid UTF-8"
    row(
        f"22.6-flag-{flag}",
        f"#22.6: `query auth {flag} <tmp>/odd\\xffname` (the path is not UTF-8 and does not exist)",
        "cli",
        outcome,
        "was: traceback (surrogates not allowed), exit 1, no output",
    )


# --------------------------------------------------------------------------- 8. a client that goes away


def _socket_daemon(args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_router", "serve", "--socket", "--no-reload", *args],
        env=_env(),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    sock = Path(args[args.index("--state-dir") + 1]) / "router.sock"
    wait_for_socket(sock, proc)
    return proc, sock


def _started(piddir: Path, count: int, within_s: float = 10.0) -> list[int]:
    """The pgids of the first ``count`` backend processes that recorded themselves in ``piddir``."""
    import time

    deadline = time.monotonic() + within_s
    while len(records := sorted(piddir.glob("*.pids"))) < count:
        assert time.monotonic() < deadline, "the backend never started"
        time.sleep(0.01)
    return [int(r.read_text().split()[1]) for r in records]


def test_a_socket_client_that_disconnects_has_its_backend_killed(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    from ..support.faults import group_members

    piddir = tmp_path / "pids"
    piddir.mkdir()
    # A backend that takes 3 s (its timeout is 8 s), recording its process group.
    slow = command_backend("slow", "--delay-ms", "3000", piddir=piddir)
    state, config = write_setup(tmp_path, {"slow": slow}, ["slow"], timeout_ms=8000)
    state.chmod(0o700)
    proc, path = _socket_daemon(["--state-dir", str(state), "--config", str(config)])
    try:
        # 1. The client sends its request and is killed mid-request (its socket closes).
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gone.connect(str(path))
        gone.sendall(b'{"id": 1, "query": "auth"}\n')
        (pgid,) = _started(piddir, 1)
        closed = time.perf_counter()
        gone.close()
        while [m for m in group_members(pgid) if m[1] != "Z"] and time.perf_counter() - closed < 5:
            time.sleep(0.01)
        killed_ms = (time.perf_counter() - closed) * 1000
        assert not [m for m in group_members(pgid) if m[1] != "Z"], "the backend ran on"
        assert killed_ms < 1000, killed_ms

        # 2. A client that only half-closes (shutdown SHUT_WR: "no more requests") still gets its answer.
        polite = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        polite.connect(str(path))
        polite.sendall(b'{"id": 2, "query": "auth"}\n')
        polite.shutdown(socket.SHUT_WR)
        polite.settimeout(20)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = polite.recv(65536)
            assert chunk, "no answer"
            answer += chunk
        polite.close()
        response = orjson.loads(answer)
        assert (response["id"], response["status"], response["routed_to"]) == (2, "success", "slow")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    row(
        "22.8-disconnect",
        "#22.8: a `serve --socket` client sends a query (its backend takes 3 s, timeout 8 s) and disconnects",
        "socket daemon",
        "the request is cancelled and the backend's process group killed; a client that only half-closes "
        "(SHUT_WR) still gets its answer",
        f"group gone {killed_ms:.0f} ms after the disconnect (was: ran on to its end, 4.6 s observed)",
    )


# --------------------------------------------------------------------------- 7. the config cache


def _cache_setup(tmp_path: Path, **config: Any) -> tuple[Path, Path, list[str]]:
    """Rule 1 (strong signal `auth`) -> backend `rule1`; the default rule -> backend `default`."""
    backends = {"rule1": command_backend("ok"), "default": command_backend("ok", "--relevance", "0.5")}
    state, path = write_setup(tmp_path, backends, ["default"], **config)
    data = orjson.loads(path.read_bytes())
    data["rules"].insert(0, {"number": 1, "id": "auth", "strong": ["\\bauth\\b"], "chain": [{"backend": "rule1"}]})
    path.write_bytes(orjson.dumps(data))
    state.chmod(0o700)
    return state, path, ["--state-dir", str(state), "--config", str(path)]


def _old_body(threshold: float = 0.4, **changes: object) -> dict:
    """What the cache used to hold besides its key: the compiled config of _cache_setup's file."""
    rule1 = ["\\bauth\\b"]
    body: dict = {
        "threshold": threshold,
        "timeout_ms": 800,
        "result_limit": 10,
        "max_query_chars": 4096,
        "regex_timeout_ms": 50,
        "deadline_ms": None,
        "cooldown": [3, 30.0],
        "rules": [
            {
                "number": 1,
                "id": "auth",
                "description": "",
                "strong_sources": rule1,
                "weak_sources": [],
                "strong_regex": "(?P<s0>\\bauth\\b)",
                "weak_regex": None,
                "chain": [["rule1", None]],
            },
            {
                "number": 7,
                "id": "default",
                "description": "",
                "strong_sources": [],
                "weak_sources": [],
                "strong_regex": None,
                "weak_regex": None,
                "chain": [["default", None]],
            },
        ],
        "backends": [["rule1", "command"], ["default", "command"]],
    }
    return {**body, **changes}


def _first_rule(**changes: object) -> dict:
    return {"rules": [{**_old_body()["rules"][0], **changes}, _old_body()["rules"][1]]}


BAD_BODIES = {
    "cooldown []": {"cooldown": []},
    "invalid strong_regex": _first_rule(strong_regex="(?P<s0>\\bauth("),
    "regex_timeout_ms 0": {"regex_timeout_ms": 0},
    "threshold 7 (out of range)": {"threshold": 7.0},
    "threshold 0.95 (in range, not the config's)": {"threshold": 0.95},
    "rule 1's chain swapped": _first_rule(chain=[["default", None]]),
}


@pytest.mark.parametrize("bad", list(BAD_BODIES))
def test_a_cache_with_the_right_key_and_a_bad_body_is_not_trusted(tmp_path: Path, bad: str) -> None:
    from memory_router.config import cache as config_cache

    state, path, args = _cache_setup(tmp_path)
    first = run_cli(["query", "auth", *args], env=_env())
    assert (first.returncode, first.envelope["routed_to"]) == (0, "rule1"), first.stderr
    cache = state / config_cache.CACHE_NAME
    key = orjson.loads(cache.read_bytes())["key"]
    # A cache whose key matches this config (and this code) but whose body says something else.
    cache.write_bytes(orjson.dumps({"format": config_cache.FORMAT, "key": key, "config": _old_body(**BAD_BODIES[bad])}))
    for attempt in range(2):  # and it stays right: the bad cache is not trusted the next time either
        run = run_cli(["query", "auth", *args], env=_env())
        assert b"Traceback" not in run.stderr, run.stderr
        envelope = run.envelope
        assert (run.returncode, envelope["status"], envelope["routed_to"]) == (0, "success", "rule1"), attempt
        assert envelope["rule"]["number"] == 1
    row(
        f"22.7-body-{bad}",
        f"#22.7: the config cache under its right key, its body tampered: {bad}",
        "cli",
        "the query routes by the config file's rule 1 (success), twice: the cache holds nothing but the key "
        "now, the config is compiled from the file's own bytes",
        "was: a crash on every query, or the wrong rule",
    )


def test_a_config_of_800_kb_is_cached_and_not_rewritten_on_every_query(tmp_path: Path) -> None:
    import statistics

    from memory_router.config import cache as config_cache

    state, path, args = _cache_setup(tmp_path)
    data = orjson.loads(path.read_bytes())
    data["rules"][0]["description"] = "a long note. " * 62_000  # ~800 KB of config
    path.write_bytes(orjson.dumps(data))
    assert 780_000 < path.stat().st_size < 1_000_000
    first = run_cli(["query", "auth", *args], env=_env())
    assert (first.returncode, first.envelope["routed_to"]) == (0, "rule1"), first.stderr
    cache = state / config_cache.CACHE_NAME
    written = cache.stat()
    assert written.st_size <= config_cache.MAX_CACHE_BYTES
    for _ in range(3):
        run = run_cli(["query", "auth", *args], env=_env())
        assert (run.returncode, run.envelope["routed_to"]) == (0, "rule1")
    after = cache.stat()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # read, never rewritten
    # What the cache saves a fresh process (CPU time, so the machine's load does not count).
    load = (
        "import sys, time; t = time.process_time(); from pathlib import Path; "
        "from memory_router.config.cache import load_config_cached; "
        "load_config_cached(Path(sys.argv[1]), Path(sys.argv[2])); print((time.process_time() - t) * 1000)"
    )

    def cpu_ms(**env: str) -> float:
        argv = [sys.executable, "-c", load, str(path), str(state)]
        return float(subprocess.run(argv, env=_env(**env), capture_output=True, check=True).stdout)

    cached = statistics.median(cpu_ms() for _ in range(3))
    full = statistics.median(cpu_ms(MEMORY_ROUTER_CONFIG_CACHE="off") for _ in range(3))
    row(
        "22.7-size",
        "#22.7: an 800 KB router-config.json (a long rule description)",
        "cli",
        f"the cache ({written.st_size // 1024} KiB, under the {config_cache.MAX_CACHE_BYTES // 1024} KiB cap) is "
        "read by each later query and never rewritten",
        f"loading it in a fresh process: {cached:.0f} ms CPU from the cache, {full:.0f} ms validated in full "
        "(pydantic imported; medians of 3); "
        "was: a 1.6 MB cache, never read, rewritten on every query",
    )


# --------------------------------------------------------------------------- 9. a Cognee path


@pytest.fixture(scope="module")
def cognee_server() -> Iterator[CogneeServer]:
    """A REAL Cognee 1.6.5 API server (tests/support/cognee: FAKE hashed embeddings, no LLM) with
    the 16-entity "services" graph, refusing Cypher as Cognee does by default: paths are found by
    the adapter's expansion."""
    import shutil

    from ..support.cognee import cognee_server as harness

    python = harness.cognee_python()
    if python is None:
        pytest.skip("the Cognee venv (.tools/cognee-venv) is not installed: run `bash .ci/setup.d/40-cognee.sh`")
    srv = harness.start(python, access_control=True, allow_cypher=False)
    yield srv
    srv.stop()
    shutil.rmtree(srv.root, ignore_errors=True)


def test_a_cognee_path_beyond_the_first_frontier_comes_back_whole(tmp_path: Path, cognee_server: CogneeServer) -> None:
    from ..support.cognee import relation_questions as rq

    backends = {"cognee": {"type": "cognee", "base_url": cognee_server.base_url, "datasets": ["services"]}}
    state, config = write_setup(tmp_path, backends, ["cognee"], timeout_ms=5000)  # the router's default
    env = _env(COGNEE_API_KEY=cognee_server.api_key)
    walls, missing = [], []
    for q in rq.FAR_PATH_QUESTIONS:
        run = run_cli(["query", q.query, "--state-dir", str(state), "--config", str(config)], env=env)
        assert run.returncode == 0, run.stderr
        first = run.envelope["results"][0]
        walls.append(run.envelope["attempts"][0]["duration_ms"])
        if rq.path_of(first) != q.nodes:
            missing.append((q.query, first["content"]))
            continue
        assert first["found_by"] == "expand" and len(first["path"]) == len(q.nodes) - 1
        assert first["relevance"] >= 0.75
    assert not missing, missing
    row(
        "22.9-cognee-path",
        "#22.9: 3 path questions (4-5 hops) on the 16-entity services graph whose ends the first expansion round "
        "did not join, real Cognee refusing Cypher, the default 5 s timeout",
        "cli",
        "every hop of each path, as one result at rank 1 (found_by expand)",
        f"adapter {min(walls)}-{max(walls)} ms; was: the second round cut by the budget, the answer only the "
        "edges near the ends",
    )
