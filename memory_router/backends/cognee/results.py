"""Turning Cognee's search answers into contract results (pure functions, no I/O).

**Shapes** (Cognee 1.6.5, ``POST /api/v1/search``): with access control on, the answer is one
object per dataset, ``[{"dataset_id", "dataset_name", "dataset_tenant_id", "search_result": R}]``
(plus ``"error"`` when that dataset failed); with it off, a bare list of ``R`` (or ``R`` itself
when it is a single list). ``R`` is, per search type:

* graph context (a completion type with ``onlyContext``): one prompt string whose
  ``Connections:`` block has one ``A --[rel]--> B  (text)`` line per relationship, and whose
  ``Nodes:`` block has ``Node: A`` / ``__node_content_start__`` ... ``__node_content_end__``;
* full completion: a list of answer strings;
* CYPHER: a list of rows (``[source, relationship, target]`` for the adapter's own query);
* CHUNKS: a list of chunk payloads ``{text, document_name, chunk_index, ..., score}`` where
  ``score`` is a cosine *distance* (lower is better); CHUNKS_LEXICAL: the same payloads, BM25
  ranked, without a score.

**Relevance** of graph results follows the question (:mod:`.cognee.question` reads it; the
formula and its figures are in docs/backends/cognee.md): the entities it names, weighed by
which end of the edge they are at when it asks a direction, times 1 or 0.6 for whether the edge
type is one it names; at most 0.35 for Cognee's structural edges and for every result when it
names an entity the graph does not know; a question naming no entity scores every edge 0.35.
A path question's answer is one result holding the whole path (:mod:`.cognee.paths`).
Completion answers and CHUNKS_LEXICAL chunks score by term coverage over their text, and
CHUNKS use ``1 - distance``, clamped to 0..1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from memory_router.backends.base import Result
from memory_router.backends.cognee.paths import STRUCTURAL_RELATIONS, Path, Relationship, entity_names, rows_to_paths
from memory_router.backends.cognee.question import (
    UNKNOWN_CAP,
    MentionWord,
    Question,
    known_mentions,
    parse_question,
    relation_factor,
    score_edge,
    score_path,
)
from memory_router.backends.common.words import META_WORDS, STOPWORDS, identifier_parts, stem
from memory_router.backends.totalrecall.parse import index_terms
from memory_router.core.frozen import Frozen

NO_TERMS_RELEVANCE = 0.35
# Structural edges (Cognee's own: a chunk's document, an entity's type): context, never a strong answer.
STRUCTURAL_CAP = NO_TERMS_RELEVANCE
MAX_CONTENT_CHARS = 2000

# Words that ask for *some* relation rather than naming an entity.
_RELATION_PREFIXES = ("relat", "depend", "connect", "interact")
_RELATION_WORDS = frozenset(
    """link links linked linking call calls called calling chain chains path paths between
    trace traces tracing graph edge edges use uses used using""".split()
)
_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*", re.UNICODE)

_NO_DATA = re.compile(r"No data found|NoDataError|No valid chunks")
_CONNECTION = re.compile(r"^(?P<src>\S.*?) --\[(?P<rel>[^\]\n]+)\]--> (?P<dst>.+?)(?:\s{2,}\((?P<text>.*)\))?$")
_NODE = re.compile(
    r"^Node: (?P<name>[^\n]+)\n__node_content_start__\n(?P<content>.*?)\n__node_content_end__", re.M | re.S
)


# --------------------------------------------------------------------------- shapes


class DatasetAnswer(Frozen):
    dataset: str | None  # None when access control is off (no per-dataset wrapper)
    result: Any


def unwrap(payload: Any) -> tuple[list[DatasetAnswer], list[str]]:
    """Split a search response into per-dataset answers and per-dataset error messages."""
    if (
        isinstance(payload, list)
        and payload
        and all(
            isinstance(item, dict) and ("search_result" in item or "error" in item) and "dataset_id" in item
            for item in payload
        )
    ):
        answers, errors = [], []
        for item in payload:
            name = item.get("dataset_name") or item.get("dataset_id")
            error = item.get("error")
            # "No data found ..." is Cognee's NoDataError for a dataset with nothing of this
            # kind (no chunks in a graph-only dataset): that dataset is empty, not failing.
            if error and not _NO_DATA.search(str(error)):
                errors.append(f"dataset {name}: {error}")
            if item.get("search_result") is not None:
                answers.append(DatasetAnswer(name, item["search_result"]))
        return answers, errors
    return [DatasetAnswer(None, payload)], []


def parse_connections(context: str) -> list[Relationship]:
    """The ``A --[rel]--> B  (text)`` lines of a graph context, in order, without duplicates."""
    out: dict[tuple[str, str, str], Relationship] = {}
    for raw in context.splitlines():
        line = raw.strip().rstrip("`").rstrip()
        m = _CONNECTION.match(line)
        if not m:
            continue
        rel = Relationship(m["src"].strip(), m["rel"].strip(), m["dst"].strip(), (m["text"] or "").strip() or None)
        out.setdefault((rel.source, rel.relation, rel.target), rel)
    return list(out.values())


def parse_nodes(context: str) -> dict[str, str]:
    """``Node: name`` -> its content, from the ``Nodes:`` block of a graph context."""
    return {m["name"].strip(): m["content"].strip() for m in _NODE.finditer(context)}


def rows_to_relationships(rows: Iterable[Any]) -> tuple[list[Relationship], list[str]]:
    """CYPHER rows: ``[source, relation, target]`` rows become relationships, others text."""
    rels: list[Relationship] = []
    other: list[str] = []
    for row in rows:
        if isinstance(row, (list, tuple)) and len(row) == 3 and all(isinstance(v, str) for v in row):
            rels.append(Relationship(row[0], row[1], row[2]))
        elif isinstance(row, (list, tuple)):
            other.append(" | ".join("" if v is None else str(v) for v in row))
        else:
            other.append(str(row))
    return rels, other


# --------------------------------------------------------------------------- relevance


def is_relation_word(lower: str) -> bool:
    return lower in _RELATION_WORDS or lower.startswith(_RELATION_PREFIXES)


def entity_terms(query: str) -> list[MentionWord]:
    """The query's entity terms (see the module docstring), de-duplicated, in order."""
    seen: dict[str, MentionWord] = {}
    for word in _WORD.findall(query):
        lower = word.lower()
        if len(lower) < 2 or lower in STOPWORDS or lower in META_WORDS or is_relation_word(lower):
            continue
        parts = identifier_parts(word)
        term = MentionWord(stem(lower), tuple(stem(p) for p in parts) if len(parts) > 1 else ())
        seen.setdefault(term.stem, term)
    return list(seen.values())


