"""Rule 7 choosing between qmd's modes, replayed offline over the benches' recorded answers.

    python bench/rule7_replay.py [--records DIR ...] [--lobo] [--markdown FILE]

The question (issue 29): the packaged router trails qmd ``search`` alone on the code set and qmd
``vsearch`` alone on CoSQA, and the loss is rule 7 (the default rule), whose chain starts with qmd
``query``. Can rule 7 decide per query, from the query's text or from what qmd's three modes
answer, which of them to trust, so that the router is at least the best single mode on both,
without lowering LoCoMo or LongMemEval (whose default-rule questions take rule 7 too)?

Input: the ``alone:*`` records of ``bench/locomo.py``, ``bench/longmemeval.py``,
``bench/code_memory.py`` and ``bench/cosqa.py`` (each backend and mode alone, native relevance,
every result labelled ``hit`` by its bench and carrying its ``path``). Each policy replaces the qmd
step of rule 7's chain (qmd ``query``, Lossless, Total Recall) with an answer built from the
recorded answers of qmd's modes; every other rule is replayed as packaged. ``fill`` is replayed as
shipped: the walk's winner (the first step whose calibrated first result reaches the threshold,
else the most relevant) gives the first result, weighted RRF of every step's results the rest
(``bench/fit_calibration.py``'s replay). Figures are in-sample with the packaged maps: compare the
rows with each other, not with the benches' own runs. ``--lobo`` adds, for the policies that act
on a calibrated value, each bench replayed with maps fitted on the other three only.

Output: markdown tables (docs/calibration.md, *Rule 7 from the query's shape or from the modes'
answers*). Exit 2 when no record folder holds ``alone:*`` records.
"""

from __future__ import annotations

import argparse
import copy
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fit_calibration as fc  # noqa: E402
from _common import BENCH_DATA  # noqa: E402

from memory_router.backends.common.words import STOPWORDS  # noqa: E402
from memory_router.config.calibration import load as load_calibration  # noqa: E402
from memory_router.core.calibration import Calibration  # noqa: E402
from memory_router.core.fuse import RRF_K  # noqa: E402

QUERY, SEARCH, VSEARCH, LOSSLESS, TOTALRECALL = "qmd:query", "qmd:search", "qmd:vsearch", "lossless", "totalrecall"
FOLDERS = ("locomo", "longmemeval", "code_memory", "cosqa")
BENCHES = ("locomo", "longmemeval", "code", "cosqa")
_WORD = re.compile(r"[A-Za-z0-9']+")


class Item(NamedTuple):
    """One result of a step, as the replay needs it."""

    ids: frozenset[str]  # the evidence ids it holds (its bench's labels)
    hit: bool
    relevance: float  # calibrated
    path: str  # the file it comes from ("" when the backend gives none)


class Step(NamedTuple):
    """One chain step's calibrated answer."""

    key: str
    items: tuple[Item, ...]

    @property
    def relevance(self) -> float:
        return self.items[0].relevance if self.items else 0.0


class Replay(fc.Recorded):
    """The recorded answers of every backend and mode, calibrated with one calibration."""

    def __init__(self, records: dict[str, list[dict[str, Any]]], calibration: Calibration) -> None:
        super().__init__(records)
        self.paths: dict[tuple[str, fc.QKey], tuple[str, ...]] = {}
        for variant, key in fc.ALONE_KEYS.items():
            for row in records.get(variant, []):
                q = (fc.bench_of(row), str(row["conv"]), str(row["qid"]))
                self.paths[(key, q)] = tuple(str(r.get("path") or "") for r in row.get("results") or [])
        self.text = {q: a.text for v in self.per_key.values() for q, a in v.items()}
        self.calibration = calibration
        self._steps: dict[tuple[str, fc.QKey], Step | None] = {}

    def recalibrated(self, calibration: Calibration) -> Replay:
        """The same recorded answers under another calibration (maps fitted without a bench)."""
        other = copy.copy(self)
        other.calibration, other._steps = calibration, {}
        return other

    def step(self, key: str, q: fc.QKey) -> Step | None:
        """``key``'s calibrated answer to ``q``; None when it answered nothing."""
        if (key, q) not in self._steps:
            a = self.per_key.get(key, {}).get(q)
            if a is None or not a.hits:
                self._steps[(key, q)] = None
            else:
                response = fc.calibrated(self.calibration, key, a)
                paths = self.paths.get((key, q)) or ("",) * len(a.hits)
                items = zip(a.dia_ids, a.hits, response.results, paths, strict=False)
                self._steps[(key, q)] = Step(key, tuple(Item(i, h, r.relevance, p) for i, h, r, p in items))
        return self._steps[(key, q)]

    def steps(self, q: fc.QKey, keys: Sequence[str]) -> list[Step | None]:
        return [self.step(k, q) for k in keys]


