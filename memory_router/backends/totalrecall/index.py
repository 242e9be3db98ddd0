"""The index of one memory root: every file's entries, an inverted index and idf, kept up to date
by (mtime, size), with big files parsed (and a big index rebuilt) in the background.

**Bounded work.** A memory file larger than ``max_file_bytes`` (default 4 MiB) is skipped, and so
is one that cannot be read (EACCES...) or is not a regular file: the rest of the tree is still
indexed, and the reason is kept in :attr:`MemoryIndex.skipped`. A refresh stops between files
(and every few thousand lines of a file, :func:`.parse.parse_file`) once its ``cancel`` is set.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from memory_router.backends.common.definitions import Definition, find_definition
from memory_router.backends.common.files import FileRefused, read_regular_file
from memory_router.backends.totalrecall.parse import Cancelled, Entry, parse_file, word_terms
from memory_router.backends.totalrecall.scan import scan_tree, too_big

DEFAULT_MAX_FILE_BYTES = 4 << 20
DEFINITION_CACHE_SYMBOLS = 256  # symbols whose defining entries an index remembers

BIG_FILE_BYTES = 256 << 10  # a file at least this big is parsed in the background (see _Parse)


class _Job:
    """Work on a background thread of its own that a search waits for, within its budget."""

    __slots__ = ("done",)
    done: threading.Event

    def wait(self, until: float, cancel: threading.Event | None) -> bool:
        """Wait for the job until ``until`` (monotonic) or the call's cancellation; True: done."""
        while not self.done.is_set():
            left = until - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            self.done.wait(min(left, 0.05))
        return True


class _Parse(_Job):
    """One big memory file parsed in a background thread, once per change of the file.

    A 4 MiB daily note (~500k short lines) takes longer to parse than a query's whole budget; a
    parse cut at the router's timeout would keep nothing and start again on the next query. So a
    search hands such a file to a :class:`_Parse` of its own, waits for it at most half its budget,
    and answers from the other files meanwhile (``MEMORY.md`` included), saying so in the
    response's ``note``; the thread is not tied to any query's cancellation and finishes the parse,
    which the next search merges. It stops early only when the file changed again or is gone (a
    newer parse replaces it); a one-shot process leaves it behind at exit (a daemon thread)."""

    __slots__ = ("rel", "signature", "size", "started", "stop", "entries", "why")

    def __init__(self, root: Path, tier: str, rel: str, st: os.stat_result, limit: int) -> None:
        self.rel, self.size, self.started = rel, st.st_size, time.monotonic()
        self.signature = (st.st_mtime_ns, st.st_size, st.st_ctime_ns)
        self.done, self.stop = threading.Event(), threading.Event()
        self.entries: list[Entry] | None = None
        self.why: str | None = None  # why the file is skipped, when it could not be read
        args = (root, tier, rel, st.st_mtime, limit)
        threading.Thread(target=self._run, args=args, name=f"totalrecall-parse {rel}", daemon=True).start()

    def _run(self, root: Path, tier: str, rel: str, mtime: float, limit: int) -> None:
        try:
            raw = read_regular_file(root.joinpath(*rel.split("/")), limit)
            self.entries = parse_file(tier, rel, raw.decode("utf-8", "replace"), mtime, self.stop)
        except (Cancelled, FileNotFoundError):
            pass  # replaced by a newer parse, closed, or the file is gone: nothing to keep
        except FileRefused as exc:
            self.why = str(exc) + (" (max_file_bytes)" if "limit" in str(exc) else "")
        except OSError as exc:
            self.why = f"cannot read: {exc.strerror or exc}"
        except Exception as exc:  # noqa: BLE001 - a parse bug must not leave the file "indexing" forever
            self.why = f"cannot be parsed: {type(exc).__name__}: {exc}"
        finally:
            self.done.set()


BIG_INDEX_ENTRIES = 50_000  # an index of at least this many entries is rebuilt in the background
CANCEL_CHECK_ENTRIES = 1024  # a background rebuild looks at its stop flag this often

_View = tuple[list[Entry], dict[str, list[int]], list[frozenset[str]], dict[str, float]]


