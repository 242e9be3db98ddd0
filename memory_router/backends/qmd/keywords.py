"""Natural-language query -> qmd BM25 keyword query, and the bounded relaxation ladder.

qmd's ``search`` ANDs every term (with prefix matching), so "what did we decide about the
database schema" finds nothing: every document would need "what", "did", "decide"... We keep
only the terms that carry the query's subject:

* quoted phrases (``"..."``, backticks, standalone ``'...'``) are kept as exact phrases;
* paths and globs (``src/auth/``, ``src/models/*.ts``, ``token.ts``) become phrases of their
  segments, split at wildcards (``"src models" ts``), because qmd's FTS tokenizer indexes a path
  as its segments and would otherwise receive ``srcmodelsts``;
* plain words joined by slashes (``and/or``, ``artists/bands``, ``he/she/they``) are not a path:
  two plain words, or plain words one of which is a stopword, are taken as separate words (and
  filtered like any word). A path needs a marker: a leading ``/``, ``~`` or ``./``, a trailing
  ``/``, a wildcard, a file name, a segment that is not a plain word (``v2``, ``auth_api``,
  ``a.b``), or three or more plain content words (``src/auth/middleware``);
* identifiers (camelCase, PascalCase, snake_case, dotted ``a.b``, hyphenated ``DEC-0054``, words
  with digits) are kept as they are;
* a term is only ever kept for a content word: a phrase (quoted, or a path's piece) whose words
  are all stopwords or single letters is dropped, and so is an identifier-looking abbreviation
  made of single letters (``e.g.``, ``i.e.``);
* plain words are lower-cased and kept unless they are stopwords, too short, or **trigger
  words**: the literal words of the routing rule's signal that fired (``find ... function``,
  ``search for``, ``decide``), which say how to search rather than what for.

A leading ``-`` is dropped from every term (qmd reads ``-term`` as NOT; an agent's query never
means that). Terms are de-duplicated case-insensitively.

**Weights and relaxation.** Phrases, paths and identifiers weigh 2, plain words 1. When the
strict form (all terms) finds nothing, :func:`relaxation_ladder` drops the least specific terms
(plain words first, shorter words before longer ones, later before earlier) in at most
``max_forms`` steps down to the single most specific term. Each form's *coverage* - its weight
over the strict form's weight - is what the adapter multiplies relevance by, so an answer to a
heavily relaxed query is honestly weak.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from memory_router.backends.common import words as _words
from memory_router.core.frozen import Frozen

# The shared stopwords, plus the words that tell a keyword searcher how to search rather than
# what for (in an ANDed BM25 query they only exclude).
STOPWORDS = _words.STOPWORDS | frozenset(
    """also either might must shall upon via whats whose within without d m like use used using
    i'm it's what's that's there's we're let's search searching locate lookup usages occurrences""".split()
)
# Words that say *when* to look rather than *what* for.
META_WORDS = _words.META_WORDS

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|`([^`]+)`|(?<![\w\'])\'([^\']+)\'(?![\w\'])')
_STRAY_QUOTES = str.maketrans({'"': " ", "“": " ", "”": " ", "`": " "})
_EDGE_PUNCT = "\"'`“”‘’,;:!?()[]{}<>"
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")
_HAS_DIGIT_AND_ALPHA = re.compile(r"(?=.*\d)(?=.*[^\W\d_])")
_DOTTED = re.compile(r"^[^\W_][\w]*(?:\.[\w]+)+$")
_HYPHENATED = re.compile(r"^[^\W_][\w']*(?:-[\w']+)+$")
_FILE_NAME = re.compile(r"^[\w-]+\.([A-Za-z][A-Za-z0-9]{0,5})$")
# Extensions that make ``name.ext`` a file name rather than a dotted identifier (``store.load``).
FILE_EXTENSIONS = frozenset(
    """ts tsx js jsx mjs cjs py pyi swift go rs java kt kts rb php c h cc cpp hpp cs m mm scala sh
    bash zsh sql md mdx txt rst json yaml yml toml ini cfg conf xml html css scss vue svelte lua
    dart ex exs erl hs ml r jl proto graphql tf lock env csv log""".split()
)
_WILDCARD = re.compile(r"[*?]+")
_SEGMENT_WORD = re.compile(r"[^\W_]+(?:_[^\W_]+)*")
_WORD = re.compile(r"[^\W_]+(?:['_][^\W_]+)*")
_PLAIN_WORD = re.compile(r"[^\W_]+")
_PLAIN_SEGMENT = re.compile(r"^[^\W\d_]+$")
_REGEX_NOISE = re.compile(r"\\[A-Za-z]|\[[^\]]*\]|\(\?[^:)]*[:)]|\{\{[^}]*\}\}|\{\d*,?\d*\}")
_REGEX_LETTERS = re.compile(r"[A-Za-z]{3,}")


