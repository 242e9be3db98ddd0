"""Total Recall's markdown, read: a memory file split into dated entries, and the terms an entry
is searched by (stemmed words, identifiers split into their parts).

**Entries.** Each file is split into entries: a top-level list item with its indented children,
a ``[HH:MM] ...`` daily line, a paragraph, or a run of ``- **key**: value`` claim lines (one
register claim). Entries remember their heading path; an entry under a heading that starts
``[superseded: ...]`` is marked superseded. A daily note is dated by its file name (and
``[HH:MM]`` lines by their time); other files by their frontmatter (``event_time``/``record_time``),
a claim by its ``last_verified``, else by the file's mtime.

Pure: text in, entries out (the files are read by :mod:`.index`).
"""

from __future__ import annotations

import functools
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

from memory_router.backends.common.words import META_WORDS, STOPWORDS, identifier_parts, stem
from memory_router.backends.totalrecall.scan import DAILY_NAME
from memory_router.core.frozen import Frozen

MAX_CONTENT_CHARS = 2000
# A long entry keeps its lines' terms for choosing what a result shows (.shown); lines past this
# many are never shown from (a session note has fifteen), so one huge paragraph costs bounded memory.
MAX_SHOWN_LINES = 400
CANCEL_CHECK_LINES = 1024  # parse_file looks at its cancellation flag this often


class Cancelled(Exception):
    """The router gave up on the call: stop reading and parsing."""


# --------------------------------------------------------------------------- text handling

_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*|_+[^\W_]+", re.UNICODE)
QUOTED = re.compile(r"\"([^\"]+)\"|'([^']+)'")


@functools.lru_cache(maxsize=1 << 16)
def word_terms(word: str) -> tuple[str, ...]:
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
        terms.extend(word_terms(word))
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
    body: str | None = None  # the whole text where ``text`` is cut (longer than MAX_CONTENT_CHARS)
    line_terms: tuple[frozenset[str], ...] = ()  # with ``body``: each of its first lines' terms

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


def _entry_terms(prefix: str, body: str) -> tuple[tuple[str, ...], tuple[frozenset[str], ...]]:
    """An entry's terms (``prefix`` then ``body``, in order) and, for a body longer than a result
    shows, each of its first lines' terms too, from one pass over it: no word spans a line break,
    so the body's terms are its lines' terms one after the other."""
    if len(body) <= MAX_CONTENT_CHARS:
        return tuple(index_terms(f"{prefix} {body}")), ()
    per_line = [index_terms(line) for line in body.split("\n")]
    terms = index_terms(prefix)
    for line_terms in per_line:
        terms.extend(line_terms)
    return tuple(terms), tuple(frozenset(t) for t in per_line[:MAX_SHOWN_LINES])


def parse_file(tier: str, rel_path: str, text: str, mtime: float, cancel: threading.Event | None = None) -> list[Entry]:  # noqa: C901 - one pass of a line-oriented markdown state machine; splitting it scatters the state
    """Split one memory file into entries. Raises :class:`Cancelled` once ``cancel`` is set."""
    lines = text.splitlines()
    meta, body_start = _split_frontmatter(lines)
    file_time = _parse_date(meta.get("event_time", "") or meta.get("record_time", ""))
    if file_time is None and tier == "daily":
        m = DAILY_NAME.match(Path(rel_path).name)
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
            terms, line_terms = _entry_terms(f"{heading} {file_label}", body)
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
                    terms=terms,
                    dated=dated,
                    line_map=None if block_lines[-1] - block_line + 1 == len(block_lines) else tuple(block_lines),
                    body=body if len(body) > MAX_CONTENT_CHARS else None,
                    line_terms=line_terms,
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
