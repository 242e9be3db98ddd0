"""Abstention: what a relevance floor (``query --min-relevance``, the plugin's ``minRelevance``) does
to unanswerable and answerable questions, measured on the router records of the benches.

The floor is applied as the router applies it (memory_router/core/trim.py): an answer whose best
hit is under it abstains (no hits); an answer that reaches it is kept whole. For each floor it
prints, per bench and pooled:

* **unanswerable: no hits** -- of the questions whose answer is not in the memory (LoCoMo
  category 5, recorded by ``bench/locomo.py --adversarial``; LongMemEval's ``*_abs`` questions,
  recorded by ``bench/longmemeval.py --abstention``), the share whose answer abstains, as it should;
* **answerable: keep hits** -- of the questions whose answer is there (categories 1-4; the other
  LongMemEval questions), the share whose answer is kept;
* **keep a right hit** -- of the answerable questions with a hit holding the evidence in their
  top 10, the share whose answer is kept;
* **right top-1 survives** -- of the answerable questions whose first result holds the evidence,
  the share whose answer is kept;
* **R@10** and **hit@1** -- the answerable questions' evidence recall@10 and hit@1 (the benches'
  own measures, ``bench/_locomo_score.py``), an abstaining answer counting 0: what an agent is
  left with;
* **R@10 hit by hit** -- the same recall had every hit under the floor been dropped one by one
  (the floor's meaning until the answer-level one): what the answer-level floor keeps.

Records are read, never re-asked::

    python bench/abstention.py            # the default record folders below
    python bench/abstention.py --answerable locomo=DIR/router.jsonl --unanswerable locomo=...

Only development halves are read (the records come from the benches' development questions).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import BENCH_DATA, fmt, parser, table

FLOORS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
# The plugin's default floor: the highest (in steps of 0.01) that costs the answerable questions at
# most this many points of evidence recall@10 on every bench. Keeping the evidence an agent needs
# comes first; the floor abstains where that costs (almost) nothing.
RECALL_TOLERANCE = 1.0
STEPS = tuple(i / 100 for i in range(101))
# Where bench/locomo.py and bench/longmemeval.py write their records by default (docs/abstention.md
# reports a run of 7f94fe8 through serve, the refitted calibration: pass its folders to repeat it).
DEFAULT_ANSWERABLE = {
    "locomo": BENCH_DATA / "locomo" / "records" / "router.jsonl",
    "longmemeval": BENCH_DATA / "longmemeval" / "records" / "router.jsonl",
}
DEFAULT_UNANSWERABLE = {
    "locomo": BENCH_DATA / "locomo" / "records-adversarial" / "router.jsonl",
    "longmemeval": BENCH_DATA / "longmemeval" / "records-abstention" / "router.jsonl",
}


def read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def unanswerable(record: dict[str, Any]) -> bool:
    return record.get("category") == 5 or str(record.get("qid", "")).endswith("_abs")


def hits(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's hits (an error answer has none)."""
    return [] if record.get("status") == "error" else list(record.get("results") or [])


def kept(record: dict[str, Any], floor: float) -> list[dict[str, Any]]:
    """The hits a floor lets through: all of them when the best reaches it, else none."""
    found = hits(record)
    return found if found and max(h["relevance"] for h in found) >= floor else []


def kept_hit_by_hit(record: dict[str, Any], floor: float) -> list[dict[str, Any]]:
    """The hits a per-hit floor would let through (each one under it dropped), for comparison."""
    return [h for h in hits(record) if h["relevance"] >= floor]


def recall_at_10(record: dict[str, Any], results: Sequence[dict[str, Any]]) -> float:
    """The share of the question's evidence ids among the labels of the first 10 results
    (``_locomo_score.recall_at``; LongMemEval's records carry the same ``evidence`` / ``dia_ids``)."""
    evidence = set(record.get("evidence") or ())
    if not evidence:
        return 0.0
    found = {i for h in results[:10] for i in h.get("dia_ids") or ()}
    return len(evidence & found) / len(evidence)


def share(part: float, whole: int) -> float:
    return 100.0 * part / whole if whole else float("nan")


def measure(
    answerable: Sequence[dict[str, Any]], unanswerable: Sequence[dict[str, Any]], floor: float
) -> dict[str, Any]:
    """The shares (%) at one floor, with the counts they are shares of."""
    silent = sum(1 for r in unanswerable if not kept(r, floor))
    keep = sum(1 for r in answerable if kept(r, floor))
    with_right = [r for r in answerable if any(h.get("hit") for h in (r.get("results") or [])[:10])]
    keep_right = sum(1 for r in with_right if kept(r, floor))
    right_top = [r for r in answerable if r.get("results") and r["results"][0].get("hit")]
    top_kept = sum(1 for r in right_top if kept(r, floor))
    n = len(answerable)
    return {
        "floor": floor,
        "unanswerable_no_hits": share(silent, len(unanswerable)),
        "answerable_keep_hits": share(keep, n),
        "keep_a_right_hit": share(keep_right, len(with_right)),
        "right_top1_survives": share(top_kept, len(right_top)),
        "recall@10": share(sum(recall_at_10(r, kept(r, floor)) for r in answerable), n),
        "hit@1": share(sum(1 for r in answerable if kept(r, floor)[:1] and kept(r, floor)[0].get("hit")), n),
        "recall@10_hit_by_hit": share(sum(recall_at_10(r, kept_hit_by_hit(r, floor)) for r in answerable), n),
        "counts": {
            "unanswerable": len(unanswerable),
            "answerable": n,
            "with_right_hit": len(with_right),
            "right_top1": len(right_top),
        },
    }