def coverage(terms: list[MentionWord], text: str) -> float | None:
    """Covered fraction of ``terms`` in ``text``; ``None`` when there are no terms."""
    if not terms:
        return None
    words = set(index_terms(text))
    return sum(1 for t in terms if t.covered_by(words)) / len(terms)


def relevance(terms: list[MentionWord], text: str) -> float:
    c = coverage(terms, text)
    return NO_TERMS_RELEVANCE if c is None else round(c, 4)


# --------------------------------------------------------------------------- results


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 1] + "…"


def relationship_results(
    rels: Iterable[Relationship],
    question: Question,
    source: str,
    *,
    nodes: dict[str, str] | None = None,
    unknown: bool = False,
) -> list[Result]:
    """One result per relationship naming a queried entity, scored against the question.

    ``unknown``: the question names an entity the graph does not know; nothing is strong."""
    out = []
    for rel in rels:
        if question.mentions:
            score = score_edge(question, rel.source, rel.relation, rel.target)
            if score <= 0.0:
                continue
        else:
            score = round(NO_TERMS_RELEVANCE * relation_factor(question, rel.relation), 4)
        if rel.relation in STRUCTURAL_RELATIONS:
            score = min(score, STRUCTURAL_CAP)
        if unknown:
            score = min(score, UNKNOWN_CAP)
        content = rel.line + (f"  ({rel.text})" if rel.text else "")
        extra: dict[str, Any] = {"relationship": {"source": rel.source, "relation": rel.relation, "target": rel.target}}
        if nodes:
            described = {n: nodes[n] for n in (rel.source, rel.target) if nodes.get(n)}
            if described:
                extra["nodes"] = described
        if rel.dataset:
            extra["dataset"] = rel.dataset
        out.append(Result(content=_clip(content), relevance=score, source=source, **extra))
    return out


def path_results(paths: Iterable[Path], question: Question, source: str, *, via: str | None = None) -> list[Result]:
    """One result per path of two or more hops (one hop is an edge, scored as such): the whole
    walk as its content, its edges under ``path``, its nodes, in order, under ``path_nodes``, and
    how it was found (``cypher`` or ``expand``) under ``found_by``."""
    out = []
    for p in paths:
        if len(p.edges) < 2:
            continue
        score = score_path(question, (e.relation for e in p.edges), p.forward)
        datasets = {e.dataset for e in p.edges}
        extra: dict[str, Any] = {
            "path": [{"source": e.source, "relation": e.relation, "target": e.target} for e in p.edges],
            "path_nodes": list(p.nodes),
        }
        if via:
            extra["found_by"] = via
        if len(datasets) == 1 and (dataset := datasets.pop()):
            extra["dataset"] = dataset
        out.append(Result(content=_clip(p.line), relevance=score, source=source, **extra))
    return out