class KeywordTerm(Frozen):
    text: str  # exactly what is sent to qmd for this term
    weight: int  # 2: phrase, path or identifier; 1: plain word
    position: int  # order in the query, for stable tie-breaking

    @property
    def priority(self) -> tuple[int, int, int]:
        """Sort key, most specific first: weight, then length (a crude rarity), then position."""
        return (-self.weight, -len(self.text), self.position)


class KeywordForm(Frozen):
    """One query string sent to ``qmd search`` and the share of the strict form it keeps."""

    text: str
    coverage: float


def trigger_words(signal: str | None) -> frozenset[str]:
    """The literal words (3+ letters) of a rule signal's regex source, lower-cased.

    ``\\bfind\\b.*\\bfunctions?\\b`` -> {find, functions}; character classes, escapes and group
    syntax are removed first, so an identifier pattern like ``\\b[a-z][a-z0-9]*...`` yields nothing.
    """
    if not signal:
        return frozenset()
    return frozenset(w.lower() for w in _REGEX_LETTERS.findall(_REGEX_NOISE.sub(" ", signal)))


def _is_trigger(word: str, triggers: frozenset[str]) -> bool:
    # "function" vs signal "functions?", "relationship" vs "relat(?:e|...)": a shared stem of 4+.
    for t in triggers:
        if word == t or (len(t) >= 4 and word.startswith(t)) or (len(word) >= 4 and t.startswith(word)):
            return True
    return False


def _phrase(words: list[str]) -> str:
    return words[0] if len(words) == 1 else '"' + " ".join(words) + '"'


def _is_content(word: str) -> bool:
    """A word that can carry the query's subject: not a stopword or meta word, not a lone letter."""
    lower = word.lower()
    return (len(lower) > 1 or lower.isdigit()) and lower not in STOPWORDS and lower not in META_WORDS


def _has_content(text: str) -> bool:
    """Whether any alphanumeric run of ``text`` is a content word (``e.g``, ``x_y``: no)."""
    return any(_is_content(w) for w in _PLAIN_WORD.findall(text))


def _path_terms(token: str) -> list[str]:
    """``src/models/*.ts`` -> ['"src models"', 'ts']: one phrase per wildcard-free piece (a piece
    of stopwords and single letters only, ``*/a/*``, is dropped: it would match anything)."""
    out: list[str] = []
    for piece in _WILDCARD.split(token):
        words = [w.lower() for w in _SEGMENT_WORD.findall(piece)]
        if words and _has_content(" ".join(words)):
            out.append(_phrase(words))
    return out


def _is_path(token: str) -> bool:
    if "\\" in token or "*" in token:
        return True
    if "/" in token:
        return not _is_slashed_words(token)
    m = _FILE_NAME.match(token)
    return bool(m and m.group(1).lower() in FILE_EXTENSIONS)


def _is_slashed_words(token: str) -> bool:
    """``and/or``, ``artists/bands``, ``he/she/they``: plain words joined by slashes, with no
    sign of a path (see the module docstring)."""
    segments = token.split("/")
    if len(segments) < 2 or not all(_PLAIN_SEGMENT.match(s) for s in segments):
        return False  # a leading/trailing slash (empty segment), or a segment like v2, a_b, x.ts
    return len(segments) == 2 or any(s.lower() in STOPWORDS for s in segments)


