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
:mod:`.keywords`). A hit containing all of the query's keywords therefore scores 0.6..1.0; an
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

**Definition-first** (:func:`definitions_first`): for a query that asks for a symbol's definition
("find the function X", a bare identifier; see ``_definitions``), each hit's file is read from
disk - ``<collection path from qmd's index.yml>/<path>``, at most ``MAX_DEFINITION_READ`` bytes,
used only if it holds the snippet's longest line - and a hit that defines the symbol is ranked
above hits that only mention it, with the definition's line reported. When the file cannot be
read (or is not the document qmd matched), qmd's snippet is scanned instead.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from memory_router.backends.base import Result
from memory_router.backends.common import lenient_json
from memory_router.backends.common.definitions import (
    definition_target,
    definitions_first_relevances,
    find_definition,
    is_document,
)

_SNIPPET_HEADER = re.compile(r"^@@ [^\n]*@@[^\n]*(?:\n|$)")
_SNIPPET_START = re.compile(r"^(?:\d+: )?@@ -(\d+)(?:,(\d+))? @@")
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
        data = lenient_json.loads(text)  # a snippet cut inside an emoji: U+FFFD, not a lost answer
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


# --------------------------------------------------------------------------- definition-first

MAX_DEFINITION_READ = 512 * 1024
"""Bytes of a hit's file read to look for the definition (the file's start when it is larger)."""
DEFINITION_BEFORE, DEFINITION_AFTER = 2, 8
"""Lines around the definition shown as the content when qmd's snippet does not include it."""

_COLLECTIONS_BLOCK = re.compile(r"^collections:[ \t]*\r?\n((?:[ \t]+\S.*(?:\r?\n|$)|[ \t]*\r?\n)*)", re.MULTILINE)
_YAML_KEY = re.compile(r"^([ \t]+)(\"[^\"]*\"|'[^']*'|[^:#\s][^:#]*?)[ \t]*:[ \t]*(.*?)[ \t]*$")


def collection_roots(config_file: Path) -> dict[str, Path]:
    """``collection name -> folder`` from qmd's index.yml (``collections: NAME: path: DIR``).

    Read with a small line parser (the block qmd itself writes); empty when the file is missing
    or the block is not in that shape - callers then fall back to qmd's snippet."""
    try:
        text = config_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    block = _COLLECTIONS_BLOCK.search(text)
    if block is None:
        return {}
    roots: dict[str, Path] = {}
    name_indent: int | None = None
    current: str | None = None
    for line in block.group(1).splitlines():
        m = _YAML_KEY.match(line)
        if m is None:
            continue
        indent, key, value = len(m.group(1)), m.group(2).strip("\"'"), m.group(3)
        if name_indent is None or indent <= name_indent:
            name_indent, current = indent, key
        elif current is not None and key == "path" and value:
            roots[current] = Path(os.path.expanduser(value.strip("\"'")))
    return roots