def walk(steps: Sequence[Step | None], threshold: float) -> Step | None:
    """The sequential decision: the first step reaching the threshold, else the most relevant
    (the earliest wins a tie)."""
    answered = [s for s in steps if s is not None]
    if not answered:
        return None
    return next((s for s in answered if s.relevance >= threshold), None) or max(answered, key=lambda s: s.relevance)


def fill(
    steps: Sequence[Step | None], head: Step | None = None, fused: Sequence[Step | None] | None = None
) -> fc.Replayed:
    """``fill``: the first result of ``head`` (default: the walk's winner), then weighted RRF of
    ``fused`` (default: every step), duplicates of the first dropped, cut at 10."""
    win = head or walk(steps, fc.THRESHOLD)
    if win is None:
        return fc.NOTHING
    scores: dict[Any, float] = defaultdict(float)
    shown: dict[Any, Item] = {}
    for s in fused if fused is not None else steps:
        for rank, item in enumerate(s.items if s else (), start=1):
            ident = item.ids or (s.key if s else "", rank)
            scores[ident] += item.relevance / (RRF_K + rank)
            shown[ident] = item
    first = win.items[0]
    rest = [shown[i] for i in sorted(scores, key=lambda i: -scores[i]) if not (first.ids and shown[i].ids == first.ids)]
    items = [first, *rest][:10]
    return fc.Replayed(
        tuple(i.ids for i in items), tuple(i.hit for i in items), win.relevance >= fc.THRESHOLD, win.relevance
    )


# --------------------------------------------------------------------------- qmd answers rebuilt


def lines_from(base: Step | None, other: Step | None, head_only: bool = False) -> Step | None:
    """``base`` with, before each of its results whose file ``other`` also returned, ``other``'s
    result for that file (its lines), at ``base``'s relevance; ``head_only``: only when the first
    results of both are the same file (the two modes agree on the file)."""
    if base is None or other is None:
        return base
    by_file: dict[str, Item] = {}
    for item in other.items[:1] if head_only else other.items:
        if item.path:
            by_file.setdefault(item.path, item)
    out: list[Item] = []
    for n, item in enumerate(base.items):
        theirs = by_file.get(item.path) if item.path and (n == 0 or not head_only) else None
        if theirs is not None and theirs.ids != item.ids:
            out.append(theirs._replace(relevance=item.relevance))
        out.append(item)
    return Step(base.key, tuple(out))


def vector_head(query: Step | None, vsearch: Step | None, search: Step | None, threshold: float) -> Step | None:
    """``query`` headed by ``vsearch``'s first result when ``query``'s first is the keyword list's
    own (``search``'s first file), absent from ``vsearch``'s top 10, and ``search``'s answer is
    under the threshold: qmd's fusion gave a weak keyword answer the first place."""
    if query is None or vsearch is None or search is None:
        return query
    first = query.items[0]
    if first.path in {i.path for i in vsearch.items[:10]} or search.items[0].path != first.path:
        return query
    if search.relevance >= threshold:
        return query
    return Step(query.key, (vsearch.items[0]._replace(relevance=first.relevance), *query.items))


# --------------------------------------------------------------------------- policies

Policy = Callable[[Replay, fc.QKey], fc.Replayed]


def _rest(r: Replay, q: fc.QKey) -> list[Step | None]:
    return r.steps(q, (LOSSLESS, TOTALRECALL))


def qmd_step(build: Callable[[Replay, fc.QKey], Step | None]) -> Policy:
    """Rule 7's chain with its qmd step answered by ``build``."""
    return lambda r, q: fill([build(r, q), *_rest(r, q)])


