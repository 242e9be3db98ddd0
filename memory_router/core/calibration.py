"""Calibration: one meaning for ``relevance`` on every backend.

Each adapter maps its native score onto 0..1 in its own way (qmd's RRF positions or cosines, Total
Recall's and Lossless's term coverage times recency...), so before calibration 0.4 meant something
different on each backend, and "the best result across attempts" compared numbers that could not
be compared. Measured on LoCoMo's development half, qmd ``query``'s native relevance did not
predict a hit at all (docs/calibration.md).

Calibration replaces every result's ``relevance`` with an estimate of one thing, on one scale:

    the chance that this result holds what was asked

fitted offline on labelled data (``bench/fit_calibration.py``, from the records of
``bench/locomo.py``) and shipped as data (``calibration.json`` beside this module, read by
:func:`memory_router.config.calibration.load`; this module only parses and applies it). A map is a
logistic model per backend type and mode over five features of a result:

* ``native``: the adapter's own relevance (kept on the result as ``native_relevance``);
* ``coverage``: the share of the query's content terms (stopwords and words about *when* dropped,
  lightly stemmed: :mod:`memory_router.backends.common.words`) that the result's text contains, the same
  measure for every backend;
* ``rank``: ``1 / position`` in the backend's own order;
* ``exact``: the share of the identifiers and paths the query names that the result matches
  exactly (:func:`memory_router.core.asked.exact`: ``parseAuthToken`` in its text, a file under
  ``src/auth/``), 0 when the query names none;
* ``gap``: how far the result stands out from the next one in the backend's own scores (its
  native relevance minus the next result's, 0 at least; the last result's next is 0). A first
  result far ahead of the second is right more often than one of many alike. Replayed over the
  four benches (docs/calibration.md), fitting it lifts LoCoMo's hit@1 from 48.0 to 50.0 and the AUC
  of the answer's relevance for "the first result is right" from 0.689 to 0.713 (CoSQA 0.691 to
  0.704), and costs LongMemEval 2 of its 100 questions (68 to 66, AUC 0.749 to 0.688).

Coverage does not count the words of the rule the query matched ("find", "function", "how does
... work"): they say how to search, not what (:mod:`memory_router.core.asked`). The maps are fitted
across kinds of memory (chat notes, a chat history without notes, code, code search:
docs/calibration.md). Its coefficients on ``native``, ``coverage``, ``exact`` and ``gap`` are
fitted non-negative, so the value is monotone in each. A backend's own order is kept (a backend knows its
ranking best, and the code-memory benches depend on it): each relevance is capped by the one before it.

The first result's value is then recalibrated by a step map fitted on first results alone
(isotonic regression of "the first result holds the evidence" on its logistic value): the
logistic's rank term is only linear in ``1/rank``, and the first result is what the router acts on.
``normalized_relevance``, the value the router accepts at the threshold and compares across
attempts, is the first result's, as the backend contract says: the chance that the answer's first
result holds what was asked. Replayed on LoCoMo, this did better on both hit@1 and evidence
recall@10 than judging an answer by its first three results or calibrating it to hit@10
(docs/calibration.md).

It is static while routing: nothing is learnt from live queries. Only what was measured is
mapped: a configuration without a fitted map (Cognee, which the LoCoMo tier has no graph for; qmd
with another embedding model or a reranker on disk; a command backend) keeps its native relevance
rather than a guess, and ``memory-router backends`` names the map (or ``native``) per mode. A
query with no content term at all ("why did we do it that way") gives the features nothing to go
on: its answers keep their native relevance too. When the data file is missing or unreadable the
router keeps the native values and ``memory-router backends`` says why; a query never fails for it.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Mapping
from typing import Any

from memory_router.backends.base import BackendResponse, Result
from memory_router.backends.common.words import stem, stemming_to
from memory_router.core.asked import Asked, asked, exact
from memory_router.core.frozen import Frozen
from memory_router.core.rules import Rule

FORMAT = 1
FEATURES = ("native", "coverage", "rank", "exact", "gap")
_WORD = re.compile(r"[0-9A-Za-z]+")
_WORD_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# Enough of a result's text to judge it; a huge hit costs no more than this to score.
_SCAN_CHARS = 4000
# A memo of the stemmer for the forms of each query's terms (TermWords: ~15 per term), which come
# back query after query in a daemon; a result's own words are no longer stemmed at all.
# Bounded: a long-lived daemon's vocabulary can be large.
_stem = functools.lru_cache(maxsize=1 << 14)(stem)


class Model(Frozen):
    """A logistic map, ``sigmoid(intercept + sum(weight * feature))``, and the step map of the
    first result (``first_x`` -> ``first_y``, interpolated; none: the logistic value stands)."""

    intercept: float
    native: float
    coverage: float
    rank: float
    exact: float = 0.0
    first_x: tuple[float, ...] = ()
    first_y: tuple[float, ...] = ()
    gap: float = 0.0  # a weight of a file written before the feature: 0, the map it was fitted as

    def __call__(self, native: float, coverage: float, rank: float, exact: float = 0.0, gap: float = 0.0) -> float:
        z = self.intercept + self.native * native + self.coverage * coverage + self.rank * rank + self.exact * exact
        z += self.gap * gap
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def first(self, value: float) -> float:
        """The first result's value, recalibrated: the hit rate of first results with that
        logistic value on the labelled data (isotonic, so non-decreasing). Below the first
        breakpoint the value falls linearly to 0 at 0 rather than holding flat: two weak answers
        keep their order (a flat floor tied them, and the tie went to the earlier step)."""
        xs, ys = self.first_x, self.first_y
        if not xs:
            return value
        if value <= xs[0]:
            return ys[0] * value / xs[0] if xs[0] > 0 else ys[0]
        at = bisect.bisect_left(xs, value)
        if at == len(xs):
            return ys[-1]
        x0, x1, y0, y1 = xs[at - 1], xs[at], ys[at - 1], ys[at]
        return y0 + (y1 - y0) * (value - x0) / (x1 - x0) if x1 > x0 else y1


class Calibration(Frozen):
    """The loaded maps, keyed ``type:mode`` (``qmd:query``) or ``type`` (``lossless``)."""

    models: Mapping[str, Model]
    source: str  # where it came from, for `backends`
    problem: str | None = None  # why the native scores are used instead, or None

    @property
    def active(self) -> bool:
        return self.problem is None and bool(self.models)

    def model_for(self, key: str) -> tuple[str, Model | None]:
        """The map fitted for an adapter's calibration key, and its name; ``("native", None)``
        when calibration is off or that configuration was not measured."""
        if not self.active:
            return "native", None
        model = self.models.get(key)
        return (key, model) if model is not None else ("native", None)

    def apply(self, key: str, query: str | Asked, response: BackendResponse) -> BackendResponse:
        """``response`` with every result's relevance calibrated by the map for ``key`` (its
        native value kept as the extra key ``native_relevance``) and ``normalized_relevance``
        the first one's. ``query`` is the query's text, or what it asks for as
        :func:`~memory_router.core.asked.asked` read it with its rule (the router's way)."""
        if not response.results:
            return response
        _, model = self.model_for(key)
        if model is None:
            return response
        wanted = query if isinstance(query, Asked) else asked(query)
        if not wanted.judgeable:  # "why did we do it that way": nothing to judge a result by; the backend's word stands
            return response
        terms = wanted.terms
        words = TermWords(terms)  # once per answer, not per result
        results: list[Result] = []
        cap = 1.0
        hits = response.results
        for position, hit in enumerate(hits, start=1):
            after = hits[position].relevance if position < len(hits) else 0.0
            stands_out = gap(hit.relevance, after)
            value = model(
                hit.relevance, coverage(terms, hit.content, words), 1.0 / position, exact(wanted, hit), stands_out
            )
            if position == 1:
                value = model.first(value)
            cap = min(cap, value)  # keep the backend's own order
            extra = hit.extra
            if "native_relevance" not in extra:
                extra = {**extra, "native_relevance": hit.relevance}
            results.append(hit.derived(round(cap, 4), extra))
        return response.replace(results=tuple(results), normalized_relevance=results[0].relevance)


NATIVE = Calibration({}, "off", "calibration is off in router-config.json")


def query_terms(query: str, rule: Rule | None = None) -> frozenset[str]:
    """The query's content terms, stemmed: what a result has to hold to answer it (the words of
    ``rule``, the rule it matched, not counted)."""
    return asked(query, rule).terms


def gap(native: float, following: float) -> float:
    """How far a result's native relevance stands above the next result's (0 when it does not)."""
    return max(0.0, native - following)


def coverage(terms: frozenset[str], content: str, words: TermWords | None = None) -> float:
    """The share of ``terms`` that ``content`` holds (0.5 when the query has no content term:
    nothing to judge by, neither a match nor a miss): the terms among the stems of its words.
    ``words``: :class:`TermWords` of ``terms`` (a caller judging many texts by one query works
    them out once)."""
    if not terms:
        return 0.5
    if words is None:
        words = TermWords(terms)
    return words.share(content[:_SCAN_CHARS].lower())


class TermWords:
    """The words that stem to one of a query's terms (:func:`~memory_router.backends.common.words.stemming_to`),
    and where to look for them: a text's other words cannot match a term, so they are neither
    stemmed nor even cut out of the text. Every such word begins with its term (the term plus a
    suffix, or the term itself) or is an irregular form: each of those *heads* is found in the
    text with ``str.find``, and a word is read only where a head starts one."""

    __slots__ = ("count", "heads", "stems")

    def __init__(self, terms: frozenset[str]) -> None:
        self.count = len(terms)
        self.stems = stemming_to(terms, _stem)
        self.heads = tuple(dict.fromkeys(t if w.startswith(t) else w for w, t in self.stems.items()))

    def share(self, low: str) -> float:
        """The share of the terms that ``low`` (a lower-cased text) holds: the same as
        ``len(terms & {stem(w) for w in _WORD.findall(low)}) / len(terms)``."""
        stems, found = self.stems, set()
        for head in self.heads:
            at = low.find(head)
            while at != -1:
                if at == 0 or low[at - 1] not in _WORD_CHARS:  # a word starts here: read it whole
                    word = _WORD.match(low, at)
                    if word is not None and word.group() in stems:
                        found.add(stems[word.group()])
                at = low.find(head, at + 1)
        return len(found) / self.count


def parse(data: Any) -> dict[str, Model]:
    """The models of a calibration file; ``ValueError`` names what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a calibration file of format {FORMAT}")
    maps = data.get("maps")
    if not isinstance(maps, dict) or not maps:
        raise ValueError('"maps" must be a non-empty object')
    models: dict[str, Model] = {}
    for key, raw in maps.items():
        if not isinstance(raw, dict):
            raise ValueError(f"maps.{key} must be an object")
        values: list[float] = []
        for name in ("intercept", *FEATURES):
            value = raw.get(name, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"maps.{key}.{name} must be a finite number, got {value!r}")
            values.append(float(value))
        first_x, first_y = _first_map(key, raw.get("first"))
        intercept, native, cover, rank, exact_weight, gap_weight = values
        model = Model(intercept, native, cover, rank, exact_weight, first_x, first_y, gap_weight)
        if model.native < 0 or model.coverage < 0 or model.exact < 0 or model.gap < 0:
            raise ValueError(f"maps.{key}: the native, coverage, exact and gap weights must be >= 0 (monotone)")
        models[key] = model
    return models


def _first_map(key: str, raw: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``maps.<key>.first``: ``{"x": [...], "y": [...]}``, both non-decreasing, y in 0..1."""
    if raw is None:
        return (), ()
    if not isinstance(raw, dict):
        raise ValueError(f"maps.{key}.first must be an object with x and y")
    xs, ys = raw.get("x"), raw.get("y")
    if not isinstance(xs, list) or not isinstance(ys, list) or not xs or len(xs) != len(ys):
        raise ValueError(f"maps.{key}.first: x and y must be lists of one length")
    for name, values in (("x", xs), ("y", ys)):
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and 0.0 <= v <= 1.0 for v in values):
            raise ValueError(f"maps.{key}.first.{name} must hold numbers in 0..1")
        if any(b < a for a, b in zip(values, values[1:], strict=False)):
            raise ValueError(f"maps.{key}.first.{name} must be non-decreasing (monotone)")
    return tuple(float(x) for x in xs), tuple(float(y) for y in ys)
