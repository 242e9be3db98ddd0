"""One agent's memory stays that agent's, through the CLI and the warm daemon (issue 30, items 3
and 8-13; the plugin's side is test_faults_agents_plugin.py, the two-agent Gateway
tests/openclaw/test_openclaw_agents.py).

Real processes over real files: an lcm.db with lossless-claw's schema holding two agents'
conversations, OpenClaw's openclaw.json in a scratch HOME, Total Recall's markdown layout, and
``serve --socket`` answered through the thin client. Each test adds its row to tests/FAULTS.md
("One agent's memory stays that agent's").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import memory_router.core

from ..support.client import assert_same_answer, wait_for_socket
from ..support.faults import (
    cli_base,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    report,
    run_cli,
)
from ..support.lcm_fixtures import ALICE_SAYS, BOB_SAYS, HOUSE, UNKEYED_SAYS, build_two_agents_db

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

PACKAGED_CALIBRATION = Path(memory_router.core.__file__).with_name("calibration.json")


def row(key: str, item: str, fault: str, transport: str, outcome: str, measured: str = "") -> None:
    cells = {"item": item, "fault": fault, "transport": transport, "outcome": outcome, "measured": measured}
    # Rows in the order, whichever module ran first (the plugin's rows share the section).
    report("agents", f"core-{key}", order=f"{int(item.split()[0]):02d} {key}", **cells)


def scratch_env(home: Path, **extra: str) -> dict[str, str]:
    """This shell's environment minus memory-router's and OpenClaw's own variables, in ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_", "LCM_"))}
    return {**env, "HOME": str(home), "MEMORY_ROUTER_DAEMON": "off", **extra}


def write_state(root: Path, backends: dict[str, dict[str, Any]], **config: Any) -> tuple[Path, list[str]]:
    """A state dir whose router-config.json asks ``backends`` in order (every rule falls to the
    default rule), all of them ready. Returns (state dir, the CLI's --state-dir/--config args)."""
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o700)
    (state / "backends.json").write_bytes(orjson.dumps({"backends": {n: {"status": "ready"} for n in backends}}))
    cfg = {
        "rules": [{"number": 7, "id": "default", "chain": [{"backend": n} for n in backends]}],
        "backends": backends,
        **config,
    }
    (state / "router-config.json").write_bytes(orjson.dumps(cfg))
    return state, ["--state-dir", str(state), "--config", str(state / "router-config.json")]


