"""Queries over a Python repository in the spec's phrasings, generated from its AST, with their
ground truth from the AST too (for ``bench/code_memory.py``).

**What is read.** Every ``def``/``async def``/``class`` of every ``*.py`` file (methods under
their class), its span (first decorator to ``end_lineno``), its *head* (first decorator to the end
of the docstring, or to the signature's last line when there is none), its docstring's first
sentence; and every *reference* to a name: a ``Name`` load, an ``Attribute`` access
(``x.name``), or a name imported by ``from ... import`` (an IDE's "find usages" lists imports).

**Queries**, per rule of the spec's table (each is checked against the packaged rule table, and a
candidate that would fire another rule is passed over), drawn with a seeded ``random.Random`` from
sorted candidates, so one repository always gives the same set:

=====  =========  =========================================  =====================================
rule   kind       phrasing                                   gold
=====  =========  =========================================  =====================================
1      function   ``find the function X`` / ``method X``     every definition's head (lines)
1      class      ``find the class X``                       every definition's head (lines)
1      usages     ``find all usages of X``                   every reference but the definitions
4      how        ``how does <X's words> work``              the definition's span (lines)
4      explain    ``explain how to <docstring sentence>``    span of each def opening with it
6      dir        ``search in <dir>/*.py for <X's words>``   each file in <dir> that defines X
6      file       ``X in <dir>/<file>.py``                   that file (it defines X)
7      doc        ``<docstring sentence>``                   span of each def opening with it
7      words      ``<class words> <X's words>``              the definition's span (lines)
=====  =========  =========================================  =====================================

*X's words* are the identifier split at ``_`` and case changes, lower-cased (``TaskGroup.start_soon``
-> ``task group start soon``). Names shorter than 6 characters, dunders, names defined more than
3 times and definitions of 120 lines or more (for the span golds) are left out: they have no one
answer. Each target is asked for once (one query per gold set), and usages only of identifiers
(an inner ``_`` or CamelCase: every object has an attribute ``unwrap``) with 2 to 20 references.

**Labelling rule.** Gold ids are ``<path>:<first>-<last>``, or ``<path>`` for a whole file (a path
query's answer is a file under that path that holds what it asks for), paths relative to the
repository. A result *shows* the lines ``line - 1`` .. ``line + <its content's line count>`` of its
file (qmd's ``line`` is its best line, its snippet starts a line earlier); it holds a line gold id
when it is from that file and the two line ranges overlap, a file gold id when it is from that
file. A result without a line holds only file gold ids.
"""

from __future__ import annotations

import ast
import random
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from memory_router.core.frozen import Frozen

SEED = 29
PER_KIND = {
    "function": 11,
    "class": 10,
    "usages": 11,
    "how": 16,
    "explain": 16,
    "dir": 16,
    "file": 16,
    "doc": 16,
    "words": 16,
}
RULE_OF_KIND = {
    "function": "exact_symbol",
    "class": "exact_symbol",
    "usages": "exact_symbol",
    "how": "concept",
    "explain": "concept",
    "dir": "file_path",
    "file": "file_path",
    "doc": "default",
    "words": "default",
}
MIN_NAME = 6
MAX_DEFS = 3
MAX_SPAN = 120  # "how does X work" about a 400-line function has no one place to point at
USAGES = (2, 20)
_VERBS = {
    "acquire", "add", "call", "cancel", "check", "close", "connect", "convert", "create", "get", "iterate",
    "look", "make", "open", "read", "receive", "release", "remove", "return", "run", "send", "set", "start",
    "wait", "write", "wrap", "yield", "bind", "apply", "notify", "raise", "retrieve", "schedule", "spawn",
    "determine", "ensure", "register", "signal", "stop", "try", "change", "copy", "move", "load", "list",
}  # fmt: skip


class Definition(Frozen):
    path: str
    """Relative to the repository, POSIX."""
    name: str
    qualname: str
    kind: str
    """``function``, ``method`` or ``class``."""
    start: int
    head_end: int
    end: int
    doc_line: str


