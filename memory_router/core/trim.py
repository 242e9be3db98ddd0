"""What a caller lets through of an answer: a relevance floor (abstention) and a character budget.

Both are applied to the router's finished envelope, in this order, on every path that answers a
query (the in-process CLI, ``serve`` and the socket daemon, MCP), so the same request gets the same
answer whichever path serves it:

1. ``min_relevance`` (the floor, on the answer): an answer whose best hit is under it *abstains*:
   no results, status ``empty``, ``normalized_relevance`` 0, and ``abstained`` says why
   (``{"min_relevance", "best", "dropped"}``). An answer whose best hit reaches it is returned
   whole. The relevance is calibrated (0.4: such hits hold the evidence about 4 times in 10;
   docs/calibration.md), so the floor is the least likelihood the caller accepts of the answer's
   strongest hit. It is not applied hit by hit: the calibrated relevance falls with rank, so a
   per-hit floor cut the evidence an agent needed from the tail of answers it kept (LoCoMo dev
   through OpenClaw: evidence recall@10 71.0 -> 53.7 at 0.2; docs/abstention.md).
2. ``max_chars`` (the budget, on the hits' ``content``, counted in Unicode code points): hits are
   kept whole, in rank order, until the next one would pass the budget; that one and every
   later one are cut (a smaller hit further down does not jump the queue: rank order is the
   caller's contract). The first hit is never dropped for its size: when it alone passes the
   budget, it is kept cut to ``max_chars`` characters (``truncated: true``), and alone, so a
   budget never turns an answer into no answer and the total never passes the budget.
   ``budget`` says what was kept and cut (``{"max_chars", "kept", "cut", "chars", "truncated"}``).

Each field appears only when it changed the answer; an envelope asked for neither is unchanged,
byte for byte. Error envelopes are never touched (they carry no hits).
"""

from __future__ import annotations

from memory_router.core.envelope import Envelope
from memory_router.core.frozen import Frozen


class Trim(Frozen):
    """A caller's floor and budget; ``None``: not asked."""

    min_relevance: float | None = None
    max_chars: int | None = None

    @property
    def asked(self) -> bool:
        return self.min_relevance is not None or self.max_chars is not None


def apply(envelope: Envelope, trim: Trim | None) -> Envelope:
    """``envelope`` with ``trim``'s floor, then its budget, applied (module docstring)."""
    if trim is None or not trim.asked or envelope.status == "error" or not envelope.results:
        return envelope
    if trim.min_relevance is not None:
        envelope = _floor(envelope, trim.min_relevance)
    if trim.max_chars is not None and envelope.results:
        envelope = _budget(envelope, trim.max_chars)
    return envelope


def _floor(envelope: Envelope, floor: float) -> Envelope:
    best = max(hit.relevance for hit in envelope.results)
    if best >= floor:
        return envelope
    return envelope.replace(
        results=(),
        result_count=0,
        normalized_relevance=0.0,
        status="empty",
        abstained={"min_relevance": floor, "best": best, "dropped": len(envelope.results)},
    )


def _budget(envelope: Envelope, max_chars: int) -> Envelope:
    results = list(envelope.results)
    first = results[0]
    truncated = len(first.content) > max_chars
    kept = [first.replace(content=first.content[:max_chars])] if truncated else [first]
    chars = len(kept[0].content)
    # A first hit cut to the budget is the whole answer (not even an empty hit follows it).
    for hit in [] if truncated else results[1:]:
        if chars + len(hit.content) > max_chars:
            break
        kept.append(hit)
        chars += len(hit.content)
    cut = len(results) - len(kept)
    if not cut and not truncated:
        return envelope
    report = {"max_chars": max_chars, "kept": len(kept), "cut": cut, "chars": chars, "truncated": truncated}
    return envelope.replace(results=tuple(kept), result_count=len(kept), budget=report)
