"""What a query asks for, as the relevance calibration judges an answer by it. Pure: no I/O.

Three things, read once per query (:func:`asked`):

* ``terms``: its content terms, stemmed, that a result's text should hold. Stopwords and words
  about *when* are dropped (as before), and so are **the matched rule's own words**: in "find the
  function parseAuthToken" the words "find" and "function" say how to search, not what; a result
  that answers it holds ``parseAuthToken``, not "function". The rule's words are the literal
  words of its signal regexes (split at ``.*``, so "how does X work" drops "how", "does" and
  "work" but keeps X), found in the query where those pieces match, plus a few words of the
  spec's phrasings that no rule names literally ("search in src/*.py for ...", "usages").
* ``identifiers``: the code identifiers it names (``parseAuthToken``, ``user_id``,
  ``config.load``, and the word after "function"/"class"/"method"/"usages of"), which an answer
  holds *exactly*, case and all.
* ``paths``: the paths and globs it names (``src/auth/*.py``, ``auth.py``): an answer to a path
  query is a file under that path, and holds none of its words.

:func:`exact` is the share of a query's identifiers and paths that one result matches exactly (an
identifier in its text or path, a path by the result's own path): the calibration's ``exact``
feature. Before this, coverage counted "find"/"function"/"search" as content and had nothing for a
path, so right answers to code queries were called poor (docs/calibration.md).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from memory_router.backends.base import Result
from memory_router.backends.common.words import META_WORDS, STOPWORDS, stem
from memory_router.core.frozen import Frozen
from memory_router.core.rules import Rule, plain_pattern

TYPE_CHECKING = False  # not typing's: a one-shot query needs none of it
if TYPE_CHECKING:
    from typing import Any

    from memory_router.core.rules import Interrupt

# Words of the spec's query phrasings that say how to search, never what: no rule's regex holds
# them literally (rule 6 matches the path, rule 1 "search for"), yet "search in src/*.py for X"
# and "show usages of X" use them.
PHRASING = frozenset("search searching grep locate usages usage occurrences references".split())
_WORD = re.compile(r"[0-9A-Za-z]+")
# Identifiers: camelCase / PascalCase with an inner capital, snake_case, dotted names, a call.
_IDENTIFIER = re.compile(
    r"(?<![\w.])(?:[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|_\w+|[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+)(?![\w])"
)
# "find the function parse", "usages of load", "the class Router": the name after the kind.
_NAMED = re.compile(r"\b(?:functions?|class(?:es)?|methods?|def|usages? of|references to|calls to)\s+`?([A-Za-z_]\w*)")
# A file name's extension, for "auth.py" (not "e.g" or "config.load"): the packaged config's list.
_EXTENSIONS = frozenset(
    """ts tsx js jsx mjs cjs py pyi swift go rs java kt kts rb php c h cc cpp hpp cs m mm scala sh bash zsh
    sql md mdx json yaml yml toml ini cfg xml html css scss vue svelte lua dart ex exs erl hs ml r jl proto
    graphql tf lock txt log csv env""".split()
)
_PATH = re.compile(r"(?<![\w/])(?:~/|\.{1,2}/|/)?(?:[\w.*-]+/)+[\w.*-]*|(?<![\w/])[\w*-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b")
# These three read a signal's source text (the config's, validated), never a query: `re` compiles
# them for a third of what `regex` takes, 1M instructions of a cold query.
_NOT_A_WORD_PIECE = re.compile(r"\\[A-Za-z]|\[[^\]]*\]|\(\?[A-Za-z-]*[:)]|\(\?P<\w+>|\(\?<?[=!]")
_LITERAL = re.compile(r"[A-Za-z]{3,}")
_ANY_RUN = re.compile(r"\.[*+]\??")
_SCAN_CHARS = 4000
_PIECES: dict[tuple[str, bool], tuple[Any, ...]] = {}  # (source, re allowed) -> compiled pieces
# What re says of a piece that regex refuses too: a piece split out of a larger group.
_UNBALANCED = ("missing ), unterminated subpattern", "unbalanced parenthesis")


class Asked(Frozen):
    """A query's content terms (stemmed), identifiers and paths; see the module docstring."""

    terms: frozenset[str]
    identifiers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    @property
    def anchors(self) -> int:
        """How many exact things the query names (identifiers and paths)."""
        return len(self.identifiers) + len(self.paths)

    @property
    def judgeable(self) -> bool:
        """Whether a result can be judged at all ("why did we do it that way" cannot)."""
        return bool(self.terms) or self.anchors > 0


