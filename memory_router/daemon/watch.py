"""File watching for a :class:`~.service.Service`.

A :class:`Watcher` watches the folders of router-config.json and backends.json (watchfiles, so
editors that write a temporary file and rename it are seen) and calls back on every change; it
also watches the data folders of backend instances that offer ``watch_paths()``,
``set_watched(bool)`` and ``invalidate()`` (Total Recall does), telling them about each change.
:class:`Watched` and :func:`signature` are how a file's identity on disk is compared.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_router.backends.base import Backend, WatchableBackend
from memory_router.core.frozen import Frozen


class Watched(Frozen):
    """What is known about one watched file: its identity on disk when last read."""

    path: Path
    signature: tuple[int, int, int] | None


def signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def real_directories(top: Path, limit: int = 10_000) -> list[Path]:
    """``top`` and every directory below it reached without following a symlink (at most ``limit``:
    a tree that big is watched in its first ``limit`` directories and walked as a safety net)."""
    found = [top]
    for directory, subdirs, _ in os.walk(top, followlinks=False):
        base = Path(directory)
        for name in sorted(subdirs):
            if not (base / name).is_symlink():
                found.append(base / name)
                if len(found) >= limit:
                    return found
        subdirs[:] = [d for d in subdirs if not (base / d).is_symlink()]
    return found


def _tree_changed(kind: object, path: str, known: set[str]) -> bool:
    """Whether a change adds a directory to the watched tree or removes one of it."""
    from watchfiles import Change

    if kind == Change.deleted:
        return path in known
    return kind == Change.added and os.path.isdir(path) and not os.path.islink(path)


class Watcher:
    """Watches ``files`` (calling ``on_change`` when one changes) and the backends' data folders."""

    def __init__(self, files: Sequence[Path], on_change: Callable[[], object], say: Callable[[str], None]) -> None:
        self._files = tuple(files)
        self._on_change = on_change
        self._say = say
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        # id(backend instance) -> (instance, its watcher's stop event or None if not watchable)
        self._backend_watches: dict[int, tuple[Any, asyncio.Event | None]] = {}
        self.stale = False  # a config reload replaced backend instances

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start watching the files (the caller yields to let the watches register)."""
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._watch(self._stop), name="memory-router-reload")

    def behind(self, instances: Mapping[str, Backend]) -> bool:
        """Whether the backend watches may not match ``instances`` (one was created or replaced)."""
        return self._task is not None and (self.stale or len(self._backend_watches) != len(instances))

    async def stop(self) -> None:
        """Stop every watch (idempotent)."""
        task, self._task = self._task, None
        if task is None:
            return
        for instance, stop in self._backend_watches.values():
            if stop is not None:
                stop.set()
                instance.set_watched(False)
        self._backend_watches.clear()
        assert self._stop is not None
        self._stop.set()
        try:
            await asyncio.wait_for(task, 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()

    async def watch_backends(self, instances: Mapping[str, Backend]) -> None:  # noqa: C901 - start, stop and replace in one place so no watch is leaked
        """Watch the data folders of backend instances that can use it; stop watching replaced ones."""
        current = {id(b): b for b in instances.values()}
        for key in [k for k in self._backend_watches if k not in current]:
            instance, stop = self._backend_watches.pop(key)
            if stop is not None:
                stop.set()
                instance.set_watched(False)
        started = False
        for key, instance in current.items():
            if key in self._backend_watches:
                continue
            folders = instance.watch_paths() if isinstance(instance, WatchableBackend) else []
            if not folders:
                self._backend_watches[key] = (instance, None)
                continue
            stop = asyncio.Event()
            self._backend_watches[key] = (instance, stop)
            for folder, recursive in folders:
                asyncio.create_task(
                    self._watch_folder(instance, Path(folder), recursive, stop),
                    name=f"memory-router-watch-{getattr(instance, 'name', '?')}",
                )
            started = True
        if started:
            for _ in range(3):  # let the watchers register before the backends rely on them
                await asyncio.sleep(0)
            for instance, stop in self._backend_watches.values():
                if stop is not None and not stop.is_set():
                    instance.set_watched(True)

    async def _watch_folder(self, instance: Any, folder: Path, recursive: bool, stop: asyncio.Event) -> None:
        """Watch ``folder`` (and, when ``recursive``, every real directory below it) for ``instance``.

        A recursive watch is not watchfiles' own ``recursive=True``: that follows symbolic links,
        so a ``memory/projects`` link to a big tree that Total Recall never reads (its walk does
        not enter symlinked directories) would cost one inotify watch per directory there, out of
        a per-user kernel budget. Instead each directory under ``folder`` that is not reached
        through a symlink is watched on its own, and the set is listed again whenever a directory
        is added or removed."""
        from watchfiles import awatch

        try:
            while not stop.is_set():
                folders = real_directories(folder) if recursive else [folder]
                known = {str(f) for f in folders}
                async for changes in awatch(*folders, stop_event=stop, recursive=False, debounce=400, step=5):
                    instance.invalidate()
                    if recursive and any(_tree_changed(kind, path, known) for kind, path in changes):
                        break  # a directory came or went: watch the new set
                else:
                    return  # stopped
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the folder vanished, too many watches...: back to walking
            stop.set()
            instance.set_watched(False)
            self._say(f"warning: stopped watching {folder} for {getattr(instance, 'name', 'a backend')}: {exc}")

    async def _watch(self, stop: asyncio.Event) -> None:
        try:
            from watchfiles import awatch
        except ImportError:  # pragma: no cover - watchfiles is a dependency
            self._say("warning: watchfiles is not installed; router-config.json and backends.json are not watched")
            return
        targets = {str(p.parent.resolve() / p.name) for p in self._files}
        folders = sorted({str(Path(t).parent) for t in targets if Path(t).parent.is_dir()})
        if not folders:
            self._say("warning: the folders of router-config.json and backends.json do not exist; not watching")
            return

        def relevant(change: object, path: str) -> bool:
            return path in targets

        try:
            async for _changes in awatch(
                *folders,
                watch_filter=relevant,
                stop_event=stop,
                recursive=False,
                debounce=400,
                step=30,
            ):
                self._on_change()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._say(f"warning: stopped watching {', '.join(folders)}: {exc}; restart serve to pick up changes")
