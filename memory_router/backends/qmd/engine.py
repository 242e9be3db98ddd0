"""The warm qmd engine: one long-lived Node process (``qmd_engine.mjs``) per qmd backend of a
daemon, which keeps qmd's index open and its GGUF models loaded between queries.

:class:`QmdEngine` owns the process: started on the first request (never at daemon start), one
JSON line per request over its stdin, answers matched by ``id`` from its stdout, so concurrent
queries share it. Its lifecycle, as docs/backends/qmd.md ("The warm qmd engine") explains:

* a crash fails the requests in flight (``EngineFailed``) and the next request restarts it once;
  a second crash in a row leaves it down for ``restart_backoff_s`` (the router's cooldown sees
  the failures meanwhile);
* a request given up by its caller (the router's timeout) makes the engine *suspect*: the next
  request first pings it, and a silent engine is killed and restarted;
* stdout that is not a protocol line is a protocol violation: the engine is killed; an answer
  line that cannot be read fails only its own request, and a lone surrogate (qmd cutting a
  snippet inside an emoji) is read as U+FFFD (``_lenient_json``);
* :meth:`aclose` closes its stdin (it unloads and exits) and kills its process group after a
  grace period; the engine also exits by itself when its stdin closes, so a daemon killed with
  SIGKILL leaves no engine behind.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import re
import signal
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from memory_router.backends.common import lenient_json

ENGINE_SCRIPT = Path(__file__).resolve().parent / "qmd_engine.mjs"
MAX_LINE_BYTES = 16 << 20  # an answer of 1000 hits with 300-character snippets is ~1 MiB
STDERR_LINES = 40
# How the engine starts every answer line (JSON.stringify keeps the key order of qmd_engine.mjs).
_ANSWER_START = re.compile(rb'\{"id":(\d+),')

# Process groups of live engines, killed at interpreter exit whatever path it takes.
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_live_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)


class EngineFailed(Exception):
    """The engine could not answer: it is missing, crashed, hung or spoke garbage. ``kind`` is
    ``unavailable`` (cannot start here, or down after repeated crashes) or ``error``."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