class Query(Frozen):
    qid: str
    kind: str
    category: str
    """The rule id the query is written for (``exact_symbol``, ``concept``, ``file_path``, ``default``)."""
    question: str
    evidence: tuple[str, ...]
    group: str
    """The top-level package or subfolder of the (first) gold file: the cross-validation group."""


class Repository(Frozen):
    definitions: tuple[Definition, ...]
    references: dict[str, tuple[tuple[str, int, int], ...]]
    """name -> (path, first line, last line) of each reference."""


# --------------------------------------------------------------------------- reading the AST


def read_repository(repo: Path) -> Repository:
    definitions: list[Definition] = []
    references: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for file in sorted(repo.rglob("*.py")):
        rel = file.relative_to(repo).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=rel)
        definitions += _definitions(tree.body, rel, "")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                references[node.id].append((rel, node.lineno, node.end_lineno or node.lineno))
            elif isinstance(node, ast.Attribute):
                references[node.attr].append((rel, node.lineno, node.end_lineno or node.lineno))
            elif isinstance(node, ast.ImportFrom):
                # An import is a usage, as an IDE's "find usages" lists it (``import X`` of a
                # module is not: only names defined in the repository are asked for).
                for alias in node.names:
                    references[alias.name].append((rel, alias.lineno, alias.end_lineno or alias.lineno))
    return Repository(definitions=tuple(definitions), references={k: tuple(v) for k, v in references.items()})


def _definitions(body: Sequence[ast.stmt], path: str, prefix: str) -> list[Definition]:
    out: list[Definition] = []
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        first = node.body[0]
        has_doc = (
            isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
        )
        head_end = (first.end_lineno or first.lineno) if has_doc else max(node.lineno, first.lineno - 1)
        doc = ast.get_docstring(node) or ""
        is_class = isinstance(node, ast.ClassDef)
        out.append(
            Definition(
                path=path,
                name=node.name,
                qualname=prefix + node.name,
                kind="class" if is_class else ("method" if prefix else "function"),
                start=start,
                head_end=head_end,
                end=node.end_lineno or node.lineno,
                doc_line=_first_sentence(doc),
            )
        )
        if is_class:
            out += _definitions(node.body, path, prefix + node.name + ".")
    return out


def _first_sentence(doc: str) -> str:
    """The docstring's first sentence (of its first paragraph, lines joined), or "" when that
    paragraph has no sentence end: a line cut mid-sentence is no phrase to ask with."""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    found = re.match(r"(.+?[.!?])(?:\s|$)", paragraph)
    if found:
        return found.group(1)
    return paragraph if "\n" not in doc.strip().split("\n\n")[0] else ""


# --------------------------------------------------------------------------- phrasing


def words(identifier: str) -> str:
    """``TaskGroup.start_soon`` -> ``task group start soon``."""
    parts = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", identifier.replace(".", " ").replace("_", " "))
    return " ".join(parts.lower().split())


def gold_id(path: str, first: int, last: int) -> str:
    return f"{path}:{first}-{last}"


def parse_gold(gid: str) -> tuple[str, int, int]:
    """``path:first-last`` -> (path, first, last); a bare ``path`` (a whole file) -> (path, 0, 0)."""
    path, colon, span = gid.rpartition(":")
    if not colon:
        return gid, 0, 0
    first, _, last = span.partition("-")
    return path, int(first), int(last)


def group_of(path: str) -> str:
    """``anyio/_core/_tasks.py`` -> ``anyio/_core``; ``anyio/lowlevel.py`` -> ``anyio``."""
    parts = PurePosixPath(path).parts
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def _doc_sentence(line: str) -> str | None:
    """A docstring's first line as a plain phrase (4-14 words, no markup), or None."""
    text = line.rstrip(".").strip()
    if not 4 <= len(text.split()) <= 14 or re.search(r"[`:*/()\[\]{}=<>\"'@#]|\.\w", text):
        return None
    return text


def _imperative(sentence: str) -> str | None:
    """``Return the current time`` / ``Returns the current time`` -> ``return the current time``."""
    first, _, rest = sentence.partition(" ")
    verb = first.lower()
    if verb not in _VERBS and verb.endswith("s") and verb[:-1] in _VERBS:
        verb = verb[:-1]
    if verb not in _VERBS or not rest:
        return None
    return f"{verb} {rest[0].lower() + rest[1:] if not rest[:2].isupper() else rest}"