def text_results(
    texts: Iterable[str], terms: list[MentionWord], source: str, *, dataset: str | None = None
) -> list[Result]:
    out = []
    for text in texts:
        if not text.strip():
            continue
        score = relevance(terms, text)
        if score <= 0.0:
            continue
        out.append(
            Result(
                content=_clip(text.strip()), relevance=score, source=source, **({"dataset": dataset} if dataset else {})
            )
        )
    return out


def distance_relevance(score: Any) -> float:
    """CHUNKS ``score`` is a cosine distance (0 = identical): relevance = 1 - distance."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return 0.0
    if value != value:  # NaN
        return 0.0
    return round(min(1.0, max(0.0, 1.0 - value)), 4)


def chunk_results(
    payloads: Iterable[Any],
    terms: list[MentionWord],
    source: str,
    *,
    scored: bool,
    dataset: str | None = None,
) -> list[Result]:
    """CHUNKS (``scored``: relevance from the distance) or CHUNKS_LEXICAL (term coverage)."""
    out = []
    for payload in payloads:
        if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
            continue
        text = payload["text"]
        score = distance_relevance(payload.get("score")) if scored else relevance(terms, text)
        if score <= 0.0:
            continue
        extra: dict[str, Any] = {}
        for key in ("document_name", "chunk_index", "document_id"):
            if payload.get(key) is not None:
                extra[key] = payload[key]
        if dataset:
            extra["dataset"] = dataset
        out.append(Result(content=_clip(text), relevance=score, source=source, **extra))
    return out


# --------------------------------------------------------------------------- a whole answer

RELATION_MODES = frozenset({"graph", "cypher"})  # answers made of relationships, scored against the question


def graph_answer(payload: Any, mode: str) -> tuple[list[Relationship], dict[str, str], list[str]]:
    """The relationships of a graph-context or Cypher answer (each with its dataset), the node
    descriptions of graph contexts, and the Cypher rows that are not relationships, as text."""
    answers, _ = unwrap(payload)
    rels: list[Relationship] = []
    nodes: dict[str, str] = {}
    other: list[str] = []
    for answer in answers:
        items = _items(answer.result, rows=(mode == "cypher"))
        if mode == "cypher":
            found, rest = rows_to_relationships(items)
            other += rest
        else:
            found = []
            for context in (i for i in items if isinstance(i, str)):
                found += parse_connections(context)
                nodes.update(parse_nodes(context))
        rels += [r.replace(dataset=answer.dataset) for r in found]
    return rels, nodes, other


def cypher_paths(payload: Any) -> list[Path]:
    """The paths of a :func:`.cognee.paths.cypher_path` answer, from every dataset."""
    answers, _ = unwrap(payload)
    return [p for a in answers for p in rows_to_paths(_items(a.result, rows=True), a.dataset)]


def to_results(
    payload: Any, mode: str, query: str, source: str, explored: Any = None
) -> tuple[list[Result], list[str]]:
    """Contract results from a search response (plus what follow-up searches found, an
    :class:`.cognee.explore.Explored`), and per-dataset error messages."""
    answers, errors = unwrap(payload)
    results: list[Result] = []
    if mode in RELATION_MODES:
        question = parse_question(query)
        rels, nodes, other = graph_answer(payload, mode)
        if explored is not None:
            rels += explored.rels
            results += path_results(explored.paths, question, source, via=explored.via)
        # follow-ups find some edges again (Cypher's without Cognee's text): keep the first
        rels = list({(r.source, r.relation, r.target, r.dataset): r for r in reversed(rels)}.values())[::-1]
        unknown = not all(known_mentions(question, entity_names(rels)))
        results += relationship_results(rels, question, source, nodes=nodes, unknown=unknown)
        results += text_results(other, entity_terms(query), source)
    else:
        terms = entity_terms(query)
        for answer in answers:
            items = _items(answer.result, rows=False)
            if mode == "completion":
                results += text_results((i for i in items if isinstance(i, str)), terms, source, dataset=answer.dataset)
            else:
                results += chunk_results(items, terms, source, scored=(mode == "chunks"), dataset=answer.dataset)
    # Best first (stable: Cognee's own order breaks ties), so a limit keeps the best ones.
    results.sort(key=lambda r: r.relevance, reverse=True)
    return results, errors


def _items(value: Any, *, rows: bool) -> list[Any]:
    """A dataset's answer as a flat list of items.

    Without access control Cognee returns a bare list of per-dataset answers, except that a
    single answer which is itself a list is returned as that list; so a list may hold items
    (strings, chunk dicts, Cypher rows) or lists of them. Cypher rows are lists too: a list of
    lists of lists is the nested form.
    """
    if not isinstance(value, list):
        return [value]
    if rows:
        if (
            value
            and all(isinstance(v, list) for v in value)
            and any(v and all(isinstance(x, list) for x in v) for v in value)
        ):
            return [row for v in value for row in v]
        return value
    return [x for v in value for x in (v if isinstance(v, list) else [v])]
