"""Keeping a qmd index up to date with its collections' files (the daemon's index refresh).

qmd indexes a folder only when told (``qmd update``; ``qmd embed`` for the vectors), so an index
answers from whatever was last built. In a long-lived router (``serve``, ``serve --socket``, the
OpenClaw plugin's daemon) the qmd backend offers its collections' folders to the daemon's
:class:`~memory_router.daemon.watch.Watcher`; every change there reaches a :class:`Refresher`,
which runs a debounced ``qmd update`` (then ``qmd embed`` when the embedding model is on disk)
under the index-writer lock. Searches never wait for it: qmd's SQLite is in WAL mode, so readers
keep answering from the last committed index while a writer runs.

Pieces, smallest first:

* :class:`Schedule`: the sans-IO debounce machine (an injected clock, no I/O): when an update is
  due, whether one is running, how the last one ended;
* :func:`.collection_scan.collection_specs`, :func:`~.collection_scan.scan`,
  :func:`~.collection_scan.pending_files`: which files each collection holds
  (qmd's own walk: its glob, no hidden files, no symlinked directories, its excluded folders) and
  how many changed since the last update;
* the record (``<index>.refresh.json`` beside the index): per collection, the files as they were
  when the last update started, and how the last run ended. Every memory-router process reads it,
  so the one-shot ``memory-router backends`` says how fresh the index is without a daemon;
* :func:`index_lock_path` / :func:`try_lock`: the index-writer lock (``<index>.lock`` beside the
  index, an ``flock``), shared with the demo's and benches' indexing (:func:`.indexing.index_lock`), so
  two daemons never write one index at once;
* :class:`Refresher`: the asyncio driver.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memory_router.backends.qmd.collection_scan import CollectionSpec, Signatures, collection_specs, pending_files, scan
from memory_router.backends.qmd.settings import RefreshSettings
from memory_router.core.frozen import Frozen

RECORD_VERSION = 1
LOCK_POLL_S = 0.1
ERROR_CHARS = 400


# --------------------------------------------------------------------------- the debounce machine


class Schedule:
    """When the next update is due, sans IO: the driver reports changes and runs, and asks
    :meth:`delay`. A change starts (or extends) a quiet period of ``debounce_s``; the update is due
    when it ends, or ``max_wait_s`` after the first change not yet indexed, whichever is first. A
    change during a run makes another run due after it. A failed run is not retried by itself:
    the next change retries it (a broken qmd must not spin)."""

    def __init__(self, debounce_s: float, max_wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.debounce_s = debounce_s
        self.max_wait_s = max(max_wait_s, debounce_s)
        self.clock = clock
        self._first: float | None = None  # the first change not yet taken by a run
        self._last: float | None = None
        self.running = False
        self.runs = 0
        self.failures = 0
        self.last_error: str | None = None
        self.last_ok: bool | None = None

    @property
    def dirty(self) -> bool:
        """A change happened that no run has taken yet."""
        return self._first is not None

    def changed(self) -> None:
        now = self.clock()
        if self._first is None:
            self._first = now
        self._last = now

    def delay(self) -> float | None:
        """Seconds until an update is due (0.0: now); None when nothing is to do (no change, or a
        run is under way: it is asked again when the run ends)."""
        if self.running or self._first is None or self._last is None:
            return None
        due = min(self._last + self.debounce_s, self._first + self.max_wait_s)
        return max(0.0, due - self.clock())

    def _take(self, upto: float | None) -> None:
        """Forget the changes up to ``upto`` (the clock when the files were looked at; None: all):
        one that came later is still to be indexed, from its own time."""
        if upto is None or self._last is None or self._last <= upto:
            self._first = self._last = None
        else:
            self._first = self._last

    def settle(self, upto: float | None = None) -> None:
        """A due check, which looked at the files at ``upto``, found nothing to update (the change
        was outside the collections' files, or another writer indexed it)."""
        self._take(upto)

    def begin(self, upto: float | None = None) -> None:
        """A run starts over the files as they were at ``upto``: it takes the changes until then."""
        if self.running:
            raise RuntimeError("an update is already running")
        self.running = True
        self._take(upto)
        self.runs += 1

    def end(self, error: str | None) -> None:
        """The run ended: ``error`` None when it succeeded."""
        self.running = False
        self.last_ok = error is None
        self.last_error = error
        if error is not None:
            self.failures += 1


# --------------------------------------------------------------------------- the record and the lock


def index_lock_path(index_file: Path) -> Path:
    """The index-writer lock beside the index: ``index.sqlite`` -> ``index.lock`` (what the demo,
    the benches and the daemon's refresh all take before writing the index)."""
    return index_file.with_name(index_file.stem + ".lock")


def record_path(index_file: Path) -> Path:
    return index_file.with_name(index_file.stem + ".refresh.json")


def read_record(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes()[: 64 << 20])
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == RECORD_VERSION else {}


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    """Replace the record atomically (a reader never sees half of it). Called under the lock."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**record, "version": RECORD_VERSION}, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, path)


def try_lock(path: Path) -> int | None:
    """The lock's file descriptor, held, or None when another writer holds it. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_held(path: Path) -> bool:
    """Whether a writer holds the index lock now (never creates the file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def wanted_specs(config_file: Path, names: Iterable[str]) -> tuple[dict[str, CollectionSpec], list[str]]:
    """The named collections' specs (all of index.yml's when ``names`` is empty) and the names
    index.yml does not know."""
    specs = collection_specs(config_file)
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return specs, []
    return {n: specs[n] for n in wanted if n in specs}, [n for n in wanted if n not in specs]


def freshness(
    index_file: Path, config_file: Path, names: Iterable[str], record: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Per collection: its folder, how many files changed since the last update memory-router ran
    (None: it never ran one on this index), and when that update was; the last run's outcome, and
    whether a writer holds the index lock now. Blocking (it walks the folders)."""
    record = read_record(record_path(index_file)) if record is None else record
    specs, unknown = wanted_specs(config_file, names)
    known = _collections_of(record)
    collections: dict[str, Any] = {}
    for name, spec in specs.items():
        entry = known.get(name) if isinstance(known.get(name), dict) else None
        current = scan(spec)
        collections[name] = {
            "folder": str(spec.root),
            "pattern": spec.pattern,
            "files": len(current),
            "pending": pending_files(current, entry.get("files") or {}) if entry else None,
            "last_updated": entry.get("updated_at") if entry else None,
        }
    for name in unknown:
        collections[name] = {"folder": None, "pending": None, "last_updated": None, "error": "not in index.yml"}
    last = record.get("last_run") if isinstance(record.get("last_run"), dict) else None
    return {
        "collections": collections,
        "last_run": last,
        "failed": bool(last and last.get("ok") is False),
        "error": last.get("error") if last and last.get("ok") is False else None,
        "locked": lock_held(index_lock_path(index_file)),
    }