class QmdEngine:
    def __init__(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        start_timeout_s: float = 20.0,
        ping_timeout_s: float = 2.0,
        restart_backoff_s: float = 30.0,
        clock: Any = time.monotonic,
    ) -> None:
        self.argv = argv
        self.env = dict(env)
        self.cwd = cwd
        self.start_timeout_s = start_timeout_s
        self.ping_timeout_s = ping_timeout_s
        self.restart_backoff_s = restart_backoff_s
        self.clock = clock
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._tasks: list[asyncio.Task[None]] = []
        self._starting: asyncio.Task[None] | None = None
        self._suspect = False
        self._crashes = 0  # in a row, since the last good answer
        self._last_crash = 0.0
        self._last_failure: str | None = None
        self.starts = 0
        self.started_at: float | None = None
        self.health: dict[str, Any] = {}

    # ------------------------------------------------------------------ public

    async def request(self, payload: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request, return its answer (``ok`` true or false). Raises
        :class:`EngineFailed`; cancellation (the caller's timeout) leaves the engine suspect.
        ``timeout_s`` (the caller's budget) bounds the health check of a suspect engine to a
        third of it, so a replaced engine still has time to answer."""
        await self._ensure_running()
        if self._suspect:
            ping = self.ping_timeout_s if timeout_s is None else min(self.ping_timeout_s, max(0.2, timeout_s / 3))
            await self._check_alive(ping)
        try:
            answer = await self._send(payload)
        except asyncio.CancelledError:
            self._suspect = True
            raise
        self._crashes = 0
        if isinstance(answer.get("health"), dict):
            self.health = answer["health"]
        return answer

    @property
    def starting(self) -> bool:
        """A start is in progress: the process is being spawned or has not reported ready yet."""
        return self._starting is not None and not self._starting.done()

    def facts(self) -> dict[str, Any]:
        """pid, RSS, uptime, model state: for ``daemon status`` and ``backends``."""
        proc = self._proc
        running = proc is not None and proc.returncode is None
        models: dict[str, Any] = self.health["models"] if isinstance(self.health.get("models"), dict) else {}
        return {
            "state": "running"
            if running
            else ("down" if self._crashes >= 2 else "not started" if not self.starts else "stopped"),
            "pid": proc.pid if running and proc else None,
            "rss_mib": _rss_mib(proc.pid) if running and proc else None,
            "uptime_s": round(self.clock() - self.started_at, 1) if running and self.started_at else None,
            "starts": self.starts,
            "served": self.health.get("served"),
            "models": {role: bool(m.get("loaded")) for role, m in models.items() if isinstance(m, dict)},
            "last_failure": self._last_failure,
        }

    async def refresh(self) -> dict[str, Any]:
        """Ask a running engine for its current state (models may have been unloaded when idle)."""
        if self._proc is not None and self._proc.returncode is None and not self._pending_model_work():
            with contextlib.suppress(EngineFailed, asyncio.TimeoutError):
                answer = await asyncio.wait_for(self._send({"op": "health"}), self.ping_timeout_s)
                if isinstance(answer.get("health"), dict):
                    self.health = answer["health"]
        return self.facts()

    async def aclose(self, grace_s: float = 2.0) -> None:
        """Stop the engine: close its stdin (it frees its models and exits), then kill its group.

        Only this process's reader tasks and requests are ended: a request made while it closes
        starts a new engine, whose readers and requests must survive (a replaced index)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        tasks, self._tasks = self._tasks, []
        pending, self._pending = self._pending, {}
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), grace_s)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
        _killpg(proc.pid)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 2.0)
        _fail(pending, "the qmd engine was stopped")
        for task in tasks:
            task.cancel()

    # ------------------------------------------------------------------ process

    async def _ensure_running(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            return
        if self._crashes >= 2 and self.clock() - self._last_crash < self.restart_backoff_s:
            wait = self.restart_backoff_s - (self.clock() - self._last_crash)
            raise EngineFailed(
                f"the qmd engine crashed twice in a row ({self._last_failure}); it is restarted in {wait:.0f} s",
                "unavailable",
            )
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        self._cleanup_process()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                limit=MAX_LINE_BYTES,
            )
        except OSError as exc:
            raise EngineFailed(f"cannot start the qmd engine ({self.argv[0]}): {exc}", "unavailable") from None
        _LIVE_GROUPS.add(proc.pid)
        self._proc = proc
        self.starts += 1
        self._stderr.clear()
        ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._tasks = [
            asyncio.create_task(self._read_stdout(proc, ready), name="qmd-engine-stdout"),
            asyncio.create_task(self._read_stderr(proc), name="qmd-engine-stderr"),
        ]
        try:
            hello = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
        except asyncio.TimeoutError:
            self._kill(proc, f"it did not report ready within {self.start_timeout_s:.0f} s")
            raise EngineFailed(f"the qmd engine did not start: {self._why()}") from None
        except EngineFailed:
            raise
        self.health = hello
        self.started_at = self.clock()
        self._suspect = False

    async def _read_stdout(self, proc: asyncio.subprocess.Process, ready: asyncio.Future[dict[str, Any]]) -> None:
        assert proc.stdout is not None
        reason = None
        try:
            while reason is None:
                try:
                    line = await proc.stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    reason = f"it printed a line over {MAX_LINE_BYTES} bytes"
                    break
                if not line:
                    break
                reason = self._dispatch(line, ready)
        finally:
            if reason is not None:
                self._kill(proc, reason)
            code = await _wait_code(proc)
            failure = EngineFailed(
                f"the qmd engine stopped: {reason or f'it exited with code {code}'}{self._stderr_tail()}"
            )
            if not ready.done():
                ready.set_exception(failure)
            if proc is self._proc or self._proc is None:
                self._crashed(str(failure))
                self._fail_pending(str(failure))

    def _dispatch(self, line: bytes, ready: asyncio.Future[dict[str, Any]]) -> str | None:
        """Hand one stdout line to whoever waits for it; a reason to stop the engine, or None.

        A line that starts as an answer (``{"id":N,``, how the engine writes every answer) but
        cannot be read fails that request only: the engine itself is fine. Anything else that is
        not a protocol line is a real protocol break, and the engine is stopped."""
        try:
            message = lenient_json.loads(line)  # a snippet cut inside an emoji: U+FFFD, not a kill
        except ValueError:
            message = None
        if message is None and (answer := _ANSWER_START.match(line)) is not None:
            future = self._pending.pop(int(answer.group(1)), None)
            if future is not None and not future.done():
                future.set_exception(
                    EngineFailed(f"the qmd engine's answer could not be read: {line[:120]!r}{self._stderr_tail()}")
                )
            return None
        if not isinstance(message, dict):
            return f"it printed something that is not a protocol line: {line[:120]!r}"
        event = message.get("event")
        if event == "ready":
            if not ready.done():
                ready.set_result(message)
        elif event == "fatal":
            return f"it could not open qmd's index or config: {message.get('error')}"
        elif isinstance(message.get("id"), int):
            future = self._pending.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)
        return None

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while True:
            try:
                line = await proc.stderr.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").replace("\x1b[?25l", "").replace("\x1b[?25h", "").strip()
            if text:
                self._stderr.append(text[:500])

    def _kill(self, proc: asyncio.subprocess.Process, reason: str) -> None:
        self._last_failure = reason
        _killpg(proc.pid)

    def _crashed(self, message: str) -> None:
        if self._proc is None:
            return  # stopped on purpose (aclose)
        self._crashes += 1
        self._last_crash = self.clock()
        self._last_failure = message

    def _cleanup_process(self) -> None:
        if self._proc is not None:
            _killpg(self._proc.pid)
            self._proc = None
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    def _fail_pending(self, message: str) -> None:
        pending, self._pending = self._pending, {}
        _fail(pending, message)

    def _pending_model_work(self) -> bool:
        return bool(self._pending)

    # ------------------------------------------------------------------ requests

    async def _send(self, payload: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.returncode is not None or proc.stdin is None:
            raise EngineFailed(f"the qmd engine is not running{self._stderr_tail()}")
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            proc.stdin.write(orjson.dumps({**payload, "id": request_id}) + b"\n")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._pending.pop(request_id, None)
            raise EngineFailed(f"the qmd engine's input closed ({exc}){self._stderr_tail()}") from None
        try:
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def _check_alive(self, timeout_s: float) -> None:
        """After an abandoned request: a ping must come back, or the engine is hung."""
        try:
            await asyncio.wait_for(self._send({"op": "health"}), timeout_s)
            self._suspect = False
        except (asyncio.TimeoutError, EngineFailed):
            proc = self._proc
            if proc is not None:
                self._kill(proc, f"it did not answer a health check within {timeout_s:.1f} s (hung)")
                await _wait_code(proc)
            await self._ensure_running()

    def _why(self) -> str:
        return (self._last_failure or "no reason given") + self._stderr_tail()

    def _stderr_tail(self) -> str:
        lines = [ln for ln in self._stderr if ln]
        return f" (stderr: {' | '.join(lines[-3:])[-300:]})" if lines else ""


def _fail(pending: dict[int, asyncio.Future[dict[str, Any]]], message: str) -> None:
    for future in pending.values():
        if not future.done():
            future.set_exception(EngineFailed(message))


def _killpg(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    _LIVE_GROUPS.discard(pid)


async def _wait_code(proc: asyncio.subprocess.Process) -> int | None:
    with contextlib.suppress(Exception):
        return await asyncio.wait_for(proc.wait(), 5.0)
    return proc.returncode


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None