def _is_identifier(token: str) -> bool:
    return bool(
        _CAMEL.search(token)
        or _SNAKE.search(token)
        or _HAS_DIGIT_AND_ALPHA.match(token)
        or _DOTTED.match(token)
        or (_HYPHENATED.match(token) and any(c.isupper() or c.isdigit() for c in token))
    )


def extract_terms(query: str, signal: str | None = None) -> list[KeywordTerm]:
    """The keyword terms of ``query`` in query order (see the module docstring)."""
    triggers = trigger_words(signal)
    terms: list[KeywordTerm] = []
    seen: set[str] = set()

    def add(text: str, weight: int, position: int) -> None:
        key = text.lower()
        if text and key not in seen:
            seen.add(key)
            terms.append(KeywordTerm(text, weight, position))

    position = 0
    for text, quoted in _pieces(query):
        if quoted and not any(c.isspace() for c in text.strip()):
            position += 1
            for term in _quoted_token_terms(text):
                add(term, 2, position)
        elif quoted:
            phrase = _quoted_phrase(text)
            if phrase:
                add(phrase, 2, position)
                position += 1
        else:
            # A stray (unpaired) quote inside a token would reach qmd as an unmatched phrase quote.
            for raw in text.translate(_STRAY_QUOTES).split():
                position += 1
                for term, weight in _bare_token_terms(raw, triggers):
                    add(term, weight, position)
    return terms


def _pieces(query: str) -> list[tuple[str, bool]]:
    """``query`` cut into (text, is_quoted) pieces, in order."""
    cursor = 0
    pieces: list[tuple[str, bool]] = []
    for m in _QUOTED.finditer(query):
        pieces.append((query[cursor : m.start()], False))
        pieces.append((next(g for g in m.groups() if g is not None), True))
        cursor = m.end()
    pieces.append((query[cursor:], False))
    return pieces


def _quoted_token_terms(text: str) -> list[str]:
    """`sessionStore.load`, "token.ts": one quoted token, classified like any other."""
    token = text.strip().strip(_EDGE_PUNCT)
    if _is_path(token):
        return _path_terms(token)
    if token and _is_identifier(token) and _has_content(token):
        return [token]
    if token:
        words = [w.lower() for w in _WORD.findall(token)]
        words = [w for w in words if w not in STOPWORDS and _has_content(w)]
        if words:
            return [_phrase(words)]
    return []


def _quoted_phrase(text: str) -> str | None:
    """A quoted span of several words: one phrase (a lone stopword or letter is dropped)."""
    words = [w.lower() for w in _WORD.findall(text)]
    if not _has_content(" ".join(words)):
        return None  # `" a -- "`, `"and the"`: no word that says what to look for
    return _phrase(words) if len(words) > 1 else words[0]


def _bare_token_terms(raw: str, triggers: frozenset[str]) -> list[tuple[str, int]]:
    """(term, weight) of one unquoted token: a path or identifier whole, else its content words."""
    token = raw.strip(_EDGE_PUNCT).lstrip("-").rstrip(".")
    if not token:
        return []
    if _is_path(token):
        return [(part, 2) for part in _path_terms(token)]
    if _is_identifier(token) and _has_content(token):
        return [(token.strip("."), 2)]
    out: list[tuple[str, int]] = []
    for word in _WORD.findall(token):
        lower = word.lower().replace("’", "'")
        if "'" in lower and lower not in STOPWORDS:
            lower = lower.split("'")[0]  # user's -> user
        if lower in STOPWORDS or lower in META_WORDS or not _has_content(lower):
            continue
        if _is_trigger(lower, triggers):
            continue
        out.append((lower, 1))
    return out


