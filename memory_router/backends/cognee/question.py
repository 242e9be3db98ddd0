"""What a relationship question asks: its entities, relation types, direction and path ends.

Pure functions, no I/O. :func:`parse_question` reads a question once into an immutable
:class:`Question`; :func:`score_edge` and :func:`score_path` score graph answers against it
(the formula, with figures, is in docs/backends/cognee.md). Words are classified as:

* **relation words** (:data:`RELATIONS`): verbs ("depends on", "calls", "owns", "reads from",
  "publishes to", "uses", ...), agent nouns ("dependents", "callers", "owner") and object nouns
  ("dependencies", "callees"), each mapped to one relation *family*; an edge type belongs to the
  family of its first word (``depends_on`` -> depend, ``reads_from`` -> read);
* **path words** ("trace", "path", "chain", "route", "connected", "reach", ...), and the
  generic relation words ("relate", "link", "between", ...), which name no entity;
* stopwords; everything else is an **entity word**. A run of entity words is one *mention*
  ("the billing database" -> billing, database); a mention of generic nouns only ("services",
  "components") names no particular entity and is dropped.

Direction comes from word order around the first relation word: an active verb's subject is
the edge's source and its object the target ("X depends on" / "what depends on X"); a passive
verb ("owned by X") swaps them; an agent noun makes its entity the target ("dependents of X"),
an object noun the source ("dependencies of X"). A path question ("from A to B", "between A
and B" with a path word) has two ends instead; "from A to B" prefers edges pointing A -> B.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from memory_router.backends.common.words import META_WORDS, STOPWORDS, identifier_parts, stem
from memory_router.backends.totalrecall.parse import index_terms
from memory_router.core.frozen import Frozen

Role = Literal["source", "target", "any"]

# family: (verbs, agent nouns, object nouns). Agent nouns name the edge's source ("the owner of
# X" owns X), object nouns its target ("the dependencies of X" are what X depends on).
RELATIONS: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    fam: (frozenset(v.split()), frozenset(a.split()), frozenset(o.split()))
    for fam, v, a, o in (
        (
            "depend",
            "depend depends depended depending rely relies relied relying require requires required requiring",
            "dependent dependents",
            "dependency dependencies deps requirement requirements",
        ),
        ("call", "call calls called calling invoke invokes invoked invoking", "caller callers", "callee callees"),
        ("own", "own owns owned owning maintain maintains maintained", "owner owners maintainer maintainers", ""),
        (
            "read",
            "read reads reading consume consumes consumed consuming subscribe subscribes subscribed",
            "reader readers consumer consumers subscriber subscribers",
            "",
        ),
        ("write", "write writes wrote written writing store stores stored", "writer writers", ""),
        (
            "publish",
            "publish publishes published publishing emit emits emitted produce produces produced",
            "publisher publishers producer producers emitter emitters",
            "",
        ),
        ("use", "use uses used using", "", ""),
        ("contain", "contain contains contained", "container containers", ""),
    )
}
# How to ask Cognee about an entity's edges of a family (its vector search matches edge-type names).
SEARCH_PHRASES = {
    "depend": "depends on",
    "call": "calls",
    "own": "owns",
    "read": "reads from",
    "write": "writes to",
    "publish": "publishes to",
    "use": "uses",
    "contain": "contains",
}
_FAMILY_OF: dict[str, tuple[str, str]] = {}  # word -> (family, "verb" | "agent" | "object")
for _fam, (_verbs, _agents, _objects) in RELATIONS.items():
    for _kind, _words in (("verb", _verbs), ("agent", _agents), ("object", _objects)):
        for _w in _words:
            _FAMILY_OF[_w] = (_fam, _kind)
_PASSIVE = frozenset({"owned", "called", "used", "read", "consumed", "written", "stored", "published", "invoked"})
PATH_WORDS = frozenset(
    "trace traces tracing path paths chain chains route routes routing reach reaches reachable hop hops "
    "connected connect connects connecting flow flows".split()
)
# Words that ask for *some* relation, or how to look, rather than naming an entity.
_GENERIC_RELATION = frozenset(
    "relate relates related relating relation relations relationship relationships link links linked "
    "linking connection connections interact interacts interaction interactions between graph edge edges "
    "via through".split()
)
# Nouns that name a kind of thing, not a thing: a mention of these only is no entity.
GENERIC_NOUNS = frozenset(
    "service services component components system systems module modules thing things part parts "
    "entity entities node nodes app apps application applications team teams resource resources "
    "who whom".split()
)
_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*(?:'s)?", re.UNICODE)


class MentionWord(Frozen):
    """One word of a mention: its stem and, for identifiers, the stems of its parts."""

    stem: str
    parts: tuple[str, ...] = ()

    def covered_by(self, terms: set[str] | frozenset[str]) -> bool:
        return self.stem in terms or (bool(self.parts) and all(p in terms for p in self.parts))


def term_of(word: str) -> MentionWord:
    parts = identifier_parts(word)
    return MentionWord(stem(word.lower()), tuple(stem(p) for p in parts) if len(parts) > 1 else ())


class Mention(Frozen):
    """An entity the question names: its words as written, its terms, and its side of the edge."""

    text: str
    terms: tuple[MentionWord, ...]
    role: Role = "any"

    def match(self, node_words: frozenset[str]) -> float:
        """Share of this mention's terms a node name covers (1.0: the node is this entity)."""
        return sum(1 for t in self.terms if t.covered_by(node_words)) / len(self.terms)


