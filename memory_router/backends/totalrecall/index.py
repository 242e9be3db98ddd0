"""The index of one memory root: every file's entries, an inverted index and idf, kept up to date
by (mtime, size), with big files parsed in the background.

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


class _Parse:
    """One big memory file parsed in a background thread, once per change of the file.

    A 4 MiB daily note (~500k short lines) takes longer to parse than a query's whole budget; a
    parse cut at the router's timeout would keep nothing and start again on the next query. So a
    search hands such a file to a :class:`_Parse` of its own, waits for it at most half its budget,
    and answers from the other files meanwhile (``MEMORY.md`` included), saying so in the
    response's ``note``; the thread is not tied to any query's cancellation and finishes the parse,
    which the next search merges. It stops early only when the file changed again or is gone (a
    newer parse replaces it); a one-shot process leaves it behind at exit (a daemon thread)."""

    __slots__ = ("rel", "signature", "size", "started", "done", "stop", "entries", "why")

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

    def wait(self, until: float, cancel: threading.Event | None) -> bool:
        """Wait for the parse until ``until`` (monotonic) or the call's cancellation; True: done."""
        while not self.done.is_set():
            left = until - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            self.done.wait(min(left, 0.05))
        return True


class MemoryIndex:
    """Entries of all files plus an inverted index and idf, rebuilt when a file changes.

    A plain class (not a dataclass): defining a dataclass costs a cold query ~0.5 ms."""

    __slots__ = (
        "files",
        "skipped",
        "dirty",
        "entries",
        "postings",
        "idf",
        "term_sets",
        "_by_time",
        "_definitions",
        "indexing",
    )

    def __init__(self) -> None:
        self.files: dict[str, tuple[tuple[int, int], list[Entry]]] = {}
        # Files not indexed: rel path -> ((mtime_ns, size, ctime_ns), why). ctime: a chmod retries.
        self.skipped: dict[str, tuple[tuple[int, int, int], str]] = {}
        self.dirty = False  # files changed but entries were not rebuilt (a cancelled refresh)
        self.entries: list[Entry] = []
        self.postings: dict[str, list[int]] = {}
        self.idf: dict[str, float] = {}
        self.term_sets: list[frozenset[str]] = []  # per entry, for scoring
        self._by_time: list[Entry] | None = None  # entries newest first, built on first use
        self._definitions: dict[str, dict[int, Definition]] = {}  # symbol -> entry -> where
        self.indexing: dict[str, _Parse] = {}  # big files being parsed in the background

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
                    self.dirty = True
                continue
            skipped.pop(rel, None)
            files[rel] = (signature, entries)
            self.dirty = True
        for gone in set(self.indexing) - seen:
            self.indexing.pop(gone).stop.set()
        if len(seen) != len(files) + len(skipped):
            for gone in set(files) - seen:
                del files[gone]
                self.dirty = True
            for gone in set(skipped) - seen:
                del skipped[gone]
        if self.indexing and wait_until is not None:
            self._collect(wait_until, cancel)
        if self.dirty or not self.entries and self.files:
            self._rebuild()

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
                self.dirty = True
            elif job.why is not None:
                self.skipped[rel] = (job.signature, job.why)
                if self.files.pop(rel, None) is not None:
                    self.dirty = True

    def indexing_note(self) -> str | None:
        """What this answer left out because it is still being parsed (the response's note)."""
        if not self.indexing:
            return None
        now = time.monotonic()
        jobs = sorted(self.indexing.values(), key=lambda j: j.rel)
        shown = ", ".join(f"{j.rel} ({j.size / (1 << 20):.1f} MiB, {now - j.started:.1f} s so far)" for j in jobs[:3])
        more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
        return (
            f"still indexing {shown}{more} in the background: not searched in this answer "
            "(its previous version is, if it had one); the next query includes it"
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

    def _rebuild(self) -> None:
        self.dirty = False
        self.entries = [e for _, entries in self.files.values() for e in entries]
        postings: dict[str, list[int]] = defaultdict(list)
        term_sets: list[frozenset[str]] = []
        for i, entry in enumerate(self.entries):
            present = frozenset(entry.terms)
            term_sets.append(present)
            for term in present:
                postings[term].append(i)
        n = len(self.entries)
        self.postings = dict(postings)
        self.term_sets = term_sets
        self.idf = {t: math.log(1 + n / (1 + len(ids))) for t, ids in postings.items()}
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