def most_relevant(*keys: str) -> Callable[[Replay, fc.QKey], Step | None]:
    def build(r: Replay, q: fc.QKey) -> Step | None:
        answered = [s for s in r.steps(q, keys) if s is not None]
        return max(answered, key=lambda s: s.relevance) if answered else None

    return build


def search_walked_first(r: Replay, q: fc.QKey) -> fc.Replayed:
    """``search`` asked first and accepted at the threshold, never the weak best-of, its other
    results not fused."""
    head = r.step(SEARCH, q)
    main = [r.step(QUERY, q), *_rest(r, q)]
    if head is None or head.relevance < fc.THRESHOLD:
        head = walk(main, fc.THRESHOLD)
    return fill(main, head)


def by_shape(test: Callable[[str], bool]) -> Policy:
    return qmd_step(lambda r, q: r.step(SEARCH if test(r.text.get(q, "")) else QUERY, q))


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def search_lines(threshold: float | None) -> Callable[[Replay, fc.QKey], Step | None]:
    """S: ``query`` with ``search``'s lines for the files both return, when ``search`` reaches
    ``threshold`` (None: always)."""

    def build(r: Replay, q: fc.QKey) -> Step | None:
        search = r.step(SEARCH, q)
        if search is None or (threshold is not None and search.relevance < threshold):
            return r.step(QUERY, q)
        return lines_from(r.step(QUERY, q), search)

    return build


def lines_and_vector_head(threshold: float, lines: bool) -> Callable[[Replay, fc.QKey], Step | None]:
    """F (``lines`` False): the vector head, else ``search``'s lines for ``query``'s first file;
    S + F (``lines`` True): S when ``search`` reaches the threshold, else F."""

    def build(r: Replay, q: fc.QKey) -> Step | None:
        query, search = r.step(QUERY, q), r.step(SEARCH, q)
        if lines and search is not None and search.relevance >= threshold:
            return lines_from(query, search)
        headed = vector_head(query, r.step(VSEARCH, q), search, threshold)
        return headed if headed is not query else lines_from(query, search, head_only=True)

    return build


def policies(threshold: float = fc.THRESHOLD) -> dict[str, Policy]:
    return {
        "packaged `fill` (qmd `query`, Lossless, Total Recall)": qmd_step(lambda r, q: r.step(QUERY, q)),
        "qmd step = `search`": qmd_step(lambda r, q: r.step(SEARCH, q)),
        "qmd step = `vsearch`": qmd_step(lambda r, q: r.step(VSEARCH, q)),
        "+ `search` after Total Recall (fused)": lambda r, q: fill(r.steps(q, (QUERY, LOSSLESS, TOTALRECALL, SEARCH))),
        "+ `vsearch` after `query` (fused)": lambda r, q: fill(r.steps(q, (QUERY, VSEARCH, LOSSLESS, TOTALRECALL))),
        "qmd step = the mode with the most relevant first result": qmd_step(most_relevant(QUERY, SEARCH, VSEARCH)),
        "qmd step = the more relevant of `query` and `vsearch`": qmd_step(most_relevant(QUERY, VSEARCH)),
        "`search` walked first (accepted at 0.4 only), its other results not fused": search_walked_first,
        "shape: `search` when the query has no stopword": by_shape(lambda t: not set(_words(t)) & STOPWORDS),
        "shape: `search` when the query has 4 words or fewer": by_shape(lambda t: len(_words(t)) <= 4),
        "agreement: `query`'s first file is `search`'s first file -> `search`'s lines first": qmd_step(
            lambda r, q: lines_from(r.step(QUERY, q), r.step(SEARCH, q), head_only=True)
        ),
        "S, always: each file `query` and `search` both return shows `search`'s lines first": qmd_step(
            search_lines(None)
        ),
        f"S: the same when `search` reaches {threshold:g}": qmd_step(search_lines(threshold)),
        f"F: `vsearch`'s first heads when `query`'s first is `search`'s, not in `vsearch`'s top 10, `search` under {threshold:g}": qmd_step(  # noqa: E501
            lines_and_vector_head(threshold, lines=False)
        ),
        "S + F": qmd_step(lines_and_vector_head(threshold, lines=True)),
    }


# --------------------------------------------------------------------------- scoring