# --------------------------------------------------------------------------- the driver


class Command(Frozen):
    """One qmd writer call: argument list, environment, working directory."""

    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path


class Refresher:
    """Brings one qmd index up to date after changes to its collections' files, in the background.

    ``update`` is the ``qmd update`` call; ``embed`` returns the ``qmd embed`` call, or None when
    no embedding model is on disk (asked at each run: a model pulled later is used from then on).
    ``report(kind, message)`` puts a failure on stderr and in router.log."""

    def __init__(
        self,
        name: str,
        settings: RefreshSettings,
        *,
        index_file: Path,
        config_file: Path,
        collections: Sequence[str],
        update: Command,
        embed: Callable[[], Command | None],
        report: Callable[[str, str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.settings = settings
        self.index_file = index_file
        self.config_file = config_file
        self.collections = tuple(collections)
        self.update = update
        self.embed = embed
        self.report = report
        self.schedule = Schedule(settings.debounce_ms / 1000, settings.max_wait_ms / 1000, clock)
        self.watched = False
        self.waiting_for_lock = False
        self.phase: str | None = None  # "update" / "embed" while running
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def roots(self) -> list[Path]:
        """The existing folders of the collections (a missing one would stop the whole watch)."""
        specs, _ = wanted_specs(self.config_file, self.collections)
        return sorted({s.root for s in specs.values() if s.root.is_dir()})

    def set_watched(self, watched: bool) -> None:
        """The daemon's watch started (run the loop, check once for changes made while no one
        watched) or stopped (stop the loop; a run under way finishes)."""
        self.watched = watched
        if watched and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=f"qmd-refresh-{self.name}")
            self.note_change()

    @property
    def active(self) -> bool:
        """Its loop runs (it was watched once); a watch that stopped leaves it running."""
        return self._task is not None

    def note_change(self) -> None:
        self.schedule.changed()
        self._wake.set()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()  # a qmd process under way is killed with its group (process.run)
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            delay = self.schedule.delay()
            if delay is None or delay > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                await self.refresh_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a refresh bug must not end the daemon
                self.schedule.running = False
                self.report("QMD_REFRESH_FAILED", f"{self.name}: refreshing the qmd index failed: {exc!r}")

    async def refresh_once(self) -> None:
        """One due check: nothing pending -> settle; else take the lock, update (and embed), record."""
        looked = self.schedule.clock()
        if not await asyncio.to_thread(self._has_pending):
            self.schedule.settle(looked)
            return
        lock = index_lock_path(self.index_file)
        self.waiting_for_lock = True
        try:
            while (fd := await asyncio.to_thread(try_lock, lock)) is None:
                await asyncio.sleep(LOCK_POLL_S)
        finally:
            self.waiting_for_lock = False
        error: str | None = None
        started = time.time()
        looked = self.schedule.clock()
        try:
            # Under the lock, again: another daemon may have just updated this index.
            specs, _ = await asyncio.to_thread(wanted_specs, self.config_file, self.collections)
            snapshot = await asyncio.to_thread(lambda: {n: scan(s) for n, s in specs.items()})
            record = await asyncio.to_thread(read_record, record_path(self.index_file))
        except BaseException:
            await asyncio.to_thread(unlock, fd)
            raise
        if not _pending_in(record, snapshot):
            await asyncio.to_thread(unlock, fd)
            self.schedule.settle(looked)
            return
        self.schedule.begin(looked)
        try:
            self.phase = "update"
            error = await self._run("update", self.update)
            if error is None:
                record = _with_files(record, snapshot, started)
            if error is None and self.settings.embed and (embed := self.embed()) is not None:
                self.phase = "embed"
                error = await self._run("embed", embed)
            run = {"at": _iso(started), "ok": error is None, "error": error, "seconds": round(time.time() - started, 2)}
            await asyncio.to_thread(write_record, record_path(self.index_file), {**record, "last_run": run})
        finally:
            self.phase = None
            if error is not None:
                # Said before the state shows the failure, so whoever sees it failed (`daemon
                # status`, a test) finds it on stderr and in router.log too.
                why = f"{self.name}: {error}; the index answers as before; retried on the next change"
                self.report("QMD_REFRESH_FAILED", why)
            self.schedule.end(error)
            await asyncio.to_thread(unlock, fd)

    def _has_pending(self) -> bool:
        specs, _ = wanted_specs(self.config_file, self.collections)
        snapshot = {n: scan(s) for n, s in specs.items()}
        return _pending_in(read_record(record_path(self.index_file)), snapshot)

    async def _run(self, what: str, command: Command) -> str | None:
        """Run one qmd writer call; None on success, else why it failed (for the report)."""
        from memory_router.backends.common.process import ExecutableNotFound, OutputTooLarge, run

        command.cwd.mkdir(parents=True, exist_ok=True)
        try:
            done = await asyncio.wait_for(
                run(command.argv, cwd=command.cwd, env=command.env), self.settings.timeout_s
            )  # a timeout cancels run(), which kills the process group
        except asyncio.TimeoutError:
            return f"qmd {what} timed out after {self.settings.timeout_s:g} s (killed)"
        except (ExecutableNotFound, OutputTooLarge, OSError) as exc:
            return f"qmd {what} could not run: {exc}"
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip()[-ERROR_CHARS:] or "no message"
            return f"qmd {what} exited with code {done.returncode}: {tail}"
        return None

    async def facts(self) -> dict[str, Any]:
        """What ``daemon status`` and ``backends`` show: :func:`freshness` plus this daemon's state."""
        fresh = await asyncio.to_thread(freshness, self.index_file, self.config_file, self.collections)
        schedule = self.schedule
        return {
            **fresh,
            "enabled": True,
            "watching": self.watched,
            "running": schedule.running,
            "phase": self.phase,
            "waiting_for_lock": self.waiting_for_lock,
            "due": schedule.dirty,
            "runs": schedule.runs,
            "failures": schedule.failures,
            "failed": schedule.last_ok is False if schedule.last_ok is not None else fresh["failed"],
            "error": schedule.last_error if schedule.last_ok is not None else fresh["error"],
            "debounce_ms": self.settings.debounce_ms,
            "embed": self.settings.embed,
        }


def _pending_in(record: Mapping[str, Any], snapshot: Mapping[str, Signatures]) -> bool:
    known = _collections_of(record)
    for name, current in snapshot.items():
        entry = known.get(name)
        if not isinstance(entry, dict) or pending_files(current, entry.get("files") or {}):
            return True
    return False


def _with_files(record: Mapping[str, Any], snapshot: Mapping[str, Signatures], started: float) -> dict[str, Any]:
    known = dict(record.get("collections") or {}) if isinstance(record.get("collections"), dict) else {}
    for name, files in snapshot.items():
        known[name] = {"updated_at": _iso(started), "files": {rel: list(sig) for rel, sig in files.items()}}
    return {**record, "collections": known}


def _collections_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record's ``collections`` object (``{}`` when the record has none or a broken one)."""
    found = record.get("collections")
    return found if isinstance(found, dict) else {}
