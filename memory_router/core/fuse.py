"""The fused strategy (``"strategy": "fuse"``), beyond the spec: every usable step of the chain is
asked at once and the answers are merged by reciprocal rank fusion.

The spec's router returns one backend's results (sequential fallback, the default). Fusing asks
each step concurrently, each under its own timeout and the query's deadline, then merges:

* a result scores ``sum(relevance / (RRF_K + rank))`` over the answers that hold it (rank from 1
  in each backend's own order): reciprocal rank fusion with each vote weighted by the result's
  calibrated relevance, so a backend's confident answer outweighs another's long tail (on LoCoMo's
  development half the weighting added 3.5 points of evidence recall@10 and 10 of hit@1 to plain
  RRF, docs/calibration.md); the merged list is ordered by that score, then by relevance;
* duplicates (the same file and line, or the same text) are merged into one result: the one
  with the highest relevance is kept, with its ``source``; the other backends that returned it
  are listed in its extra key ``also_from``;
* a result that another backend's result above it already shows (a conversation turn Lossless
  returns and the session note above it quotes: its text, case aside, inside that one's; see
  :func:`_shown_by`) is folded into it the same way, so the slot goes to evidence the list does not
  hold yet (on LongMemEval's development half ~1 result in 8 of the router's ten was such a
  quote);
* the list is cut at the query's ``limit``.

How the envelope reads in this mode (docs/strategies.md): ``routed_to``/``routed_mode`` are the
step of the top result; ``normalized_relevance`` is the highest relevance in the merged list, and
``status`` is ``success`` when it reaches the threshold, ``partial`` below it; ``attempts`` lists
every call, ``accepted`` when it contributed a result; ``fallbacks_used`` counts the calls that
contributed nothing; ``backend_duration_ms`` is the slowest contributing call (they ran at once).
"""

from __future__ import annotations

from typing import Any

from memory_router.backends.base import Result
from memory_router.core.attempts import Attempt

RRF_K = 60  # the usual constant (Cormack et al. 2009): damps the weight of the very first ranks
# Fewer words than this and a text found inside another may be a coincidence, not a quote.
QUOTE_MIN_WORDS = 5


def fuse_results(attempts: list[Attempt], limit: int) -> tuple[list[Result], Attempt | None]:
    """The merged results of the attempts that answered, and the attempt of the top one."""
    fused, top = _fused(attempts, None)
    return _distinct([hit for _, hit in fused], limit), top


def fill_results(head: Result, attempts: list[Attempt], limit: int) -> list[Result]:
    """``"strategy": "fill"``: ``head`` (the sequential winner's first result) first, then the
    fused results of ``attempts`` without it, cut at ``limit``. Replayed on the development halves
    (docs/calibration.md) this keeps the sequential hit@1 and adds most of fuse's recall@10."""
    fused, _ = _fused(attempts, None)
    first = _identity(head)
    rest = [hit for key, hit in fused if key != first]
    return _distinct([head, *rest], limit)


def _fused(attempts: list[Attempt], limit: int | None) -> tuple[list[tuple[Any, Result]], Attempt | None]:
    """:func:`fuse_results` before :func:`_distinct`, each merged result with its :func:`_identity`
    (worked out once per hit: a long text's is a pass over it); ``limit`` None: all of them."""
    scores: dict[Any, float] = {}
    best: dict[Any, tuple[Result, Attempt]] = {}
    sources: dict[Any, list[str]] = {}
    for attempt in attempts:
        for rank, hit in enumerate(attempt.response.results, start=1):
            key = _identity(hit)
            scores[key] = scores.get(key, 0.0) + hit.relevance / (RRF_K + rank)
            seen = sources.setdefault(key, [])
            if hit.source not in seen:
                seen.append(hit.source)
            kept = best.get(key)
            if kept is None or hit.relevance > kept[0].relevance:
                best[key] = (hit, attempt)
    order = sorted(scores, key=lambda k: (-scores[k], -best[k][0].relevance))[:limit]
    merged = []
    for key in order:
        hit, _ = best[key]
        others = [s for s in sources[key] if s != hit.source]
        merged.append((key, hit.derived(hit.relevance, {**hit.extra, "also_from": others}) if others else hit))
    return merged, (best[order[0]][1] if order else None)


def _identity(hit: Result) -> Any:
    """What makes two hits the same memory: its file and line when the backend names them,
    else its text with spacing and case ignored (``str.split`` and ``re``'s ``\\s`` agree on
    what is a space, every code point checked)."""
    path = hit.extra.get("path")
    if isinstance(path, str):
        line = hit.extra.get("line", hit.extra.get("start_line"))
        return ("path", path, line if isinstance(line, int) else None)
    return ("text", " ".join(hit.content.split()).lower())


def _distinct(ranked: list[Result], limit: int) -> list[Result]:
    """The first ``limit`` of ``ranked`` that no result above them from another backend already
    shows; a result folded into the one that shows it adds its source to that one's
    ``also_from``. Texts are compared only when two backends' results meet, and only until the
    list is full."""
    kept: list[Result] = []
    shown: list[str | None] = []  # kept's _as_shown, worked out when first needed
    for hit in ranked:
        if len(kept) == limit:
            break
        i = _shown_by(hit, kept, shown)
        if i is None:
            kept.append(hit)
            shown.append(None)
            continue
        also = list(kept[i].extra.get("also_from", ()))
        if hit.source not in also:
            kept[i] = kept[i].derived(kept[i].relevance, {**kept[i].extra, "also_from": [*also, hit.source]})
    return kept


def _shown_by(hit: Result, kept: list[Result], shown: list[str | None]) -> int | None:
    """The index of the first of ``kept`` from another backend whose text holds all of ``hit``'s
    (case aside), if ``hit``'s has :data:`QUOTE_MIN_WORDS` words or more: a shorter one may be a
    coincidence, not a quote. Fills ``shown`` as it needs it."""
    mine: str | None = None
    for i, above in enumerate(kept):
        if above.source == hit.source or len(above.content) < len(hit.content):
            continue  # one store's own answers stand; a shorter text cannot hold a longer one
        if mine is None:
            mine = hit.content.strip().lower()
            if mine.count(" ") < QUOTE_MIN_WORDS - 1:
                return None
        theirs = shown[i]
        if theirs is None:
            theirs = shown[i] = _as_shown(above.content)
        if mine in theirs:
            return i
    return None


def _as_shown(text: str) -> str:
    """A text lower-cased, with a JSON-escaped line break, tab, quote or backslash read as the
    character itself: a session note quotes a turn that way (``user: "...\\n..."``)."""
    if "\\" in text:
        text = text.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")
    return text.lower()
