"""The rule table: signal regexes compiled once, matched in two passes.

Pass 1 tries every rule's **strong** signals top to bottom; the first rule that matches wins.
Only when no strong signal matched anywhere does pass 2 try the **weak** signals in the same
order; only when nothing matched does the last rule (the default) apply. The two passes are what
let "relationship between OrderController and PaymentService" go to rule 2 although rule 1's weak
identifier signal also fires, and "that thing with the tokens" reach rule 5 through a weak
back-reference while "find the function parseAuthToken" still goes to rule 1.

Each rule's signals become one case-insensitive alternation of named groups (``s0``, ``s1``...)
compiled with the ``regex`` module, so one search per rule both decides the match and says which
signal fired. The searches of one query share one time budget (``regex_timeout_ms``, less when
the query's deadline is shorter; CPU time, as ``regex`` measures its match timeout): each runs
under that timeout set to what is left, so no query can stall the router on a backtracking
pattern however many rules backtrack; a timed-out rule, and every rule left when the budget is
spent, counts as not matching and is reported.

**Without ``regex`` where ``re`` reads the same** (a one-shot query: importing ``regex`` is a fifth
of a cold query). A caller that can stop an ``re`` search by CPU time (``interrupt``: the one-shot
CLI's main thread, :mod:`memory_router.routing.cpu_alarm`) has an ASCII query matched with ``re``
against every alternation written in the syntax the two engines share (:func:`plain_pattern`: ASCII,
no escape, class, group or repeat that ``regex`` reads otherwise); the rest is compiled with
``regex`` as before. On ASCII text (a normalised query holds no control character) such a
pattern finds the same match in both, so the daemon (``regex`` always) and a one-shot query
route alike.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from memory_router.core.frozen import Frozen

TYPE_CHECKING = False  # not typing's: a one-shot query needs none of it
if TYPE_CHECKING:  # a name only: rules are compiled from a parsed config, never read from a file
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, Literal, TypeAlias

    import regex

    Strength: TypeAlias = Literal["strong", "weak", "default"]
    Interrupt: TypeAlias = Callable[..., Any]
    """``interrupt(seconds, search, *args)``: ``search(*args)`` (an ``re`` search), stopped with
    ``TimeoutError`` after ``seconds`` of CPU time (:func:`memory_router.routing.cpu_alarm.interrupter`)."""

_EXT_PLACEHOLDER = "{{file_extensions}}"


def _regex_flags() -> int:
    import regex  # here: a one-shot query whose patterns ``re`` reads never imports it

    return regex.IGNORECASE | regex.UNICODE


# ---------------------------------------------------------------------------- re or regex

# Escapes that mean the same in re and regex (regex reads more letters: \p, \X, \G, \K, \m...;
# \B differs: re never matches it on empty text, regex does).
_PLAIN_ESCAPES = frozenset("bdDsSwWAZntrfv")
# Group openings both read alike; "(?<name>", "(?|", "(?>", "(?(", "(?P>", "(?R)"... are regex's own.
_PLAIN_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?P<", "(?P=")
_PLAIN_FLAGS = "imsx"  # (?i) at the start, (?-i:...) scoped


def plain_pattern(source: str) -> bool:
    """Whether ``source`` is ASCII and written in the syntax ``re`` and ``regex`` (version 0, the
    default, meant to be ``re``'s) share, so that on ASCII text both find the same match: escapes
    of punctuation and of ``_PLAIN_ESCAPES`` only, ``{m,n}`` repeats only (a ``{`` that is not one
    is a fuzzy match in ``regex``), classes without nested sets, POSIX classes or set operations,
    the groups of ``_PLAIN_GROUPS`` and the inline flags ``i``, ``m``, ``s``, ``x``. Conservative:
    a ``False`` only means the pattern goes to ``regex``."""
    if not source.isascii():
        return False
    i = 0
    while 0 <= i < len(source):
        i = _plain_token_end(source, i)
    return i >= 0


def _plain_token_end(source: str, i: int) -> int:
    """The index after the token at ``i`` (an escape, a class, a repeat, a group's opening, a
    character), or -1 if it is not plain."""
    c = source[i]
    if c == "\\":
        return i + 2 if _plain_escape(source[i + 1 : i + 2]) else -1
    if c == "[":
        return _class_end(source, i)
    if c == "{":  # "{e<=1}" is regex's fuzzy match and re's literal text: only {m}, {m,}, {,n}, {m,n}
        return _repeat_end(source, i)
    if source.startswith("(?", i):
        return i + 3 if source.startswith(_PLAIN_GROUPS, i) else _flags_end(source, i)
    return i + 1


def _plain_escape(escaped: str) -> bool:
    return bool(escaped) and (not escaped.isalnum() or escaped in _PLAIN_ESCAPES)


def _digits_end(source: str, i: int) -> int:
    while i < len(source) and source[i].isdigit():
        i += 1
    return i


def _repeat_end(source: str, start: int) -> int:
    """The index after the ``{m,n}`` repeat at ``start``, or -1 if it is not one."""
    i = _digits_end(source, start + 1)
    bounded = i > start + 1  # "{}" and "{,}" are no repeat
    if source.startswith(",", i):
        high = _digits_end(source, i + 1)
        bounded = bounded or high > i + 1
        i = high
    return i + 1 if bounded and source.startswith("}", i) else -1


def _flags_end(source: str, start: int) -> int:
    """The index after inline flags ``(?imsx)``, ``(?i:`` or ``(?-i:`` at ``start``, or -1."""
    i = start + 2
    while i < len(source) and source[i] in _PLAIN_FLAGS:
        i += 1
    if source.startswith("-", i):
        off = i + 1
        while off < len(source) and source[off] in _PLAIN_FLAGS:
            off += 1
        if off == i + 1:
            return -1
        i = off
    if i == start + 2 or i >= len(source) or source[i] not in ":)":
        return -1
    return i + 1


def _class_end(source: str, start: int) -> int:
    """The index after the class opened at ``start``, or -1 if it is not plain (or not closed)."""
    i = start + 1
    if source.startswith("^", i):
        i += 1
    if source.startswith("]", i):  # a leading "]" is a literal
        i += 1
    while i < len(source):
        c = source[i]
        if c == "\\":
            if not _plain_escape(source[i + 1 : i + 2]):
                return -1
            i += 2
            continue
        if c == "[" or source.startswith(("--", "&&", "||", "~~"), i):  # nested / POSIX sets, set operations
            return -1
        if c == "]":
            return i + 1
        i += 1
    return -1


class ChainStep(Frozen):
    """One step of a fallback chain: a backend and, for qmd, its search mode."""

    backend: str
    mode: str | None = None
    extension: bool = False
    """True for a step the config's ``extend`` adds after the spec's chain (``"table": "extended"``)."""

    @property
    def health_key(self) -> str:
        """The dead-backend cooldown's key: ``backend``, or ``backend/mode`` for a moded step."""
        return self.backend if self.mode is None else f"{self.backend}/{self.mode}"


class Rule(Frozen):
    """One rule. ``strong_regex``/``weak_regex`` are the combined alternations (placeholders
    expanded); :attr:`strong`/:attr:`weak` compile them on first use, so a process that routes one
    query compiles only the rules it reaches. Immutable (change one with :meth:`replace`, which
    starts a new cache); equal, hashed, shown and pickled by its eight fields (the compiled
    patterns are a cache, not part of its value)."""

    __slots__ = ("_compiled",)  # a cache, not part of the value
    number: int
    id: str
    description: str
    strong_sources: tuple[str, ...]
    weak_sources: tuple[str, ...]
    chain: tuple[ChainStep, ...]
    strong_regex: str | None
    weak_regex: str | None
    _compiled: dict[str, Any]  # "strong"/"weak": regex's; "re strong"/"re weak": re's, or False

    def __init__(
        self,
        number: int,
        id: str,
        description: str,
        strong_sources: tuple[str, ...],
        weak_sources: tuple[str, ...],
        chain: tuple[ChainStep, ...],
        strong_regex: str | None = None,
        weak_regex: str | None = None,
    ) -> None:
        self._init(number, id, description, strong_sources, weak_sources, chain, strong_regex, weak_regex, _compiled={})

    @property
    def strong(self) -> regex.Pattern[str] | None:
        return self.pattern("strong")

    @property
    def weak(self) -> regex.Pattern[str] | None:
        return self.pattern("weak")

    def pattern(self, strength: str) -> regex.Pattern[str] | None:
        """The compiled alternation for ``"strong"`` or ``"weak"`` (``None``: no such signals)."""
        compiled = self._compiled.get(strength)
        if compiled is None:
            source = self.strong_regex if strength == "strong" else self.weak_regex
            if source is None:
                return None
            import regex

            compiled = self._compiled[strength] = regex.compile(source, _regex_flags())
        return compiled

    def plain(self, strength: str) -> re.Pattern[str] | None:
        """The alternation for ``strength`` compiled with ``re`` if it is a :func:`plain_pattern`
        (``None``: no such signals, or not plain: use :meth:`pattern`)."""
        key = f"re {strength}"
        compiled: re.Pattern[str] | bool | None = self._compiled.get(key)
        if compiled is None:
            source = self.strong_regex if strength == "strong" else self.weak_regex
            compiled = False
            if source is not None and plain_pattern(source):
                try:
                    compiled = re.compile(source, re.IGNORECASE)
                except re.error:  # valid for regex (the config was checked), not for re: regex's
                    compiled = False
            self._compiled[key] = compiled
        return compiled if isinstance(compiled, re.Pattern) else None


class RuleMatch(Frozen):
    """Which rule a query matched, through which signal, and where in the query."""

    rule: Rule
    strength: Strength
    signal: str | None = None  # the signal's regex source
    matched: str | None = None  # the text it matched
    span: tuple[int, int] | None = None
    timed_out: tuple[int, ...] = ()  # rule numbers whose regex hit the match timeout

    def as_dict(self) -> dict[str, object]:
        return {
            "number": self.rule.number,
            "id": self.rule.id,
            "strength": self.strength,
            "signal": self.signal,
            "matched": self.matched,
            "span": list(self.span) if self.span else None,
        }


def _combine(sources: Sequence[str]) -> str:
    return "|".join(f"(?P<s{i}>{source})" for i, source in enumerate(sources))


# file_extensions -> their escaped alternation. One config's rules share one list, and escaping
# the packaged config's 56 extensions was most of the cost of compiling it: once, not per signal list.
_EXT_ALTERNATIONS: dict[tuple[str, ...], str] = {}


def _ext_alternation(file_extensions: tuple[str, ...]) -> str:
    found = _EXT_ALTERNATIONS.get(file_extensions)
    if found is None:
        if len(_EXT_ALTERNATIONS) >= 8:  # a daemon reloading edited configs: keep it small
            _EXT_ALTERNATIONS.clear()
        # re.escape and regex.escape escape different sets of punctuation, all of it literal in both
        found = "|".join(re.escape(e.lstrip(".")) for e in file_extensions) or "(?!)"
        _EXT_ALTERNATIONS[file_extensions] = found
    return found


def signal_regex(sources: Sequence[str], file_extensions: Sequence[str] = ()) -> tuple[tuple[str, ...], str | None]:
    """Each signal with ``{{file_extensions}}`` expanded, and the rule's combined alternation of
    them (``None``: no signals). Only text: nothing is compiled or checked here."""
    if not sources:
        return (), None
    ext_alternation = _ext_alternation(tuple(file_extensions))
    expanded = tuple(s.replace(_EXT_PLACEHOLDER, ext_alternation) for s in sources)
    return expanded, _combine(expanded)


def compile_rule(
    *,
    number: int,
    id: str,
    description: str,
    strong: Sequence[str],
    weak: Sequence[str],
    chain: tuple[ChainStep, ...],
    file_extensions: Sequence[str] = (),
    path: Path | str = "router-config.json",
    label: str = "",
) -> Rule:
    """Compile one rule's signals, raising ``InvalidConfig`` that quotes a bad pattern."""
    import regex

    from memory_router.core.errors import InvalidConfig

    def compile_list(kind: str, sources: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
        expanded, combined = signal_regex(sources, file_extensions)
        for i, source in enumerate(expanded):
            try:
                pattern = regex.compile(source, _regex_flags())
            except regex.error as exc:
                raise InvalidConfig(path, f"{label}.{kind}[{i}]", f"invalid regex {sources[i]!r}: {exc}") from None
            if pattern.search("", timeout=0.05) is not None:
                raise InvalidConfig(
                    path,
                    f"{label}.{kind}[{i}]",
                    f"regex {sources[i]!r} matches the empty string, so it matches every query",
                    "Make it require at least one character.",
                )
        return tuple(sources), combined

    strong_sources, strong_re = compile_list("strong", strong)
    weak_sources, weak_re = compile_list("weak", weak)
    rule = Rule(number, id, description, strong_sources, weak_sources, chain, strong_re, weak_re)
    rule.pattern("strong"), rule.pattern("weak")  # validated config: compiled now, as before
    return rule


class RuleTable:
    """The ordered rules; :meth:`match` is the router's whole routing decision."""

    __slots__ = ("rules", "regex_timeout_s", "_passes")

    def __init__(self, rules: tuple[Rule, ...], regex_timeout_s: float = 0.05) -> None:
        self.rules = rules
        self.regex_timeout_s = regex_timeout_s
        # The two passes flattened once: (strength, [[pattern, rule, sources, group -> index, re's
        # pattern]]), rules without signals of that strength left out. match() runs on every query.
        # A pattern not compiled yet (a config loaded from the compiled cache) is None until first
        # reached (re's: False once known not plain), so each entry is a mutable, mixed list
        # (list[Any]), not a tuple.
        self._passes: tuple[tuple[Strength, tuple[list[Any], ...]], ...] = tuple(
            (
                strength,
                tuple(
                    [rule._compiled.get(strength), rule, sources, {f"s{i}": i for i in range(len(sources))}, None]
                    for rule in rules
                    for source, sources in [
                        (rule.strong_regex, rule.strong_sources)
                        if strength == "strong"
                        else (rule.weak_regex, rule.weak_sources)
                    ]
                    if source is not None
                ),
            )
            for strength in ("strong", "weak")
        )

    @property
    def default(self) -> Rule:
        return self.rules[-1]

    def by_number(self, number: int) -> Rule:
        return next(r for r in self.rules if r.number == number)

    def match(  # noqa: C901 - the two passes, each pattern compiled on first use, under one budget
        self, query: str, budget_s: float | None = None, *, concurrent: bool = False, interrupt: Interrupt | None = None
    ) -> RuleMatch:
        """The rule ``query`` matches. All searches together take at most ``budget_s`` (default and
        upper bound: ``regex_timeout_s``). ``concurrent=True`` releases the GIL while a search runs
        (for a caller that runs this in a worker thread next to an event loop). With ``interrupt``
        an ASCII query is searched with ``re`` where a pattern is plain (see the module docstring),
        ``interrupt`` stopping each search at half of what is left of the budget; a pattern ``re``
        cannot search within that is searched with ``regex`` in the rest, as without ``interrupt``."""
        timed_out: list[int] = []
        budget = self.regex_timeout_s if budget_s is None else min(budget_s, self.regex_timeout_s)
        # `regex` times a search in process CPU time. The budget is checked on the cheap wall clock
        # first; only once that says "spent" is CPU time read (a system call): a process that was
        # merely preempted keeps the CPU time it did not use, as each search did before.
        end = time.perf_counter() + budget
        cpu_start = time.process_time()
        release = True if concurrent else None
        if interrupt is not None and not query.isascii():
            interrupt = None

        def left() -> float:
            """What is left of the budget: by the wall clock, else (once that says "spent") by CPU time."""
            wall_left = end - time.perf_counter()
            return wall_left if wall_left > 0 else budget - (time.process_time() - cpu_start)

        for strength, candidates in self._passes:
            for entry in candidates:
                pattern, rule, sources, groups, plain = entry
                if plain is None and interrupt is not None:  # compiled on first use, not budgeted
                    wall, cpu = time.perf_counter(), time.process_time()
                    plain = entry[4] = rule.plain(strength) or False
                    end += time.perf_counter() - wall
                    cpu_start += time.process_time() - cpu
                searched = False
                if plain and interrupt is not None:
                    seconds = left()
                    if seconds <= 0:
                        timed_out.append(rule.number)
                        continue
                    try:
                        m, searched = interrupt(seconds / 2, plain.search, query), True
                    except TimeoutError:
                        # re backtracks where regex's optimisations may not (``(a+)+b``): regex
                        # gets the rest of the budget, and this pattern from now on.
                        entry[4] = False
                if not searched:
                    if pattern is None:  # compiled on first use; compiling is not matching: not budgeted
                        wall, cpu = time.perf_counter(), time.process_time()
                        pattern = entry[0] = rule.pattern(strength)
                        end += time.perf_counter() - wall
                        cpu_start += time.process_time() - cpu
                    seconds = left()
                    if seconds <= 0:
                        timed_out.append(rule.number)
                        continue
                    try:
                        m = pattern.search(query, timeout=seconds, concurrent=release)
                    except TimeoutError:
                        timed_out.append(rule.number)
                        continue
                if m is not None:
                    # The signal groups are the pattern's only top-level groups and exactly one
                    # took part, so it is the last group closed; scan only if a signal's own
                    # groups make that ambiguous.
                    index = groups.get(m.lastgroup or "")
                    if index is None or m.group(m.lastgroup or 0) is None:
                        index = next(int(k[1:]) for k, v in m.groupdict().items() if v is not None and k[1:].isdigit())
                    return RuleMatch(rule, strength, sources[index], m.group(), m.span(), _once(timed_out))
        return RuleMatch(self.default, "default", timed_out=_once(timed_out))


def _once(numbers: list[int]) -> tuple[int, ...]:
    """Rule numbers in order, each once (a rule with strong and weak signals can time out twice)."""
    return tuple(dict.fromkeys(numbers)) if numbers else ()