def _built(files: list[list[Entry]], stop: threading.Event | None = None) -> _View:
    """The searchable view of the files' entries: ``(entries, postings, term_sets, idf)``.
    Raises :class:`Cancelled` once ``stop`` is set (checked every few thousand entries)."""
    entries = [e for file_entries in files for e in file_entries]
    postings: dict[str, list[int]] = defaultdict(list)
    term_sets: list[frozenset[str]] = []
    for i, entry in enumerate(entries):
        if stop is not None and not i % CANCEL_CHECK_ENTRIES and stop.is_set():
            raise Cancelled
        present = frozenset(entry.terms)
        term_sets.append(present)
        for term in present:
            postings[term].append(i)
    n = len(entries)
    idf = {t: math.log(1 + n / (1 + len(ids))) for t, ids in postings.items()}
    return entries, dict(postings), term_sets, idf


class _Rebuild(_Job):
    """The inverted index of a big memory rebuilt in a background thread after a change.

    Rebuilding half a million entries (one 4 MiB daily note) takes seconds: done in the query that
    noticed the change, it timed that query out, and so did any later change (an edited
    MEMORY.md). So a search hands it to a :class:`_Rebuild` over the files' entries as they are,
    waits for it at most half its budget, and meanwhile answers from the previous view, naming the
    files not searched yet in the response's ``note``. ``changes`` is the index's change count it
    reflects: after a newer change a new rebuild replaces it (and this one stops)."""

    __slots__ = ("changes", "stop", "built")

    def __init__(self, files: list[list[Entry]], changes: int) -> None:
        self.changes = changes
        self.done, self.stop = threading.Event(), threading.Event()
        self.built: _View | None = None
        threading.Thread(target=self._run, args=(files,), name="totalrecall-rebuild", daemon=True).start()

    def _run(self, files: list[list[Entry]]) -> None:
        try:
            self.built = _built(files, self.stop)
        except Cancelled:
            pass  # replaced by a newer rebuild
        finally:
            self.done.set()


