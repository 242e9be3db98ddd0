"""How well the one relevance the router acts on separates a right first result from a wrong one.

Reads the ``router`` records of real bench runs (bench/locomo.py, longmemeval.py, code_memory.py,
cosqa.py with ``--records DIR``) and prints, per bench:

* the separation of the answer's ``normalized_relevance`` (the calibrated P(the first result holds
  the evidence)): its AUC for "first result right" against "first result wrong";
* the status against the truth at a few thresholds (right first results that say ``success``,
  wrong ones that do not; the router's is 0.4);
* the AUC a relevance would need for the issue's target (90 % and 60 % at one threshold), under
  the usual binormal model: Phi((z(0.9) + z(0.6)) / sqrt 2) = 0.86;
* what one more feature would add, measured and not shipped: *agreement*, the largest share of the
  first result's content words that a result from another store in the top 10 also holds (two
  stores finding the same fact), refitted leave-one-bench-out beside the relevance's logit.

    python bench/status_truth.py .bench-data/after/{locomo,longmemeval,code,cosqa}

Gold labels never reach a feature: the bench's evidence ids (``[D1:3]``) are stripped from every
text before its words are counted.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import auc, fmt, table

from memory_router.backends.common.words import stem

THRESHOLDS = (0.3, 0.4, 0.5, 0.6)
TARGET_AUC = 0.86  # binormal: sensitivity 0.9 and specificity 0.6 at one threshold
_WORD = re.compile(r"[A-Za-z0-9]+")
_GOLD = re.compile(r"\[D\d+:\d+\]")
_STOP = frozenset(
    "the a an and or of to in on at for with is was are were be been i you he she it we they my your his her our "
    "their me him them this that what when where who how did do does have has had not no yes so but if about from "
    "by as".split()
)


def words(text: str) -> frozenset[str]:
    text = _GOLD.sub(" ", text)
    return frozenset(stem(w.lower()) for w in _WORD.findall(text) if len(w) > 2 and w.lower() not in _STOP)


def agreement(results: Sequence[dict[str, Any]]) -> float:
    """The largest share of the first result's words that a top-10 result of another store holds."""
    first = words(results[0]["content"])
    best = 0.0
    for other in results[1:10]:
        if other.get("source") == results[0].get("source"):
            continue
        theirs = words(other["content"])
        if first and theirs:
            best = max(best, len(first & theirs) / min(len(first), len(theirs)))
    return best


def read_answers(directory: Path) -> list[tuple[bool, float, float]]:
    """(first result right, normalized_relevance, agreement) per answered question."""
    rows = []
    for line in (directory / "router.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        results = record.get("results") or []
        if results:
            rows.append((bool(results[0].get("hit")), float(record["normalized_relevance"]), agreement(results)))
    return rows


def _logit(p: float) -> float:
    p = min(max(p, 1e-3), 1 - 1e-3)
    return math.log(p / (1 - p))


def fit(rows: Sequence[tuple[bool, float, float]], steps: int = 2000, rate: float = 0.5) -> tuple[float, float, float]:
    """Logistic weights (intercept, logit(relevance), agreement) by gradient descent (tiny L2)."""
    w = [0.0, 0.0, 0.0]
    for _ in range(steps):
        grad = [0.0, 0.0, 0.0]
        for right, relevance, agree in rows:
            x = (1.0, _logit(relevance), agree)
            p = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, x, strict=True))))
            for k in range(3):
                grad[k] += (p - right) * x[k]
        w = [w[k] - rate * (grad[k] / len(rows) + 1e-3 * w[k]) for k in range(3)]
    return w[0], w[1], w[2]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("records", nargs="+", type=Path, help="a bench's --records folder (holding router.jsonl)")
    args = p.parse_args(argv)
    benches = {d.name: read_answers(d) for d in args.records}
    rows = []
    for name, answers in benches.items():
        right = [a for a in answers if a[0]]
        wrong = [a for a in answers if not a[0]]
        cells: list[object] = [name, len(answers), fmt(100 * len(right) / len(answers))]
        cells.append(f"{auc([a[1] for a in right], [a[1] for a in wrong]):.3f}")
        for t in THRESHOLDS:
            say = 100 * sum(a[1] >= t for a in right) / len(right) if right else math.nan
            not_say = 100 * sum(a[1] < t for a in wrong) / len(wrong) if wrong else math.nan
            cells.append(f"{fmt(say, 0)} / {fmt(not_say, 0)}")
        rows.append(cells)
    headers = ["bench", "answers", "first right %", "AUC"] + [f"at {t}: right say / wrong do not" for t in THRESHOLDS]
    table(
        "How the relevance separates right first results from wrong ones (router records)",
        headers,
        rows,
        note=f"The target (90 / 60 at one threshold) needs an AUC of about {TARGET_AUC} (binormal).",
    )
    if len(benches) > 1:
        extra = []
        for held, answers in benches.items():
            w = fit([a for name, rows_ in benches.items() if name != held for a in rows_])
            score = [w[0] + w[1] * _logit(a[1]) + w[2] * a[2] for a in answers]
            right_scores = [s for s, a in zip(score, answers, strict=True) if a[0]]
            wrong_scores = [s for s, a in zip(score, answers, strict=True) if not a[0]]
            base = auc([a[1] for a in answers if a[0]], [a[1] for a in answers if not a[0]])
            extra.append([held, f"{base:.3f}", f"{auc(right_scores, wrong_scores):.3f}", f"{w[2]:+.2f}"])
        table(
            "Adding cross-store agreement (fitted on the other benches, measured on this one; not shipped)",
            ["held-out bench", "AUC relevance", "AUC relevance + agreement", "agreement weight"],
            extra,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
