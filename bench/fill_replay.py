"""How ``fill`` merges two stores' results, replayed offline over the chat benches' recorded answers.

    python bench/fill_replay.py [--records DIR ...] [--router DIR ...] [--markdown FILE]

The question (issue 29): on LongMemEval the packaged router's turn R@10 (86.6) trails Lossless
alone (88.0), because ``fill`` gives some of its ten slots to Total Recall's session notes. Is
there a way of ordering or interleaving the stores' results after the first one, or of limiting
how many slots a store's weak results take, that reaches 88.0 there without lowering hit@1, and
without lowering LoCoMo's hit@1, R@10 or hit@10?

Input: the ``alone:*`` records of ``bench/locomo.py`` and ``bench/longmemeval.py`` (each store
alone, native relevance, every result with its text and the labels its bench gave it). Each
question is replayed through its rule's packaged chain: every step's recorded answer calibrated
with the packaged maps, the sequential walk's winner giving the first result (so hit@1 is the
packaged router's by construction), and a policy filling the other nine. The policies call the
core's own merge (:mod:`memory_router.core.fuse`: weighted RRF, duplicates, quotes folded), so the
packaged row is the shipped code, not a copy of it. ``--router DIR`` compares that row with the
router's recorded run (a folder holding ``router.jsonl``): how many questions get the same labels.

Output: a markdown table (docs/calibration.md, *How fill merges two stores*). Exit 2 when no
record folder holds ``alone:*`` records.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fit_calibration as fc  # noqa: E402
import orjson  # noqa: E402
from _common import BENCH_DATA  # noqa: E402
from rule7_replay import packaged_calibration  # noqa: E402

from memory_router.backends.base import BackendResponse, Result  # noqa: E402
from memory_router.core import fuse  # noqa: E402
from memory_router.core.calibration import Calibration  # noqa: E402

BENCHES = ("locomo", "longmemeval")
LIMIT = 10
TAG = "replay_tag"  # the extra key that leads a merged result back to its recorded labels
# The extra key holding the sessions a result's labels name ("s7" of "s7:t2", "D1" of "D1:3"): what
# a note's "Session ID" line and lossless-claw's conversation row could tell the router at best.
SESSIONS = "replay_sessions"
LOSSLESS = "lossless"


class Answer(NamedTuple):
    """One step's calibrated answer, in the shape the core's merge reads (``.response.results``)."""

    key: str
    response: BackendResponse


class Labels(NamedTuple):
    ids: frozenset[str]
    hit: bool


class Replay(fc.Recorded):
    """Every store's recorded answers, calibrated with one calibration (None: their native
    relevance), each result labelled by its tag."""

    def __init__(self, records: dict[str, list[dict[str, Any]]], calibration: Calibration | None) -> None:
        super().__init__(records)
        self.rows: dict[tuple[str, fc.QKey], list[dict[str, Any]]] = {}
        for variant, key in fc.ALONE_KEYS.items():
            for row in records.get(variant, []):
                self.rows[(key, (fc.bench_of(row), str(row["conv"]), str(row["qid"])))] = row.get("results") or []
        self.calibration = calibration
        self.labels: dict[str, Labels] = {}

    def answer(self, key: str, q: fc.QKey) -> Answer | None:
        """``key``'s calibrated answer to ``q``, each result tagged; None when it answered nothing."""
        a = self.per_key.get(key, {}).get(q)
        if a is None or not a.hits:
            return None
        response = fc.calibrated(self.calibration, key, a)
        results = []
        for n, (hit, row) in enumerate(zip(response.results, self.rows[(key, q)], strict=False)):
            tag = f"{key}|{'|'.join(q)}|{n}"
            self.labels[tag] = Labels(frozenset(row.get("dia_ids") or ()), bool(row["hit"]))
            extra = {k: row[k] for k in ("path", "line", "start_line") if row.get(k) is not None}
            extra[SESSIONS] = frozenset(str(i).split(":")[0] for i in row.get("dia_ids") or ())
            results.append(Result(hit.content, hit.relevance, hit.source, None, **extra, **{TAG: tag}))
        return Answer(key, response.replace(results=results))

    def answers(self, q: fc.QKey, chain: Sequence[str]) -> list[Answer]:
        return [a for a in (self.answer(k, q) for k in chain) if a is not None]

    def scored(self, results: Sequence[Result]) -> fc.Replayed:
        labels = [self.labels[str(r.extra[TAG])] for r in results]
        return fc.Replayed(tuple(x.ids for x in labels), tuple(x.hit for x in labels))


