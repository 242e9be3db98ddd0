"""Total Recall: markdown memory tiers in the project, searched in-process.

Layout under the memory root: Total Recall's own tiers, then OpenClaw's memory files (what
memory-core indexes by default; docs/backends-openclaw-layout.md)::

    CLAUDE.local.md            working memory            tier working    weight 1.00
    memory/registers/*.md      decisions, people, ...    tier registers  weight 0.95
    MEMORY.md, memory.md       OpenClaw long-term memory tier longterm   weight 0.95
    memory/daily/YYYY-MM-DD.md timestamped daily log     tier daily      weight 0.90
    memory/YYYY-MM-DD[-x].md   OpenClaw daily notes      tier daily      weight 0.90
    memory/**/*.md (others)    OpenClaw topic notes      tier notes      weight 0.85
    memory/archive/**/*.md     history                   tier archive    weight 0.75

A daily note is dated by its file name (and ``[HH:MM]`` lines by their time); other files by
their frontmatter (``event_time``/``record_time``), a claim by its ``last_verified``, else by
the file's mtime. One file reached by two paths (``memory/daily/X.md`` a symlink to
``memory/X.md``) is read once, under the path that is not a symlink. A root holding no memory
file at all answers ``BACKEND_UNAVAILABLE`` ("no memory files under <root>: ..."), not ``empty``.

The root is ``settings.root``, else ``$OPENCLAW_REPO_ROOT``, else the git top level of the
working directory (found by walking up to ``.git``, no subprocess), else OpenClaw's agent
workspace when that folder exists (``agents.defaults.workspace`` in openclaw.json, default
``~/.openclaw/workspace``: :func:`memory_router.config.paths.openclaw_workspace`), which is where an
OpenClaw agent's exec tool runs and is not a git repository.

**Entries.** Each file is split into entries: a top-level list item with its indented children,
a ``[HH:MM] ...`` daily line, a paragraph, or a run of ``- **key**: value`` claim lines (one
register claim). Entries remember their heading path; an entry under a heading that starts
``[superseded: ...]`` is marked superseded.

**Relevance** (0..1; the router accepts >= 0.4)::

    coverage  = sum(idf(t) for query terms t found in the entry) / sum(idf(t) for all query terms)
    base      = min(1, coverage + phrase_bonus)     # +0.1 per adjacent query-term pair, max +0.2
    relevance = base * tier_weight * recency * (0.6 if superseded else 1)
    recency   = 0.85 + 0.15 * 0.5 ** (age_days / 14)

Query terms are the query's words minus stopwords and meta words ("recently", "session"...),
lower-cased and lightly stemmed; identifiers match their camel/snake parts too. So an entry that
holds all of a query's content today in working memory scores ~1.0, and one that holds about
half of it (by idf weight) in the daily log scores ~0.4: "a weak match". A query with no content
terms at all ("what was the last thing") returns the most recent entries at 0.35 x recency,
which the router treats as weak.

**Bounded work.** A memory file larger than ``max_file_bytes`` (default 4 MiB) is skipped, and so
is one that cannot be read (EACCES...) or is not a regular file: the rest of the tree is still
searched, and ``memory-router backends`` lists what was skipped and why. The search is blocking
work (:class:`~.base.BlockingAdapter`: in the daemon it runs on the instance's own threads) and
stops between files (and every few thousand
lines of a file) once the router has given up on the call, so a slow tree never holds threads
that other backends need.

Parsed entries are cached per file by (mtime, size), so a long-lived process re-reads only
files that changed. In the daemon the memory tree is also *watched* (:meth:`watch_paths`,
:meth:`set_watched`, :meth:`invalidate`): a warm query then skips even the walk that stats every
file, until a change under the root (or :data:`WATCHED_RESCAN_S` without one, as a safety net
for missed events) marks the index stale.
"""

from __future__ import annotations

import functools
import heapq
import math
import os
import re
import stat
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from typing import Annotated

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    QUERY_TIMEOUT,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
    Result,
    Stopwatch,
)
from memory_router.backends.common.definitions import (
    Definition,
    definition_target,
    definitions_first_relevances,
    find_definition,
)
from memory_router.backends.common.files import FileRefused, read_regular_file
from memory_router.backends.common.settings import Limits
from memory_router.backends.common.words import META_WORDS, STOPWORDS, identifier_parts, recency, stem
from memory_router.config.envvars import TOTALRECALL
from memory_router.config.openclaw import OpenClawConfigInvalid, agent_workspace
from memory_router.config.paths import openclaw_workspace
from memory_router.core.frozen import Frozen
from memory_router.core.timefmt import iso_z

ENV_VARS: frozenset[str] = TOTALRECALL  # the environment variables it reads: memory_router.config.envvars

TIER_WEIGHTS = {"working": 1.0, "registers": 0.95, "longterm": 0.95, "daily": 0.9, "notes": 0.85, "archive": 0.75}
TOTAL_RECALL_FOLDERS = frozenset({"registers", "daily", "archive"})  # memory/<these>: Total Recall's tiers
OPENCLAW_LONG_TERM = ("MEMORY.md", "memory.md")  # memory-core's long-term files, at the root
SUPERSEDED_FACTOR = 0.6
NO_TERMS_RELEVANCE = 0.35
MAX_CONTENT_CHARS = 2000
WATCHED_RESCAN_S = 5.0  # even when watched, walk the tree at least this often
MODES = None  # a single mode: chain steps name none
DEFAULT_MAX_FILE_BYTES = 4 << 20
CANCEL_CHECK_LINES = 1024  # parse_file looks at its cancellation flag this often
DEFINITION_CACHE_SYMBOLS = 256  # symbols whose defining entries an index remembers


