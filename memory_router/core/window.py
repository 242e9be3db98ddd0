"""When the memory a query may read was written: ``since`` / ``until``, parsed once.

A request may carry ``since`` and ``until`` (``query --since/--until``, the query op's and MCP's
fields, the plugin's ``memory_search``): an ISO date (``2026-11-30``), an ISO date and time
(``2026-11-30T09:00``, with or without an offset; without one it is the machine's local time), or
a day relative to the query's time: ``today``, ``yesterday``, ``last week`` (the 7 days before
today), ``last month`` (30 days), ``N days ago``. A date means the whole day: ``since`` a date is
from its first instant, ``until`` a date is to its last (``since yesterday until yesterday`` is
yesterday). Days are the machine's local days, as OpenClaw names its daily notes
(``memory/YYYY-MM-DD.md``).

The parsed :class:`Window` is a half-open interval ``[since, until)`` of aware datetimes, handed
to every backend through the one call's request (``request.window``), like the scope. Backends
that know when a memory was written filter before they rank (Lossless by the message's time,
Total Recall by the note's date, qmd by the note date in the file name); then the driver keeps
only results whose date (:func:`result_span`: the result's ``timestamp``, else the day of a
``YYYY-MM-DD`` in its path) meets the window, and leaves out undated ones (a memory with no
date cannot be said to be from yesterday), saying how many in the attempt's note.

Checks (``INVALID_TIME_RANGE``, exit 2): a value this module cannot read, quoted, with the forms it
takes; ``since`` after ``until``.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from memory_router.contract import INVALID_TIME_RANGE
from memory_router.core.errors import InvalidQuery
from memory_router.core.frozen import Frozen

FORMS = (
    "an ISO date (2026-11-30) or date and time (2026-11-30T09:00), today, yesterday, last week, last month, N days ago"
)

_DAYS_AGO = re.compile(r"(\d{1,4}) days? ago")
_DATE_IN_PATH = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_RELATIVE_DAYS = {"today": 0, "yesterday": 1, "last week": 7, "last month": 30}


class Window(Frozen):
    """``[since, until)``: aware datetimes, either open (``None``). Build one with :func:`parse_window`."""

    since: datetime | None = None
    until: datetime | None = None

    def meets(self, start: datetime, end: datetime) -> bool:
        """Whether ``[start, end)`` overlaps the window (a day's note meets a window inside that day)."""
        return (self.since is None or end > self.since) and (self.until is None or start < self.until)

    def as_dict(self) -> dict[str, str]:
        """The envelope's form: ISO 8601 with the offset, only the ends that are set."""
        out = {}
        if self.since is not None:
            out["since"] = self.since.isoformat()
        if self.until is not None:
            out["until"] = self.until.isoformat()
        return out

    def sql_bounds(self) -> tuple[str, str]:
        """The ends as SQLite's ``datetime()`` text in UTC (``YYYY-MM-DD HH:MM:SS``), open ends as
        the widest values, for a ``BETWEEN``-style filter on a ``created_at`` column."""
        low = self.since.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if self.since else "0000-01-01"
        high = self.until.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if self.until else "9999-12-31"
        return low, high


def parse_window(since: object = None, until: object = None, now: datetime | None = None) -> Window | None:
    """The window of ``since`` and ``until`` (``None``/``""``: open), ``None`` when both are open, or
    :class:`~memory_router.core.errors.InvalidQuery` (``INVALID_TIME_RANGE``). ``now``: the query's
    time (default: now, local)."""
    if since in (None, "") and until in (None, ""):
        return None
    now = (now or datetime.now()).astimezone()
    low = _moment("since", since, now, end=False)
    high = _moment("until", until, now, end=True)
    if low is not None and high is not None and low >= high:
        between = f"since ({low.isoformat()}) must be before until ({high.isoformat()}): nothing is between"
        raise InvalidQuery(INVALID_TIME_RANGE, between)
    return Window(low, high)


def window_from_wire(since: object, until: object) -> Window | None:
    """A request's ``since``/``until`` fields (strings or null)."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and not isinstance(value, str):
            raise InvalidQuery(INVALID_TIME_RANGE, f'"{name}" must be a string ({FORMS}), got {_short(value)}')
    return parse_window(since, until)


def _moment(name: str, value: object, now: datetime, *, end: bool) -> datetime | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidQuery(INVALID_TIME_RANGE, f"{name} must be {FORMS}; got {_short(value)}")
    text = " ".join(value.strip().lower().split())
    day: date | None = None
    if text in _RELATIVE_DAYS:
        day = now.date() - timedelta(days=_RELATIVE_DAYS[text])
        if end and text in ("last week", "last month"):
            day = now.date() - timedelta(days=1)  # "until last week": to the end of yesterday
    elif match := _DAYS_AGO.fullmatch(text):
        day = now.date() - timedelta(days=int(match.group(1)))
    else:
        try:
            if len(text) == 10:
                day = date.fromisoformat(text)
            else:
                moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
                return moment if moment.tzinfo else moment.astimezone()
        except ValueError:
            raise InvalidQuery(INVALID_TIME_RANGE, f"{name} must be {FORMS}; got {_short(value)}") from None
    if end:
        day += timedelta(days=1)  # a day named as the end is included whole
    return datetime.combine(day, time.min).astimezone()


def result_span(result: Any) -> tuple[datetime, datetime] | None:
    """When a result's memory was written, as ``[start, end)``: its ``timestamp`` (ISO 8601, an
    instant), else a ``YYYY-MM-DD`` in its ``path`` (a daily note: that whole local day), else
    ``None`` (undated)."""
    stamp = getattr(result, "timestamp", None)
    if isinstance(stamp, str) and stamp:
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            moment = None
        if moment is not None:
            moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
            return moment, moment + timedelta(microseconds=1)
    path = getattr(result, "path", None)
    if isinstance(path, str) and (match := _DATE_IN_PATH.search(path)):
        try:
            start = datetime.combine(date(*map(int, match.groups())), time.min).astimezone()
        except ValueError:
            return None
        return start, start + timedelta(days=1)
    return None


def in_window(window: Window, results: tuple[Any, ...]) -> tuple[tuple[Any, ...], int, int]:
    """``(kept, outside, undated)``: the results whose span meets ``window``, in their order, and
    how many were dated outside it or not dated at all."""
    kept, outside, undated = [], 0, 0
    for result in results:
        span = result_span(result)
        if span is None:
            undated += 1
        elif window.meets(*span):
            kept.append(result)
        else:
            outside += 1
    return tuple(kept), outside, undated


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
