"""Definition-first ranking for "find the function X" queries, shared by qmd and Total Recall.

Three pieces, all pure functions:

* :func:`definition_target` reads the query: does it ask for a symbol's definition ("find the
  function X", "find class X", "where is X defined", a bare identifier), and which symbol? It
  answers ``None`` for usage queries ("find all usages of X", "who calls X"), which keep ranking
  mentions.
* :func:`find_definition` finds the first line of a text that *defines* the symbol in one of the
  common languages' definition forms (``function X``, ``class X``, ``X(...) {`` methods, ``def X``,
  ``const X =``, ``interface``/``type X``, ``fn X``, ``func X``...). In markdown only code counts:
  fenced blocks and inline code spans, never prose.
* :func:`definitions_first_relevances` turns the adapters' relevances into definition-first ones.

The forms, the ranking formula and the measured effect are in docs/backends/definition-first.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

from memory_router.core.frozen import Frozen

DOCUMENT_SUFFIXES = (".md", ".mdx", ".markdown", ".txt", ".rst", ".adoc", ".org")
"""Files read as prose with code in it (fenced blocks, inline code), not as source."""
MENTION_FACTOR = 0.9
"""Relevance kept by a hit that only mentions the symbol when the answer holds its definition."""
MAX_SIGNATURE_CANDIDATES = 1000
"""Statement-like ``X(`` lines checked for a signature per text (a file of calls stops here)."""
MAX_PARAMETER_CHARS = 600
"""A signature's parameter list longer than this is taken for a call."""

# --------------------------------------------------------------------------- the query

_TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#)[A-Za-z_$][\w$]*)*(?:\(\))?")
_IDENTIFIER_SHAPE = re.compile(
    r"^(?:[a-z$_][a-z0-9$_]*(?:[A-Z][a-z0-9$_]*)+[A-Z]?"  # camelCase
    r"|[A-Z][a-z0-9$]+(?:[A-Z][a-z0-9$]*)+"  # PascalCase
    r"|[A-Za-z$][A-Za-z0-9$]*(?:_[A-Za-z0-9$]+)+"  # snake_case / SCREAMING_CASE
    r"|_+[A-Za-z][\w$]*)$"  # _private
)
_KIND_WORDS = frozenset(
    """function functions func fn method methods class classes struct interface type enum trait
    protocol def definition definitions defined define defines declaration declared declare
    constant const constructor""".split()
)
_USAGE = re.compile(
    r"\b(?:usages?|uses|used|using|references?|referenced|callers?|call\s*sites?|calls|calling"
    r"|occurrences?|mentions?|mentioned|invocations?|invoked|imports?|imported|who\s+calls)\b",
    re.IGNORECASE,
)
_FILLER = frozenset(
    """find search for locate look lookup up show me the a an where is are was of to in on at
    please get go named called its it this that my our where's whats what's which""".split()
)


class Target(Frozen):
    """The symbol a definition query asks for (``symbol``; ``Ledger.reconcile`` -> ``reconcile``)."""

    symbol: str
    asked: str  # the token as written in the query


def definition_target(query: str) -> Target | None:
    """The symbol whose definition the query asks for, or None (a usage query, no symbol).

    A definition query names a kind ("function", "class", "method", "type", "defined"...) and a
    symbol - the identifier right after the kind word, else the one identifier-shaped token - or
    is nothing but one identifier-shaped token (``BerthAllocator``, ``parse_token``,
    ``search for reconcileManifest``)."""
    if _USAGE.search(query):
        return None
    tokens = [m.group() for m in _TOKEN.finditer(query.replace("`", " "))]
    kind_at = next((i for i, t in enumerate(tokens) if t.lower() in _KIND_WORDS), None)
    content = [t for t in tokens if t.lower() not in _FILLER and t.lower() not in _KIND_WORDS]
    shaped = [t for t in content if _IDENTIFIER_SHAPE.match(_last_part(t)) or _last_part(t) != t]
    chosen: str | None = None
    if kind_at is not None:
        after = [t for t in tokens[kind_at + 1 :] if t.lower() not in _FILLER and t.lower() not in _KIND_WORDS]
        if after and (len(content) == 1 or _IDENTIFIER_SHAPE.match(_last_part(after[0]))):
            chosen = after[0]
        elif len(shaped) == 1:
            chosen = shaped[0]
        elif len(content) == 1:
            chosen = content[0]
    elif len(content) == 1 and shaped:
        chosen = content[0]
    if chosen is None:
        return None
    return Target(_last_part(chosen), chosen)


def _last_part(token: str) -> str:
    token = token.removesuffix("()")
    return re.split(r"\.|::|#", token)[-1]


# --------------------------------------------------------------------------- the forms


class Definition(Frozen):
    """Where a text defines the symbol: 1-based ``line`` of the text, the ``kind`` of definition
    and the defining line itself (stripped)."""

    line: int
    kind: str
    text: str


# Words that may precede a definition on its line (TypeScript/JS, Java, C#, Kotlin, Swift, Rust...).
_MODIFIERS = (
    r"(?:(?:export|default|declare|public|private|protected|internal|static|abstract|final|async|override"
    r"|readonly|pub(?:\([\w:]+\))?|unsafe|extern|inline|virtual|sealed|open|data|case|const|local|mutating"
    r"|suspend|operator|infix|tailrec|synchronized|native|partial|fileprivate|lazy|required|convenience|dynamic)\s+)*"
)
# Keywords that start a statement, not a definition, when found before ``X(``.
_NOT_A_SIGNATURE = frozenset(
    """return new await yield throw else if while for switch case typeof delete in of do
    instanceof import export from echo print assert raise not and or is await sizeof goto""".split()
)


@functools.lru_cache(maxsize=256)
def _patterns(symbol: str, ignore_case: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(keyword forms, signature candidates) for one symbol, compiled once."""
    name = re.escape(symbol)
    if ignore_case:
        name = f"(?i:{name})"
    x = rf"(?<![\w$]){name}(?![\w$])"
    sql = r"create[ \t]+(?:or[ \t]+replace[ \t]+)?"
    keyword_forms = rf"""^[ \t]*{_MODIFIERS}(?:
        (?P<function>(?:async[ \t]+)?function[ \t]*\*?[ \t]*{x}[ \t]*[(<]
            |(?:def|defp|defmacro|fun|fn|func|sub|proc)[ \t]+(?:self\.|<[^>\n]*>[ \t]*)?{x}[ \t]*[(<\[:]?
            |func[ \t]*\([^)\n]*\)[ \t]*{x}[ \t]*[(\[]
            |function[ \t]+[\w$.:]*[.:]{x}[ \t]*\(
            |{sql}(?:function|procedure)[ \t]+(?:[\w.]+\.)?{x})
        |(?P<class>(?:class|struct|enum|trait|protocol|record|object|union|module|namespace|actor)[ \t]+{x}
            |{sql}(?:table|view)[ \t]+(?:if[ \t]+not[ \t]+exists[ \t]+)?(?:[\w.]+\.)?{x})
        |(?P<interface>interface[ \t]+{x})
        |(?P<type>(?:type|typealias|typedef)[ \t]+{x}[ \t]*(?:<[^=\n]*>)?[ \t]*
            (?:=|[ \t](?:struct|interface|func|map|chan|\[|\*|[\w.]+)|$))
        |(?P<const>(?:const|let|var|val)[ \t]+{x}[ \t]*(?::[^=\n]+)?=(?![=>]))
        |(?P<property>{x}[ \t]*(?::[^=\n]+)?=[ \t]*(?:async[ \t]+)?
            (?:function\b|\([^)\n]*\)[ \t]*(?::[^=\n]+)?=>|[\w$]+[ \t]*=>))
        |(?P<member>{x}[ \t]*:[ \t]*(?:async[ \t]+)?(?:function\b|\([^)\n]*\)[ \t]*=>))
        |(?P<macro>\#[ \t]*define[ \t]+{x})
    )"""
    top_level_assignment = rf"|^(?P<variable>{name}[ \t]*(?::[^=\n]+)?=(?![=>]))"
    signature = rf"^[ \t]*(?P<prefix>[^\n]*?)(?<![\w$.]){name}[ \t]*(?:<[^>\n]*>)?[ \t]*\("
    flags = re.MULTILINE | re.VERBOSE
    return re.compile(keyword_forms + top_level_assignment, flags), re.compile(signature, re.MULTILINE)


def _signature_ends_in_body(text: str, open_paren: int) -> bool:
    """After ``X(`` at ``open_paren``: balanced parameters, an optional return type / ``throws``
    clause, then ``{`` (same line or the next non-blank one) - a method or function definition,
    not a call (``X(a);``)."""
    depth, i, limit = 0, open_paren, min(len(text), open_paren + MAX_PARAMETER_CHARS)
    while i < limit:
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        elif ch in ";{}" and depth:
            return False
        i += 1
    else:
        return False
    rest = text[i + 1 : i + 400]
    m = re.match(r"[ \t]*(?:(?::|->)[^{;=\n]*|(?:const|throws[^{;\n]*|noexcept|override|where[^{;\n]*))?[ \t]*", rest)
    tail = rest[m.end() if m else 0 :]
    if tail.startswith("{"):
        return True
    return bool(re.match(r"\r?\n[ \t]*\{", tail))


def _signature_prefix_ok(prefix: str) -> bool:
    """Text before ``X(`` on a method/function signature line: modifiers, a return type, nothing
    that makes it a call or an expression."""
    if not prefix.strip():
        return True
    if re.search(r"[=.,;:()!?+\-/%|&^~'\"`]|//|/\*|^\s*[*#]", prefix):
        return False
    words = re.findall(r"[\w$]+", prefix)
    return bool(words) and not any(w in _NOT_A_SIGNATURE for w in words)


def _code_definition(text: str, symbol: str, ignore_case: bool) -> tuple[int, str] | None:
    """(offset, kind) of the first definition of ``symbol`` in code ``text``."""
    keyword, signature = _patterns(symbol, ignore_case)
    found: list[tuple[int, str]] = []
    if m := keyword.search(text):
        kind = m.lastgroup or "definition"
        if kind in ("property", "member"):
            kind = "function"
        elif kind == "const" and re.search(r"=>|\bfunction\b", _rest_of_line(text, m.end())):
            kind = "function"
        found.append((m.start(), kind))
    checked = 0
    for m in signature.finditer(text):
        if (found and m.start() > found[0][0]) or checked >= MAX_SIGNATURE_CANDIDATES:
            break
        if _signature_prefix_ok(m.group("prefix")):
            checked += 1
            if _signature_ends_in_body(text, m.end() - 1):
                found.append((m.start(), "method" if text[m.start()] in " \t" else "function"))
                break
    return min(found) if found else None


def _rest_of_line(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


# Compiled on first use (re's cache keeps them): only a definition search in markdown reads them.
_FENCE = r"^[ \t]*(```+|~~~+)"
_INLINE_CODE = r"(`{1,3})([^`\n]+?)\1"
MAX_INLINE_LINE = 2000  # longer markdown lines are not searched for inline code


def _markdown_code(text: str) -> list[tuple[int, str]]:
    """(1-based line, code) pieces of a markdown text: fenced blocks (one piece per block, its
    first line's number) and inline code spans."""
    pieces: list[tuple[int, str]] = []
    fence: str | None = None
    block: list[str] = []
    block_start = 0
    fence_re, inline_code = re.compile(_FENCE), re.compile(_INLINE_CODE)
    for number, line in enumerate(text.split("\n"), 1):
        if fence is not None:
            m = fence_re.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                pieces.append((block_start, "\n".join(block)))
                fence, block = None, []
            else:
                block.append(line)
            continue
        if m := fence_re.match(line):
            fence, block, block_start = m.group(1), [], number + 1
            continue
        if "`" in line and len(line) <= MAX_INLINE_LINE:
            pieces.extend((number, span.group(2).strip()) for span in inline_code.finditer(line))
    if fence is not None and block:
        pieces.append((block_start, "\n".join(block)))
    return pieces


def find_definition(text: str, symbol: str, *, markdown: bool = False) -> Definition | None:
    """The first place ``text`` defines ``symbol``, or None.

    Case-sensitive (``berthAllocator = new BerthAllocator()`` does not define ``BerthAllocator``)
    unless the symbol is written all lower-case, when the writer may not know its case. With
    ``markdown`` only fenced code and inline code spans are read."""
    if not symbol:
        return None
    ignore_case = symbol == symbol.lower()
    haystack = text.lower() if ignore_case else text
    if (symbol.lower() if ignore_case else symbol) not in haystack:
        return None
    if not markdown:
        return _locate(text, 1, symbol, ignore_case)
    for first_line, code in _markdown_code(text):
        if (found := _locate(code, first_line, symbol, ignore_case)) is not None:
            return found
    return None


def _locate(code: str, first_line: int, symbol: str, ignore_case: bool) -> Definition | None:
    hit = _code_definition(code, symbol, ignore_case)
    if hit is None:
        return None
    offset, kind = hit
    start = code.rfind("\n", 0, offset) + 1
    end = code.find("\n", offset)
    line_text = code[start : end if end >= 0 else len(code)].strip()
    return Definition(first_line + code.count("\n", 0, offset), kind, line_text[:200])


def is_document(path: str) -> bool:
    """Whether a file is prose (markdown, text...): only its code spans and blocks can define."""
    return path.lower().endswith(DOCUMENT_SUFFIXES)


# --------------------------------------------------------------------------- ranking


def definitions_first_relevances(relevances: Sequence[float], strengths: Sequence[int]) -> list[float]:
    """Relevances that put the strongest definitions first.

    ``strengths`` per hit: 0 mentions the symbol only, higher is a stronger definition (qmd: 2 in
    a source file, 1 in a markdown code block). With no definition nothing changes. Otherwise,
    with ``best`` the answer's highest relevance, a hit of the strongest kind present scores
    ``max(own, best)`` and every other hit ``own * MENTION_FACTOR``: definitions strictly above
    mentions, each side keeping its own order, nothing above the best evidence the answer had."""
    if len(relevances) != len(strengths):
        raise ValueError("definitions_first_relevances: one strength per relevance")
    top = max(strengths, default=0)
    if top <= 0:
        return list(relevances)
    best = max(relevances)
    # Scaling a subnormal can round back to itself; the cap keeps mentions strictly below.
    cap = math.nextafter(best, 0.0)
    return [
        max(r, best) if s == top else min(r * MENTION_FACTOR, cap) for r, s in zip(relevances, strengths, strict=True)
    ]
