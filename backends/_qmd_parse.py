"""qmd's ``--json`` output -> contract :class:`Result` objects, with per-mode relevance.

qmd prints a JSON array of hits ``{docid, score, file, line, title, snippet[, context, explain]}``
where ``file`` is ``qmd://<collection>/<path>`` and ``snippet`` starts with a unified-diff style
``@@ -a,b @@ (x before, y after)`` header line. ``score`` means something different per mode, so
relevance (0..1, the router accepts >= 0.4 everywhere) is mapped per mode:

``search`` (BM25): qmd's score is ``|bm25| / (1 + |bm25|)`` rounded to 2 decimals; its scale
depends on the corpus (a term found in every document scores 0.00). What is absolute is that every
hit contains *every* term of the keyword form that was sent (qmd ANDs them). So::

    relevance = coverage * (0.6 + 0.4 * score / best_score_in_this_answer)

``coverage`` is the sent form's share of the strict keyword query (1.0 unless relaxed, see
``_qmd_keywords``). A hit containing all of the query's keywords therefore scores 0.6..1.0; an
answer to a query relaxed to half its keywords peaks at 0.5 (the threshold region, like Total
Recall's "about half the query's content"); one relaxed to a third stays below 0.4 (weak). When
every score rounds to 0, all hits count as best.

``vsearch``: score is cosine similarity; qmd itself drops hits under 0.3. We take 0.3 as "no
relation" and 0.8 as "certain", linearly: ``relevance = clamp((cosine - 0.3) / 0.5)``, so cosine
0.5 (reliably on-topic for embeddinggemma in practice) is 0.4.

``query`` (hybrid): score is rank-based (``1/rank`` blended with the reranker; the top hit is
always near 1.0), so it is not used. The adapter asks for ``--explain`` and uses, per hit:

* the reranker's own score (``explain.rerankScore``, Qwen3-Reranker's probability that the
  chunk answers the query) when reranking really ran (not skipped, and not qmd's fallback that
  scores every chunk 0.5 when the reranker cannot load), else
* the best absolute retrieval evidence: the ``vsearch`` mapping of its best vector score, or the
  ``search`` mapping (coverage 1) of its BM25 score, whichever is higher;
* with no explain data at all (a transport without it): ``0.35 * score`` - rank-only evidence is
  reported as weak so the router looks further.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import orjson

from .base import Result

_SNIPPET_HEADER = re.compile(r"^@@ [^\n]*@@[^\n]*(?:\n|$)")
_NUMBERED_HEADER = re.compile(r"^\d+: @@ ")
_LINE_NUMBER_PREFIX = re.compile(r"^\d+: ", re.MULTILINE)
MAX_CONTENT_CHARS = 2000

VSEARCH_FLOOR = 0.3
VSEARCH_SPAN = 0.5
SEARCH_BASE = 0.6
RANK_ONLY_FACTOR = 0.35


class QmdOutputError(ValueError):
    """qmd's stdout was not the JSON array of hits we expect."""


def _clamp(x: float) -> float:
    if math.isnan(x):
        return 0.0
    return min(1.0, max(0.0, x))


def vsearch_relevance(cosine: float) -> float:
    return _clamp((cosine - VSEARCH_FLOOR) / VSEARCH_SPAN)


def search_relevance(score: float, best: float, coverage: float = 1.0) -> float:
    ratio = 1.0 if best <= 0 else _clamp(score / best)
    return _clamp(coverage * (SEARCH_BASE + (1 - SEARCH_BASE) * ratio))


def query_relevance(hit: dict[str, Any], best_fts: float, reranked: bool) -> float:
    explain = hit.get("explain")
    if not isinstance(explain, dict):
        return _clamp(RANK_ONLY_FACTOR * _num(hit.get("score")))
    if reranked:
        return _clamp(_num(explain.get("rerankScore")))
    vec = max((_num(v) for v in explain.get("vectorScores") or ()), default=None)
    fts = max((_num(v) for v in explain.get("ftsScores") or ()), default=None)
    evidence = 0.0
    if vec is not None:
        evidence = vsearch_relevance(vec)
    if fts is not None:
        evidence = max(evidence, search_relevance(fts, best_fts))
    return evidence


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value)


def split_uri(uri: str) -> tuple[str | None, str]:
    """``qmd://notes/a/b.md`` -> ("notes", "a/b.md"); anything else -> (None, uri)."""
    if uri.startswith("qmd://"):
        rest = uri[len("qmd://") :]
        collection, _, path = rest.partition("/")
        return (collection or None), path
    return None, uri


def clean_snippet(snippet: str) -> str:
    """The snippet without qmd's ``@@ ... @@`` header line.

    HTTP mode numbers every line (``1: @@ -1,3 @@ ...``); those prefixes are removed first.
    """
    if _NUMBERED_HEADER.match(snippet):
        snippet = _LINE_NUMBER_PREFIX.sub("", snippet)
    text = _SNIPPET_HEADER.sub("", snippet, count=1).strip("\n")
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 3] + "..."


def parse_hits(stdout: bytes) -> list[dict[str, Any]]:
    """Decode qmd's ``--json`` stdout; raise :class:`QmdOutputError` with what was wrong."""
    text = stdout.strip()
    if not text:
        raise QmdOutputError("qmd printed nothing on stdout (expected a JSON array)")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise QmdOutputError(f"qmd's output is not JSON ({exc}); it starts with {text[:80]!r}") from None
    if isinstance(data, dict) and isinstance(data.get("results"), list):  # HTTP /query shape
        data = data["results"]
    if not isinstance(data, list):
        raise QmdOutputError(f"qmd's JSON is a {type(data).__name__}, expected an array of hits")
    hits = [h for h in data if isinstance(h, dict)]
    if len(hits) != len(data):
        raise QmdOutputError("qmd's JSON array holds something other than hit objects")
    return hits


def to_results(
    hits: Iterable[dict[str, Any]],
    mode: str,
    source: str,
    *,
    coverage: float = 1.0,
    reranked: bool = False,
    rank_only: bool = False,
) -> list[Result]:
    """Map hits to contract results with the documented per-mode relevance. ``rank_only``: the
    scores are rank positions (qmd's HTTP ``/query``), reported as weak evidence whatever the mode."""
    hits = list(hits)
    best_search = max((_num(h.get("score")) for h in hits), default=0.0)
    best_fts = max(
        (_num(v) for h in hits if isinstance(h.get("explain"), dict) for v in h["explain"].get("ftsScores") or ()),
        default=0.0,
    )
    results: list[Result] = []
    for hit in hits:
        score = _num(hit.get("score"))
        if rank_only:
            relevance = _clamp(RANK_ONLY_FACTOR * score)
        elif mode == "search":
            relevance = search_relevance(score, best_search, coverage)
        elif mode == "vsearch":
            relevance = vsearch_relevance(score)
        else:
            relevance = query_relevance(hit, best_fts, reranked)
        uri = str(hit.get("file") or "")
        collection, path = split_uri(uri)
        extras: dict[str, Any] = {"path": path, "qmd_score": score}
        if isinstance(hit.get("line"), int):
            extras["line"] = hit["line"]
        for key in ("title", "docid", "context"):
            if isinstance(hit.get(key), str) and hit[key]:
                extras[key] = hit[key]
        if collection:
            extras["collection"] = collection
        if uri:
            extras["uri"] = uri
        snippet = hit.get("snippet") if isinstance(hit.get("snippet"), str) else hit.get("body")
        results.append(
            Result(
                content=clean_snippet(snippet if isinstance(snippet, str) else ""),
                relevance=round(relevance, 4),
                source=source,
                **extras,
            )
        )
    return results
