"""Total Recall's relevance: how well an entry answers a query, and the best entries for it.

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
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime, timezone
from itertools import pairwise

from memory_router.backends.common.definitions import Definition, definition_target, definitions_first_relevances
from memory_router.backends.common.words import recency
from memory_router.backends.totalrecall.index import MemoryIndex
from memory_router.backends.totalrecall.parse import QUOTED, Entry, query_terms

TIER_WEIGHTS = {"working": 1.0, "registers": 0.95, "longterm": 0.95, "daily": 0.9, "notes": 0.85, "archive": 0.75}
SUPERSEDED_FACTOR = 0.6
NO_TERMS_RELEVANCE = 0.35


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
    index: MemoryIndex, query: str, limit: int, now: datetime, keep: Callable[[Entry], bool] | None = None
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
    quoted = [a or b for a, b in QUOTED.findall(query)]
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


def _relevance_function(index: MemoryIndex, query: str, terms: list[str], now: datetime) -> Callable[[int], float]:
    """The documented relevance of entry ``i`` for the query (whose content terms are ``terms``)."""
    weight_items = tuple((t, index.idf_of(t)) for t in terms)
    total = sum(w for _, w in weight_items)
    quoted = [a or b for a, b in QUOTED.findall(query)]
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
    index: MemoryIndex, query: str, limit: int, now: datetime, keep: Callable[[Entry], bool] | None = None
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
