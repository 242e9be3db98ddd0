"""Worker threads owned by one backend instance, for its blocking work (file scans, SQLite).

Each in-process adapter instance runs its blocking calls on its own small pool instead of the
event loop's default executor. The router abandons a call at its timeout, but a thread cannot be
killed: with one shared executor, a few calls stuck in one backend (a huge memory file, a locked
database) would hold every worker and the *other* backends' calls would queue behind them and
time out. With a pool per instance a stuck backend can only starve itself. The adapters also stop
abandoned work early (a cancellation flag checked between files or SQLite steps), so a pool's
threads come back soon after the router gives up.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # imported when a pool first runs: the one-shot CLI's blocking path never does
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")

DEFAULT_WORKERS = 4
_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


class WorkerPool:
    """A lazily started thread pool for one backend instance."""

    def __init__(self, name: str, max_workers: int = DEFAULT_WORKERS) -> None:
        self.name = name
        self.max_workers = max_workers
        self._executor: ThreadPoolExecutor | None = None
        _POOLS.add(self)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of this pool's threads. Cancelling the await abandons the call
        (the thread finishes it; ``fn`` should watch a cancellation flag to stop early)."""
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_workers, thread_name_prefix=f"memory-router-{self.name}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    def release(self, *, cancel_pending: bool = True) -> None:
        """Let idle threads exit now; a thread still running abandoned work finishes it alone.
        ``cancel_pending``: drop calls still queued (the one-shot CLI has its answer); False lets
        them run first (a daemon closing a replaced backend may still have calls in flight).
        The pool starts new threads if it is used again."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=cancel_pending)

    def close(self) -> None:
        """The backend instance that owns this pool is closed: its idle threads exit now instead
        of whenever the garbage collector finds the pool, after the calls still in flight."""
        self.release(cancel_pending=False)


def release_all() -> None:
    """:meth:`WorkerPool.release` every pool: the one-shot CLI calls this once it has its answer,
    so its exit does not wait for idle worker threads (as ``loop.close()`` does for the default
    executor's)."""
    for pool in list(_POOLS):
        pool.release()
