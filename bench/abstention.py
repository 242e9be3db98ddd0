"""Abstention: what a relevance floor (``query --min-relevance``, the plugin's ``minRelevance``) does
to unanswerable and answerable questions, measured on the router records of the benches.

For each floor it prints, per bench and pooled:

* **unanswerable: no hits** -- of the questions whose answer is not in the memory (LoCoMo
  category 5, recorded by ``bench/locomo.py --adversarial``; LongMemEval's ``*_abs`` questions,
  recorded by ``bench/longmemeval.py --abstention``), the share left with no hit at or above the
  floor: the answer abstains, as it should;
* **answerable: keep hits** -- of the questions whose answer is there (categories 1-4; the other
  LongMemEval questions), the share that still get at least one hit;
* **keep a right hit** -- of the answerable questions with a hit holding the evidence in their
  top 10, the share that keep one such hit;
* **right top-1 survives** -- of the answerable questions whose first result holds the evidence,
  the share whose first result is at or above the floor.

The floor is applied as the router applies it (memory_router/core/trim.py): every hit under it is
dropped, and an answer with none left abstains. Records are read, never re-asked::

    python bench/abstention.py            # the default record folders below
    python bench/abstention.py --answerable locomo=DIR/router.jsonl --unanswerable locomo=...

Only development halves are read (the records come from the benches' development questions).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import fmt, parser, table

FLOORS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
DEFAULT_ANSWERABLE = {
    "locomo": Path("/work/data/abst/locomo/router.jsonl"),
    "longmemeval": Path("/work/data/abst/longmemeval/router.jsonl"),
}
DEFAULT_UNANSWERABLE = {
    "locomo": Path("/work/data/locomo/records-adversarial/router.jsonl"),
    "longmemeval": Path("/work/data/longmemeval/records-abstention/router.jsonl"),
}


def read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def unanswerable(record: dict[str, Any]) -> bool:
    return record.get("category") == 5 or str(record.get("qid", "")).endswith("_abs")


def kept(record: dict[str, Any], floor: float) -> list[dict[str, Any]]:
    """The hits a floor lets through (an error answer has none)."""
    if record.get("status") == "error":
        return []
    return [h for h in record.get("results") or [] if h["relevance"] >= floor]


def share(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else float("nan")


def measure(
    answerable: Sequence[dict[str, Any]], unanswerable: Sequence[dict[str, Any]], floor: float
) -> dict[str, Any]:
    """The four shares (%) at one floor, with the counts they are shares of."""
    silent = sum(1 for r in unanswerable if not kept(r, floor))
    keep = sum(1 for r in answerable if kept(r, floor))
    with_right = [r for r in answerable if any(h.get("hit") for h in (r.get("results") or [])[:10])]
    keep_right = sum(1 for r in with_right if any(h.get("hit") for h in kept(r, floor)[:10]))
    right_top = [r for r in answerable if r.get("results") and r["results"][0].get("hit")]
    top_kept = sum(1 for r in right_top if r["results"][0]["relevance"] >= floor)
    return {
        "floor": floor,
        "unanswerable_no_hits": share(silent, len(unanswerable)),
        "answerable_keep_hits": share(keep, len(answerable)),
        "keep_a_right_hit": share(keep_right, len(with_right)),
        "right_top1_survives": share(top_kept, len(right_top)),
        "counts": {
            "unanswerable": len(unanswerable),
            "answerable": len(answerable),
            "with_right_hit": len(with_right),
            "right_top1": len(right_top),
        },
    }


def rows(
    answerable: Sequence[dict[str, Any]], unanswerable: Sequence[dict[str, Any]], floors: Sequence[float]
) -> list[dict[str, Any]]:
    return [measure(answerable, unanswerable, f) for f in floors]


def print_table(title: str, measured: list[dict[str, Any]]) -> None:
    counts = measured[0]["counts"]
    table(
        title,
        ["min_relevance", "unanswerable: no hits", "answerable: keep hits", "keep a right hit", "right top-1 survives"],
        [
            [
                f"{m['floor']:g}",
                fmt(m["unanswerable_no_hits"]),
                fmt(m["answerable_keep_hits"]),
                fmt(m["keep_a_right_hit"]),
                fmt(m["right_top1_survives"]),
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
    report: dict[str, list[dict[str, Any]]] = {}
    pooled_a: list[dict[str, Any]] = []
    pooled_u: list[dict[str, Any]] = []
    for bench in benches:
        a = [r for r in read(answerable_files[bench]) if not unanswerable(r)]
        u = [r for r in read(unanswerable_files[bench]) if unanswerable(r)]
        pooled_a += a
        pooled_u += u
        report[bench] = rows(a, u, FLOORS)
        print_table(f"{bench}: a relevance floor on the router's answers (%)", report[bench])
    if len(benches) > 1:
        # Each question counts once: LoCoMo's larger sets weigh more, as in the pooled calibration.
        report["pooled"] = rows(pooled_a, pooled_u, FLOORS)
        print_table("pooled: a relevance floor on the router's answers (%)", report["pooled"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
