"""Shared helpers of the fault-tolerance tests (tests/faults/test_faults_*.py): building configs around
the fault program, running the real CLI as a subprocess with its resource usage, finding
leftover processes, and collecting the rows of the generated report (tests/FAULTS.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

FAULT_PROGRAM = Path(__file__).with_name("faultbackend.py")
REPORT_PATH = Path(__file__).resolve().parents[1] / "FAULTS.md"


def fault_argv(fault: str, *extra: str) -> list[Any]:
    """The argv template of a command backend running the fault program with ``fault``."""
    return [
        sys.executable,
        "-I",
        "-S",
        str(FAULT_PROGRAM),
        "--fault",
        fault,
        *extra,
        "--adapter",
        "{query}",
        ["--hint", "{mode}"],
    ]


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
    (state / "backends.json").write_bytes(
        orjson.dumps({"tier": "pro", "backends": {n: {"status": "ready"} for n in backends}})
    )
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
        envelope: dict[str, Any] = orjson.loads(self.stdout)
        return envelope


def cli_base() -> list[str]:
    return [sys.executable, "-m", "memory_router"]


# Runs argv[2:] and writes the child's peak RSS (wait4) to the file argv[1]. Measuring from this
# small intermediate process matters: a process forked from pytest inherits pytest's RSS
# high-water mark across exec, so wait4 from pytest itself would report pytest's size.
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def run_cli(
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> CliRun:
    """Run ``memory-router ARGS`` (this checkout's code), measuring its peak RSS."""
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as rss:
        started = time.perf_counter()
        # Its own process group, so a run past the timeout is killed whole (the launcher, the
        # CLI and whatever the CLI started), not just the launcher.
        with subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, rss.name, *cli_base(), *args],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        ) as proc:
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
        wall = (time.perf_counter() - started) * 1000
        maxrss = int(rss.read() or 0)
    return CliRun(proc.returncode, out, err, wall, maxrss)


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
        fields = stat[stat.rindex(")") + 2 :].split()
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
    rows = REPORT.setdefault(section, {})
    cells.setdefault("order", f"{len(rows):04d}")  # default: the order the tests ran in
    rows[key] = {k: str(v) for k, v in cells.items()}


# --------------------------------------------------------------------------- the daemon


@dataclass
class DaemonRun:
    responses: list[dict[str, Any]]
    exit_code: int
    stderr: bytes
    peak_rss_kb: list[int]  # VmHWM of the daemon process itself after each response
    after_each: list[Any]  # what ``after_each`` returned for each response