class Question(Frozen):
    mentions: tuple[Mention, ...]
    families: frozenset[str]
    """Relation families the question names (empty: any relation)."""
    path: bool
    """A path/trace/chain question with two ends (``mentions[0]`` -> ``mentions[-1]``)."""
    directed: bool
    """"from A to B": edges pointing A -> B are the answer; otherwise any direction."""

    @property
    def ends(self) -> tuple[Mention, Mention] | None:
        return (self.mentions[0], self.mentions[-1]) if len(self.mentions) >= 2 else None


def family(relation: str) -> str:
    """The family of an edge type: that of its first word (``reads_from`` -> read), else its stem."""
    words = identifier_parts(relation) or [relation.lower()]
    first = words[0]
    hit = _FAMILY_OF.get(first)
    return hit[0] if hit else stem(first)


def parse_question(query: str) -> Question:
    words = [w[:-2] if w.lower().endswith("'s") else w for w in _WORD.findall(query)]
    lowers = [w.lower() for w in words]
    families, marker, path, runs = _classify(words, lowers)
    runs = [(i, ws) for i, ws in runs if not all(w.lower() in GENERIC_NOUNS for w in ws)]
    two_ends = path and len(runs) >= 2
    # with two ends, or two entities around a noun ("dependencies of A and B"), no one direction
    directional = marker is not None and not two_ends and not (len(runs) >= 2 and marker[2] in ("agent", "object"))
    mentions = tuple(
        Mention(
            " ".join(ws),
            tuple(dict.fromkeys(term_of(w) for w in ws)),
            _role(index, marker) if directional and marker else "any",
        )
        for index, ws in runs
    )
    directed = two_ends and "from" in lowers and "to" in lowers
    return Question(mentions, frozenset(families), two_ends, directed)


def _classify(
    words: list[str], lowers: list[str]
) -> tuple[list[str], tuple[int, str, str] | None, bool, list[tuple[int, list[str]]]]:
    """Relation families named, the first relation word (index, family, how), whether a path
    word occurs, and the runs of entity words (index of the first, the words)."""
    families: list[str] = []
    marker: tuple[int, str, str] | None = None
    path = False
    runs: list[tuple[int, list[str]]] = []
    for i, lower in enumerate(lowers):
        kind = _FAMILY_OF.get(lower)
        if kind:
            families.append(kind[0])
            if marker is None:
                passive = kind[1] == "verb" and lower in _PASSIVE and lowers[i + 1 : i + 2] == ["by"]
                marker = (i, kind[0], "passive" if passive else kind[1])
        elif lower in PATH_WORDS:
            path = True
        elif not (lower in _GENERIC_RELATION or lower in STOPWORDS or lower in META_WORDS or len(lower) < 2):
            if runs and runs[-1][0] + len(runs[-1][1]) == i:
                runs[-1][1].append(words[i])
            else:
                runs.append((i, [words[i]]))
    return families, marker, path, runs


