"""Which part of a long entry a result shows: its beginning and the lines that hold the query's words.

An entry is searched by the terms of its whole text, but a result shows at most
:data:`~.parse.MAX_CONTENT_CHARS` of it. For most entries (a list item, a paragraph, a daily line)
that is all of it. A long one is cut, and the cut used to keep only its beginning: a session note
that OpenClaw's session-memory hook writes holds the session's last fifteen messages, one line
each, in one paragraph, so a query matching the twelfth message was answered with the first
three. On LongMemEval's development half, 67 of Total Recall's 991 results held an evidence turn
past the text they showed, 33 of them first results.

:func:`shown_part` keeps the beginning (the whole lines that fit in half the room: a session's
opening message is where the user says what it is about) and, when a later line holds more of
the query's weight (each content term's idf, counted once) than the plain cut does, fills the
rest from the later line that adds the most, after a line saying which lines it leaves out
(``[… lines 12-19 left out …]``). An entry whose plain cut already holds as much reads exactly
as before. Measured on LongMemEval's development half (docs/benchmarks-longmemeval.md, *What a
long note shows*). Showing the best part alone (no beginning) lowered the router's hit@1 there
from 66.0 to 60.0: it cut away the opening message, which often held the evidence. LoCoMo, the
code set and CoSQA hold no entry this long: their answers are unchanged.

Pure: an entry and the query's term weights in, the text and where it ends out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from memory_router.backends.totalrecall.parse import MAX_CONTENT_CHARS, MAX_SHOWN_LINES, Entry, index_terms
from memory_router.core.frozen import Frozen


class Shown(Frozen):
    """What a result shows of an entry: its text, and where the text ends when it leaves lines
    out (``last_line``: the file line of its last line; None: the text is a plain cut, its lines
    consecutive from the entry's ``line``)."""

    text: str
    last_line: int | None = None


def shown_part(entry: Entry, weights: Mapping[str, float]) -> Shown:
    """What a result for ``entry`` shows, for a query whose content terms weigh ``weights``
    (stemmed term -> idf). Its text starts where the entry starts (the result's ``line``)."""
    body = entry.body
    plain = Shown(entry.text)
    if body is None or not weights:
        return plain
    lines = body.split("\n")[:MAX_SHOWN_LINES]
    starts = [0]  # where each line starts in body
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    # Each line's query terms: from the terms parse_file keeps for a long entry's lines (an entry
    # built by hand without them is tokenised here).
    line_terms = entry.line_terms or tuple(frozenset(index_terms(line)) for line in lines)
    held = [terms.intersection(weights) for terms in line_terms]
    head = _whole_lines(lines, MAX_CONTENT_CHARS // 2)
    kept = head.count("\n") + 1  # the lines the beginning shows (the last one maybe cut)
    head_terms = _held_in(body, lines, starts, held, 0, len(head), weights)
    best, best_weight = plain, _weight(_held_in(body, lines, starts, held, 0, len(entry.text), weights), weights)
    for i in range(kept + 1, len(lines)):  # a start leaving at least one line out
        if not held[i] - head_terms:
            continue  # adds none of the query's terms to the beginning's
        elision = elision_line(entry.file_line(kept + 1), entry.file_line(i))
        room = MAX_CONTENT_CHARS - len(head) - len(elision)
        weight = _weight(head_terms | _held_in(body, lines, starts, held, i, room, weights), weights)
        if weight > best_weight:  # strictly: a tie keeps the plain cut, then the earlier line
            part = body[starts[i] : starts[i] + room]
            best, best_weight = Shown(head + elision + part, entry.file_line(i + 1 + part.count("\n"))), weight
    return best


def _held_in(
    body: str,
    lines: list[str],
    starts: list[int],
    held: list[frozenset[str]],
    first: int,
    size: int,
    weights: Mapping[str, float],
) -> frozenset[str]:
    """The query terms of ``body[starts[first] : starts[first] + size]``: its whole lines' (from
    ``held``) and those of the one line the cut falls inside, up to the cut."""
    end = starts[first] + size
    out: set[str] = set()
    for j in range(first, len(lines)):
        if starts[j] + len(lines[j]) <= end:
            out |= held[j]
            continue
        if starts[j] < end:
            out |= _terms(body[starts[j] : end], weights)
        break
    return frozenset(out)


def elision_line(first: int, last: int) -> str:
    """The line that stands for the file lines ``first``..``last`` left out (1-based, inclusive):
    where they are, for an agent that wants to read them from the file."""
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return f"\n[… {where} left out …]\n"


def _terms(text: str, weights: Mapping[str, float]) -> frozenset[str]:
    return frozenset(t for t in index_terms(text) if t in weights)


def _weight(terms: frozenset[str], weights: Mapping[str, float]) -> float:
    # fsum: the exact sum, whatever order a set yields its terms in, so two parts holding the same
    # terms tie exactly and the tie keeps the earlier one (a plain sum may differ in its last bit).
    return math.fsum(weights[t] for t in terms)


def _whole_lines(lines: list[str], budget: int) -> str:
    """The entry's first lines that fit in ``budget`` characters (the first one cut to it when it
    alone does not)."""
    out = lines[0][:budget]
    for line in lines[1:]:
        if len(out) + 1 + len(line) > budget:
            break
        out += "\n" + line
    return out