def replay(r: Replay, policy: Policy, bench: str) -> list[tuple[fc.Replayed, frozenset[str]]]:
    """Every question of ``bench``: rule 7's through ``policy``, the others as packaged."""
    out = []
    for q in r.questions.get(bench, []):
        rule = r.rule.get(q, "default")
        got = policy(r, q) if rule == "default" else fill(r.steps(q, fc.chain_for(rule, True)))
        out.append((got, r.evidence[q]))
    return out


def mrr(got: Sequence[tuple[fc.Replayed, frozenset[str]]]) -> float:
    return 100 * statistics.fmean(next((1 / n for n, h in enumerate(r.hits[:10], 1) if h), 0.0) for r, _ in got)


def cells(got: Sequence[tuple[fc.Replayed, frozenset[str]]], bench: str) -> str:
    """hit@1 / R@10 on the chat sets; hit@1 / hit@10 / MRR@10 on the code sets (their benches' own)."""
    if not got:
        return "-"
    m = fc.metrics(list(got))
    if bench in ("code", "cosqa"):
        return f"{m['hit@1']:.1f} / {m['hit@10']:.1f} / {mrr(got):.1f}"
    return f"{m['hit@1']:.1f} / {m['recall@10']:.1f}"


HEADER = (
    "| {label} | LoCoMo hit@1 / R@10 | LongMemEval hit@1 / R@10 | code hit@1 / hit@10 / MRR@10 | "
    "CoSQA hit@1 / hit@10 / MRR@10 |\n|---|---|---|---|---|"
)


def table(r: Replay) -> list[str]:
    lines = [HEADER.format(label="rule 7 (every other rule as packaged)")]
    for key in (SEARCH, VSEARCH, QUERY):  # the mode alone, every rule
        row = [cells([(fill([r.step(key, q)]), r.evidence[q]) for q in r.questions.get(b, [])], b) for b in BENCHES]
        lines.append(f"| qmd `{key[4:]}` alone | " + " | ".join(row) + " |")
    for label, policy in policies().items():
        lines.append(f"| {label} | " + " | ".join(cells(replay(r, policy, b), b) for b in BENCHES) + " |")
    return lines


def lobo_table(r: Replay) -> list[str]:
    """The policies that act on a calibrated value, each bench with maps fitted on the others."""
    lines = [HEADER.format(label="maps fitted without the bench")]
    held_out = {}
    for bench in BENCHES:
        others = {k: {q: a for q, a in v.items() if q[0] != bench} for k, v in r.per_key.items()}
        others = {k: v for k, v in others.items() if any(a.hits for a in v.values())}
        held_out[bench] = r.recalibrated(Calibration({**r.calibration.models, **fc.fit(others)}, f"without {bench}"))
    for threshold in (fc.THRESHOLD, 0.5):
        chosen = policies(threshold)
        for label in list(chosen)[:1] + [k for k in chosen if k.startswith(("S:", "F:", "S + F"))]:
            if threshold != fc.THRESHOLD and label.startswith("packaged"):
                continue
            row = [cells(replay(held_out[b], chosen[label], b), b) for b in BENCHES]
            lines.append(
                f"| {label}{'' if threshold == fc.THRESHOLD else f' (at {threshold:g})'} | " + " | ".join(row) + " |"
            )
    return lines


def packaged_calibration() -> Calibration:
    """The shipped maps under the keys the records use (the vector modes' keys without the model)."""
    shipped = load_calibration("packaged")
    return Calibration({k.split(":all-MiniLM")[0]: m for k, m in shipped.models.items()}, shipped.source)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--records",
        type=Path,
        action="append",
        help="a bench's records folder (repeatable; default the four benches' records/ under the bench data)",
    )
    parser.add_argument("--lobo", action="store_true", help="add the leave-one-benchmark-out table")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    folders = args.records or [BENCH_DATA / f / "records" for f in FOLDERS]
    records = fc.read_alone_records(folders)
    if records is None:
        return 2
    r = Replay(records, packaged_calibration())
    lines = ["## Rule 7 replayed with the packaged maps (in-sample)", "", *table(r)]
    if args.lobo:
        lines += ["", "## Leave one benchmark out", "", *lobo_table(r)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
