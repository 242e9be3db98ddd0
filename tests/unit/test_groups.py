"""The live backend process groups (backends/common/groups.py) that the one-shot CLI's signal handler
kills: a termination that arrives while a program is being started waits until its group is known."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from memory_router.backends.common import groups as _groups


def test_a_termination_during_a_start_runs_once_the_group_is_registered() -> None:
    seen: list[set[int]] = []
    with _groups.spawning():
        _groups.when_settled(lambda: seen.append(set(_groups.LIVE)))
        assert seen == []  # not yet: the program's group is not known
        _groups.LIVE.add(424242)
    assert seen == [{424242}]
    _groups.LIVE.discard(424242)


@pytest.mark.slow
def test_kill_all_ends_every_live_group_including_grandchildren() -> None:
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
    _groups.LIVE.add(leader.pid)
    time.sleep(0.2)
    _groups.kill_all()
    leader.wait(5)
    assert leader.pid not in _groups.LIVE
    time.sleep(0.1)
    members = [e for e in os.listdir("/proc") if e.isdigit() and _pgid(e) == leader.pid and _state(e) != "Z"]
    assert members == []


def _pgid(pid: str) -> int | None:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: str) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