@dataclass(frozen=True, slots=True)
class Settings:
    """``backends.<name>`` keys for ``"type": "totalrecall"`` in router-config.json (all optional)."""

    __pydantic_config__ = {"extra": "forbid", "strict": True}

    root: str | None = None
    """Memory root: the project or OpenClaw workspace holding CLAUDE.local.md, MEMORY.md, memory/."""
    max_file_bytes: Annotated[int, Limits(ge=1, le=1 << 40)] = DEFAULT_MAX_FILE_BYTES
    """A memory file larger than this is skipped (and listed by ``memory-router backends``)."""


def create(name: str, settings: Settings, context: BackendContext) -> TotalRecallBackend:
    fixed = _fixed_root(settings, context)
    shared = Path(os.path.expanduser(settings.root)) if settings.root else None
    if fixed is not None:
        return TotalRecallBackend(name, fixed, settings.max_file_bytes, shared_root=shared, environ=context.environ)
    environ = context.environ
    # The root is OpenClaw's workspace: read now (an openclaw.json that cannot be used is a
    # configuration error, exit 2), then again per query (cached by the file's stat), so a moved
    # workspace (agents.defaults.workspace changed) is followed by a long-lived daemon.
    return TotalRecallBackend(
        name,
        _workspace_root(environ),
        settings.max_file_bytes,
        resolve=lambda: _workspace_root(environ),
        environ=environ,
    )


class Cancelled(Exception):
    """The router gave up on the call: stop reading and parsing."""


def resolve_root(settings: Settings, context: BackendContext) -> Path | None:
    """The memory root of an unscoped query (see the module docstring for the order)."""
    fixed = _fixed_root(settings, context)
    return fixed if fixed is not None else _workspace_root(context.environ)