def walk(answers: Sequence[Answer]) -> Answer | None:
    """The sequential decision: the first answer reaching the threshold, else the most relevant
    (the earliest wins a tie)."""
    if not answers:
        return None
    best = max(answers, key=lambda a: a.response.normalized_relevance)
    return next((a for a in answers if a.response.normalized_relevance >= fc.THRESHOLD), best)


# --------------------------------------------------------------------------- policies
# Each takes the walk's first result, every step's answer (chain order) and the winner, and
# returns the ten results. All but the packaged one reorder the fused list (each result once,
# its best copy, ``also_from`` kept) and cut it with the core's quote folding.

Policy = Callable[[Result, Sequence[Answer], Answer], list[Result]]
Merged = list[tuple[Any, Result]]  # (identity, result) in fused order, the head left out


def _rest(head: Result, answers: Sequence[Answer], k: int = fuse.RRF_K, weighted: bool = True) -> Merged:
    """The weighted (or plain) RRF of ``answers`` with constant ``k``, ``head`` left out."""
    scores: dict[Any, float] = defaultdict(float)
    best: dict[Any, Result] = {}
    for a in answers:
        for rank, hit in enumerate(a.response.results, start=1):
            key = fuse._identity(hit)
            scores[key] += (hit.relevance if weighted else 1.0) / (k + rank)
            if key not in best or hit.relevance > best[key].relevance:
                best[key] = hit
    first = fuse._identity(head)
    order = sorted(scores, key=lambda key: (-scores[key], -best[key].relevance))
    return [(key, best[key]) for key in order if key != first]


def _cut(head: Result, rest: Sequence[Result]) -> list[Result]:
    return fuse._distinct([head, *rest], LIMIT)


