"""Paths between two entities of a Cognee graph: found in edges already fetched, or by Cypher.

Pure functions, no I/O (the adapter, :mod:`.cognee`, sends the searches). A path never walks
Cognee's structural edges (a chunk's document, an entity's type): every entity ``is_a`` some
type, so through them everything would be two hops from everything else.

* :func:`find_paths`: breadth-first search over fetched relationships, from every node naming
  the first end to every node naming the second; for a directed question ("from A to B")
  edges are first walked only forwards, then in either direction.
* :func:`cypher_path` / :func:`rows_to_paths`: the same as one ``ALL SHORTEST`` Cypher query
  (Ladybug/Kuzu syntax, as Cognee's default graph store speaks it) and its rows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from memory_router.backends.cognee.question import Mention, node_words
from memory_router.core.frozen import Frozen

# Edges Cognee's own data model adds around the user's graph (chunk -> document, chunk ->
# entity, entity -> type, summary -> chunk, node -> node set).
STRUCTURAL_RELATIONS = frozenset({"is_part_of", "contains", "is_a", "made_from", "belongs_to_set"})
# Structural edges whose *source* is a text (a chunk or summary), not an entity.
TEXT_SOURCE_RELATIONS = frozenset({"is_part_of", "contains", "made_from"})
MAX_HOPS = 6
MAX_PATHS = 3


class Relationship(Frozen):
    source: str
    relation: str
    target: str
    text: str | None = None
    dataset: str | None = None

    @property
    def line(self) -> str:
        return f"{self.source} --[{self.relation}]--> {self.target}"


class Path(Frozen):
    """A walk ``nodes[0] .. nodes[-1]``; ``edges[i]`` (as stored) joins ``nodes[i]`` and ``nodes[i+1]``."""

    nodes: tuple[str, ...]
    edges: tuple[Relationship, ...]

    @property
    def forward(self) -> bool:
        return all(e.source == self.nodes[i] for i, e in enumerate(self.edges))

    @property
    def line(self) -> str:
        out = [self.nodes[0]]
        for i, e in enumerate(self.edges):
            arrow = f" --[{e.relation}]--> " if e.source == self.nodes[i] else f" <--[{e.relation}]-- "
            out.append(arrow + self.nodes[i + 1])
        return "".join(out)


def entity_names(rels: Iterable[Relationship]) -> set[str]:
    """Names of the entity nodes among relationships (a chunk's text is not an entity)."""
    names: set[str] = set()
    for r in rels:
        if r.relation not in TEXT_SOURCE_RELATIONS:
            names.add(r.source)
        names.add(r.target)
    return names


def matching(mention: Mention, names: Iterable[str]) -> set[str]:
    """Entity names that name ``mention`` completely."""
    return {n for n in names if mention.match(node_words(n)) == 1.0}


def find_paths(
    rels: Sequence[Relationship], start: Mention, end: Mention, *, directed: bool, max_hops: int = MAX_HOPS
) -> list[Path]:
    """The shortest paths (up to :data:`MAX_PATHS`) between the two ends among ``rels``."""
    edges = [r for r in rels if r.relation not in STRUCTURAL_RELATIONS and r.source != r.target]
    names = entity_names(edges)
    starts, ends = matching(start, names), matching(end, names)
    if not starts or not ends:
        return []
    for forward_only in (True, False) if directed else (False,):
        found = _bfs(edges, starts, ends - starts or ends, forward_only, max_hops)
        if found:
            return found
    return []


def _bfs(edges: list[Relationship], starts: set[str], ends: set[str], forward_only: bool, max_hops: int) -> list[Path]:
    adjacent: dict[str, list[tuple[str, Relationship]]] = {}
    for e in dict.fromkeys(edges):
        adjacent.setdefault(e.source, []).append((e.target, e))
        if not forward_only:
            adjacent.setdefault(e.target, []).append((e.source, e))
    queue: deque[tuple[str, tuple[str, ...], tuple[Relationship, ...]]] = deque((s, (s,), ()) for s in sorted(starts))
    seen = {s: 0 for s in starts}
    found: list[Path] = []
    while queue:
        node, nodes, walked = queue.popleft()
        if found and len(walked) >= len(found[0].edges):
            break
        if len(walked) >= max_hops:
            continue
        for nxt, edge in adjacent.get(node, ()):
            if nxt in nodes or seen.get(nxt, len(walked) + 1) < len(walked) + 1:
                continue
            seen[nxt] = len(walked) + 1
            path = (nodes + (nxt,), walked + (edge,))
            if nxt in ends:
                found.append(Path(*path))
                if len(found) >= MAX_PATHS:
                    return found
            else:
                queue.append((nxt, *path))
    return found


# --------------------------------------------------------------------------- Cypher


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _names(var: str, mention: Mention) -> str:
    """A condition: ``var``'s name contains every term of the mention (identifiers: every part)."""
    conds = []
    for term in mention.terms:
        for piece in term.parts or (term.stem,):
            conds.append(f"lower({var}.name) CONTAINS {_quote(piece)}")
    return " AND ".join(dict.fromkeys(conds))


def cypher_path(start: Mention, end: Mention, *, directed: bool, limit: int, max_hops: int = MAX_HOPS) -> str:
    """One Cypher statement for the shortest paths from ``start`` to ``end`` that avoid
    structural edges. Names are quoted (``'`` and ``\\`` escaped): a question cannot change the
    statement's structure."""
    skip = ", ".join(_quote(r) for r in sorted(STRUCTURAL_RELATIONS))
    arrow = "->" if directed else "-"
    return (
        f"MATCH (a:Node)-[r* ALL SHORTEST 1..{int(max_hops)} (e, n | WHERE NOT e.relationship_name IN [{skip}])]"
        f"{arrow}(b:Node) WHERE {_names('a', start)} AND {_names('b', end)} AND id(a) <> id(b) "
        "RETURN a.name, id(a), properties(nodes(r), 'name'), list_transform(nodes(r), x -> id(x)), "
        f"properties(rels(r), 'relationship_name'), list_transform(rels(r), x -> x._src), b.name, id(b) "
        f"LIMIT {int(limit)}"
    )


def _node_id(value: Any) -> tuple[Any, ...]:
    return (value.get("table"), value.get("offset")) if isinstance(value, dict) else (value,)


def rows_to_paths(rows: Iterable[Any], dataset: str | None = None) -> list[Path]:
    """Rows of :func:`cypher_path` as paths, shortest first (rows of another shape are skipped)."""
    paths: dict[tuple[str, ...], Path] = {}
    for row in rows:
        try:
            a, a_id, mid_names, mid_ids, rel_names, src_ids, b, b_id = row
            nodes = (str(a), *map(str, mid_names), str(b))
            ids = [_node_id(a_id), *map(_node_id, mid_ids), _node_id(b_id)]
            if len(rel_names) != len(nodes) - 1 or len(src_ids) != len(rel_names) or len(ids) != len(nodes):
                continue
        except (TypeError, ValueError):
            continue
        edges = []
        for i, (rel, src) in enumerate(zip(rel_names, src_ids, strict=True)):
            forward = _node_id(src) == ids[i]
            s, t = (nodes[i], nodes[i + 1]) if forward else (nodes[i + 1], nodes[i])
            edges.append(Relationship(s, str(rel), t, dataset=dataset))
        paths.setdefault(nodes, Path(nodes, tuple(edges)))
    return sorted(paths.values(), key=lambda p: len(p.edges))[:MAX_PATHS]
