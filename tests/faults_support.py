"""Shared helpers of the fault-tolerance tests (tests/test_faults_*.py): building configs around
the fault program, running the real CLI as a subprocess with its resource usage, finding
leftover processes, and collecting the rows of the generated report (tests/FAULTS.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson

FAULT_PROGRAM = Path(__file__).with_name("faultbackend.py")
REPORT_PATH = Path(__file__).with_name("FAULTS.md")


def fault_argv(fault: str, *extra: str) -> list[Any]:
    """The argv template of a command backend running the fault program with ``fault``."""
    return [sys.executable, "-I", "-S", str(FAULT_PROGRAM), "--fault", fault, *extra,
            "--adapter", "{query}", ["--hint", "{mode}"]]


def command_backend(fault: str, *extra: str, piddir: Path | None = None, **settings: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "command", "argv": fault_argv(fault, *extra), **settings}
    if piddir is not None:
        spec.setdefault("env", {})["FAULT_PIDDIR"] = str(piddir)
    return spec


def write_setup(
    root: Path,
    backends: dict[str, dict[str, Any]],
    chain: Sequence[str],
    *,
    timeout_ms: int = 800,
    **config: Any,
) -> tuple[Path, Path]:
    """A state dir with backends.json (all of ``backends`` ready) and a router-config.json whose
    only rule is the default rule with ``chain``. Returns (state_dir, config_path)."""
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "backends.json").write_bytes(orjson.dumps({"tier": "pro", "backends": {n: {"status": "ready"} for n in backends}}))
    cfg = {
        "timeout_ms": timeout_ms,
        "rules": [{"number": 7, "id": "default", "chain": [{"backend": b} for b in chain]}],
        "backends": backends,
        **config,
    }
    config_path = root / "router-config.json"
    config_path.write_bytes(orjson.dumps(cfg))
    return state, config_path


@dataclass
class CliRun:
    returncode: int
    stdout: bytes
    stderr: bytes
    wall_ms: float
    maxrss_kb: int  # peak RSS of the router process (and of any descendant it waited for)

    @property
    def envelope(self) -> dict[str, Any]:
        return orjson.loads(self.stdout)


def cli_base() -> list[str]:
    return [sys.executable, "-m", "memory_router"]


def run_cli(args: Sequence[str], *, stdin: bytes | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 60) -> CliRun:
    """Run ``memory-router ARGS`` (this checkout's code) and measure it with ``wait4``."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*cli_base(), *args], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
    )
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        chunks[name] = stream.read()

    threads = [threading.Thread(target=drain, args=(n, s)) for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for t in threads:
        t.start()
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"memory-router {' '.join(args)} did not finish within {timeout} s")
        time.sleep(0.005)
    for t in threads:
        t.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return CliRun(proc.returncode, chunks["out"], chunks["err"], (time.perf_counter() - started) * 1000, usage.ru_maxrss)


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process in process group ``pgid``, zombies included."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid:
            members.append((int(entry), fields[0]))
    return members


def live_leftovers(piddir: Path) -> list[tuple[int, str]]:
    """Processes still running (zombies excluded) in the groups of the programs that recorded
    themselves in ``piddir``, plus any recorded grandchild that is still alive."""
    alive: list[tuple[int, str]] = []
    for record in piddir.glob("*.pids"):
        pids = [int(p) for p in record.read_text().split()]
        pid, pgid, *children = pids
        alive += [m for m in group_members(pgid) if m[1] != "Z"]
        for child in children:
            try:
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append((child, state))
    return sorted(set(alive))


def wait_no_leftovers(piddir: Path, within_s: float = 1.0) -> list[tuple[int, str]]:
    """Leftovers after giving a SIGKILLed group a moment to disappear from /proc."""
    deadline = time.monotonic() + within_s
    while (left := live_leftovers(piddir)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return left


def log_lines(state: Path) -> list[str]:
    path = state / "router.log"
    return path.read_text().splitlines() if path.exists() else []


# --------------------------------------------------------------------------- the report

# Rows collected during the run: section -> row key -> cells. Written to tests/FAULTS.md at the
# end of the session when MR_WRITE_REPORT=1 (see write_report, called from a session fixture).
REPORT: dict[str, dict[str, dict[str, str]]] = {}


def report(section: str, key: str, **cells: Any) -> None:
    REPORT.setdefault(section, {})[key] = {k: str(v) for k, v in cells.items()}
