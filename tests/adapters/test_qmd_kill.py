"""A qmd call cancelled mid-flight (the router's timeout) leaves no qmd or node process behind.

qmd is made to hang for real: `qmd query` without its models and without CI set tries to
download them (qmd retries for ~12 minutes). The adapter's model pre-check would refuse that, so
the transport is called directly. Processes are found by a marker variable in their environment
(/proc/<pid>/environ), which the node child inherits too."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.locate import QmdCommand
from memory_router.backends.qmd.transports import CliTransport

from ..support.qmd import QMD, needs_qmd

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


def marked_pids(marker: str) -> list[int]:
    needle = f"MR_QMD_TEST_MARKER={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


async def _cancel_mid_flight(b: QmdBackend, marker: str, expect: int = 1) -> list[int]:
    transport = b.transport()
    env = {k: v for k, v in transport.env.items() if k != "CI"}  # CI would refuse at once
    transport.env = env
    task = asyncio.create_task(transport.search("query", "leader election", 5, ()))
    seen: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not task.done():
        await asyncio.sleep(0.1)
        seen = marked_pids(marker)
        if len(seen) >= expect:
            await asyncio.sleep(0.5)  # let it get into model loading / downloading
            seen = marked_pids(marker)
            break
    assert not task.done(), f"qmd finished instead of hanging: {task.result() if task.done() else ''}"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return seen


def _backend(
    tmp_path: Path, marker: str, *, extra_env: Mapping[str, str] | None = None, **settings: object
) -> QmdBackend:
    env = {**os.environ, "MR_QMD_TEST_MARKER": marker, **(extra_env or {})}
    env.pop("CI", None)
    base = {
        "index_path": str(tmp_path / "index.sqlite"),
        "config_dir": str(tmp_path / "cfg"),
        "cache_dir": str(tmp_path / "cache"),
    }
    return QmdBackend(
        "qmd",
        _settings.validate(qmd_adapter.Settings, {**base, **settings}),
        BackendContext(state_dir=tmp_path / "state", environ=env),
    )


def _assert_all_gone(marker: str) -> None:
    deadline = time.monotonic() + 3
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked_pids(marker) == []


@needs_qmd
def test_cancelled_query_leaves_no_process(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    seen = asyncio.run(_cancel_mid_flight(_backend(tmp_path, marker), marker))
    assert seen, "qmd never started"
    _assert_all_gone(marker)


@needs_qmd
def test_cancelled_launcher_leaves_no_node_child(tmp_path: Path) -> None:
    # qmd's bin/qmd launcher spawns a second node process; killing only the launcher would leave
    # that child running (re-parented to PID 1). The whole process group goes.
    assert QMD is not None and QMD.node is not None  # needs_qmd
    launcher = QMD.qmd.parent.parent.parent / "bin" / "qmd"
    if not launcher.is_file():
        pytest.skip(f"no launcher at {launcher}")
    marker = uuid.uuid4().hex
    path = f"{QMD.node.parent}:{os.environ.get('PATH', '')}"  # the launcher runs `node`
    b = _backend(tmp_path, marker, extra_env={"PATH": path})
    b.settings = b.settings.replace(qmd=str(launcher))
    b._transport = CliTransport(
        QmdCommand((str(launcher),), launcher, None, None), env=b.env(), cwd=b.working_dir(), index="index"
    )
    seen = asyncio.run(_cancel_mid_flight(b, marker, expect=2))
    assert len(seen) >= 2, f"expected launcher + node child, saw {seen}"
    _assert_all_gone(marker)
