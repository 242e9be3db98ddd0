"""Running a backend's external program: argument lists only, bounded output, and the whole
process group killed on timeout or cancellation.

Used by the qmd and command adapters. A backend program is started in its own session
(``start_new_session=True``) so that it and everything it spawns share one process group, which
is the unit we kill: the ``qmd`` launcher, for example, leaves its ``node`` child running if only
the launcher is killed. Live groups are listed in :mod:`.common.groups`, for the one-shot CLI's signal
handler, which must kill them before it exits (a signal to our group never reaches theirs).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Mapping, Sequence

from memory_router.backends.common import groups as _groups
from memory_router.core.frozen import Frozen

DEFAULT_MAX_STDOUT = 8 * 1024 * 1024
DEFAULT_MAX_STDERR = 64 * 1024
_CHUNK = 64 * 1024


class ExecutableNotFound(Exception):
    """The program (argv[0]) does not exist or is not executable."""


class OutputTooLarge(Exception):
    """The program wrote more than ``max_stdout`` bytes; it has been killed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"backend output exceeded {limit} bytes; the process was killed")
        self.limit = limit


class ProcessResult(Frozen):
    returncode: int
    stdout: bytes
    stderr: bytes
    duration_ms: int

    def stderr_tail(self, limit: int = 400) -> str:
        """The last bit of stderr, decoded leniently, for error messages."""
        text = self.stderr.decode("utf-8", "replace").strip()
        return text[-limit:]


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid``; a group already gone is fine."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _groups.LIVE.discard(pid)


async def _read_capped(stream: asyncio.StreamReader, limit: int, *, strict: bool) -> bytes:
    """Read a stream to EOF keeping at most ``limit`` bytes.

    ``strict``: raise :class:`OutputTooLarge` past the limit (stdout, which must be parsed
    whole). Otherwise keep the last ``limit`` bytes and drain the rest (stderr, diagnostic only),
    so the child never blocks on a full pipe.
    """
    if not strict:
        tail = bytearray()
        while chunk := await stream.read(_CHUNK):
            tail += chunk
            if len(tail) > limit:
                del tail[: len(tail) - limit]
        return bytes(tail)
    # Chunks joined once at the end: no buffer regrown (and copied) as it fills, so a call's peak
    # is its output twice at most, and nothing of it survives the call.
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            # The exception keeps this frame alive (traceback, the reader task that holds it):
            # drop the chunks first, or every oversized call keeps its megabytes.
            chunks.clear()
            raise OutputTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def run(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    max_stdout: int = DEFAULT_MAX_STDOUT,
    max_stderr: int = DEFAULT_MAX_STDERR,
) -> ProcessResult:
    """Run ``argv`` (no shell) and return its exit code and output.

    No timeout parameter on purpose: the caller (ultimately the router) bounds the call by
    cancelling the task, and cancellation kills the process group here. Raises
    :class:`ExecutableNotFound` and :class:`OutputTooLarge`; never leaves a process behind.
    """
    started = time.perf_counter()
    try:
        with _groups.spawning():  # a Ctrl-C meanwhile waits until this group can be killed too
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            _groups.LIVE.add(proc.pid)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ExecutableNotFound(f"{argv[0]}: {exc.strerror or exc}") from exc
    readers: list[asyncio.Task[bytes]] = []
    try:
        assert proc.stdout is not None and proc.stderr is not None
        # Readers first: a program that writes a lot before reading all of its stdin must not
        # deadlock against our stdin write.
        readers = [
            asyncio.ensure_future(_read_capped(proc.stdout, max_stdout, strict=True)),
            asyncio.ensure_future(_read_capped(proc.stderr, max_stderr, strict=False)),
        ]
        if stdin is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the program does not read stdin; its output still counts
        out, err = await asyncio.gather(*readers)
        returncode = await proc.wait()
    except BaseException:
        # Timeout (cancellation), oversized output, or anything else: end the whole group.
        kill_group(proc.pid)
        for reader in readers:
            reader.cancel()
        # The exception's traceback holds this frame; a reader task holding the exception back
        # would make a cycle that keeps the call's buffers until a full garbage collection.
        readers.clear()
        # Stop reading before waiting: asyncio's wait() returns only once the pipes are closed,
        # and a stdout pipe paused with unread data (the oversized-output case) would never see
        # EOF, holding this call for the whole reap timeout.
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
        await asyncio.shield(_reap(proc))
        raise
    # The leader is gone; anything it left in its group (a backgrounded grandchild) goes too.
    kill_group(proc.pid)
    return ProcessResult(returncode, out, err, int((time.perf_counter() - started) * 1000))


async def _reap(proc: asyncio.subprocess.Process) -> None:
    try:
        await asyncio.wait_for(proc.wait(), timeout=2.0)
    except (asyncio.TimeoutError, ProcessLookupError):
        pass