def packaged(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
    return fuse.fill_results(head, answers, LIMIT)  # type: ignore[arg-type]  # duck-typed attempts


def rrf(k: int, weighted: bool = True) -> Policy:
    return lambda head, answers, win: _cut(head, [h for _, h in _rest(head, answers, k, weighted)])


def strong_first(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
    """Every result reaching the threshold (fused order), then the rest (fused order)."""
    rest = [h for _, h in _rest(head, answers)]
    return _cut(head, sorted(rest, key=lambda h: h.relevance < fc.THRESHOLD))


def by_relevance(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
    return _cut(head, sorted((h for _, h in _rest(head, answers)), key=lambda h: -h.relevance))


def _positions(answers: Sequence[Answer], by_rank: bool) -> dict[Any, tuple[int, int]]:
    """Each result's earliest place in the steps' answers: (rank, step) when the lists are read
    round robin (``by_rank``), else (step, rank): one step's list after the other."""
    out: dict[Any, tuple[int, int]] = {}
    for step, a in enumerate(answers):
        for rank, hit in enumerate(a.response.results):
            place = (rank, step) if by_rank else (step, rank)
            key = fuse._identity(hit)
            out[key] = min(out.get(key, place), place)
    return out


def interleaved(winner_first: bool) -> Policy:
    """Round robin by rank over the steps (chain order, or the winner's step first)."""

    def policy(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
        order = [win, *(a for a in answers if a is not win)] if winner_first else list(answers)
        pos = _positions(order, by_rank=True)
        rest = _rest(head, answers)
        return _cut(head, [h for _, h in sorted(rest, key=lambda kh: pos[kh[0]])])

    return policy


def weak_tail(order: str) -> Policy:
    """Results reaching the threshold in fused order, then the weak ones: round robin by rank
    (``rank``), each step's in turn in chain order (``chain``), or the winner's step first."""

    def policy(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
        steps = [win, *(a for a in answers if a is not win)] if order == "winner" else list(answers)
        pos = _positions(steps, by_rank=order == "rank")
        rest = _rest(head, answers)
        strong = [h for _, h in rest if h.relevance >= fc.THRESHOLD]
        weak = [kh for kh in rest if kh[1].relevance < fc.THRESHOLD]
        weak.sort(key=lambda kh: pos[kh[0]])
        return _cut(head, [*strong, *(h for _, h in weak)])

    return policy


def answer_weighted(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
    """RRF with each vote weighted by its answer's first relevance (trust a store's whole list)."""
    scored = [
        Answer(
            a.key,
            a.response.replace(
                results=[h.derived(a.response.results[0].relevance, h.extra) for h in a.response.results]
            ),
        )
        for a in answers
    ]
    merged = {key: hit for key, hit in _rest(head, answers)}  # the best copies, at their own relevance
    return _cut(head, [merged[key] for key, _ in _rest(head, scored) if key in merged])


def weak_cap(n: int) -> Policy:
    """Each store's weak results take at most ``n`` slots before every other result is listed."""

    def policy(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
        counted: dict[str, int] = defaultdict(int)
        now, later = [], []
        for _, hit in _rest(head, answers):
            if hit.relevance < fc.THRESHOLD:
                counted[hit.source] += 1
                if counted[hit.source] > n:
                    later.append(hit)
                    continue
            now.append(hit)
        return _cut(head, [*now, *later])

    return policy


def _quoted_lines(text: str) -> list[str]:
    """A note's transcript lines as the turns they quote (``role: "..."`` read as the text)."""
    out = []
    for line in fuse._as_shown(text).split("\n"):
        line = line.strip()
        for role in ("user: ", "assistant: "):
            line = line.removeprefix(role)
        line = line.strip('"').strip()
        if line:
            out.append(line)
    return out


def adds_evidence(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
    """A result of several lines that adds nothing: every line it shows is inside another store's
    result above it, or holds one (a note whose turns are all listed already), gives its slot up."""
    kept: list[Result] = []
    for hit in [head, *(h for _, h in _rest(head, answers))]:
        lines = _quoted_lines(hit.content)
        above = [fuse._as_shown(k.content) for k in kept if k.source != hit.source]
        if len(lines) >= 2 and all(any(q in a or a.strip() in q for a in above) for q in lines):
            continue
        kept.append(hit)
    return _cut(head, kept[1:])


def session_listed(only_notes: bool) -> Policy:
    """A weak result (a weak note, ``only_notes``) whose sessions another store's result above it
    already lists gives its slot up (moves after the rest): a session's note repeats its last turns.
    The sessions come from the bench's labels, so this is the most the router could get from
    pairing a note's "Session ID" line with lossless-claw's conversations, not a shipped signal."""

    def policy(head: Result, answers: Sequence[Answer], win: Answer) -> list[Result]:
        kept, later = [head], []
        for _, hit in _rest(head, answers):
            mine = hit.extra[SESSIONS]
            weak = hit.relevance < fc.THRESHOLD and (not only_notes or hit.source == "totalrecall")
            if weak and mine and any(mine <= k.extra[SESSIONS] for k in kept if k.source != hit.source):
                later.append(hit)
            else:
                kept.append(hit)
        return _cut(head, [*kept[1:], *later])

    return policy


POLICIES: dict[str, Policy] = {
    "packaged `fill` (weighted RRF, K = 60)": packaged,
    "results reaching 0.4 first, then the rest (fused order in each)": strong_first,
    "calibrated relevance order (no RRF)": by_relevance,
    "plain RRF (unweighted)": rrf(fuse.RRF_K, weighted=False),
    "weighted RRF, K = 5": rrf(5),
    "weighted RRF, K = 20": rrf(20),
    "interleaved by rank, chain order": interleaved(False),
    "interleaved by rank, the winner's step first": interleaved(True),
    "results under 0.4 after the rest, interleaved by rank": weak_tail("rank"),
    "results under 0.4 after the rest, step by step in chain order": weak_tail("chain"),
    "results under 0.4 after the rest, the winner's step first": weak_tail("winner"),
    "RRF weighted by each answer's first relevance": answer_weighted,
    "each store's results under 0.4: at most 3 before the others' rest": weak_cap(3),
    "each store's results under 0.4: at most 5 before the others' rest": weak_cap(5),
    "a note whose every line the results above show gives its slot up": adds_evidence,
    "a weak note from a session another store's result above lists gives its slot up": session_listed(True),
    "any weak result from a session another store's result above lists gives its slot up": session_listed(False),
}


# --------------------------------------------------------------------------- replay and scoring


def replay(
    r: Replay, bench: str, policy: Policy, fill_lossless: bool = False, lossless_last: frozenset[str] = frozenset()
) -> list[tuple[fc.Replayed, frozenset[str]]]:
    """Every question of ``bench`` through its rule's packaged chain; ``fill_lossless``: Lossless's
    answer merged into the rest where the chain does not ask it (never the walk's winner);
    ``lossless_last``: the rules (ids) whose chain gets Lossless as an ordinary last step."""
    out = []
    for q in r.questions.get(bench, []):
        rule = r.rule.get(q, "default")
        chain = fc.chain_for(rule, True)
        if rule in lossless_last and LOSSLESS not in chain:
            chain = [*chain, LOSSLESS]
        answers = r.answers(q, chain)
        win = walk(answers)
        if win is None:
            out.append((fc.NOTHING, r.evidence[q]))
            continue
        if fill_lossless and LOSSLESS not in chain:
            answers = [*answers, *r.answers(q, [LOSSLESS])]
        out.append((r.scored(policy(win.response.results[0], answers, win)), r.evidence[q]))
    return out


def ceiling(r: Replay, bench: str) -> float:
    """R@10 if the nine slots after the walk's first result took the chain's results that add the
    most evidence (greedy): what no order of these answers can beat."""
    values = []
    for q in r.questions.get(bench, []):
        ev = r.evidence[q]
        answers = r.answers(q, fc.chain_for(r.rule.get(q, "default"), True))
        win = walk(answers)
        if win is None or not ev:
            values.append(0.0)
            continue
        pool = [r.labels[str(h.extra[TAG])].ids & ev for a in answers for h in a.response.results]
        got = set(r.labels[str(win.response.results[0].extra[TAG])].ids & ev)
        for _ in range(LIMIT - 1):
            got |= max(pool, key=lambda ids: len(ids - got), default=frozenset())
        values.append(len(got) / len(ev))
    return 100 * statistics.fmean(values) if values else 0.0


def cells(got: Sequence[tuple[fc.Replayed, frozenset[str]]]) -> str:
    if not got:
        return "-"
    m = fc.metrics(list(got))
    return f"{m['hit@1']:.1f} / {m['recall@10']:.2f} / {m['hit@10']:.1f}"


def same_as_recorded(r: Replay, folder: Path) -> list[str]:
    """Per bench the router's recorded run in ``folder`` holds: how many questions the packaged
    row gives the labels that run gave (its first ten results' evidence ids, in order)."""
    path = folder / "router.jsonl"
    recorded: dict[fc.QKey, tuple[frozenset[str], ...]] = {}
    for line in path.read_bytes().splitlines():
        row = orjson.loads(line)
        key = (fc.bench_of(row), str(row["conv"]), str(row["qid"]))
        recorded[key] = tuple(frozenset(x.get("dia_ids") or ()) for x in row.get("results") or [])
    out = []
    for bench in BENCHES:
        questions = [q for q in r.questions.get(bench, []) if q in recorded]
        if questions:
            got = replay(r, bench, packaged)
            same = sum(1 for q, (g, _) in zip(r.questions[bench], got, strict=True) if recorded.get(q) == g.dia_ids)
            out.append(f"{bench}: the packaged row gives {same} of {len(questions)} questions the labels of {path}")
    return out


def table(r: Replay) -> list[str]:
    lines = [
        "| after the walk's first result | LoCoMo hit@1 / R@10 / hit@10 | LongMemEval hit@1 / R@10 / hit@10 |",
        "|---|---|---|",
    ]
    alone = {
        b: cells(
            [
                (fc.Replayed(a.dia_ids, a.hits), r.evidence[q])
                for q in r.questions.get(b, [])
                if (a := r.per_key[LOSSLESS].get(q))
            ]
        )
        for b in BENCHES
    }
    lines.append(f"| Lossless alone (recorded) | {alone['locomo']} | {alone['longmemeval']} |")
    for label, policy in POLICIES.items():
        lines.append(f"| {label} | " + " | ".join(cells(replay(r, b, policy)) for b in BENCHES) + " |")
    lines.append(
        "| the most evidence any order of these answers could list (R@10) | "
        + " | ".join(f"- / {ceiling(r, b):.2f} / -" for b in BENCHES)
        + " |"
    )
    for label in ("packaged `fill` (weighted RRF, K = 60)", "weighted RRF, K = 20"):
        row = " | ".join(cells(replay(r, b, POLICIES[label], fill_lossless=True)) for b in BENCHES)
        lines.append(f"| chain change: Lossless fills every rule that does not ask it; {label} | {row} |")
    # One rule at a time: Lossless as the last step of a packaged chain that does not ask it.
    for rule in fc.RULES.rules:
        if LOSSLESS not in fc.chain_for(rule.id, True):
            row = " | ".join(cells(replay(r, b, packaged, lossless_last=frozenset({rule.id}))) for b in BENCHES)
            lines.append(f"| chain change: Lossless last in rule {rule.number} ({rule.id}) | {row} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--records",
        type=Path,
        action="append",
        help="a chat bench's records folder (repeatable; default: the records/ of both)",
    )
    parser.add_argument(
        "--router",
        type=Path,
        action="append",
        default=[],
        help="a folder with a router.jsonl to compare the packaged row with (repeatable)",
    )
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    folders = args.records or [BENCH_DATA / b / "records" for b in BENCHES]
    records = fc.read_alone_records(folders)
    if records is None:
        return 2
    r = Replay(records, packaged_calibration())
    lines = table(r)
    for folder in args.router:
        lines += ["", *same_as_recorded(r, folder)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