def asked(query: str, rule: Rule | None = None, *, interrupt: Interrupt | None = None) -> Asked:
    """What ``query`` asks for, the words of ``rule`` (the rule it matched) not counted as content.
    With ``interrupt`` (:meth:`~memory_router.core.rules.RuleTable.match`'s), an ASCII query's
    rule words are found with ``re`` where a piece is plain, each search stopped by ``interrupt``."""
    paths = tuple(dict.fromkeys(m.group().strip("`'\"") for m in _PATH.finditer(query) if _is_path(m.group())))
    identifiers = [m.group() for m in _IDENTIFIER.finditer(query)]
    identifiers += [m.group(1) for m in _NAMED.finditer(query) if m.group(1).lower() not in STOPWORDS]
    in_paths = {w for p in paths for w in _WORD.findall(p)}
    ident = tuple(dict.fromkeys(i for i in identifiers if i not in paths and i not in in_paths))
    if interrupt is not None and not query.isascii():
        interrupt = None
    signal = _signal_spans(query, rule, interrupt) if rule is not None else []
    terms = set()
    for m in _WORD.finditer(query):
        word = m.group().lower()
        if len(word) < 2 or word in STOPWORDS or word in META_WORDS or word in PHRASING:
            continue
        if any(start <= m.start() and m.end() <= end for start, end in signal):
            continue
        if m.group() in in_paths and not _is_identifier_part(m.group(), ident):
            continue  # a path's words are matched as a path, not as text
        terms.add(stem(word))
    return Asked(frozenset(terms), ident, paths)


def _is_path(text: str) -> bool:
    text = text.strip("`'\"")
    if "/" in text:
        return any(c.isalnum() for c in text) or "*" in text
    # "auth.py", "*.ts", but not "e.g" or "config.load": a file name ends in a known extension.
    stem_part, _, ext = text.rpartition(".")
    return bool(stem_part) and ext in _EXTENSIONS


def _is_identifier_part(word: str, identifiers: Iterable[str]) -> bool:
    return any(word == i for i in identifiers)


def _pieces(source: str, plain: bool) -> tuple[Any, ...]:
    """The word-bearing pieces of a signal regex, split at ``.*`` (what lies between is content),
    compiled with ``re`` where ``plain`` allows and the piece is a :func:`plain_pattern`, else with
    ``regex``."""
    found = _PIECES.get((source, plain))
    if found is None:
        out = []
        for piece in _ANY_RUN.split(source):
            if "{{" in piece or not _LITERAL.search(_NOT_A_WORD_PIECE.sub(" ", piece)):
                continue  # no literal word (a path or identifier pattern matches content, not phrasing)
            pattern = _compile_piece(piece, plain)
            if pattern is not None and pattern.search("") is None:
                out.append(pattern)
        if len(_PIECES) > 512:  # a daemon reloading edited configs: keep it small
            _PIECES.clear()
        found = _PIECES[source, plain] = tuple(out)
    return found


def _compile_piece(piece: str, plain: bool) -> Any:
    """``piece`` compiled case-insensitively, or ``None`` for an unbalanced piece of a larger
    group (that signal's words stay content)."""
    if plain and plain_pattern(piece):
        try:
            return re.compile(piece, re.IGNORECASE)
        except re.error as exc:
            if exc.msg in _UNBALANCED:
                return None
            # valid in regex perhaps (a variable-width look-behind): regex says
    import regex  # here: a one-shot query whose pieces re reads never imports it

    try:
        return regex.compile(piece, regex.IGNORECASE)
    except regex.error:
        return None


def _signal_spans(query: str, rule: Rule, interrupt: Interrupt | None) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for source in (*rule.strong_sources, *rule.weak_sources):
        for pattern in _pieces(source, interrupt is not None):
            try:
                if interrupt is not None and isinstance(pattern, re.Pattern):
                    spans += interrupt(_PIECE_BUDGET_S, _spans, pattern, query)
                else:
                    spans += [m.span() for m in pattern.finditer(query, timeout=_PIECE_BUDGET_S)]
            except TimeoutError:
                continue
    return spans


_PIECE_BUDGET_S = 0.01  # each piece's search of the query


def _spans(pattern: re.Pattern[str], query: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(query)]


def exact(asked: Asked, hit: Result) -> float:
    """The share of the query's identifiers and paths that ``hit`` matches exactly (0.0 when the
    query names none)."""
    if not asked.anchors:
        return 0.0
    where = _hit_path(hit)
    text = hit.content[:_SCAN_CHARS]
    found = sum(1 for i in asked.identifiers if _holds(text, i) or _holds(where, i))
    found += sum(1 for p in asked.paths if path_matches(p, where))
    return found / asked.anchors


def _hit_path(hit: Result) -> str:
    path = hit.extra.get("path")
    return path if isinstance(path, str) and path else hit.source


def _holds(text: str, identifier: str) -> bool:
    at = text.find(identifier)
    while at >= 0:
        before = text[at - 1] if at else " "
        end = at + len(identifier)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        at = text.find(identifier, at + 1)
    return False


def path_matches(wanted: str, path: str) -> bool:
    """Whether a result at ``path`` answers a query naming ``wanted`` (a directory, a file or a
    glob): the path ends with it, lies under it, or matches the glob on its trailing segments.
    ``qmd://notes/src/auth/x.py`` is under ``src/auth``; ``./src/*.py`` matches ``src/a.py``."""
    if not path:
        return False
    want = wanted.strip().lstrip("~").lstrip("./").rstrip("/")
    if not want:
        return False
    got = "/" + path.split("://", 1)[-1].lstrip("/")
    if "*" in want or "?" in want:
        return fnmatch.fnmatchcase(got, "*/" + want) or fnmatch.fnmatchcase(got, "*/" + want + "/*")
    return got.endswith("/" + want) or ("/" + want + "/") in got
