"""router.log integrity and the router's files, through real CLI processes.

* Eight concurrent ``memory-router query`` processes appending to one router.log produce only
  whole, well-formed lines (each line is one ``write`` on an ``O_APPEND`` descriptor).
* An unwritable or full log never fails a query: a warning on stderr, the answer on stdout.
* router.log is created 0600 with its directory (0700), and nothing the router does writes
  outside the state directory (HOME, the working directory and TMPDIR are watched).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from ..support.faults import (
    CliRun,
    cli_base,
    command_backend,
    faults_report,  # noqa: F401  (writes tests/FAULTS.md with MR_WRITE_REPORT=1)
    log_lines,
    report,
    run_cli,
    write_setup,
)

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

LINE = re.compile(
    r'^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] FALLBACK query="(?P<q>(?:[^"\\]|\\.)*)" backend=(?P<b>b\d) '
    r'error_code=BACKEND_ERROR error_message="(?:[^"\\]|\\.)*" next=(?P<n>\S+)$'
)
PROCESSES = 8
FAILING_STEPS = 4


def test_concurrent_processes_write_only_whole_lines(tmp_path: Path) -> None:
    """8 processes x 4 failing backends, each line ~5 kB (a 4 kB query, longer than PIPE_BUF),
    all at once: exactly 32 lines, each one intact and attributable to its process."""
    names = [f"b{i}" for i in range(FAILING_STEPS)]
    backends = {n: command_backend("crash") for n in names[:-1]}
    backends[names[-1]] = command_backend("garbage")
    state, config = write_setup(tmp_path, backends, names, timeout_ms=10_000)
    queries = [f"proc{p} " + f"{p}" * 4000 for p in range(PROCESSES)]
    args = ["--state-dir", str(state), "--config", str(config)]
    with ThreadPoolExecutor(PROCESSES) as pool:
        runs = list(pool.map(lambda q: run_cli(["query", q, *args]), queries))
    assert all(r.returncode == 1 for r in runs)  # every backend failed: ALL_BACKENDS_FAILED
    raw = (state / "router.log").read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.decode().split("\n")[:-1]
    assert len(lines) == PROCESSES * FAILING_STEPS
    seen: dict[str, list[str]] = {}
    for line in lines:
        m = LINE.match(line)
        assert m, line[:200]
        seen.setdefault(m["q"], []).append(m["b"])
    assert sorted(seen) == sorted(queries)
    assert all(order == names for order in seen.values())  # each process's lines in its own order
    report(
        "log",
        "concurrent",
        check=f"{PROCESSES} concurrent query processes, {FAILING_STEPS} failing backends each, ~5 kB lines",
        outcome=f"{len(lines)} lines, all whole and well-formed; each process's lines in order",
    )


def _answer(tmp_path: Path, state: Path, config: Path, backends_json: Path | None = None) -> CliRun:
    args = ["query", "auth middleware", "--state-dir", str(state), "--config", str(config)]
    if backends_json:
        args += ["--backends-json", str(backends_json)]
    return run_cli(args)


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    return write_setup(
        tmp_path, {"broken": command_backend("crash"), "good": command_backend("ok")}, ["broken", "good"]
    )


@pytest.mark.parametrize("case", ["log_is_a_directory", "disk_full", "state_dir_is_a_file", "read_only_dir"])
def test_an_unwritable_or_full_log_never_fails_a_query(tmp_path: Path, case: str) -> None:
    state, config = _setup(tmp_path)
    backends_json = None
    if case == "log_is_a_directory":
        (state / "router.log").mkdir()
        expect = "Is a directory"
    elif case == "disk_full":
        # A symlink to /dev/full (every write would fail with ENOSPC) is not even followed now.
        (state / "router.log").symlink_to("/dev/full")
        expect = "is a symbolic link; not following it"
    elif case == "state_dir_is_a_file":
        backends_json = tmp_path / "backends.json"
        (state / "backends.json").rename(backends_json)
        state.rmdir()
        state.write_text("not a directory")
        expect = "File exists"  # mkdir of the state dir fails: a file is in the way
    else:
        if os.geteuid() == 0:
            pytest.skip("root ignores directory permissions")
        state.chmod(0o500)
        expect = "Permission denied"
    run = _answer(tmp_path, state, config, backends_json)
    assert run.returncode == 0, run.stderr
    data = orjson.loads(run.stdout)
    assert (data["status"], data["routed_to"], data["fallbacks_used"]) == ("success", "good", 1)
    err = run.stderr.decode()
    assert err.count("warning: ") == 1 and expect in err and "queries still work" in err
    report(
        "log",
        case,
        check={
            "log_is_a_directory": "router.log is a directory (unwritable)",
            "disk_full": "router.log is a symlink to /dev/full (a full disk)",
            "state_dir_is_a_file": "the state dir path is a file",
            "read_only_dir": "read-only state dir",
        }[case],
        outcome=f"answered (exit 0, success); one stderr warning: {err.strip()[:110]}",
    )


def _snapshot(roots: list[Path]) -> dict[str, tuple[int, int]]:
    files = {}
    for root in roots:
        for path in root.rglob("*"):
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            files[str(path)] = (st.st_mtime_ns, st.st_size)
    return files


def test_router_log_is_private_created_with_its_directory_and_nothing_written_elsewhere(tmp_path: Path) -> None:
    """umask 0, so the modes come from the router, not the environment. The state dir does not
    exist yet; HOME, the working directory and TMPDIR are fresh and watched for any write."""
    state_parent = tmp_path / "fresh"
    state = state_parent / "openclaw" / "state"
    backends_json = tmp_path / "etc" / "backends.json"
    backends_json.parent.mkdir()
    backends_json.write_bytes(b'{"backends": ["broken", "good", "memory"]}')
    home, work, tmpdir = (tmp_path / n for n in ("home", "work", "tmp"))
    for d in (home, work, tmpdir):
        d.mkdir()
    memory = tmp_path / "memory-root"
    (memory / "memory" / "registers").mkdir(parents=True)
    (memory / "CLAUDE.local.md").write_text("- Auth middleware checks the session token.\n")
    (memory / "memory" / "registers" / "decisions.md").write_text("- Decided: auth middleware uses JWT.\n")
    config = tmp_path / "etc" / "router-config.json"
    config.write_bytes(
        orjson.dumps(
            {
                "timeout_ms": 5000,
                "rules": [
                    {
                        "number": 1,
                        "id": "default",
                        "chain": [{"backend": "broken"}, {"backend": "memory"}, {"backend": "good"}],
                    }
                ],
                "backends": {
                    "broken": command_backend("crash"),
                    "good": command_backend("ok"),
                    "memory": {"type": "totalrecall", "root": str(memory)},
                },
            }
        )
    )
    watched = [home, work, tmpdir, memory, tmp_path / "etc"]
    before = _snapshot(watched)
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
        "MEMORY_ROUTER_STATE_DIR": str(state),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("MEMORY_ROUTER_CONFIG", None)
    old_umask = os.umask(0)
    try:
        proc = subprocess.run(
            [*cli_base(), "query", "auth middleware", "--config", str(config), "--backends-json", str(backends_json)],
            cwd=work,
            env=env,
            capture_output=True,
            timeout=60,
        )
    finally:
        os.umask(old_umask)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["routed_to"] in ("memory", "good")
    log = state / "router.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert [p.name for p in state.iterdir()] == ["router.log"]
    assert len(log_lines(state)) == 1
    assert _snapshot(watched) == before  # nothing created or modified outside the state dir
    report(
        "log",
        "modes",
        check="router.log and its directory, created by the router under umask 0",
        outcome="state dir created 0700 (with parents), router.log 0600; nothing else in it",
    )
    report(
        "log",
        "outside",
        check="writes outside the state dir (HOME, cwd, TMPDIR, memory root, config dir watched)",
        outcome="none: only <state dir>/router.log was written",
    )
