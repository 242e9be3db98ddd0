"""The facts the adapters share live once (backends/common/words.py, memory_router/core/timefmt.py): the
identifier splitter, the recency weight, the stopwords, the timestamp format."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.common import words as _words
from memory_router.backends.lossless import adapter as lossless
from memory_router.backends.qmd import keywords as _qmd_keywords
from memory_router.backends.totalrecall import parse as totalrecall_parse
from memory_router.backends.totalrecall import score as totalrecall_score
from memory_router.core.timefmt import iso_z


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("parseAuthToken", ["parse", "auth", "token"]),
        ("user_id", ["user", "id"]),
        ("HTTPServer2", ["http", "server", "2"]),
        ("plain", ["plain"]),
    ],
)
def test_identifier_parts(word: str, parts: list[str]) -> None:
    assert _words.identifier_parts(word) == parts


def test_recency_halves_its_share_every_half_life() -> None:
    assert _words.recency(0) == 1.0
    assert _words.recency(_words.RECENCY_HALF_LIFE_DAYS) == pytest.approx(0.925)
    assert _words.recency(None) == 0.85
    assert _words.recency(-5) == 1.0  # a date in the future counts as now


@given(st.floats(min_value=0, max_value=10_000))
def test_recency_is_the_same_in_total_recall_and_lossless(age_days: float) -> None:
    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    tr = totalrecall_score._recency(now - timedelta(days=age_days), now)
    assert tr == pytest.approx(lossless.recency(age_days), abs=1e-12)
    assert 0.85 <= tr <= 1.0


def test_the_adapters_share_one_stopword_list() -> None:
    # vars(): the name Total Recall's parser looks up, which it imports and does not re-export
    assert vars(totalrecall_parse)["STOPWORDS"] is _words.STOPWORDS and lossless.STOPWORDS is _words.STOPWORDS
    # qmd drops more: the words that say how to search ("find usages of ...").
    assert _words.STOPWORDS < _qmd_keywords.STOPWORDS
    assert {"usages", "search", "using"} <= _qmd_keywords.STOPWORDS - _words.STOPWORDS


def test_iso_z_is_utc_whole_seconds() -> None:
    ts = datetime(2026, 3, 17, 16, 30, 0, 999_000, tzinfo=timezone(timedelta(hours=2)))
    assert iso_z(ts) == "2026-03-17T14:30:00Z"