class MemoryIndex:
    """Entries of all files plus an inverted index and idf, rebuilt when a file changes.

    A plain class (not a dataclass): defining a dataclass costs a cold query ~0.5 ms."""

    __slots__ = (
        "files",
        "skipped",
        "entries",
        "postings",
        "idf",
        "term_sets",
        "_by_time",
        "_definitions",
        "indexing",
        "changes",
        "built_changes",
        "changed",
        "rebuilding",
    )

    def __init__(self) -> None:
        self.files: dict[str, tuple[tuple[int, int], list[Entry]]] = {}
        # Files not indexed: rel path -> ((mtime_ns, size, ctime_ns), why). ctime: a chmod retries.
        self.skipped: dict[str, tuple[tuple[int, int, int], str]] = {}
        self.entries: list[Entry] = []
        self.postings: dict[str, list[int]] = {}
        self.idf: dict[str, float] = {}
        self.term_sets: list[frozenset[str]] = []  # per entry, for scoring
        self._by_time: list[Entry] | None = None  # entries newest first, built on first use
        self._definitions: dict[str, dict[int, Definition]] = {}  # symbol -> entry -> where
        self.indexing: dict[str, _Parse] = {}  # big files being parsed in the background
        # The files' changes are counted; the searchable view (entries, postings...) reflects
        # `built_changes` of them (0: never built), `changed` names the files changed since.
        self.changes = 0
        self.built_changes = 0
        self.changed: set[str] = set()
        self.rebuilding: _Rebuild | None = None  # a big index's rebuild in the background

    def refresh(  # noqa: C901 - one walk: each changed file is parsed here, in the background or skipped
        self,
        root: Path,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        cancel: threading.Event | None = None,
        wait_until: float | None = None,
    ) -> None:
        """Bring the index up to date with the files under ``root``. Raises :class:`Cancelled`
        once ``cancel`` is set (what was read so far is kept and indexed by the next refresh).

        With ``wait_until`` (a monotonic time: a search's), a changed file of at least
        :data:`BIG_FILE_BYTES` is parsed in the background (:class:`_Parse`) and waited for until
        then; one still parsing is left out of this refresh (its previous version, if any, stays
        indexed) and listed in :attr:`indexing`. Without it every file is parsed here."""
        seen: set[str] = set()
        files, skipped = self.files, self.skipped
        for tier, rel, st in scan_tree(root):
            seen.add(rel)
            signature = (st.st_mtime_ns, st.st_size)
            cached = files.get(rel)
            if cached is not None and cached[0] == signature:
                continue
            if cancel is not None and cancel.is_set():
                raise Cancelled
            if wait_until is not None and BIG_FILE_BYTES <= st.st_size <= max_file_bytes:
                self._parse_in_background(root, tier, rel, st, max_file_bytes)
                continue
            entries = self._read(root, tier, rel, st, max_file_bytes, cancel)
            if entries is None:
                if files.pop(rel, None) is not None:
                    self._touch(rel)
                continue
            skipped.pop(rel, None)
            files[rel] = (signature, entries)
            self._touch(rel)
        for gone in set(self.indexing) - seen:
            self.indexing.pop(gone).stop.set()
        if len(seen) != len(files) + len(skipped):
            for gone in set(files) - seen:
                del files[gone]
                self._touch(gone)
            for gone in set(skipped) - seen:
                del skipped[gone]
        if self.indexing and wait_until is not None:
            self._collect(wait_until, cancel)
        if self.changes != self.built_changes or not self.entries and self.files:
            self._rebuild(wait_until, cancel)

    def _touch(self, rel: str) -> None:
        """File ``rel`` changed (or is gone): the searchable view must be rebuilt."""
        self.changes += 1
        self.changed.add(rel)

    def pending(self) -> bool:
        """Whether a later refresh has more to merge: a big file still parsing, or a rebuild."""
        return bool(self.indexing) or self.changes != self.built_changes

    def _parse_in_background(self, root: Path, tier: str, rel: str, st: os.stat_result, limit: int) -> None:
        full = (st.st_mtime_ns, st.st_size, st.st_ctime_ns)
        known = self.skipped.get(rel)
        if known is not None and known[0] == full:
            return  # skipped before and unchanged: do not try again
        job = self.indexing.get(rel)
        if job is not None and job.signature == full:
            return  # already being parsed
        if job is not None:
            job.stop.set()  # the file changed again: that parse is for an old version
        self.indexing[rel] = _Parse(root, tier, rel, st, limit)

    def _collect(self, until: float, cancel: threading.Event | None) -> None:
        """Merge the background parses that are done (waiting for them until ``until``)."""
        for rel, job in list(self.indexing.items()):
            if not job.wait(until, cancel):
                if cancel is not None and cancel.is_set():
                    raise Cancelled
                continue
            del self.indexing[rel]
            if job.entries is not None:
                self.skipped.pop(rel, None)
                self.files[rel] = (job.signature[:2], job.entries)
                self._touch(rel)
            elif job.why is not None:
                self.skipped[rel] = (job.signature, job.why)
                if self.files.pop(rel, None) is not None:
                    self._touch(rel)

    def indexing_note(self, long_lived: bool = True) -> str | None:
        """What this answer left out because it is still being parsed or merged (the response's
        note), and when it will be searched: in a long-lived process (the daemon) a later query
        merges the finished work; a one-shot process exits first, so every one-shot query would
        leave the file out, and the note says what indexes it once per change instead."""
        now = time.monotonic()
        jobs = sorted(self.indexing.values(), key=lambda j: j.rel)
        parts = [f"{j.rel} ({j.size / (1 << 20):.1f} MiB, {now - j.started:.1f} s so far)" for j in jobs]
        if self.changes != self.built_changes:  # parsed, not merged yet: the index is being rebuilt
            merging = sorted(self.changed - self.indexing.keys())
            parts += [f"{rel} (parsed; the index is being rebuilt)" for rel in merging]
        if not parts:
            return None
        shown = ", ".join(parts[:3])
        more = f" and {len(parts) - 3} more" if len(parts) > 3 else ""
        when = (
            "a later query includes it once it is parsed"
            if long_lived
            else "a one-shot query cannot wait for it: the warm daemon (memory-router daemon start; the OpenClaw "
            "plugin starts one) parses it once per change and then searches it"
        )
        return (
            f"still indexing {shown}{more} in the background: not searched in this answer "
            f"(its previous version is, if it had one); {when}"
        )

    def _read(
        self, root: Path, tier: str, rel: str, st: os.stat_result, limit: int, cancel: threading.Event | None
    ) -> list[Entry] | None:
        """One file's entries, or ``None`` when it is skipped (and why is in ``self.skipped``)."""
        full = (st.st_mtime_ns, st.st_size, st.st_ctime_ns)
        known = self.skipped.get(rel)
        if known is not None and known[0] == full:
            return None  # skipped before and unchanged: do not try again
        why = too_big(st.st_size, limit)
        if why is None:
            try:
                raw = read_regular_file(root.joinpath(*rel.split("/")), limit)
                return parse_file(tier, rel, raw.decode("utf-8", "replace"), st.st_mtime, cancel)
            except FileNotFoundError:
                return None  # gone since the walk: the next walk forgets it
            except FileRefused as exc:
                why = str(exc) + (" (max_file_bytes)" if "limit" in str(exc) else "")
            except OSError as exc:
                why = f"cannot read: {exc.strerror or exc}"
        self.skipped[rel] = (full, why)
        return None

    def _rebuild(self, wait_until: float | None = None, cancel: threading.Event | None = None) -> None:
        """Rebuild the searchable view from the files' entries: here, or (a search's refresh of a
        big index that was built before, so there is a previous view to answer from) in the
        background (:class:`_Rebuild`), waited for until ``wait_until``."""
        files = [entries for _, entries in self.files.values()]
        if wait_until is None or not self.built_changes or sum(map(len, files)) < BIG_INDEX_ENTRIES:
            self._install(_built(files), self.changes)
            return
        job = self.rebuilding
        if job is None or job.changes != self.changes:
            if job is not None:
                job.stop.set()  # files changed again: that rebuild is for an old state
            job = self.rebuilding = _Rebuild(files, self.changes)
        if job.wait(wait_until, cancel):
            self.rebuilding = None
            if job.built is not None:
                self._install(job.built, job.changes)
        elif cancel is not None and cancel.is_set():
            raise Cancelled

    def _install(self, built: _View, changes: int) -> None:
        self.entries, self.postings, self.term_sets, self.idf = built
        self.built_changes = changes
        self.changed.clear()  # only ever installed for the current change count (the lock is held)
        self._by_time = None
        self._definitions = {}

    def definitions(self, symbol: str) -> dict[int, Definition]:
        """``entry index -> Definition`` for the entries whose code defines ``symbol``; cached
        until the next rebuild. Only entries holding the symbol's term (and a backtick) are read."""
        found = self._definitions.get(symbol)
        if found is None:
            term = word_terms(symbol)[0]
            found = {}
            for i in self.postings.get(term, ()):
                text = self.entries[i].text
                if "`" in text and (where := find_definition(text, symbol, markdown=True)) is not None:
                    found[i] = where
            if len(self._definitions) >= DEFINITION_CACHE_SYMBOLS:
                self._definitions.clear()
            self._definitions[symbol] = found
        return found

    def by_time(self) -> list[Entry]:
        """All entries, newest first (a stable sort, so ties keep index order); cached.

        Entries whose time is written down (a ``[HH:MM]`` daily line, a dated file, frontmatter,
        ``last_verified``) come before entries known only by their file's mtime: a fresh checkout
        or a copy gives every file "now", which says nothing about when the memory was made."""
        if self._by_time is None:
            stamp = datetime.min.replace(tzinfo=timezone.utc)
            self._by_time = sorted(self.entries, key=lambda e: (e.dated, e.timestamp or stamp), reverse=True)
        return self._by_time

    def idf_of(self, term: str) -> float:
        # A term the memory never mentions weighs the most: the memory cannot answer that part.
        return self.idf.get(term, math.log(1 + len(self.entries) + 1))
