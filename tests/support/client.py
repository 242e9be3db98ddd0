"""Shared helpers for the client/daemon/MCP/skill tests (not a test module).

``starter_workspace`` builds the demo workspace with Total Recall as the only ready backend, so
the envelopes these tests compare do not change when other adapters land or are missing here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memory_router.config.paths import packaged_config
from memory_router.demo import WORKSPACE

# The console script next to the interpreter running the tests (the worktree's own install).
CLI = [sys.executable, "-m", "memory_router"]


def starter_workspace(dest: Path, *, today: date | None = None) -> tuple[Path, Path]:
    """Copy the demo workspace to ``dest``; return ``(state_dir, config_path)``.

    backends.json marks only totalrecall ready (Starter tier without QMD), the config points
    Total Recall at the copied workspace.
    """
    today = today or date.today()
    # copy, not copy2: files dated now, so recency scores do not drift with the checkout's age.
    shutil.copytree(
        WORKSPACE,
        dest,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".keep", "__pycache__"),
        copy_function=shutil.copy,
    )
    daily = dest / "memory" / "daily"
    for template in sorted(daily.glob("DAY-*.md")):
        days_ago = int(template.stem.split("-")[1])
        template.replace(daily / f"{(today - timedelta(days=days_ago)).isoformat()}.md")
    # Undated files (working memory, registers, archive) are dated by mtime: pin it to the start
    # of today, so today's timestamped daily entries ("[16:40] ...") stay the most recent ones
    # whatever the time of day (otherwise a copy made after 16:40 outranks them in a no-term query).
    midnight = datetime.combine(today, datetime.min.time(), tzinfo=timezone.utc).timestamp()
    for path in dest.rglob("*.md"):
        if daily not in path.parents:
            os.utime(path, (midnight, midnight))
    state = dest / "state"
    state.mkdir(exist_ok=True)
    config = json.loads(packaged_config().read_text(encoding="utf-8"))
    config["backends"]["totalrecall"]["root"] = str(dest)
    config_path = state / "router-config.json"
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    statuses = {name: {"status": "ready" if name == "totalrecall" else "unavailable"} for name in config["backends"]}
    (state / "backends.json").write_text(json.dumps({"tier": "starter", "backends": statuses}), encoding="utf-8")
    return state, config_path


def run_cli(
    *args: str, env: dict[str, str] | None = None, input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*CLI, *args], capture_output=True, input=input, env=full_env, timeout=timeout, check=False)


def wait_for_socket(socket: Path, proc: subprocess.Popen[bytes], within_s: float = 30) -> dict[str, Any]:
    """Poll the socket of ``proc`` (a ``serve --socket``) until it answers ``hello``; return that
    answer. A daemon that exits first, or does not answer within ``within_s`` (it is killed then),
    fails the test with its stderr, when that was piped."""
    from memory_router.client import thin as client

    deadline = time.monotonic() + within_s
    while True:
        try:
            with client.Connection(str(socket)) as conn:
                return conn.hello()
        except client.DaemonError:
            late = time.monotonic() > deadline
            if proc.poll() is None and not late:
                time.sleep(0.05)
                continue
            if late:
                proc.kill()
            stderr = proc.communicate()[1]
            what = f"did not answer within {within_s:g} s" if late else f"exited {proc.returncode}"
            raise AssertionError(f"serve --socket {what}: {stderr.decode() if stderr else ''}") from None


# Total Recall's relevance includes recency measured in seconds (and rounded to 4 decimals), so
# two runs a few seconds apart can differ in the last digit: that is a timing, like durations.
RELEVANCE_TOLERANCE = 2e-4
_RELEVANCE_KEYS = ("relevance", "normalized_relevance")


def without_timings(envelope: dict[str, Any]) -> dict[str, Any]:
    """The envelope minus what legitimately differs between two runs of the same query:
    durations, and relevance values rounded (compare those with :func:`relevances`)."""
    env: dict[str, Any] = json.loads(json.dumps(envelope))
    env.pop("router_duration_ms", None)
    env.pop("backend_duration_ms", None)
    for attempt in env.get("attempts") or []:
        attempt.pop("duration_ms", None)
        attempt.pop("normalized_relevance", None)
    env.pop("normalized_relevance", None)
    for result in env.get("results") or []:
        result.pop("relevance", None)
        result.pop("native_relevance", None)  # the backend's own figure: Total Recall's decays with time too
    return env


def relevances(envelope: dict[str, Any]) -> list[float]:
    values = [envelope.get("normalized_relevance", 0.0)]
    values += [a.get("normalized_relevance", 0.0) for a in envelope.get("attempts") or []]
    values += [r.get("relevance", 0.0) for r in envelope.get("results") or []]
    return values


def assert_same_answer(a: dict[str, Any], b: dict[str, Any], what: str = "") -> None:
    """Identical envelopes apart from timings (see :func:`without_timings`)."""
    assert without_timings(a) == without_timings(b), what
    assert list(a) == list(b), f"{what}: field order differs"
    ra, rb = relevances(a), relevances(b)
    assert len(ra) == len(rb) and all(abs(x - y) <= RELEVANCE_TOLERANCE for x, y in zip(ra, rb, strict=True)), (
        f"{what}: {ra} != {rb}"
    )
