"""Follow-up searches for a relationship question, within a time budget (no HTTP of its own).

The adapter's first Cognee search returns the triplets nearest to the whole question. That
is often not enough, and :func:`explore` asks again, through the two search functions the
adapter passes in, until the answer is complete or the budget is spent:

1. **Entities the answer does not name** are looked up once each (a search for the entity's
   name alone). Still absent afterwards: the graph does not know it, and the answer is weak.
   When the one entity a question names is there but no edge answers the question exactly
   (at the right end, by a relation type it names), the entity's own name is searched once,
   with the relation the question names ("CheckoutService depends on").
2. **A path** is wanted when the question asks for one ("trace/path/chain from A to B"), or
   names two entities no single edge joins ("how does A relate to B"). First one Cypher
   ``ALL SHORTEST`` query (exact; directed first for "from A to B"), unless the server
   refuses Cypher (Cognee's default) or ``paths`` is ``expand``; then, or instead, expansion
   from both ends: each round searches the nearest not-yet-searched entity reached from each
   end (``EXPAND_PER_ROUND``), widely (its whole neighbourhood, not the few triplets nearest
   to its name), and looks for a path in everything fetched so far.

Searches that fail or time out just end the exploration: the first answer stands.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Literal

from memory_router.backends.cognee.paths import (
    STRUCTURAL_RELATIONS,
    Path,
    Relationship,
    cypher_path,
    entity_names,
    find_paths,
    matching,
)
from memory_router.backends.cognee.question import SEARCH_PHRASES, Mention, Question, family, known_mentions, score_edge

PathsMode = Literal["auto", "cypher", "expand"]
GraphSearch = Callable[[str, bool], Coroutine[Any, Any, list[Relationship]]]
"""Searches the graph for a text: its relationships. The flag asks for a wide answer (an
entity's whole neighbourhood, for the expansion) rather than the few nearest triplets."""
CypherSearch = Callable[[str], Coroutine[Any, Any, list[Path] | None]]
"""Runs a :func:`cypher_path` statement: its paths, or ``None`` when the server refuses Cypher."""
PER_ROUND = 4
# An expansion round searches this many entities (the nearest unsearched one at each end), each
# for its whole neighbourhood (a wide search). Cognee answers concurrent searches one after the
# other: a round of four narrow searches took ~2 s on 2 loaded CPUs, and the second round of a
# path two rounds away was cut by the budget, leaving hops out (issue 22, item 9).
EXPAND_PER_ROUND = 2
MAX_ROUNDS = 8
MIN_SLICE_S = 0.05


class Explored:
    """What an exploration found, filled in as it goes: mutable state, so a plain class (values
    are :class:`~memory_router.core.frozen.Frozen`; see there)."""

    __slots__ = ("paths", "rels", "searches", "via")

    def __init__(
        self,
        *,
        rels: list[Relationship] | None = None,
        paths: list[Path] | None = None,
        searches: int = 0,
        via: str | None = None,
    ) -> None:
        self.rels = [] if rels is None else rels
        """Relationships the follow-up searches found (besides the first answer's)."""
        self.paths = [] if paths is None else paths
        self.searches = searches
        self.via = via
        """How the paths were found: "cypher", "expand", or None."""

    def __repr__(self) -> str:
        return f"Explored(rels={self.rels!r}, paths={self.paths!r}, searches={self.searches!r}, via={self.via!r})"


async def explore(
    question: Question,
    first: Sequence[Relationship],
    search: GraphSearch,
    cypher: CypherSearch | None,
    *,
    budget_s: float,
    paths: PathsMode = "auto",
    limit: int = 10,
) -> Explored:
    """Search again until the answer is complete or ``budget_s`` is spent (module docstring)."""
    run = _Exploration(question, first, search, time.monotonic() + budget_s)
    if not question.mentions or not await run.lookup_missing():
        return run.out
    ends = question.ends
    if ends is None:
        if not _exact(question, run.found):
            await run.neighbourhood()
        return run.out
    start, end = ends
    if not question.path and find_paths(run.found, start, end, directed=False, max_hops=1):
        return run.out  # "how does A relate to B" and an edge joins them: that is the answer
    if paths in ("auto", "cypher") and cypher is not None:
        answered = await run.cypher_paths(cypher, start, end, limit)
        if answered:
            return run.out  # Cypher is exact: its paths, or none at all
    if paths != "cypher":
        await run.expand(start, end)
    return run.out


class _Exploration:
    """The state of one exploration: what was found and searched, and the deadline."""

    def __init__(self, question: Question, first: Sequence[Relationship], search: GraphSearch, deadline: float):
        self.question = question
        self.found = list(first)
        self.search = search
        self.deadline = deadline
        self.searched: set[str] = set()
        self.out = Explored()

    async def run(self, calls: list[Coroutine[Any, Any, Any]]) -> tuple[list[Any], bool]:
        """Run the calls together until the deadline: the answers of those that finished, and
        whether all did (the rest are cancelled, which closes their connections)."""
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_SLICE_S or not calls:
            for c in calls:  # never awaited: close them so Python does not warn
                c.close()
            return [], not calls
        self.out.searches += len(calls)
        tasks = [asyncio.ensure_future(c) for c in calls]
        done, pending = await asyncio.wait(tasks, timeout=remaining)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        # the search functions answer [] / None for a failed search, in call order
        return [t.result() for t in tasks if t in done], not pending

    async def search_all(self, texts: list[str], *, wide: bool = False) -> bool:
        """Search each text once; ``False`` when out of time."""
        texts = [t for t in dict.fromkeys(texts) if t not in self.searched]
        got, complete = await self.run([self.search(t, wide) for t in texts])
        self.searched |= set(texts)
        for rels in got:
            self.out.rels += rels
            self.found += rels
        return complete

    async def lookup_missing(self) -> bool:
        """Look up the entities the answer lacks; ``True`` when the graph knows them all."""
        q = self.question
        known = known_mentions(q, entity_names(self.found))
        missing = [m.text for m, k in zip(q.mentions, known, strict=True) if not k]
        if missing:
            await self.search_all(missing)
            known = known_mentions(q, entity_names(self.found))
        return all(known)

    async def neighbourhood(self) -> None:
        """No edge answers exactly: search the named entities' names with the relation asked."""
        q = self.question
        names = sorted({n for m in q.mentions for n in matching(m, entity_names(self.found))})
        words = " ".join(SEARCH_PHRASES.get(f, f) for f in sorted(q.families))
        await self.search_all([f"{n} {words}".strip() for n in names[:PER_ROUND]])

    async def cypher_paths(self, cypher: CypherSearch, start: Mention, end: Mention, limit: int) -> bool:
        """One Cypher query (directed first for "from A to B"); ``True`` when Cypher answered."""
        for directed in (True, False) if self.question.directed else (False,):
            got, _ = await self.run([cypher(cypher_path(start, end, directed=directed, limit=limit))])
            if not got or got[0] is None:
                return False  # refused or out of time: expand instead
            if got[0]:
                self.out.paths, self.out.via = got[0], "cypher"
                self.out.rels += [e for p in got[0] for e in p.edges]
                return True
        return True

    async def expand(self, start: Mention, end: Mention) -> None:
        """Search outwards from both ends until a path joins them, or time or rounds run out."""
        for _ in range(MAX_ROUNDS):
            if self.joined(start, end):
                return
            frontier = _frontier(self.found, (start, end), self.searched, EXPAND_PER_ROUND, self.question.families)
            if not frontier:
                return
            if not await self.search_all(frontier, wide=True):
                break  # out of time: what did arrive may still join them
        self.joined(start, end)

    def joined(self, start: Mention, end: Mention) -> bool:
        self.out.paths = find_paths(self.found, start, end, directed=self.question.directed)
        self.out.via = "expand" if self.out.paths else None
        return bool(self.out.paths)


def _exact(question: Question, found: Sequence[Relationship]) -> bool:
    """Does some non-structural edge score 1.0 (every entity, the right end, a named relation type)?"""
    return any(
        score_edge(question, r.source, r.relation, r.target) >= 1.0
        for r in found
        if r.relation not in STRUCTURAL_RELATIONS
    )


def _frontier(
    found: Sequence[Relationship],
    ends: tuple[Mention, Mention],
    searched: set[str],
    per_round: int,
    families: frozenset[str] = frozenset(),
) -> list[str]:
    """The next entities to search: nearest to either end first, the two ends taking turns.

    "Nearest" counts an edge of a relation the question names ("trace the *call* chain") as one
    step and any other edge as three, so the walk follows the chain asked about before the leaves
    hanging off it (a service's database, its team): with several neighbours per node, a plain
    breadth-first order spent the budget on those leaves (issue 22, item 9)."""
    adjacent: dict[str, list[tuple[str, int]]] = {}
    for e in found:
        if e.relation in STRUCTURAL_RELATIONS:
            continue
        step = 1 if not families or family(e.relation) in families else 3
        adjacent.setdefault(e.source, []).append((e.target, step))
        adjacent.setdefault(e.target, []).append((e.source, step))
    names = entity_names(r for r in found if r.relation not in STRUCTURAL_RELATIONS)
    names |= entity_names(r for r in found if r.relation == "is_a")
    sides = [
        [n for n in _nearest_first(adjacent, sorted(matching(mention, names))) if n not in searched] for mention in ends
    ]
    picked: list[str] = []
    for pair in zip(*(side + [""] * per_round for side in sides), strict=False):
        for name in pair:
            if name and name not in picked and len(picked) < per_round:
                picked.append(name)
    return picked


def _nearest_first(adjacent: dict[str, list[tuple[str, int]]], starts: list[str]) -> list[str]:
    """Every node reachable from ``starts``, cheapest first (Dijkstra over the step costs; a tie
    goes to the node reached first)."""
    import heapq

    heap = [(0, i, name) for i, name in enumerate(starts)]
    best = dict.fromkeys(starts, 0)
    order: list[str] = []
    done: set[str] = set()
    pushed = len(heap)
    while heap:
        cost, _, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        order.append(node)
        for nxt, step in adjacent.get(node, ()):
            if nxt not in best or cost + step < best[nxt]:
                best[nxt] = cost + step
                heapq.heappush(heap, (cost + step, pushed, nxt))
                pushed += 1
    return order