def relaxation_ladder(terms: list[KeywordTerm], max_forms: int = 3) -> list[KeywordForm]:
    """The strict form, then up to ``max_forms - 1`` relaxed forms with fewer terms.

    Terms keep their query order inside each form; which ones survive is decided by
    :attr:`KeywordTerm.priority`. Sizes are spread evenly from all terms down to one.
    """
    if not terms:
        return []
    n = len(terms)
    total = sum(t.weight for t in terms)
    ranked = sorted(terms, key=lambda t: t.priority)
    k = max(1, min(max_forms, n))
    sizes: list[int] = []
    for i in range(k):
        size = n if k == 1 else round(n - i * (n - 1) / (k - 1))
        if size not in sizes:
            sizes.append(size)
    forms: list[KeywordForm] = []
    for size in sizes:
        kept = sorted(ranked[:size], key=lambda t: t.position)
        forms.append(KeywordForm(" ".join(t.text for t in kept), sum(t.weight for t in kept) / total))
    return forms


def keyword_forms(query: str, signal: str | None = None, max_forms: int = 3) -> list[KeywordForm]:
    """What the adapter sends to ``qmd search`` for ``query``, strictest first (maybe none)."""
    return relaxation_ladder(extract_terms(query, signal), max_forms)


# --------------------------------------------------------------------------- typed query documents


_VEC_UNSAFE = re.compile(r"(^|\s)-+(?=[\w\"])")


def vec_text(query: str) -> str:
    """The query as a ``vec:`` line: one line, without ``-term`` negations (qmd rejects those)."""
    return _VEC_UNSAFE.sub(r"\1", " ".join(query.split()))


def structured_query(query: str, signal: str | None = None) -> str:
    """A typed query document for ``qmd query``: the strict keyword form as ``lex:`` (when there
    is one) and the whole query, on one line and without ``-term`` negations (qmd rejects those
    in ``vec:``), as ``vec:``."""
    vec = vec_text(query)
    forms = keyword_forms(query, signal, 1)
    lines = [f"lex: {forms[0].text}"] if forms else []
    return "\n".join([*lines, f"vec: {vec}"])


def typed_searches(document: str) -> list[dict[str, str]] | None:
    """``lex: a b\nvec: a b`` (what :func:`structured_query` writes) as qmd's typed searches;
    None for a plain question."""
    searches = []
    for line in document.split("\n"):
        kind, sep, text = line.partition(": ")
        if not sep or kind not in ("lex", "vec", "hyde") or not text.strip():
            return None
        searches.append({"type": kind, "query": text.strip()})
    return searches or None


class SemanticPlan(Frozen):
    """How one vsearch/query call runs: the text ``sent`` (the question, or a typed ``lex:``/``vec:``
    document when qmd does not expand it), the models that must be on disk (``needs``, a key of
    :data:`.locate.MODES_NEED`: the embedding model, plus the generate model when expanding),
    whether qmd expands the query and reranks, and a ``note`` saying what was skipped and why
    (the attempt shows it)."""

    sent: str
    needs: str
    expand: bool
    rerank: bool
    note: str | None = None


def semantic_plan(
    mode: str, query: str, signal: str | None, wanted: bool = False, absent: Mapping[str, str | None] | None = None
) -> SemanticPlan:
    """The :class:`SemanticPlan` of a vsearch/query call. ``absent``: why each optional model of a
    local qmd (``generate``, ``rerank``) is not used, ``None`` when on disk; ``None`` for a qmd
    server (its own models: a typed document for ``query``, reranked). ``wanted``: whether the
    query should be expanded (the CLI's ``qmd vsearch`` always expands, the engine per settings)."""
    if absent is None:
        sent = structured_query(query, signal) if mode == "query" else query
        return SemanticPlan(sent, "", False, mode == "query")
    expand = wanted and absent["generate"] is None
    rerank = mode == "query" and absent["rerank"] is None
    notes = [f"query expansion skipped: {absent['generate']}"] if wanted and not expand else []
    if mode == "query" and not rerank:
        notes.append(f"reranking skipped: {absent['rerank']}; ranked by retrieval evidence")
    structured = mode == "query" and not expand
    sent = structured_query(query, signal) if structured else query
    needs = ("vsearch" if mode == "vsearch" else "query-expand") if expand else "embed"
    return SemanticPlan(sent, needs, expand, rerank, "; ".join(notes) or None)