class CollectionFiles:
    """Reads a hit's file from its collection's folder (qmd's index.yml is read on first use).
    One instance serves one answer: each file is read once (definition-first and a ``query``
    hit's best lines both read it)."""

    def __init__(self, config_file: Path | None) -> None:
        self.config_file = config_file
        self._roots: dict[str, Path] | None = None
        self._read: dict[tuple[str | None, str], tuple[str, bool] | None] = {}

    def read(self, collection: str | None, path: str) -> str | None:
        """The file's text (its first ``MAX_DEFINITION_READ`` bytes), or None when the collection
        is unknown, the path leaves the collection's folder, or it is not a readable regular file."""
        found = self._cached(collection, path)
        return found[0] if found is not None else None

    def read_whole(self, collection: str | None, path: str) -> str | None:
        """As :meth:`read`, but None for a file longer than ``MAX_DEFINITION_READ`` bytes (its
        lines past the cut are unknown)."""
        found = self._cached(collection, path)
        return found[0] if found is not None and found[1] else None

    def _cached(self, collection: str | None, path: str) -> tuple[str, bool] | None:
        key = (collection, path)
        if key not in self._read:
            self._read[key] = self._load(collection, path)
        return self._read[key]

    def _load(self, collection: str | None, path: str) -> tuple[str, bool] | None:
        """(text, whether that is the whole file), or None."""
        if self._roots is None:
            self._roots = collection_roots(self.config_file) if self.config_file else {}
        root = self._roots.get(collection or "")
        if root is None or not path or path.startswith("/") or ".." in Path(path).parts:
            return None
        try:
            # O_NONBLOCK: opening a FIFO that replaced the file must not wait for a writer.
            fd = os.open(root / path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except (OSError, ValueError):  # ValueError: a NUL in the path
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(MAX_DEFINITION_READ + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        whole = len(data) <= MAX_DEFINITION_READ
        return data[:MAX_DEFINITION_READ].decode("utf-8", "replace"), whole


def definitions_first(
    query: str, hits: list[dict[str, Any]], results: list[Result], files: CollectionFiles | None
) -> list[Result]:
    """``results`` (from :func:`to_results`, one per hit) re-scored so that, for a query asking
    for a symbol's definition, hits defining it come first, each with ``definition_line`` (its
    line in the file), ``definition_kind`` and ``line`` set to that line. Other queries: unchanged."""
    target = definition_target(query)
    if target is None or not results:
        return results
    found = [_definition_update(hit, result, target.symbol, files) for hit, result in zip(hits, results, strict=True)]
    relevances = definitions_first_relevances([r.relevance for r in results], [s for s, _ in found])
    out: list[Result] = []
    for result, (_, update), relevance in zip(results, found, relevances, strict=True):
        if update or relevance != result.relevance:
            result = result.replace(**(update | {"relevance": round(relevance, 4)}))
        out.append(result)
    return out


def _definition_update(
    hit: dict[str, Any], result: Result, symbol: str, files: CollectionFiles | None
) -> tuple[int, dict[str, Any]]:
    """(strength, result fields to set) for one hit: 2 defines ``symbol`` in a source file, 1 in
    a markdown file's code, 0 does not define it (as far as its file, else its snippet, shows)."""
    extra = result.extra
    path = str(extra.get("path") or "")
    markdown = is_document(path)
    snippet = hit.get("snippet") if isinstance(hit.get("snippet"), str) else hit.get("body")
    snippet = snippet if isinstance(snippet, str) else ""
    start, count = _snippet_span(snippet)
    text = files.read(extra.get("collection"), path) if files is not None else None
    if text is not None and not same_document(snippet_body(snippet), text):
        text = None  # not the document qmd indexed (another index's folder, or rewritten since)
    update: dict[str, Any] = {}
    if text is not None:
        found = find_definition(text, symbol, markdown=markdown)
        if found is not None and not start <= found.line < start + count:
            lines = text.split("\n")
            window = lines[max(0, found.line - 1 - DEFINITION_BEFORE) : found.line + DEFINITION_AFTER]
            update["content"] = clean_snippet("\n".join(window))
        line = found.line if found is not None else 0
    else:
        found = find_definition(snippet_body(snippet), symbol, markdown=markdown) if start else None
        line = start + found.line - 1 if found is not None else 0
    if found is None:
        return 0, {}
    return (1 if markdown else 2), update | {"line": line, "definition_line": line, "definition_kind": found.kind}


def same_document(snippet_body: str, text: str) -> bool:
    """Whether ``text`` holds the snippet's longest complete line (qmd cuts a long snippet with
    "..."): the file read from disk is the document qmd matched, moved lines allowed."""
    lines = snippet_body.split("\n")
    if snippet_body.endswith("..."):
        lines = lines[:-1]
    longest = max((ln.strip() for ln in lines), key=len, default="")
    return not longest or longest in text


def snippet_body(snippet: str) -> str:
    """The snippet's lines after the header, none dropped (line k is the header's first line + k - 1)."""
    if _NUMBERED_HEADER.match(snippet):
        snippet = _LINE_NUMBER_PREFIX.sub("", snippet)
    return _SNIPPET_HEADER.sub("", snippet, count=1)


def _snippet_span(snippet: str) -> tuple[int, int]:
    """(first line, line count) of qmd's snippet from its ``@@ -a,b @@`` header; (0, 0) if none."""
    m = _SNIPPET_START.match(snippet)
    if m is None:
        return 0, 0
    return int(m.group(1)), int(m.group(2) or 1)


def cosine_hits(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hits of a typed ``vec:`` query (``--explain``, no rerank) as ``qmd vsearch`` reports them:
    the score is the hit's best vector score (a cosine), hits under qmd's vsearch floor of 0.3 are
    dropped, best first."""
    out = []
    for hit in hits:
        explain = hit.get("explain")
        if not isinstance(explain, dict):
            continue
        scores = [v for v in explain.get("vectorScores") or () if isinstance(v, (int, float))]
        if scores and max(scores) >= VSEARCH_FLOOR:
            out.append({k: v for k, v in hit.items() if k != "explain"} | {"score": round(max(scores), 2)})
    return sorted(out, key=lambda h: -h["score"])


def really_reranked(hits: list[dict[str, Any]], stderr: str) -> bool:
    """Whether ``qmd query`` blended a real reranker score into these hits.

    Not when it skipped reranking (``rrf.weight`` 1.0), nor when the reranker could not load:
    qmd then prints "Reranker unavailable" (first time only; later calls hit its cache) and
    scores every chunk exactly 0.5 (observed with a stand-in model), which carries no signal.
    """
    explains = [h["explain"] for h in hits if isinstance(h.get("explain"), dict)]
    if not explains or "Reranker unavailable" in stderr:
        return False
    if all(isinstance(e.get("rrf"), dict) and e["rrf"].get("weight", 1.0) == 1.0 for e in explains):
        return False
    return not all(e.get("rerankScore") == 0.5 for e in explains)