def _fixed_root(settings: Settings, context: BackendContext) -> Path | None:
    """The root given by the settings, ``$OPENCLAW_REPO_ROOT`` or the working directory's git
    repository: fixed for the instance's life (``None``: none of them; OpenClaw's workspace)."""
    if settings.root:
        return Path(os.path.expanduser(settings.root))
    if env_root := context.environ.get("OPENCLAW_REPO_ROOT"):
        return Path(env_root)
    for directory in (context.cwd, *context.cwd.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _workspace_root(environ: Mapping[str, str]) -> Path | None:
    workspace, _ = openclaw_workspace(environ)
    return Path(workspace) if os.path.isdir(workspace) else None


# What to do when no root is found (the probe's and an unavailable search's message).
NO_ROOT_FIX = (
    "set backends.{name}.root in router-config.json or OPENCLAW_REPO_ROOT, run it inside a git "
    "repository, or give OpenClaw an agent workspace (agents.defaults.workspace, ~/.openclaw/workspace)"
)


# --------------------------------------------------------------------------- text handling

_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*|_+[^\W_]+", re.UNICODE)
_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']+)'")


@functools.lru_cache(maxsize=1 << 16)
def _word_terms(word: str) -> tuple[str, ...]:
    """The terms one word contributes: its stem, then its identifier parts' stems if it has
    several. Cached: parsing a memory stems the same few thousand words over and over."""
    lower = word.lower()
    if lower == word and word.isascii() and word.isalpha():
        return (stem(lower),)  # plain lowercase ASCII: exactly one identifier part, itself
    parts = identifier_parts(word)
    if len(parts) > 1:
        return (stem(lower), *(stem(p) for p in parts))
    return (stem(lower),)


def index_terms(text: str) -> list[str]:
    """Stemmed terms of a text in order, with identifiers also split into their parts."""
    terms: list[str] = []
    for word in _WORD.findall(text):
        terms.extend(_word_terms(word))
    return terms


def query_terms(query: str) -> list[str]:
    """The query's content terms, stemmed, de-duplicated, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        lower = word.lower()
        if lower in STOPWORDS or lower in META_WORDS or len(lower) < 2:
            continue
        seen.setdefault(stem(lower), None)
    return list(seen)


# --------------------------------------------------------------------------- parsing


class Entry(Frozen):
    tier: str
    path: str  # relative to the memory root
    line: int
    heading: str
    text: str
    timestamp: datetime | None
    superseded: bool
    terms: tuple[str, ...]
    dated: bool = True  # False: the timestamp is only the file's mtime (a checkout resets it)
    line_map: tuple[int, ...] | None = None  # file line of each text line; None: consecutive from `line`

    def file_line(self, text_line: int) -> int:
        """The file's line number of the entry text's 1-based line ``text_line``."""
        if self.line_map is not None and 0 < text_line <= len(self.line_map):
            return self.line_map[text_line - 1]
        return self.line + text_line - 1


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_DAILY_TIME = re.compile(r"^\s*(?:[-*+]\s+)?\[(\d{1,2}):(\d{2})\]\s*(.*)$")
_CLAIM = re.compile(r"^\s*[-*+]\s+\*\*([\w ]+)\*\*\s*:\s*(.*)$")
_SUPERSEDED = re.compile(r"^\[superseded\b", re.IGNORECASE)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?")
# A daily note's name: Total Recall's memory/daily/YYYY-MM-DD.md, OpenClaw's memory/YYYY-MM-DD.md
# and its session notes memory/YYYY-MM-DD-<slug>.md.
_DAILY_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:-[^/]*)?\.md$")


def _parse_date(text: str) -> datetime | None:
    m = _DATE.search(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc)
    except ValueError:
        return None


def _split_frontmatter(lines: list[str]) -> tuple[dict[str, str], int]:
    if not lines or lines[0].strip() != "---":
        return {}, 0
    meta: dict[str, str] = {}
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return meta, i + 1
        key, sep, value = lines[i].partition(":")
        if sep:
            meta[key.strip().lower()] = value.strip().strip("\"'")
    return {}, 0  # an unterminated block is content, not frontmatter


def parse_file(tier: str, rel_path: str, text: str, mtime: float, cancel: threading.Event | None = None) -> list[Entry]:  # noqa: C901 - one pass of a line-oriented markdown state machine; splitting it scatters the state
    """Split one memory file into entries. Raises :class:`Cancelled` once ``cancel`` is set."""
    lines = text.splitlines()
    meta, body_start = _split_frontmatter(lines)
    file_time = _parse_date(meta.get("event_time", "") or meta.get("record_time", ""))
    if file_time is None and tier == "daily":
        m = _DAILY_NAME.match(Path(rel_path).name)
        if m:
            file_time = _parse_date("-".join(m.groups()))
    file_dated = file_time is not None
    if file_time is None:
        file_time = datetime.fromtimestamp(mtime, tz=timezone.utc)
    file_label = Path(rel_path).stem.replace("-", " ").replace("_", " ")

    entries: list[Entry] = []
    headings: list[tuple[int, str]] = []
    superseded_level: int | None = None
    block: list[str] = []
    block_lines: list[int] = []  # the file line of each block line (blank lines inside items are skipped)
    block_line = 0
    block_kind = ""  # "item" | "para" | "claim" | "daily"
    block_time: datetime | None = None

    def flush() -> None:
        nonlocal block, block_lines, block_kind, block_time
        body = "\n".join(s.strip() for s in block).strip()
        if body:
            heading = " > ".join(h for _, h in headings)
            when = block_time or file_time
            dated = block_time is not None or file_dated
            if block_kind == "claim":
                verified = re.search(r"\*\*last_verified\*\*\s*:\s*(\S+)", body)
                if verified and (verified_time := _parse_date(verified.group(1))):
                    when, dated = verified_time, True
            entries.append(
                Entry(
                    tier=tier,
                    path=rel_path,
                    line=block_line,
                    heading=heading,
                    text=body[:MAX_CONTENT_CHARS],
                    timestamp=when,
                    superseded=superseded_level is not None,
                    terms=tuple(index_terms(f"{heading} {file_label} {body}")),
                    dated=dated,
                    line_map=None if block_lines[-1] - block_line + 1 == len(block_lines) else tuple(block_lines),
                )
            )
        block, block_lines, block_kind, block_time = [], [], "", None

    def start(kind: str, line_no: int, first: str, when: datetime | None = None) -> None:
        nonlocal block, block_lines, block_kind, block_line, block_time
        flush()
        block, block_lines, block_kind, block_line, block_time = [first], [line_no], kind, line_no, when

    def extend(raw: str, line_no: int) -> None:
        block.append(raw)
        block_lines.append(line_no)

    for offset, raw in enumerate(lines[body_start:]):
        line_no = body_start + offset + 1
        if cancel is not None and not offset % CANCEL_CHECK_LINES and cancel.is_set():
            raise Cancelled
        if not raw.strip():
            if block_kind == "para":
                flush()
            continue
        if m := _HEADING.match(raw):
            flush()
            level, title = len(m.group(1)), m.group(2)
            while headings and headings[-1][0] >= level:
                headings.pop()
            if superseded_level is not None and level <= superseded_level:
                superseded_level = None
            if _SUPERSEDED.match(title):
                superseded_level = level
            headings.append((level, title))
            continue
        if m := _DAILY_TIME.match(raw):
            when = None
            if tier == "daily":
                hour, minute = int(m.group(1)), int(m.group(2))
                if hour < 24 and minute < 60:
                    when = file_time.replace(hour=hour, minute=minute, second=0)
            start("daily", line_no, raw, when)
            continue
        if m := _CLAIM.match(raw):
            if block_kind != "claim" or m.group(1).strip().lower() == "claim":
                start("claim", line_no, raw)
            else:
                extend(raw, line_no)
            continue
        if m := _ITEM.match(raw):
            if m.group(1) and block_kind in ("item", "daily", "claim"):
                extend(raw, line_no)  # an indented child belongs to the item above
            else:
                start("item", line_no, raw)
            continue
        if block_kind in ("item", "daily", "claim") and raw[:1].isspace():
            extend(raw, line_no)  # continuation of a list item
        elif block_kind == "para":
            extend(raw, line_no)
        else:
            start("para", line_no, raw)
    flush()
    return entries


# --------------------------------------------------------------------------- the index


def memory_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(tier, path) for every memory file under ``root``, in Total Recall's search order."""
    for tier, rel, _ in _scan(root):
        yield tier, root.joinpath(*rel.split("/"))


def _scan(root: Path) -> list[tuple[str, str, os.stat_result]]:
    """(tier, relative posix path, stat) of every memory file, in :func:`memory_files` order.

    Total Recall's tiers first (``CLAUDE.local.md``, ``memory/registers/*.md``,
    ``memory/daily/*.md``, ``memory/archive/**/*.md``), then what OpenClaw's memory-core indexes
    by default: ``MEMORY.md`` and ``memory.md`` (``longterm``), then every other ``memory/**/*.md``
    (``daily`` when named ``YYYY-MM-DD[-slug].md`` directly under ``memory/``, else ``notes``).
    One file reached by several paths (a symlink, a hard link, ``memory.md`` on a case-insensitive
    disk) is listed once, under the path that is not a symlink (else the first one).

    One ``os.scandir`` walk instead of pathlib's glob + is_file + stat: the daemon runs this on
    every query to notice changed files, and with 10,000 files pathlib's per-path objects cost
    more than the system calls. Same selection as ``folder.glob("*.md")`` /
    ``folder.rglob("*.md")`` + ``is_file()`` (symlinked files count, symlinked directories are
    not descended into, unreadable directories are skipped), sorted as pathlib sorts paths
    (by path components).
    """
    out: list[tuple[str, str, os.stat_result]] = []
    links: set[str] = set()  # the relative paths that are symlinks
    base = os.fspath(root)
    _scan_top_file(base, "CLAUDE.local.md", "working", out, links)
    memory = os.path.join(base, "memory")
    has_memory = os.path.isdir(memory)
    if has_memory:
        for tier, folder, recursive in (
            ("registers", "registers", False),
            ("daily", "daily", False),
            ("archive", "archive", True),
        ):
            top = os.path.join(memory, folder)
            if not os.path.isdir(top):
                continue
            found: list[tuple[tuple[str, ...], os.stat_result]] = []
            _scan_dir(top, ("memory", folder), recursive, found, links)
            found.sort(key=lambda item: item[0])
            out.extend((tier, "/".join(parts), st) for parts, st in found)
    for name in OPENCLAW_LONG_TERM:
        _scan_top_file(base, name, "longterm", out, links)
    if has_memory:
        found = []
        _scan_dir(memory, ("memory",), True, found, links, skip=TOTAL_RECALL_FOLDERS)
        found.sort(key=lambda item: item[0])
        for parts, st in found:
            tier = "daily" if len(parts) == 2 and _DAILY_NAME.match(parts[1]) else "notes"
            out.append((tier, "/".join(parts), st))
    return _distinct_files(out, links)


def _scan_top_file(
    base: str, name: str, tier: str, out: list[tuple[str, str, os.stat_result]], links: set[str]
) -> None:
    path = os.path.join(base, name)
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            out.append((tier, name, st))
            if os.path.islink(path):
                links.add(name)
    except OSError:
        pass


def _distinct_files(
    found: list[tuple[str, str, os.stat_result]], links: set[str]
) -> list[tuple[str, str, os.stat_result]]:
    """``found`` without the second and later paths to one file (same device and inode): the
    path that is not a symlink stays, in its place (``memory/2026-05-01.md`` rather than the
    ``memory/daily/2026-05-01.md`` link to it), else the first one."""
    longterm = sum(1 for tier, _, _ in found if tier == "longterm")  # MEMORY.md, memory.md: one file?
    if not links and longterm < 2 and not any(st.st_nlink > 1 for _, _, st in found):
        return found  # no second path to any file: the usual case, and the cheap one
    chosen: dict[tuple[int, int], int] = {}
    for i, (_, rel, st) in enumerate(found):
        key = (st.st_dev, st.st_ino)
        first = chosen.get(key)
        if first is None or (found[first][1] in links and rel not in links):
            chosen[key] = i
    if len(chosen) == len(found):
        return found
    keep = set(chosen.values())
    return [item for i, item in enumerate(found) if i in keep]


def _scan_dir(
    directory: str,
    parts: tuple[str, ...],
    recursive: bool,
    found: list[tuple[tuple[str, ...], os.stat_result]],
    links: set[str],
    skip: frozenset[str] = frozenset(),
) -> None:
    """Append ``(path parts, stat)`` of the ``*.md`` files under ``directory`` (and add the
    relative path of each symlink to ``links``); ``skip``: subfolders not to enter, at this
    level only."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:  # unreadable (EACCES) or gone: skipped, as pathlib's glob skips it
        return
    for entry in entries:
        name = entry.name
        if name.endswith(".md") and name != "_index.md":
            try:
                if entry.is_file():
                    found.append(((*parts, name), entry.stat()))
                    if entry.is_symlink():
                        links.add("/".join((*parts, name)))
            except OSError:
                pass  # vanished or unreadable between the listing and the stat: not a file now
        if recursive and name not in skip:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                _scan_dir(entry.path, (*parts, name), True, found, links)


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


class _Index:
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
        for tier, rel, st in _scan(root):
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
        why = _too_big(st.st_size, limit)
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
            term = _word_terms(symbol)[0]
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


LAYOUT_OF_TIER = {
    "working": "Total Recall",
    "registers": "Total Recall",
    "archive": "Total Recall",
    "daily": "daily notes",
    "longterm": "OpenClaw",
    "notes": "OpenClaw",
}


def _no_memory_files(root: Path, skipped: dict[str, str], name: str) -> str:
    """Why a root answers no query: it holds no memory file, or none that could be read."""
    if skipped:
        rel, why = next(iter(skipped.items()))
        more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
        return (
            f"no readable memory files under {root}: {len(skipped)} skipped ({rel}: {why}{more}); "
            "see `memory-router backends`"
        )
    return (
        f"no memory files under {root}: expected OpenClaw's MEMORY.md or memory/*.md "
        "(daily notes memory/YYYY-MM-DD.md), or Total Recall's CLAUDE.local.md or "
        f"memory/{{registers,daily,archive}}/*.md. If the memory lives elsewhere, set backends.{name}.root "
        "in router-config.json or OPENCLAW_REPO_ROOT"
    )


def _too_big(size: int, limit: int) -> str | None:
    return f"{size} bytes, larger than the {limit}-byte limit (max_file_bytes)" if size > limit else None


def _unreadable(path: Path) -> str | None:
    """Why a memory file cannot be read (one byte is tried), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.read(fd, 1)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None


def _recency(ts: datetime | None, now: datetime) -> float:
    return recency(None if ts is None else (now - ts).total_seconds() / 86400)


def _phrase_bonus(terms: list[str], entry_terms: tuple[str, ...]) -> float:
    if len(terms) < 2:
        return 0.0
    pairs = set(pairwise(entry_terms))
    hits = sum(1 for pair in pairwise(terms) if pair in pairs)
    return min(0.2, 0.1 * hits)


# Up to this many candidates are simply all scored; beyond it, score() scores them by groups
# of equal coverage, best group first, and stops early. More distinct query terms than
# SUBSET_TERMS_LIMIT (2**n groups) also means scoring them all.
ALL_CANDIDATES_LIMIT = 2000
SUBSET_TERMS_LIMIT = 8


def score(
    index: _Index, query: str, limit: int, now: datetime, keep: Callable[[Entry], bool] | None = None
) -> list[tuple[float, Entry]]:
    """The ``limit`` best entries for ``query``, best first, as ``(relevance, entry)``; with
    ``keep``, only among the entries it keeps (a time window: filtered before ranking, so the
    ``limit`` best of the window come back, not the window's share of the best overall).

    Exactly what scoring every candidate (every entry holding a query term) and sorting would
    return, ties included. With many candidates (common words over a 10,000-file memory: tens of
    thousands) not all are scored: see :func:`_score_by_term_subsets`.
    """
    terms = query_terms(query)
    if not terms:
        newest = index.by_time() if keep is None else [e for e in index.by_time() if keep(e)]
        return [(round(NO_TERMS_RELEVANCE * _recency(e.timestamp, now), 4), e) for e in newest[:limit]]
    weights = {t: index.idf_of(t) for t in terms}
    total = sum(weights.values())
    postings = index.postings
    candidates: set[int] = set()
    for term in terms:
        candidates.update(postings.get(term, ()))
    if keep is not None:
        candidates = {i for i in candidates if keep(index.entries[i])}
    if not candidates or limit <= 0:
        return []
    quoted = [a or b for a, b in _QUOTED.findall(query)]
    pairs = list(pairwise(terms))
    entries = index.entries
    weight_items = tuple(weights.items())
    relevance_of = _relevance_function(index, query, terms, now)
    held = [t for t, _ in weight_items if t in postings]  # query terms the memory holds at all
    if len(candidates) <= max(limit, ALL_CANDIDATES_LIMIT) or len(held) > SUBSET_TERMS_LIMIT:
        scored = {i: relevance_of(i) for i in candidates}
    else:
        scored = _score_by_term_subsets(held, weights, total, pairs, bool(quoted), postings, relevance_of, limit)
    # Rank in the order the full candidate set would have been ranked in (set iteration order,
    # stable sort), so ties come out exactly as when every candidate is scored.
    stamp = datetime.min.replace(tzinfo=timezone.utc)
    ranked = [(scored[i], entries[i]) for i in candidates if i in scored]
    return heapq.nlargest(limit, ranked, key=lambda se: (se[0], se[1].timestamp or stamp))


def _relevance_function(index: _Index, query: str, terms: list[str], now: datetime) -> Callable[[int], float]:
    """The documented relevance of entry ``i`` for the query (whose content terms are ``terms``)."""
    weight_items = tuple((t, index.idf_of(t)) for t in terms)
    total = sum(w for _, w in weight_items)
    quoted = [a or b for a, b in _QUOTED.findall(query)]
    pairs = list(pairwise(terms))
    entries, term_sets = index.entries, index.term_sets

    def relevance_of(i: int) -> float:
        entry = entries[i]
        present = term_sets[i]
        coverage = sum(w for t, w in weight_items if t in present) / total
        bonus = 0.0
        if pairs and any(a in present and b in present for a, b in pairs):
            bonus = _phrase_bonus(terms, entry.terms)  # 0 unless both terms of a pair are present
        if quoted and any(q.lower() in entry.text.lower() for q in quoted):
            bonus += 0.2
        relevance = min(1.0, coverage + bonus)
        relevance *= TIER_WEIGHTS[entry.tier] * _recency(entry.timestamp, now)
        if entry.superseded:
            relevance *= SUPERSEDED_FACTOR
        return round(relevance, 4)

    return relevance_of


def rank(
    index: _Index, query: str, limit: int, now: datetime, keep: Callable[[Entry], bool] | None = None
) -> list[tuple[float, Entry, Definition | None]]:
    """:func:`score`, then definition-first: for a query asking for a symbol's definition (see
    ``_definitions``), entries whose code (fenced blocks, inline code) defines the symbol - even
    ones :func:`score` left below ``limit`` - rank above entries that only mention it.

    Every entry defining it holds the symbol's term, so it is a candidate; mentions all keep
    ``MENTION_FACTOR`` of their relevance, so the ``limit`` best mentions are among ``score``'s."""
    hits = score(index, query, limit, now, keep)
    target = definition_target(query)
    terms = query_terms(query)
    defined = index.definitions(target.symbol) if target is not None and terms and limit > 0 else {}
    if keep is not None:
        defined = {i: d for i, d in defined.items() if keep(index.entries[i])}
    if not defined:
        return [(r, e, None) for r, e in hits]
    entries = index.entries
    by_entry = {id(entries[i]): d for i, d in defined.items()}
    in_hits = {id(e) for _, e in hits}
    relevance_of = _relevance_function(index, query, terms, now)
    pool = hits + [(relevance_of(i), entries[i]) for i in defined if id(entries[i]) not in in_hits]
    strengths = [1 if id(e) in by_entry else 0 for _, e in pool]
    relevances = definitions_first_relevances([r for r, _ in pool], strengths)
    stamp = datetime.min.replace(tzinfo=timezone.utc)
    ranked = [(round(r, 4), e, by_entry.get(id(e))) for r, (_, e) in zip(relevances, pool, strict=True)]
    return heapq.nlargest(limit, ranked, key=lambda red: (red[0], red[1].timestamp or stamp))


def _score_by_term_subsets(  # noqa: C901 - one bounded best-first search (docstring); its steps share one heap
    held: list[str],
    weights: dict[str, float],
    total: float,
    pairs: list[tuple[str, str]],
    quoted: bool,
    postings: dict[str, list[int]],
    relevance_of: Callable[[int], float],
    limit: int,
) -> dict[int, float]:
    """Score the candidates group by group, a group being the entries holding exactly the same
    subset S of the query's terms, in falling order of the group's bound, until the bound is
    below the ``limit``-th best score found (the entries left then rank strictly below).

    Every entry of group S has coverage exactly ``w(S) / total`` (the same sum as in the
    relevance), a phrase bonus of at most 0.1 per query pair inside S (at most 0.2), at most
    0.2 for a quoted phrase, and tier weight, recency and superseded factor at most 1; so its
    relevance is at most ``bound(S) = min(1, w(S)/total + phrase + quote)``. Most entries of a
    big memory hold one common query word; their groups' bounds are low and are never scored.
    """
    groups = []
    for mask in range(1, 1 << len(held)):
        subset = [t for j, t in enumerate(held) if mask >> j & 1]
        inside = set(subset)
        coverage = sum(weights[t] for t in subset) / total
        hits = sum(1 for a, b in pairs if a in inside and b in inside)
        bound = min(1.0, coverage + min(0.2, 0.1 * hits) + (0.2 if quoted else 0.0))
        # 1e-9: the bound adds in another order than the relevance; allow for float rounding.
        groups.append((round(bound * (1 + 1e-9) + 1e-12, 4), mask, subset))
    groups.sort(key=lambda g: g[0], reverse=True)
    sets: dict[str, set[int]] = {}

    def posting_set(term: str) -> set[int]:
        found = sets.get(term)
        if found is None:
            found = sets[term] = set(postings[term])
        return found

    scored: dict[int, float] = {}
    best: list[float] = []  # min-heap of the `limit` best scores so far
    for bound, mask, subset in groups:
        if len(best) >= limit and bound < best[0]:
            break
        members = set.intersection(*sorted((posting_set(t) for t in subset), key=len))
        for j, term in enumerate(held):
            if not mask >> j & 1 and members:
                members -= posting_set(term)
        for i in members:
            value = relevance_of(i)
            scored[i] = value
            if len(best) < limit:
                heapq.heappush(best, value)
            elif value > best[0]:
                heapq.heapreplace(best, value)
    return scored


def _iso(ts: datetime | None) -> str | None:
    return iso_z(ts) if ts else None


class _RootState:
    """One memory root's index and what is known about its freshness (a plain class: state)."""

    __slots__ = ("index", "lock", "stale", "walked_at", "watched")

    def __init__(self) -> None:
        self.index = _Index()
        self.lock = threading.Lock()
        self.stale = True
        self.walked_at = 0.0
        self.watched = False  # a watcher reports the changes under this root


MAX_ROOTS = 64  # roots (agents' workspaces) whose index one instance keeps; the oldest is dropped


class TotalRecallBackend(BlockingAdapter):
    """Total Recall over one memory root per query: the instance's (``root``: fixed, or OpenClaw's
    workspace resolved again per query when ``resolve`` is given) for an unscoped query, and for a
    query scoped to an agent (``request.scope``) that agent's workspace from openclaw.json's
    ``agents.list[]`` (:func:`memory_router.config.openclaw.agent_workspace`), unless
    ``backends.<name>.root`` is set: a configured root is shared by every agent, on purpose.
    The process environment and working directory (``$OPENCLAW_REPO_ROOT``, a git repository)
    belong to the Gateway, not to an agent, so a scoped query never reads them. Each root has its
    own index (at most :data:`MAX_ROOTS`)."""

    def __init__(
        self,
        name: str,
        root: Path | None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        *,
        resolve: Callable[[], Path | None] | None = None,
        shared_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self._root = root
        self._resolve = resolve
        self.shared_root = shared_root
        self.environ = os.environ if environ is None else environ
        self.max_file_bytes = max_file_bytes
        self._states: dict[Path | None, _RootState] = {}
        self._states_lock = threading.Lock()
        self._watched = False  # a watcher calls invalidate() on changes under watch_paths()
        self._watch_root: Path | None = root

    @property
    def root(self) -> Path | None:
        """The root of an unscoped query now (OpenClaw's workspace is looked up again: cheap, the
        parsed openclaw.json is cached by its stat)."""
        if self._resolve is not None:
            try:
                self._root = self._resolve()
            except OpenClawConfigInvalid:
                pass  # the last good root; the search reports the file
        return self._root

    def _state(self, root: Path | None) -> _RootState:
        with self._states_lock:
            state = self._states.get(root)
            if state is None:
                if len(self._states) >= MAX_ROOTS:
                    oldest = next(r for r in self._states if r != self._watch_root)
                    del self._states[oldest]
                state = self._states[root] = _RootState()
                state.watched = self._watched and root == self._watch_root
            return state

    @property
    def _index(self) -> _Index:
        """The index of the unscoped query's root (for tools and tests)."""
        return self._state(self.root).index

    @property
    def _lock(self) -> threading.Lock:
        """The lock of the unscoped query's root (held while a search reads its tree)."""
        return self._state(self.root).lock

    def watch_paths(self) -> list[tuple[Path, bool]]:
        """``(folder, recursive)`` whose changes can alter the index: the root itself (for
        CLAUDE.local.md and MEMORY.md) and ``memory/``. Empty when they do not all exist (nothing
        to rely on). Only the unscoped query's root is watched; agents' roots walk their tree."""
        root = self.root
        if root is None or not (root / "memory").is_dir():
            return []
        self._watch_root = root
        return [(root, False), (root / "memory", True)]

    def set_watched(self, watched: bool) -> None:
        """A watcher is (or is no longer) reporting changes under :meth:`watch_paths`."""
        self._watched = watched
        with self._states_lock:
            for root, state in self._states.items():
                state.watched = watched and root == self._watch_root
                state.stale = True

    def invalidate(self) -> None:
        """Something under the root changed: the next query walks the tree again."""
        with self._states_lock:
            for state in self._states.values():
                state.stale = True

    def calibration_key(self, mode: str | None) -> str:
        """The calibration map (memory_router.core.calibration): one mode, one map."""
        return "totalrecall"

    def probe(self) -> Probe:
        try:
            root = self._resolve() if self._resolve is not None else self._root
        except OpenClawConfigInvalid as exc:
            return Probe(False, str(exc))
        if root is None:
            return Probe(False, "no memory root: " + NO_ROOT_FIX.format(name=self.name))
        if not root.is_dir():
            return Probe(False, f"memory root {root} does not exist")
        found = _scan(root)
        skipped = []
        for _, rel, st in found:
            why = _too_big(st.st_size, self.max_file_bytes)
            if why is None:
                why = _unreadable(root.joinpath(*rel.split("/")))
            if why is not None:
                skipped.append({"path": rel, "reason": why})
        count = len(found) - len(skipped)
        facts: dict[str, object] = {"root": str(root), "files": count, "max_file_bytes": self.max_file_bytes}
        if found:
            layouts = sorted({LAYOUT_OF_TIER[tier] for tier, _, _ in found})
            facts["tiers"] = dict(sorted(Counter(tier for tier, _, _ in found).items()))
            detail = f"{count} memory files under {root} ({' + '.join(layouts)} layout)"
        else:
            detail = _no_memory_files(root, {}, self.name)
        if skipped:
            facts["skipped"] = skipped
            first = skipped[0]
            more = f" and {len(skipped) - 1} more (facts.skipped)" if len(skipped) > 1 else ""
            detail += f"; {len(skipped)} skipped: {first['path']}: {first['reason']}{more}"
        return Probe(count > 0, detail, facts)

    def skipped(self) -> dict[str, str]:
        """Files the index left out, as of the last search: relative path -> why."""
        return {rel: why for rel, (_, why) in self._index.skipped.items()}

    def _root_for(self, request: BackendRequest) -> tuple[Path | None, str | None, bool]:
        """``(root, problem, scoped)`` for this call: the root to read, or why there is none
        (``root`` None and ``problem`` None too: a scoped query whose agent has no memory root,
        answered ``empty`` with the reason as its note, never a failure counted against the
        backend for every other agent)."""
        scope = request.scope
        if scope is None:
            if self._resolve is not None:
                try:
                    self._root = self._resolve()
                except OpenClawConfigInvalid as exc:
                    return None, str(exc), False
            root = self._root
            if root is None or not root.is_dir():
                where = "no memory root found" if root is None else f"memory root {root} does not exist"
                return None, f"{where}; " + NO_ROOT_FIX.format(name=self.name), False
            return root, None, False
        if self.shared_root is not None:
            return self.shared_root, None, True  # backends.<name>.root: every agent's, on purpose
        try:
            workspace, where = agent_workspace(scope.agent, self.environ)
        except OpenClawConfigInvalid as exc:
            return None, str(exc), True
        root = Path(workspace)
        if not root.is_dir():
            return None, None, True
        return root, None, True

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        """:class:`~.base.BlockingBackend` (the async ``search`` is :class:`~.base.BlockingAdapter`'s):
        the search in the caller's thread; ``stop`` ends a tree read at its next check (between
        files, every 1024 lines of one)."""
        watch = Stopwatch()
        root, problem, scoped = self._root_for(request)
        if root is None:
            if problem is None:  # this agent has no workspace: nothing of its memory here
                absent = f"nothing of this agent's memory here: {_workspace_missing(request, self.environ)}"
                return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, note=absent)
            return BackendResponse.failure(
                self.name, request.query, BACKEND_UNAVAILABLE, problem or "no memory root", duration_ms=watch.ms
            )
        state = self._state(root)
        # Another call may be reading the tree (or was abandoned mid-read and is stopping): wait
        # no longer than this call's own budget for it.
        if not state.lock.acquire(timeout=max(0.001, request.timeout_s)):
            return BackendResponse.failure(
                self.name,
                request.query,
                QUERY_TIMEOUT,
                f"another search was still reading the memory under {root}",
                duration_ms=watch.ms,
            )
        index = state.index
        try:
            now = time.monotonic()
            if not state.watched or state.stale or now - state.walked_at > WATCHED_RESCAN_S:
                state.stale = False  # before the walk: a change during it marks it stale again
                state.walked_at = now
                # Big files are parsed in the background; wait for them at most half the budget.
                index.refresh(root, self.max_file_bytes, stop, wait_until=now + request.timeout_s / 2)
                if index.indexing:
                    state.stale = True  # the next query merges what the background parse finished
            hits = rank(index, request.query, request.limit, datetime.now(timezone.utc), _in_window(request))
            skipped = {rel: why for rel, (_, why) in index.skipped.items()}
            nothing = None if index.files or index.indexing else _no_memory_files(root, skipped, self.name)
            note = index.indexing_note()
        except Cancelled:
            state.stale = True  # the walk did not finish
            return BackendResponse.failure(
                self.name, request.query, QUERY_TIMEOUT, "cancelled by the router", duration_ms=watch.ms
            )
        except OSError as exc:
            state.stale = True  # the walk did not finish: never trust a partial index
            return BackendResponse.failure(
                self.name,
                request.query,
                BACKEND_ERROR,
                f"reading Total Recall memory under {root}: {exc}",
                duration_ms=watch.ms,
            )
        finally:
            state.lock.release()
        if nothing is not None:
            # Not "empty": that would tell the agent "nothing remembered" about a root that holds
            # no memory at all (a wrong root, or none written yet).
            if scoped:
                return BackendResponse.from_results(self.name, request.query, [], duration_ms=watch.ms, note=nothing)
            return BackendResponse.failure(self.name, request.query, BACKEND_UNAVAILABLE, nothing, duration_ms=watch.ms)
        results = [_result(self.name, rel, entry, where) for rel, entry, where in hits]
        return BackendResponse.from_results(
            self.name,
            request.query,
            results,
            duration_ms=watch.ms,
            query_sent=" ".join(query_terms(request.query)) or None,
            note=note,
        )


def _in_window(request: BackendRequest) -> Callable[[Entry], bool] | None:
    """The entries a time window keeps: those whose time is written down (a daily line, a dated
    note, frontmatter; never a file's mtime, which a checkout or a copy resets) inside it."""
    window = request.window
    if window is None:
        return None
    return lambda e: e.dated and e.timestamp is not None and window.meets(e.timestamp, e.timestamp + _INSTANT)


_INSTANT = timedelta(microseconds=1)


def _workspace_missing(request: BackendRequest, environ: Mapping[str, str]) -> str:
    assert request.scope is not None
    workspace, where = agent_workspace(request.scope.agent, environ)
    return f"agent {request.scope.agent}'s workspace {workspace} ({where}) does not exist"


def _result(source: str, relevance: float, entry: Entry, definition: Definition | None = None) -> Result:
    extra = {}
    if definition is not None:
        extra = {"definition_line": entry.file_line(definition.line), "definition_kind": definition.kind}
    return Result(
        content=entry.text,
        relevance=relevance,
        source=source,
        timestamp=_iso(entry.timestamp),
        path=entry.path,
        line=entry.line,
        tier=entry.tier,
        heading=entry.heading or None,
        superseded=entry.superseded,
        **extra,
    )


def iter_entries(root: Path) -> Iterable[Entry]:
    """All entries under a root (for tools and tests)."""
    index = _Index()
    index.refresh(root)
    return list(index.entries)


def demo_setup(workspace: Path, state_dir: Path) -> dict[str, str]:
    """The demo workspace *is* a Total Recall project: point the adapter at it."""
    return {"root": str(workspace)}