def _vm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def run_daemon(
    args: Sequence[str],
    requests: Sequence[Any],
    *,
    after_each: Any = None,
    concurrent: bool = False,
    timeout: float = 30,
) -> DaemonRun:
    """Start ``memory-router serve ARGS`` and send the requests one at a time (each JSON line
    waits for its answer); after each answer read the daemon's peak RSS and call
    ``after_each(index)`` while the daemon still runs. Then close stdin and wait for its exit."""
    import select

    proc = subprocess.Popen(
        [*cli_base(), "serve", "--no-reload", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    err: list[bytes] = []
    drainer = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    drainer.start()
    assert proc.stdin is not None and proc.stdout is not None
    responses: list[dict[str, Any]] = []
    peaks: list[int] = []
    extra: list[Any] = []
    try:
        if concurrent:  # all at once, then read every answer (they come back as they complete)
            proc.stdin.write(b"".join(orjson.dumps(r) + b"\n" for r in requests))
            proc.stdin.flush()
            for _ in requests:
                ready, _, _ = select.select([proc.stdout], [], [], timeout)
                line = proc.stdout.readline() if ready else b""
                if not line:
                    raise AssertionError(
                        f"memory-router serve answered {len(responses)} of {len(requests)} within {timeout} s"
                    )
                responses.append(orjson.loads(line))
            peaks.append(_vm_hwm_kb(proc.pid))
            requests = []
        for index, request in enumerate(requests):
            proc.stdin.write(orjson.dumps(request) + b"\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else b""
            if not line:
                raise AssertionError(f"memory-router serve gave no answer to {request!r} within {timeout} s")
            responses.append(orjson.loads(line))
            peaks.append(_vm_hwm_kb(proc.pid))
            extra.append(after_each(index) if after_each else None)
        proc.stdin.close()
        code = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drainer.join()
    return DaemonRun(responses, code, b"".join(err), peaks, extra)


# --------------------------------------------------------------------------- writing the report

_SECTIONS = {
    "matrix": (
        "Fault matrix",
        [
            "fault",
            "position",
            "transport",
            "status",
            "routed_to",
            "fallbacks_used",
            "exit",
            "log",
            "faulty_ms",
            "peak_rss_mb",
            "leftovers",
            "message",
        ],
    ),
    "adapters": (
        "Faults of each adapter's own transport (CLI, falling back to a healthy backend)",
        ["adapter", "fault", "status", "log", "adapter_ms", "cli_wall_ms", "message"],
    ),
    "engine": (
        "The warm qmd engine (serve/mcp; the real engine, or a FAKE node where named; falling back to a healthy "
        "backend)",
        ["fault", "status", "log", "faulty_ms", "recovery", "leftovers", "message"],
    ),
    "bad_input": ("Bad input", ["input", "exit", "status", "error_code", "answered", "message"]),
    "log": ("router.log and files", ["check", "outcome"]),
    "properties": ("Properties (hypothesis)", ["property", "examples", "outcomes", "result"]),
    "trust": (
        "Trust boundaries and long-run memory (another user, a long-running daemon)",
        ["item", "attack", "outcome"],
    ),
    "bounded": (
        "Bounded work: hostile files, slow backends, secrets",
        ["case", "transport", "outcome", "measured"],
    ),
    "signals": (
        "Broken characters, slow readers, signals, a replaced index (issue 22)",
        ["item", "fault", "transport", "outcome", "measured"],
    ),
    "agents": (
        "One agent's memory stays that agent's (issue 30)",
        ["item", "fault", "transport", "outcome", "measured"],
    ),
}
_HEADINGS = {
    "item": "issue item",
    "adapter_ms": "adapter call ms",
    "cli_wall_ms": "CLI wall ms (incl. ~0.4 s start-up)",
    "fallbacks_used": "fallbacks",
    "faulty_ms": "faulty call ms",
    "peak_rss_mb": "peak RSS MB",
    "log": "router.log",
    "message": "error_message (abridged)",
}


def _cell(value: str) -> str:
    # The interpreter and the checkout are where this run happened to be, not what a reader needs.
    value = value.replace(sys.executable, "python").replace(str(REPORT_PATH.parents[1]), "<repo>")
    return value.replace("|", "\\|").replace("\n", " ")


def _figures() -> list[str]:
    rows = REPORT.get("matrix", {})
    out = []
    hangs = [(k, int(r["faulty_ms"]), int(r["timeout_ms"])) for k, r in rows.items() if k.startswith("hang/")]
    if hangs:
        over = sorted(ms - timeout for _, ms, timeout in hangs)
        span = f"{over[0]}" if over[0] == over[-1] else f"{over[0]}-{over[-1]}"
        out.append(
            f"* Hang abandonment: the hanging backend's call ended {span} ms after "
            f"`timeout_ms` ({hangs[0][2]} ms) over {len(hangs)} cells (bound: +100 ms), measured by the router."
        )
    huge = [r for k, r in rows.items() if k.startswith("huge/")]
    if huge:
        parts = [f"{r['transport']} {r['position']}: {r['peak_rss_mb']}" for r in huge]
        out.append(
            "* 50 MB of backend output: peak RSS of the router in MB (vs. a healthy query): "
            + "; ".join(parts)
            + ". stdout is capped at 8 MiB and the program killed there (the daemon's figure is its "
            "high-water mark so far, after every earlier cell)."
        )
    left = sum(int(r["leftovers"]) for r in rows.values())
    if rows:
        out.append(
            f"* Backend processes left alive after a cell (its whole process group, grandchildren included): {left}."
        )
    return out


def write_report() -> None:
    """Write tests/FAULTS.md from the rows collected in this run (only with MR_WRITE_REPORT=1)."""
    if os.environ.get("MR_WRITE_REPORT") != "1" or not REPORT:
        return
    import platform

    lines = [
        "# Fault tolerance: observed outcomes",
        "",
        "<!-- Generated by the test run; do not edit. Regenerate with:",
        "     MR_WRITE_REPORT=1 .venv/bin/python -m pytest -q tests/faults/ -->",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `MR_WRITE_REPORT=1 python -m pytest "
        f"tests/faults/` on {platform.system()} {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs. Every row is a test that passed; its cells are what the test observed.",
        "",
    ]
    figures = _figures()
    if figures:
        lines += ["## Figures", "", *figures, ""]
    for section, (title, columns) in _SECTIONS.items():
        rows = REPORT.get(section)
        if not rows:
            continue
        lines += [f"## {title}", ""]
        if section == "matrix":
            lines += [
                "Chains: **primary** = [faulty, good] (good answers at 0.9); **fallback** = [weak, faulty] "
                "(weak answers at 0.2, below the 0.4 threshold). `timeout_ms` 800. The daemon column is one "
                "long-lived `memory-router serve` answering every cell in turn.",
                "",
            ]
        lines.append("| " + " | ".join(_HEADINGS.get(c, c) for c in columns) + " |")
        lines.append("|" + "---|" * len(columns))
        for key in sorted(rows, key=lambda k: rows[k].get("order", k)):
            lines.append("| " + " | ".join(_cell(rows[key].get(c, "")) for c in columns) + " |")
        lines.append("")
    REPORT_PATH.write_text("\n".join(lines), encoding="utf-8")


@pytest.fixture(scope="session", autouse=True)
def faults_report() -> Iterator[None]:
    """Imported by each tests/faults/test_faults_*.py: writes the report once the whole session is done."""
    yield
    write_report()