def rows(
    answerable: Sequence[dict[str, Any]], unanswerable: Sequence[dict[str, Any]], floors: Sequence[float]
) -> list[dict[str, Any]]:
    return [measure(answerable, unanswerable, f) for f in floors]


def recall(answerable: Sequence[dict[str, Any]], floor: float) -> float:
    return share(sum(recall_at_10(r, kept(r, floor)) for r in answerable), len(answerable))


def choose(answerable: Mapping[str, Sequence[dict[str, Any]]], tolerance: float = RECALL_TOLERANCE) -> dict[str, Any]:
    """The highest floor (``STEPS``) whose evidence recall@10 is within ``tolerance`` points of no
    floor's on every bench, with each bench's recall there and without a floor. Raising an
    answer-level floor only ever removes answers, so recall never rises with it: the scan stops at
    the first floor that costs too much."""
    unfloored = {bench: recall(records, 0.0) for bench, records in answerable.items()}
    chosen = 0.0
    for floor in STEPS:
        if any(recall(records, floor) < unfloored[bench] - tolerance for bench, records in answerable.items()):
            break
        chosen = floor
    return {
        "floor": chosen,
        "tolerance": tolerance,
        "recall@10": {bench: recall(records, chosen) for bench, records in answerable.items()},
        "recall@10_no_floor": unfloored,
    }


def print_table(title: str, measured: list[dict[str, Any]]) -> None:
    counts = measured[0]["counts"]
    table(
        title,
        [
            "min_relevance",
            "unanswerable: no hits",
            "answerable: keep hits",
            "keep a right hit",
            "right top-1 survives",
            "R@10",
            "hit@1",
            "R@10 hit by hit",
        ],
        [
            [
                f"{m['floor']:g}",
                fmt(m["unanswerable_no_hits"]),
                fmt(m["answerable_keep_hits"]),
                fmt(m["keep_a_right_hit"]),
                fmt(m["right_top1_survives"]),
                fmt(m["recall@10"]),
                fmt(m["hit@1"]),
                fmt(m["recall@10_hit_by_hit"]),
            ]
            for m in measured
        ],
        note=f"questions: {counts['unanswerable']} unanswerable, {counts['answerable']} answerable "
        f"({counts['with_right_hit']} with a right hit in the top 10, {counts['right_top1']} with a right top-1)",
    )


def pairs(items: Sequence[str] | None, default: dict[str, Path]) -> dict[str, Path]:
    if not items:
        return dict(default)
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"expected BENCH=PATH, got {item!r}")
        out[name] = Path(path)
    return out


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--answerable", action="append", help="BENCH=router.jsonl of the answerable questions")
    p.add_argument("--unanswerable", action="append", help="BENCH=router.jsonl of the unanswerable questions")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    p.add_argument(
        "--recall-tolerance",
        type=float,
        default=RECALL_TOLERANCE,
        help=f"points of evidence recall@10 the chosen floor may cost on any bench (default {RECALL_TOLERANCE:g})",
    )
    return p.parse_args()


def main() -> int:
    args = options()
    answerable_files = pairs(args.answerable, DEFAULT_ANSWERABLE)
    unanswerable_files = pairs(args.unanswerable, DEFAULT_UNANSWERABLE)
    benches = [b for b in answerable_files if b in unanswerable_files]
    missing = [str(p) for b in benches for p in (answerable_files[b], unanswerable_files[b]) if not p.is_file()]
    if not benches or missing:
        print(f"records not found ({', '.join(missing) or 'no bench has both kinds'}); nothing measured.")
        return 0
    report: dict[str, Any] = {}
    answerable_of = {b: [r for r in read(answerable_files[b]) if not unanswerable(r)] for b in benches}
    unanswerable_of = {b: [r for r in read(unanswerable_files[b]) if unanswerable(r)] for b in benches}
    choice = choose(answerable_of, args.recall_tolerance)
    floors = sorted({*FLOORS, choice["floor"]})  # the chosen floor's row too
    for bench in benches:
        report[bench] = rows(answerable_of[bench], unanswerable_of[bench], floors)
        print_table(f"{bench}: a relevance floor on the router's answers (%)", report[bench])
    if len(benches) > 1:
        # Each question counts once: LoCoMo's larger sets weigh more, as in the pooled calibration.
        pooled_a = [r for b in benches for r in answerable_of[b]]
        pooled_u = [r for b in benches for r in unanswerable_of[b]]
        report["pooled"] = rows(pooled_a, pooled_u, floors)
        print_table("pooled: a relevance floor on the router's answers (%)", report["pooled"])
    report["choice"] = choice
    kept_recall = ", ".join(
        f"{b} {fmt(choice['recall@10'][b])} of {fmt(choice['recall@10_no_floor'][b])}" for b in benches
    )
    print(
        f"\nthe highest floor that keeps evidence recall@10 within {choice['tolerance']:g} point(s) of no floor's "
        f"on every bench: {choice['floor']:g} (R@10 {kept_recall})"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