def _role(index: int, marker: tuple[int, str, str]) -> Role:
    """Which end of the edge an entity at word ``index`` is, given the first relation word."""
    at, _, how = marker
    if how == "agent":  # "the dependents of X": X is what they depend on
        return "target"
    if how == "object":  # "the dependencies of X": X depends on them
        return "source"
    before = index < at
    if how == "passive":  # "X is owned by Y"
        return "target" if before else "source"
    return "source" if before else "target"


# --------------------------------------------------------------------------- scoring

OTHER_RELATION = 0.6
"""Factor for an edge whose type is not one the question names."""
WRONG_WAY = 0.35
"""Factor for a mention found at the wrong end of a directed edge."""
UNKNOWN_CAP = 0.35
"""Best possible score when the question names an entity the graph does not know."""
UNDIRECTED_PATH = 0.75
"""Factor for a path that answers "from A to B" only when some edge is walked backwards."""


def node_words(name: str) -> frozenset[str]:
    return frozenset(index_terms(name))


def relation_factor(question: Question, relation: str) -> float:
    return 1.0 if not question.families or family(relation) in question.families else OTHER_RELATION


def score_edge(question: Question, source: str, relation: str, target: str) -> float:
    """Entity score x relation factor for one edge (0 when it names no mentioned entity)."""
    if not question.mentions:
        return 0.0
    src, dst = node_words(source), node_words(target)
    total = 0.0
    for m in question.mentions:
        at_source = m.match(src) * (WRONG_WAY if m.role == "target" else 1.0)
        at_target = m.match(dst) * (WRONG_WAY if m.role == "source" else 1.0)
        total += max(at_source, at_target)
    return round(total / len(question.mentions) * relation_factor(question, relation), 4)


def score_path(question: Question, relations: Iterable[str], all_forward: bool) -> float:
    """A complete path between the two ends: mean relation factor over its hops, less for a
    "from A to B" path that walks some edge backwards."""
    factors = [relation_factor(question, r) for r in relations]
    score = sum(factors) / len(factors) if factors else 0.0
    if question.directed and not all_forward:
        score *= UNDIRECTED_PATH
    return round(score, 4)


def known_mentions(question: Question, names: Iterable[str]) -> list[bool]:
    """For each mention: does some entity node name cover all of its terms?"""
    words = [node_words(n) for n in set(names)]
    return [any(m.match(w) == 1.0 for w in words) for m in question.mentions]


def cypher_for(query: str, limit: int) -> str:
    """A Cypher query for the relationships touching the query's entity terms.

    Terms are word characters only (stems of ``\\w+`` words), and are quoted with ``'`` and
    ``\\`` escaped anyway, so a query can never change the statement's structure. Returns ``""``
    when the query names no entity (nothing to look up).
    """
    terms = list(dict.fromkeys(t for m in parse_question(query).mentions for t in m.terms if len(t.stem) >= 3))[:8]
    if not terms:
        return ""
    conds = []
    for term in terms:
        lit = "'" + term.stem.replace("\\", "\\\\").replace("'", "\\'") + "'"
        conds.append(f"lower(a.name) CONTAINS {lit} OR lower(b.name) CONTAINS {lit}")
    return (
        f"MATCH (a:Node)-[r]->(b:Node) WHERE {' OR '.join(conds)} "
        f"RETURN a.name, r.relationship_name, b.name LIMIT {int(limit)}"
    )
