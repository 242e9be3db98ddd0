"""A ``qmd query`` hit shows its document's best lines, as a ``qmd search`` hit does, when no
reranker read the chunk qmd's row is confined to.

**Why.** qmd 2.8's ``query`` (``hybridQuery``, ``structuredSearch``) cuts every candidate document
into ~900-token chunks and keeps, per document, the chunk holding the most of the keywords (the
first such chunk on a tie) for the reranker to read; its JSON row then shows the best line *of that
chunk* (``extractSnippet(body, query, 300, bestChunkPos, bestChunk.length)``). With a reranker the
chunk is what the reranker scored, and the relevance the adapter reports is that score: the row
must show that chunk. Without one (no rerank model on disk, ``--no-rerank``, or qmd's fallback
that scores every chunk 0.5), nothing read the chunk, and the confinement only costs: in a source
file the first chunk (imports, the module docstring) often holds every keyword somewhere, so the
row shows a line there while the definition that holds them together sits in a later chunk. A
``qmd search`` row for the same document shows the best line of the whole document
(``extractSnippet`` without a chunk). On the code benchmark's rule 7 queries, qmd ``query``'s
first result is in a right file 26 times in 32 but showed the right lines 14 times
(docs/benchmarks-code.md).

**What.** For such a hit, :func:`document_best_lines` reads the document from its collection's
folder (the file qmd indexed, read only if it holds the row's snippet, as definition-first does)
and replaces ``line`` and ``snippet`` with what qmd's own ``extractSnippet`` gives over the whole
document (:func:`document_snippet`, a line-for-line port) for the text qmd made its row's snippet
from (:func:`snippet_query`: a typed query's first ``lex:`` line, else its first ``vec:`` line, else
the question). qmd's score and explain data are kept, so the relevance is qmd's as before. A hit
whose file cannot be read (another machine's qmd server, a file changed since it was indexed, one
over ``MAX_DEFINITION_READ``) keeps qmd's row.

``vsearch`` rows are left as qmd gives them: their chunk is the one whose embedding matched the
query, so a model did choose it (and the vector query has no keywords to pick lines by).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_router.backends.qmd.keywords import typed_searches
from memory_router.backends.qmd.parse import CollectionFiles, same_document, snippet_body, split_uri

SNIPPET_CHARS = 300
"""The snippet length qmd's JSON rows use (the CLI's and the engine's ``outputResults`` rows)."""


def snippet_query(sent: str) -> str:
    """The text qmd makes a ``query`` row's snippet from, for the text the adapter sent: a typed
    document's first ``lex:`` line, else its first ``vec:`` line (the CLI's ``displayQuery``),
    else the question itself (an expanded ``hybridQuery``)."""
    searches = typed_searches(sent)
    if not searches:
        return sent
    for kind in ("lex", "vec"):
        if found := next((s["query"] for s in searches if s["type"] == kind), None):
            return found
    return sent


def _utf16_cut(text: str, units: int) -> str:
    """``text.substring(0, units)`` as JavaScript counts (UTF-16 code units): a pair cut in two
    leaves U+FFFD, as the adapter reads qmd's own cut (``lenient_json``)."""
    data = text.encode("utf-16-le", "surrogatepass")
    if len(data) <= 2 * units:
        return text
    return data[: 2 * units].decode("utf-16-le", "replace")


def _utf16_len(text: str) -> int:
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def document_snippet(body: str, query: str, max_len: int = SNIPPET_CHARS) -> tuple[int, str]:
    """(line, snippet) as qmd 2.8.3's ``extractSnippet(body, query, max_len)`` gives them over the
    whole document: the first line holding the most of the query's whitespace-separated terms
    (lower-cased substrings), shown from the line before it to two lines after, cut at
    ``max_len`` UTF-16 units with "...", under qmd's ``@@ -start,count @@ (x before, y after)``
    header. ``line`` is 1-based."""
    lines = body.split("\n")
    terms = query.lower().split()
    best_line, best_score = 0, -1
    for i, text in enumerate(lines):
        lower = text.lower()
        score = sum(1 for term in terms if term in lower)
        if score > best_score:
            best_line, best_score = i, score
    start, end = max(0, best_line - 1), min(len(lines), best_line + 3)
    shown = "\n".join(lines[start:end])
    if _utf16_len(shown) > max_len:
        shown = _utf16_cut(shown, max_len - 3) + "..."
    count = end - start
    header = f"@@ -{start + 1},{count} @@ ({start} before, {len(lines) - (start + count)} after)"
    return best_line + 1, f"{header}\n{shown}"


def document_best_lines(hits: Sequence[dict[str, Any]], sent: str, files: CollectionFiles) -> list[dict[str, Any]]:
    """``hits`` of a ``qmd query`` that no reranker scored, each with ``line`` and ``snippet``
    taken from its whole document for the text qmd made its snippet from (see the module's
    docstring); a hit whose document cannot be read as qmd indexed it is returned unchanged."""
    query = snippet_query(sent)
    out: list[dict[str, Any]] = []
    for hit in hits:
        snippet = hit.get("snippet")
        collection, path = split_uri(str(hit.get("file") or ""))
        text = files.read_whole(collection, path) if isinstance(snippet, str) else None
        if text is None or not isinstance(snippet, str) or not same_document(snippet_body(snippet), text):
            out.append(hit)
            continue
        line, best = document_snippet(text, query)
        out.append({**hit, "line": line, "snippet": best})
    return out