# --------------------------------------------------------------------------- generation

Candidates = list[tuple[str, tuple[str, ...]]]
"""(question, gold ids) pairs of one kind, before the draw."""


class _Index:
    """The repository's definitions by name and by docstring sentence, and the filters on them."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self.by_name: dict[str, list[Definition]] = defaultdict(list)
        self.by_doc: dict[str, list[Definition]] = defaultdict(list)
        for d in repository.definitions:
            self.by_name[d.name].append(d)
            if d.doc_line:
                self.by_doc[d.doc_line].append(d)
        self.named = [d for d in repository.definitions if self.plain(d)]
        self.small = [d for d in self.named if d.kind != "class" and d.end - d.start < MAX_SPAN]

    def plain(self, d: Definition) -> bool:
        """A name one can ask for: long enough, not a dunder, defined at most MAX_DEFS times, and
        not only re-exported (``__init__.py``)."""
        return (
            len(d.name) >= MIN_NAME
            and not d.name.startswith("__")
            and len(self.by_name[d.name]) <= MAX_DEFS
            and not d.path.endswith("__init__.py")
        )

    def documented(self) -> list[tuple[str, tuple[str, ...]]]:
        """(plain docstring sentence, span ids of the definitions that open with it)."""
        out = []
        for line, holders in self.by_doc.items():
            sentence = _doc_sentence(line)
            if sentence and len(holders) <= MAX_DEFS and all(h.end - h.start < MAX_SPAN for h in holders):
                out.append((sentence, tuple(span(h) for h in holders)))
        return out


def span(d: Definition) -> str:
    return gold_id(d.path, d.start, d.end)


def head(d: Definition) -> str:
    return gold_id(d.path, d.start, d.head_end)


def _rule1(ix: _Index) -> dict[str, Candidates]:
    functions = [
        (
            f"find the {'method' if d.kind == 'method' else 'function'} {d.name}",
            tuple(head(x) for x in ix.by_name[d.name]),
        )
        for d in ix.named
        if all(x.kind != "class" for x in ix.by_name[d.name])
    ]
    classes = [
        (f"find the class {d.name}", tuple(head(x) for x in ix.by_name[d.name] if x.kind == "class"))
        for d in ix.named
        if d.kind == "class"
    ]
    usages = []
    for d in ix.named:
        own = {(x.path, x.start) for x in ix.by_name[d.name]}
        refs = [r for r in ix.repository.references.get(d.name, ()) if (r[0], r[1]) not in own]
        # A plain word (``unwrap``) is also every other object's attribute of that name: only an
        # identifier (snake_case with an inner ``_``, or CamelCase) has usages one can point at.
        distinctive = "_" in d.name.strip("_") or re.fullmatch(r"_?[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", d.name)
        if distinctive and USAGES[0] <= len(refs) <= USAGES[1]:
            usages.append((f"find all usages of {d.name}", tuple(dict.fromkeys(gold_id(*r) for r in refs))))
    return {"function": functions, "class": classes, "usages": usages}


def _rule4(ix: _Index) -> dict[str, Candidates]:
    how: Candidates = [(f"how does {words(d.qualname)} work", (span(d),)) for d in ix.small]
    explain: Candidates = []
    for sentence, ids in ix.documented():
        phrase = _imperative(sentence)
        if phrase:
            explain.append((f"explain how to {phrase}", ids))
    return {"how": how, "explain": explain}


def _rule6(ix: _Index) -> dict[str, Candidates]:
    folders: Candidates = []
    files: Candidates = []
    for d in ix.small:
        folder = PurePosixPath(d.path).parent.as_posix()
        # A path query's answer is a file under that path that holds what it asks for: the gold
        # is the file, whatever lines of it a result shows (``<dir>/*.py`` is not recursive).
        under = [x.path for x in ix.by_name[d.name] if PurePosixPath(x.path).parent.as_posix() == folder]
        folders.append((f"search in {folder}/*.py for {words(d.name)}", tuple(dict.fromkeys(under))))
        files.append((f"{d.name} in {d.path}", (d.path,)))
    return {"dir": folders, "file": files}


def _rule7(ix: _Index) -> dict[str, Candidates]:
    # Several words (a method with its class's, or a three-part name): one word is rule 7's
    # "auth", which has no one answer in a code base.
    several = [d for d in ix.small if "." in d.qualname or len(d.name.split("_")) > 2]
    return {"doc": ix.documented(), "words": [(words(d.qualname), (span(d),)) for d in several]}


def generate(repo: Path, routes: Callable[[str], str], per_kind: dict[str, int] | None = None) -> list[Query]:
    """The queries for ``repo``; ``routes`` maps a query to the id of the rule it fires (the
    packaged table's), so only queries that reach their rule are kept."""
    per_kind = per_kind or PER_KIND
    ix = _Index(read_repository(repo))
    candidates = {**_rule1(ix), **_rule4(ix), **_rule6(ix), **_rule7(ix)}
    rng = random.Random(SEED)
    queries: list[Query] = []
    seen: set[str] = set()
    targets: set[tuple[str, ...]] = set()
    for kind in PER_KIND:  # a fixed order: the seeded draws depend on it
        order = sorted(set(candidates[kind]))
        rng.shuffle(order)
        taken = 0
        for question, evidence in order:
            if taken >= per_kind.get(kind, 0):
                break
            # One target once: the same definition asked for twice (say by a docstring sentence
            # under rule 4 and again under rule 7) would count one lookup twice.
            if question in seen or not evidence or evidence in targets or routes(question) != RULE_OF_KIND[kind]:
                continue
            seen.add(question)
            targets.add(evidence)
            taken += 1
            group = group_of(parse_gold(evidence[0])[0])
            queries.append(Query(qid=f"{kind}-{taken:02d}", kind=kind, category=RULE_OF_KIND[kind],
                                 question=question, evidence=evidence, group=group))  # fmt: skip
    return queries


# --------------------------------------------------------------------------- labelling


def result_path(result: dict[str, Any], repo: Path) -> str | None:
    """The result's file relative to the repository: qmd's ``qmd://<collection>/<path>``, an
    absolute path under the repository, or an already relative one."""
    path = result.get("path") or result.get("file")
    if not isinstance(path, str):
        return None
    if path.startswith("qmd://"):
        return path.removeprefix("qmd://").partition("/")[2]
    try:
        return Path(path).resolve().relative_to(repo.resolve()).as_posix() if Path(path).is_absolute() else path
    except ValueError:
        return None


def shown_lines(result: dict[str, Any]) -> tuple[int, int] | None:
    line = result.get("line")
    if not isinstance(line, int) or isinstance(line, bool):
        return None
    content = result.get("content") if isinstance(result.get("content"), str) else ""
    return max(1, line - 1), line + max(1, len(str(content).splitlines()))


def label(result: dict[str, Any], repo: Path, evidence: Sequence[str]) -> list[str]:
    """The gold ids this result holds (the rule in the module docstring)."""
    path, shown = result_path(result, repo), shown_lines(result) or (0, -1)
    if path is None:
        return []
    held = []
    for gid in evidence:
        gold_path, first, last = parse_gold(gid)
        if gold_path == path and (first == 0 or (shown[0] <= last and first <= shown[1])):
            held.append(gid)
    return held


def labelled_results(results: Sequence[dict[str, Any]], repo: Path, evidence: Sequence[str]) -> list[dict[str, Any]]:
    """Envelope results -> the records' results (rank, relevance, source, content, dia_ids, hit,
    then every other key the result carried), as ``_locomo_score.labelled_results`` shapes them."""
    out = []
    for rank, r in enumerate(results, 1):
        ids = label(r, repo, evidence)
        first = {
            "rank": rank,
            "relevance": r.get("relevance"),
            "source": r.get("source"),
            "content": r.get("content"),
            "dia_ids": ids,
            "hit": bool(ids),
        }
        out.append({**first, **{k: v for k, v in r.items() if k not in first}})
    return out