def serve_socket(args: list[str], env: dict[str, str], cwd: Path, *extra: str) -> subprocess.Popen[bytes]:
    """``serve --socket``, started as the thin client's shell would (same environment and cwd)."""
    return subprocess.Popen(
        [*cli_base(), "serve", "--socket", *extra, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return -9, err.decode()
    return proc.returncode, err.decode()


def texts(envelope: dict[str, Any]) -> str:
    return "\n".join(r["content"] for r in envelope["results"])


# --------------------------------------------------------------------------- 3. Lossless per agent


def test_lossless_answers_each_agent_from_its_own_conversations(tmp_path: Path) -> None:
    db = build_two_agents_db(tmp_path / "lcm.db")
    state, args = write_state(tmp_path, {"lossless": {"type": "lossless", "db_path": str(db)}})
    env = scratch_env(tmp_path)

    def ask(*scope: str, query: str = HOUSE, cli_args: list[str] = args) -> dict[str, Any]:
        run = run_cli(["query", query, *scope, *cli_args], env=env)
        assert run.returncode == 0, run.stderr.decode()
        return run.envelope

    assert ALICE_SAYS in texts(ask("--agent", "alice"))
    bob = ask("--agent", "bob")
    assert "sell the house" not in texts(bob) and "colour is blue" not in texts(bob)
    assert BOB_SAYS in texts(bob)
    by_key = ask("--session-key", "agent:bob:main")  # the key alone names its agent
    assert "sell the house" not in texts(by_key)
    refused = run_cli(["query", HOUSE, "--agent", "alice", "--session-key", "agent:bob:main", *args], env=env)
    assert refused.returncode == 2 and refused.envelope["error_code"] == "INVALID_SCOPE"
    assert ALICE_SAYS in texts(ask())  # no scope: every conversation, as before agents existed
    # A conversation with no session key is read by unscoped queries only (unkeyed_agents: none)...
    colour = "what colour is the house"
    assert UNKEYED_SAYS in texts(ask(query=colour))
    assert UNKEYED_SAYS not in texts(ask("--agent", "bob", query=colour))
    # ... and by the agents the config lists (here bob), on purpose.
    _, listed = write_state(
        tmp_path / "unkeyed", {"lossless": {"type": "lossless", "db_path": str(db), "unkeyed_agents": ["bob"]}}
    )
    assert UNKEYED_SAYS in texts(ask("--agent", "bob", query=colour, cli_args=listed))
    assert UNKEYED_SAYS not in texts(ask("--agent", "alice", query=colour, cli_args=listed))
    assert ALICE_SAYS not in texts(ask("--agent", "bob", cli_args=listed))

    # serve's JSON lines, with the same scopes, answer the same.
    lines = [
        {"id": 1, "query": HOUSE, "scope": {"agent": "bob"}},
        {"id": 2, "query": HOUSE, "scope": {"agent": "alice"}},
        {"id": 3, "query": HOUSE, "scope": {"agent": "alice", "session_key": "agent:bob:main"}},
    ]
    served = subprocess.run(
        [*cli_base(), "serve", "--no-reload", *args],
        input=b"".join(orjson.dumps(line) + b"\n" for line in lines),
        capture_output=True,
        env=env,
        timeout=60,
    )
    answers = {a["id"]: a for a in map(orjson.loads, served.stdout.splitlines())}
    assert "sell the house" not in texts(answers[1]) and BOB_SAYS in texts(answers[1])
    assert ALICE_SAYS in texts(answers[2])
    assert answers[3]["error_code"] == "INVALID_SCOPE" and answers[3]["results"] == []

    # The warm daemon on its socket, asked by the thin client (--daemon require: no in-process
    # retry), answers each agent as the in-process path does.
    daemon = {**env, "MEMORY_ROUTER_DAEMON": "require"}
    proc = serve_socket(args, env, tmp_path, "--no-reload")
    try:
        wait_for_socket(state / "router.sock", proc)
        assert serves_this_shell(args, env, tmp_path)
        warm = {}
        for agent in ("alice", "bob"):
            run = run_cli(["query", HOUSE, "--agent", agent, *args], env=daemon, cwd=tmp_path)
            assert run.returncode == 0, run.stderr.decode()
            warm[agent] = run.envelope
        crossed = run_cli(
            ["query", HOUSE, "--agent", "alice", "--session-key", "agent:bob:main", *args], env=daemon, cwd=tmp_path
        )
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert ALICE_SAYS in texts(warm["alice"]) and "sell the house" not in texts(warm["bob"])
    for agent, envelope in warm.items():
        cold = run_cli(["query", HOUSE, "--agent", agent, *args], env=env, cwd=tmp_path).envelope
        assert_same_answer(envelope, cold, f"{agent}: the daemon over its socket and the in-process path")
    assert crossed.returncode == 2 and crossed.envelope["error_code"] == "INVALID_SCOPE"
    row(
        "lossless-agents",
        "3",
        f"one lcm.db: alice's conversation (agent:alice:main), bob's, one with no session key; bob asks \"{HOUSE}\"",
        "query --agent / --session-key; serve's scope; serve --socket + thin client",
        "bob: his own conversation only (no alice text, no unkeyed one); alice: hers; alice's agent with bob's "
        "key: INVALID_SCOPE (exit 2); unscoped: every conversation; unkeyed_agents [bob]: the unkeyed one for bob "
        "only; the socket daemon's answers equal the in-process ones (MCP: tests/daemon/test_mcp_server.py)",
        "was: bob got alice's conversation (no scope existed)",
    )


# --------------------------------------------------------------------------- 8, 9. openclaw.json


def _total_recall_on_openclaw(tmp_path: Path) -> tuple[Path, list[str], dict[str, str]]:
    """Total Recall with no root of its own: it reads OpenClaw's workspace from openclaw.json."""
    home = tmp_path / "home"
    (home / ".openclaw" / "workspace" / "memory").mkdir(parents=True)
    (home / ".openclaw" / "workspace" / "MEMORY.md").write_text("# Long-term\n- auth tokens rotate every 30 days\n")
    state, args = write_state(tmp_path / "cfg", {"totalrecall": {"type": "totalrecall"}})
    return home, args, scratch_env(home)


HOSTILE = {
    "3000-deep": lambda: '{"agents": ' + "[" * 3000 + "]" * 3000 + "}",
    "5000-digit": lambda: '{"agents": {"defaults": {"workspace": "~/ws", "x": ' + "9" * 5000 + "}}}",
}


@pytest.mark.parametrize("case", [*HOSTILE, "fifo"])
def test_an_openclaw_json_that_cannot_be_used_is_a_clear_config_error(tmp_path: Path, case: str) -> None:
    home, args, env = _total_recall_on_openclaw(tmp_path)
    config = home / ".openclaw" / "openclaw.json"
    if case == "fifo":
        os.mkfifo(config)
    else:
        config.write_text(HOSTILE[case]())
    started = time.monotonic()
    run = run_cli(["query", "auth tokens", *args], env=env, cwd=tmp_path, timeout=30)
    query_ms = (time.monotonic() - started) * 1000
    assert run.returncode == 2, run.stderr.decode()
    envelope = run.envelope
    assert envelope["status"] == "error" and envelope["error_code"] == "CONFIG_INVALID"
    assert str(config) in envelope["error_message"] and "Traceback" not in run.stderr.decode()
    # serve --socket starts, answers the handshake and each query with the same error, and stops on SIGTERM.
    socket_path = tmp_path / "cfg" / "state" / "router.sock"
    proc = subprocess.Popen(
        [*cli_base(), "serve", "--socket", "--no-reload", *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert wait_for_socket(socket_path, proc)["op"] == "hello"
        assert serves_this_shell(args, env, tmp_path)
        warm = run_cli(["query", "auth tokens", *args], env={**env, "MEMORY_ROUTER_DAEMON": "auto"}, cwd=tmp_path)
        assert warm.returncode == 2 and warm.envelope["error_code"] == "CONFIG_INVALID"
        assert str(config) in warm.envelope["error_message"]
    finally:
        code, err = stop(proc)
    assert code == 0 and "Traceback" not in err, err
    if case == "fifo":
        os.unlink(config)
    row(
        f"openclaw-json-{case}",
        "9" if case == "fifo" else "8",
        {
            "3000-deep": "openclaw.json nested 3,000 deep",
            "5000-digit": "openclaw.json holding a 5,000-digit number",
            "fifo": "a FIFO at ~/.openclaw/openclaw.json (no writer)",
        }[case],
        "query; serve --socket + thin client; SIGTERM",
        "CONFIG_INVALID naming the file (exit 2), no traceback; serve --socket answers the handshake and each query "
        "with that error, and exits 0 on SIGTERM",
        f"query answered in {query_ms:.0f} ms",
    )


# --------------------------------------------------------------------------- 10, 11. SIGHUP


def serves_this_shell(args: list[str], env: dict[str, str], cwd: Path) -> bool:
    """Whether the running daemon answers this shell's queries (else the thin client would route
    in-process, and a comparison with the in-process path would prove nothing)."""
    run = run_cli(["daemon", "status", "--json", *args], env={**env, "MEMORY_ROUTER_DAEMON": "auto"}, cwd=cwd)
    return bool(orjson.loads(run.stdout).get("serves_this_shell"))


def _query(args: list[str], env: dict[str, str], cwd: Path, daemon: str) -> dict[str, Any]:
    run = run_cli(["query", "auth tokens", *args], env={**env, "MEMORY_ROUTER_DAEMON": daemon}, cwd=cwd)
    assert run.returncode == 0, run.stderr.decode()
    return run.envelope


def test_a_moved_workspace_is_followed_by_the_warm_daemon(tmp_path: Path) -> None:
    home, args, env = _total_recall_on_openclaw(tmp_path)
    moved = tmp_path / "moved-ws"
    (moved / "memory").mkdir(parents=True)
    (moved / "MEMORY.md").write_text("# Long-term\n- auth tokens now live in the vault, rotated weekly\n")
    config = home / ".openclaw" / "openclaw.json"
    config.write_text(json.dumps({"agents": {"defaults": {"workspace": "~/.openclaw/workspace"}}}))
    proc = serve_socket(args, env, tmp_path, "--no-reload")
    try:
        wait_for_socket(tmp_path / "cfg" / "state" / "router.sock", proc)
        assert serves_this_shell(args, env, tmp_path)
        before = _query(args, env, tmp_path, "auto")
        assert "every 30 days" in texts(before)
        config.write_text(json.dumps({"agents": {"defaults": {"workspace": str(moved)}}}))
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        warm = _query(args, env, tmp_path, "auto")
        cold = _query(args, env, tmp_path, "off")
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert "rotated weekly" in texts(warm) and "every 30 days" not in texts(warm)
    assert_same_answer(warm, cold, "the warm daemon and the in-process path, after the move")
    row(
        "moved-workspace",
        "10",
        "agents.defaults.workspace changed in openclaw.json, then SIGHUP, under a warm daemon",
        "serve --socket + thin client",
        "the daemon answers from the new workspace, the same envelope as the in-process path",
    )


def test_a_refitted_calibration_file_is_followed_after_sighup(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Long-term\n- auth tokens rotate every 30 days\n")
    calibration = tmp_path / "calibration.json"
    calibration.write_text(PACKAGED_CALIBRATION.read_text())
    state, args = write_state(
        tmp_path / "cfg", {"totalrecall": {"type": "totalrecall", "root": str(root)}}, calibration=str(calibration)
    )
    env = scratch_env(tmp_path)
    proc = serve_socket(args, env, tmp_path, "--no-reload")
    try:
        wait_for_socket(state / "router.sock", proc)
        assert serves_this_shell(args, env, tmp_path)
        before = _query(args, env, tmp_path, "auto")
        refitted = json.loads(calibration.read_text())
        for fitted in refitted["maps"].values():  # a refit that trusts no answer (docs/calibration.md)
            fitted["intercept"] = -12.0
            fitted["first"]["y"] = [0.01 for _ in fitted["first"]["y"]]
        calibration.write_text(json.dumps(refitted))  # in place: router-config.json does not change
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        warm = _query(args, env, tmp_path, "auto")
        cold = _query(args, env, tmp_path, "off")
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert before["status"] == "success" and warm["status"] != "success"
    assert_same_answer(warm, cold, "the warm daemon and the in-process path, after the refit")
    row(
        "refit-calibration",
        "11",
        '"calibration": "<file>" refitted in place, then SIGHUP, under a warm daemon',
        "serve --socket + thin client",
        "SIGHUP re-reads the file router-config.json names: the daemon's answer equals the in-process one",
        f"before {before['normalized_relevance']} {before['status']}; after {warm['normalized_relevance']} "
        f"{warm['status']}",
    )


# --------------------------------------------------------------------------- 12. inotify watches


def _inotify_watches(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            count += sum(1 for line in fd.read_text().splitlines() if line.startswith("inotify wd:"))
        except OSError:
            continue
    return count


def test_the_watcher_does_not_follow_a_symlinked_tree(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "memory" / "daily").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Long-term\n- auth tokens rotate every 30 days\n")
    big = tmp_path / "elsewhere"
    for i in range(2000):
        (big / f"d{i // 50}" / f"e{i % 50}").mkdir(parents=True, exist_ok=True)
    (root / "memory" / "projects").symlink_to(big, target_is_directory=True)
    state, args = write_state(tmp_path / "cfg", {"totalrecall": {"type": "totalrecall", "root": str(root)}})
    env = scratch_env(tmp_path)
    proc = serve_socket(args, env, tmp_path)  # with reload: the watcher runs
    try:
        wait_for_socket(state / "router.sock", proc)
        assert serves_this_shell(args, env, tmp_path)
        assert "every 30 days" in texts(_query(args, env, tmp_path, "auto"))  # the folder is watched now
        deadline = time.monotonic() + 10
        while (watches := _inotify_watches(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        (root / "MEMORY.md").write_text("# Long-term\n- auth tokens are revoked on logout\n")
        time.sleep(1.5)  # the watcher's debounce
        fresh = _query(args, env, tmp_path, "auto")
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert 3 <= watches < 50, (watches, err)  # the workspace's own folders, not the 2,000 behind the link
    assert "revoked on logout" in texts(fresh)  # and a change is still seen
    row(
        "watch-symlink",
        "12",
        "memory/projects -> a 2,000-directory tree that Total Recall never reads, under serve --socket",
        "serve --socket (watcher on)",
        "the daemon watches the workspace's real directories only; a changed MEMORY.md is still answered",
        f"{watches} inotify watches (was 2,046)",
    )


# --------------------------------------------------------------------------- 13. one big daily note

BIG_NOTE = "memory/daily/2026-12-01.md"
ZEBRA = "the zebra key is kept in drawer seven"


def _big_daily_note(root: Path, size: int = 4_150_000) -> int:
    """The issue's trigger: one daily note of ~4 MiB short lines, under the default
    ``max_file_bytes`` (4 MiB), with one line worth finding at its very end. Returns its lines."""
    lines = ["# 2026-12-01\n"]
    written, n = len(lines[0]), 0
    while written < size:
        lines.append(f"- {n}\n")
        written += len(lines[-1])
        n += 1
    lines.append(f"- [23:59] {ZEBRA}\n")
    path = root / BIG_NOTE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    assert path.stat().st_size < 4 << 20
    return len(lines)


def _attempt(envelope: dict[str, Any]) -> dict[str, Any]:
    (attempt,) = [a for a in envelope["attempts"] if a["backend"] == "totalrecall"]
    return attempt


def test_one_big_daily_note_never_blinds_total_recall(tmp_path: Path) -> None:
    """A 4 MiB daily note takes longer to parse than a query's 5 s budget. Each query is answered
    within its budget from the other memory files (MEMORY.md too), naming the file still being
    indexed; the warm daemon parses it once per change, in the background, and then searches it."""
    root = tmp_path / "ws"
    lines = _big_daily_note(root)
    (root / "MEMORY.md").write_text("# Long-term\n- auth tokens rotate every 30 days\n")
    state, args = write_state(tmp_path / "cfg", {"totalrecall": {"type": "totalrecall", "root": str(root)}})
    env = scratch_env(tmp_path)
    budget = 5000  # the default timeout_ms

    # The one-shot CLI: every query answers from MEMORY.md within the budget (was QUERY_TIMEOUT).
    oneshot = []
    for _ in range(2):
        run = run_cli(["query", "auth tokens", *args], env=env, cwd=tmp_path)
        assert run.returncode == 0, run.stderr.decode()
        oneshot.append(run.envelope)
    for envelope in oneshot:
        attempt = _attempt(envelope)
        assert envelope["status"] != "error" and "every 30 days" in texts(envelope), envelope
        assert attempt["duration_ms"] < budget and BIG_NOTE in attempt["note"], attempt
        assert "memory-router daemon start" in attempt["note"]  # what indexes it once per change

    # The warm daemon: the first query answers within the budget too; the parse goes on in the
    # background, once, and a later query searches the note (no note any more).
    zebra, required = ["query", "where is the zebra key kept", *args], {**env, "MEMORY_ROUTER_DAEMON": "require"}
    proc = serve_socket(args, env, tmp_path)
    try:
        wait_for_socket(state / "router.sock", proc)
        assert serves_this_shell(args, env, tmp_path)
        first = _query(args, env, tmp_path, "require")
        started = time.monotonic()
        deadline = started + 180
        while True:
            run = run_cli(zebra, env=required, cwd=tmp_path)
            assert run.returncode == 0, run.stderr.decode()
            found = run.envelope
            assert _attempt(found)["duration_ms"] < budget, found
            if ZEBRA in texts(found) or time.monotonic() > deadline:
                break
            time.sleep(1)
        indexed_s = time.monotonic() - started
        warm = _query(args, env, tmp_path, "require")
        # A change: the note's old version stays searched while the new one is parsed.
        with (root / BIG_NOTE).open("a") as note:
            note.write("- [23:59] the spare zebra key is in the car\n")
        time.sleep(1.5)  # the watcher's debounce
        changed = run_cli(zebra, env=required, cwd=tmp_path)
    finally:
        code, err = stop(proc)
    assert code == 0, err
    first_attempt = _attempt(first)
    assert "every 30 days" in texts(first) and first_attempt["duration_ms"] < budget, first
    assert BIG_NOTE in first_attempt["note"] and "a later query includes it" in first_attempt["note"]
    assert ZEBRA in texts(found), f"the note was not searched within {indexed_s:.0f} s: {found}"
    assert BIG_NOTE in [r.get("path") for r in found["results"]]
    assert "note" not in _attempt(warm) or not _attempt(warm)["note"], warm
    assert changed.returncode == 0 and ZEBRA in texts(changed.envelope), changed.envelope
    assert _attempt(changed.envelope)["duration_ms"] < budget
    row(
        "big-daily-note",
        "13",
        f"one {(root / BIG_NOTE).stat().st_size / (1 << 20):.1f} MiB daily note ({lines:,} short lines, under "
        "max_file_bytes) next to MEMORY.md; default 5 s budget",
        "query (one-shot); serve --socket + thin client",
        "every query answered within the budget from MEMORY.md, its note naming the file still being indexed "
        "(one-shot: and that the warm daemon indexes it); the daemon parses it and rebuilds its index once per change "
        "in the background, then searches it; while a changed version is parsed the old one is still searched",
        f"one-shot answered in {_attempt(oneshot[0])['duration_ms']} / {_attempt(oneshot[1])['duration_ms']} ms of "
        f'{budget}, note: "{_attempt(oneshot[0])["note"][:64]}..."; daemon first answer '
        f"{first_attempt['duration_ms']} ms, the note searched {indexed_s:.0f} s later, then in "
        f"{_attempt(warm)['duration_ms']} ms (was QUERY_TIMEOUT at 5000 ms)",
    )
