"""The daemon keeps a real qmd index up to date with its collection's files (issue 31, item 2).

Real parts: the qmd CLI from .tools/ builds the index and runs every ``qmd update``; the daemons
are real ``memory-router serve`` processes (stdin and ``--socket``); queries go through them and
are answered by qmd ``search``. Two scripts stand in front of the real qmd where a test needs to
see or break the update: a FAKE that refuses ``update`` (exit 1), and a wrapper that logs when
each ``update`` starts and ends before running the real one."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.refresh import index_lock_path, try_lock, unlock

from ..support.qmd import QMD, needs_qmd

pytestmark = [pytest.mark.slow, needs_qmd]
REPO = Path(__file__).resolve().parents[2]
ENV = {k: v for k, v in os.environ.items() if k not in ("CI", "MEMORY_ROUTER_DAEMON")}
LATENCY_OUT = Path(os.environ.get("MEMORY_ROUTER_REFRESH_LATENCY_OUT", "/nonexistent/latency.json"))


# --------------------------------------------------------------------------- set-up


def make_index(base: Path, **refresh: Any) -> dict[str, Any]:
    """A real qmd index over ``base/ws`` (collection ``kb``) and the qmd settings that use it."""
    ws = base / "ws"
    ws.mkdir(parents=True)
    (ws / "raft.md").write_text("# Raft consensus\n\nA leader is elected with randomized timeouts.\n")
    settings: dict[str, Any] = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),  # no embedding model there: update only, no embed
        "collections": ["kb"],
        "refresh": {"debounce_ms": 300, **refresh},
    }
    backend = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base / "s0")
    )
    build_collection(backend.transport(), ws, "kb", "**/*.md", index_lock_path(base / "idx" / "index.sqlite"))
    return {"ws": ws, "settings": settings, "index": base / "idx" / "index.sqlite"}


def state_dir(base: Path, name: str, qmd: dict[str, Any]) -> Path:
    state = base / name
    state.mkdir(mode=0o700)
    config = json.loads((REPO / "memory_router" / "router-config.json").read_text())
    config["backends"]["qmd"] = {"type": "qmd", **qmd}
    (state / "router-config.json").write_text(json.dumps(config))
    (state / "backends.json").write_text(json.dumps({"backends": {"qmd": {"status": "ready"}}}))
    return state


def cli(state: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "memory_router",
        *args,
        "--state-dir",
        str(state),
        "--config",
        str(state / "router-config.json"),
    ]


class Daemon:
    """``memory-router serve`` on stdin/stdout, its stderr kept in a file."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.stderr = state / "serve.stderr"
        self.proc = subprocess.Popen(
            cli(state, "serve"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr.open("wb"),
            env=ENV,
        )
        self._id = 0

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._id += 1
        self.proc.stdin.write(json.dumps({"id": self._id, **payload}).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def refresh(self) -> dict[str, Any]:
        return self.request({"op": "stats"})["stats"]["runtime"]["qmd"]["refresh"]

    def search(self, word: str) -> dict[str, Any]:
        return self.request({"query": f"find the function {word}", "limit": 5})

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def found(answer: dict[str, Any], note: str) -> bool:
    return answer.get("status") == "success" and any(
        str(r.get("path", "")).endswith(note) for r in answer.get("results", [])
    )


def wait_until(check: Callable[[], Any], timeout: float, what: str, step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(step)


def settled(daemon: Daemon) -> bool:
    r = daemon.refresh()
    return not r["running"] and not r["due"] and r["collections"]["kb"]["pending"] == 0


def qmd_script(path: Path, body: str) -> str:
    """An executable script in front of the real qmd (``$QMD`` in ``body`` runs it)."""
    assert QMD is not None
    assert not any(" " in part for part in QMD.argv_prefix)  # $QMD is split on spaces
    real = " ".join(QMD.argv_prefix)
    path.write_text(f'#!/bin/sh\nQMD="{real}"\n{body}\n')
    path.chmod(0o755)
    return str(path)


# --------------------------------------------------------------------------- the tests


def test_a_note_written_into_the_collection_is_found_within_seconds(tmp_path: Path) -> None:
    idx = make_index(tmp_path, debounce_ms=1500)
    daemon = Daemon(state_dir(tmp_path, "s", idx["settings"]))
    try:
        wait_until(lambda: settled(daemon), 30, "the start-up refresh")
        first = daemon.refresh()
        assert first["collections"]["kb"]["last_updated"] and first["runs"] >= 1 and not first["failed"]
        latencies = []
        for run in range(4):
            word = f"okapizebra{run}x"
            note = f"memory/2026-12-0{run + 1}.md"
            path = idx["ws"] / note
            path.parent.mkdir(exist_ok=True)
            assert not found(daemon.search(word), note)
            written = time.monotonic()
            path.write_text(f"# Day {run}\n\nWe talked about the {word} in the garden.\n")
            wait_until(lambda: found(daemon.search(word), note), 15, f"{word} findable", step=0.05)  # noqa: B023
            latencies.append(time.monotonic() - written)
            wait_until(lambda: settled(daemon), 15, "the refresh to settle")
        median = statistics.median(latencies)
        print(f"write-to-findable (debounce 1.5 s), s: {[round(x, 2) for x in latencies]}, median {median:.2f}")
        if LATENCY_OUT.parent.is_dir():
            LATENCY_OUT.write_text(json.dumps({"latencies_s": latencies, "median_s": median}))
        assert median < 6.0, latencies
        assert daemon.refresh()["collections"]["kb"]["files"] == 5
    finally:
        daemon.close()


def test_a_failing_update_is_reported_and_the_daemon_keeps_answering(tmp_path: Path) -> None:
    idx = make_index(tmp_path)
    fake = tmp_path / "qmd-fake"
    refuse = 'for a in "$@"; do [ "$a" = update ] && { echo "FAKE qmd: update refused" >&2; exit 1; }; done\n'
    qmd_script(fake, refuse + 'exec $QMD "$@"')
    state = state_dir(tmp_path, "s", {**idx["settings"], "qmd": str(fake)})
    daemon = Daemon(state)
    try:
        facts = wait_until(lambda: (r := daemon.refresh())["failed"] and r, 30, "the failed start-up refresh")
        assert "qmd update exited with code 1" in facts["error"] and "FAKE qmd: update refused" in facts["error"]
        assert facts["failures"] == 1 and facts["last_run"]["ok"] is False
        assert "qmd update exited with code 1" in daemon.stderr.read_text()
        assert "QMD_REFRESH_FAILED" in (state / "router.log").read_text()
        assert found(daemon.search("randomized"), "raft.md")  # the index answers as before
        (idx["ws"] / "new.md").write_text("# New\n\nThe capybara plan.\n")
        wait_until(lambda: daemon.refresh()["failures"] == 2, 15, "the retry on the next change")
        assert daemon.proc.poll() is None and found(daemon.search("randomized"), "raft.md")
        assert not found(daemon.search("capybara"), "new.md")
        # No update of memory-router's ever went through on this index: how far behind it is, is unknown.
        assert daemon.refresh()["collections"]["kb"]["pending"] is None
        qmd_script(fake, 'exec $QMD "$@"')  # qmd works again: the next change brings the index up to date
        (idx["ws"] / "new.md").write_text("# New\n\nThe capybara plan, revised.\n")
        wait_until(lambda: found(daemon.search("capybara"), "new.md"), 15, "the note after the fix")
        after = wait_until(lambda: (r := daemon.refresh())["last_run"]["ok"] and r, 15, "a good run recorded")
        assert after["failed"] is False and after["error"] is None
    finally:
        daemon.close()


def test_two_daemons_on_one_index_never_update_at_once(tmp_path: Path) -> None:
    idx = make_index(tmp_path, debounce_ms=200)
    log = tmp_path / "updates.log"
    wrapper = tmp_path / "qmd-logging"
    qmd_script(
        wrapper,
        'case " $* " in *" update "*)\n'
        f'  echo "start $PPID $(date +%s.%N)" >> {log}; sleep 0.4; $QMD "$@"; rc=$?\n'
        f'  echo "end $PPID $(date +%s.%N)" >> {log}; exit $rc;;\nesac\nexec $QMD "$@"',
    )
    qmd = {**idx["settings"], "qmd": str(wrapper)}
    one, two = Daemon(state_dir(tmp_path, "one", qmd)), Daemon(state_dir(tmp_path, "two", qmd))
    try:
        for i in range(12):  # a stream of writes both daemons see
            (idx["ws"] / f"n{i}.md").write_text(f"# Note {i}\n\nwalrus{i}y\n")
            time.sleep(0.35)
        wait_until(lambda: settled(one) and settled(two), 30, "both daemons to settle")
        assert found(one.search("walrus11y"), "n11.md") and found(two.search("walrus11y"), "n11.md")
        events = [line.split() for line in log.read_text().splitlines()]
        starts = [(float(t), pid) for kind, pid, t in events if kind == "start"]
        ends = [(float(t), pid) for kind, pid, t in events if kind == "end"]
        assert len(starts) == len(ends) >= 2
        spans = sorted(zip(sorted(starts), sorted(ends), strict=True))
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start[0] >= end[0], f"two updates overlapped: {events}"
        ran = {pid for _, pid in starts}
        assert ran == {str(one.proc.pid), str(two.proc.pid)}, f"both daemons updated: {events}"
    finally:
        one.close()
        two.close()


def test_status_shows_pending_files_before_the_update_and_none_after(tmp_path: Path) -> None:
    idx = make_index(tmp_path)
    state = state_dir(tmp_path, "s", idx["settings"])
    daemon = subprocess.Popen(cli(state, "serve", "--socket"), stderr=subprocess.DEVNULL, env=ENV)

    def status() -> dict[str, Any]:
        out = subprocess.run(cli(state, "daemon", "status", "--json"), capture_output=True, env=ENV, check=False)
        return json.loads(out.stdout)

    def refresh() -> dict[str, Any] | None:
        s = status()
        return s["stats"]["runtime"]["qmd"].get("refresh") if s.get("running") else None

    def backends() -> dict[str, Any]:
        out = subprocess.run(cli(state, "backends", "--json"), capture_output=True, env=ENV, check=False)
        return next(r for r in json.loads(out.stdout)["backends"] if r["backend"] == "qmd")

    try:
        wait_until(lambda: (r := refresh()) and r["collections"]["kb"]["pending"] == 0, 30, "start-up refresh", 0.3)
        fd = try_lock(index_lock_path(idx["index"]))  # another writer holds the index
        assert fd is not None
        try:
            (idx["ws"] / "a.md").write_text("# A\n\nthe narwhal\n")
            (idx["ws"] / "b.md").write_text("# B\n\nthe axolotl\n")
            held = wait_until(lambda: (r := refresh()) and r["waiting_for_lock"] and r, 15, "waiting for the lock", 0.3)
            assert held["collections"]["kb"]["pending"] == 2 and held["locked"] is True
            row = backends()
            assert row["freshness"]["collections"]["kb"]["pending"] == 2
            before = row["freshness"]["collections"]["kb"]["last_updated"]
            text = subprocess.run(cli(state, "daemon", "status"), capture_output=True, env=ENV, text=True).stdout
            assert "kb: 2 pending" in text and "waiting for the index lock" in text
        finally:
            unlock(fd)
        after = wait_until(
            lambda: (r := refresh()) and r["collections"]["kb"]["pending"] == 0 and r, 15, "updated", 0.3
        )
        assert after["collections"]["kb"]["last_updated"] >= before and not after["failed"]
        assert backends()["freshness"]["collections"]["kb"]["pending"] == 0
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(15)
    # Without a daemon, `backends` reads the index's record and the folder itself.
    (idx["ws"] / "c.md").write_text("# C\n\nthe pangolin\n")
    row = backends()
    assert "daemon" not in row and row["freshness"]["collections"]["kb"]["pending"] == 1
    text = subprocess.run(cli(state, "backends"), capture_output=True, env=ENV, text=True).stdout
    assert "index: kb: 1 pending, updated " in text


PLUGIN_STATUS = """
import { MemoryRouterPlugin, memoryRuntime } from "%s/manager.js";
const api = { pluginConfig: input, config: {}, logger: { info() {}, warn() {} } };
const plugin = new MemoryRouterPlugin(api);
const { manager } = await memoryRuntime(plugin).getMemorySearchManager({ cfg: {}, agentId: "main" });
const before = manager.status().custom.memoryRouter.index;
await manager.search("find the function randomized");  // the plugin starts its daemon
let index = null;
for (let i = 0; i < 150; i++) {
  await manager.loadIndexFreshness();
  index = manager.status().custom.memoryRouter.index;
  const r = index?.backends?.qmd;
  if (r && r.collections.kb.pending === 0 && !r.running && !r.due) break;
  await new Promise((done) => setTimeout(done, 200));
}
plugin.closeAll();
output = { before, index };
"""


def test_the_plugin_s_memory_status_passes_the_freshness_through(tmp_path: Path) -> None:
    from ..openclaw._support import PLUGIN_DIR, any_node, memory_router_bin

    node = any_node()
    if node is None:
        pytest.skip("no Node >= 22 for the plugin")
    idx = make_index(tmp_path)
    state = state_dir(tmp_path, "state", idx["settings"])
    memory_root = tmp_path / "agent"
    memory_root.mkdir()
    config = {"stateDir": str(state), "memoryRoot": str(memory_root), "command": str(memory_router_bin())}
    program = (
        'const input = JSON.parse((await import("node:fs")).readFileSync(0, "utf8"));\nlet output;\n'
        + PLUGIN_STATUS % (PLUGIN_DIR / "lib")
        + "\nprocess.stdout.write(JSON.stringify(output));"
    )
    try:
        proc = subprocess.run(
            [str(node), "--input-type=module", "-e", program],
            input=json.dumps(config),
            capture_output=True,
            text=True,
            timeout=120,
            env=ENV,
            check=False,
        )
    finally:
        subprocess.run(cli(state, "daemon", "stop"), capture_output=True, env=ENV, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["before"] is None  # nothing asked yet: status() never starts a daemon
    kb = out["index"]["backends"]["qmd"]["collections"]["kb"]
    assert kb["pending"] == 0 and kb["last_updated"] and kb["folder"] == str(idx["ws"])
    assert out["index"]["backends"]["qmd"]["failed"] is False
