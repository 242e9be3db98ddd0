"""A query's time window (memory_router.core.window): the forms it reads, the interval it means,
how a result is dated, and the precise error for what it cannot read."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import Result
from memory_router.core.errors import InvalidQuery
from memory_router.core.window import Window, in_window, parse_window, result_span

NOW = datetime(2026, 12, 4, 15, 30).astimezone()


def local_midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time()).astimezone()


def test_nothing_given_is_no_window() -> None:
    assert parse_window(None, None) is None and parse_window("", "") is None


def test_yesterday_is_the_whole_local_day_before_the_query() -> None:
    window = parse_window("yesterday", "yesterday", now=NOW)
    assert window == Window(local_midnight(date(2026, 12, 3)), local_midnight(date(2026, 12, 4)))


@pytest.mark.parametrize(
    ("since", "until", "low", "high"),
    [
        ("today", None, date(2026, 12, 4), None),
        ("last week", None, date(2026, 11, 27), None),
        ("last month", None, date(2026, 11, 4), None),
        ("3 days ago", None, date(2026, 12, 1), None),
        (None, "last week", None, date(2026, 12, 4)),  # until last week: to the end of yesterday
        ("2026-11-30", "2026-11-30", date(2026, 11, 30), date(2026, 12, 1)),
        ("  Last   Week ", None, date(2026, 11, 27), None),  # case and spaces as typed
    ],
)
def test_relative_and_dated_forms(since: str | None, until: str | None, low: date | None, high: date | None) -> None:
    window = parse_window(since, until, now=NOW)
    assert window is not None
    assert window.since == (local_midnight(low) if low else None)
    assert window.until == (local_midnight(high) if high else None)


def test_a_date_and_time_is_an_instant_and_z_is_utc() -> None:
    window = parse_window("2026-11-30T09:00Z", "2026-11-30T10:00:00+00:00", now=NOW)
    assert window is not None
    assert window.since == datetime(2026, 11, 30, 9, tzinfo=timezone.utc)
    assert window.until == datetime(2026, 11, 30, 10, tzinfo=timezone.utc)
    assert window.as_dict() == {"since": "2026-11-30T09:00:00+00:00", "until": "2026-11-30T10:00:00+00:00"}


@pytest.mark.parametrize("bad", ["the day before", "2026-13-01", "last year", "x" * 200, "1e9 days ago"])
def test_a_value_it_cannot_read_is_refused_quoting_it_and_the_forms(bad: str) -> None:
    with pytest.raises(InvalidQuery) as caught:
        parse_window(bad, None, now=NOW)
    assert caught.value.error_code == "INVALID_TIME_RANGE"
    assert "since must be" in str(caught.value) and "yesterday" in str(caught.value)
    assert repr(bad)[:40] in str(caught.value)


def test_since_after_until_is_refused() -> None:
    with pytest.raises(InvalidQuery, match="must be before until"):
        parse_window("today", "yesterday", now=NOW)


@given(st.dates(date(2000, 1, 1), date(2100, 1, 1)), st.integers(0, 400))
def test_a_window_of_named_days_holds_each_of_those_days_whole(first: date, days: int) -> None:
    last = first + timedelta(days=days)
    window = parse_window(first.isoformat(), last.isoformat(), now=NOW)
    assert window is not None
    inside = Result("note", 0.5, "totalrecall", path=f"memory/{first.isoformat()}.md")
    end = Result("note", 0.5, "totalrecall", path=f"memory/{last.isoformat()}.md")
    before = Result("note", 0.5, "totalrecall", path=f"memory/{(first - timedelta(days=1)).isoformat()}.md")
    after = Result("note", 0.5, "totalrecall", path=f"memory/{(last + timedelta(days=1)).isoformat()}.md")
    kept, outside, undated = in_window(window, (inside, before, end, after))
    assert kept == (inside, end) and (outside, undated) == (2, 0)


def test_a_result_is_dated_by_its_timestamp_then_by_the_date_in_its_path() -> None:
    stamped = Result("turn", 0.5, "lossless", timestamp="2026-12-03T08:00:00Z", path="memory/2026-01-01.md")
    assert result_span(stamped)[0] == datetime(2026, 12, 3, 8, tzinfo=timezone.utc)  # type: ignore[index]
    daily = Result("note", 0.5, "qmd", path="memory/2026-12-03.md")
    assert result_span(daily) == (local_midnight(date(2026, 12, 3)), local_midnight(date(2026, 12, 4)))
    assert result_span(Result("fact", 0.5, "cognee")) is None
    assert result_span(Result("x", 0.5, "qmd", path="src/2026-99-99-weird.md")) is None
    window = parse_window("yesterday", "yesterday", now=NOW)
    assert window is not None
    kept, outside, undated = in_window(window, (stamped, daily, Result("fact", 0.5, "cognee")))
    assert kept == (stamped, daily) and (outside, undated) == (0, 1)
