"""Fit the relevance calibration (memory_router/calibration.json) from LoCoMo bench records.

Input: the records ``bench/locomo.py`` writes (one JSON line per variant and question), from the
development half only. The ``alone:*`` variants ran each backend and mode alone with
``"calibration": "off"``, so their results carry the backends' native relevance; each result is
labelled ``hit`` when it holds one of the question's evidence turns.

For each calibration key (``qmd:search``, ``qmd:vsearch``, ``qmd:query``, ``totalrecall``,
``lossless``) a logistic model of ``hit`` over (native relevance, query-term coverage, 1/rank) is
fitted by Newton's method (IRLS) with the native and coverage weights held non-negative (a negative
one is pinned at 0 and the rest refitted), so the calibrated value is monotone in both. ``default``
is fitted on all keys pooled. The script prints, per key, the calibration table before and after
(relevance bucket -> share of answers, hit@1 and hit@10 of the answers in the bucket), then a
replay of the router's decision rule over the recorded answers (sequential fallback with the
spec's table or the extended one, native or calibrated, and the fused strategy) so that a change
to the maps can be judged before the full bench runs it for real.

    python bench/fit_calibration.py --records /work/data/locomo/records [--write memory_router/calibration.json]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memory_router.calibration import FEATURES, FORMAT, Model, coverage, query_terms  # noqa: E402

BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)
ALONE_KEYS = {
    "alone:qmd:search": "qmd:search",
    "alone:qmd:vsearch": "qmd:vsearch",
    "alone:qmd:query": "qmd:query",
    "alone:totalrecall": "totalrecall",
    "alone:lossless": "lossless",
}
THRESHOLD = 0.4


class Answer(NamedTuple):
    """One backend's recorded answer to one question."""

    question: tuple[str, int]
    evidence: frozenset[str]
    natives: tuple[float, ...]
    features: tuple[tuple[float, float, float], ...]
    hits: tuple[bool, ...]
    dia_ids: tuple[frozenset[str], ...]
    status: str


def read_records(directory: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        if rows:
            out[rows[0]["variant"]] = rows
    return out


def answers(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, int], Answer]:
    out = {}
    for row in rows:
        terms = query_terms(row["question"])
        results = row.get("results") or []
        feats = tuple(
            (float(r["relevance"]), coverage(terms, r.get("content") or ""), 1.0 / (i + 1)) for i, r in enumerate(results)
        )
        key = (str(row["conv"]), str(row["qid"]))
        out[key] = Answer(
            key,
            frozenset(row["evidence"]),
            tuple(float(r["relevance"]) for r in results),
            feats,
            tuple(bool(r["hit"]) for r in results),
            tuple(frozenset(r.get("dia_ids") or ()) for r in results),
            row.get("status") or "error",
        )
    return out


# ---------------------------------------------------------------------------- fitting


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (4x4 at most)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-12:
            m[col][col] = 1e-12
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_logistic(xs: Sequence[Sequence[float]], ys: Sequence[bool], free: Sequence[bool], ridge: float = 1e-3) -> list[float]:
    """Weights [intercept, *features] by IRLS; a feature with ``free`` False is held at 0."""
    k = 1 + len(free)
    active = [0] + [i + 1 for i, f in enumerate(free) if f]
    w = [0.0] * k
    for _ in range(50):
        grad = [0.0] * len(active)
        hess = [[0.0] * len(active) for _ in active]
        for x, y in zip(xs, ys, strict=True):
            row = (1.0, *x)
            z = sum(w[j] * row[j] for j in range(k))
            p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
            g = p - (1.0 if y else 0.0)
            s = p * (1 - p)
            for a, ja in enumerate(active):
                grad[a] += g * row[ja]
                for b, jb in enumerate(active):
                    hess[a][b] += s * row[ja] * row[jb]
        for a in range(len(active)):
            hess[a][a] += ridge * len(xs)
            grad[a] += ridge * len(xs) * w[active[a]]
        step = _solve(hess, grad)
        for a, ja in enumerate(active):
            w[ja] -= step[a]
        if max(abs(s) for s in step) < 1e-7:
            break
    return w


def fit_key(samples: list[tuple[tuple[float, float, float], bool]]) -> Model:
    xs = [s[0] for s in samples]
    ys = [s[1] for s in samples]
    free = [True, True, True]
    while True:
        w = fit_logistic(xs, ys, free)
        negative = [i for i in (0, 1) if free[i] and w[i + 1] < 0]  # native, coverage must be >= 0
        if not negative:
            return Model(*(round(v, 4) for v in w))
        for i in negative:
            free[i] = False


def samples_of(answers_: Iterable[Answer]) -> list[tuple[tuple[float, float, float], bool]]:
    return [(f, h) for a in answers_ for f, h in zip(a.features, a.hits, strict=True)]


def calibrated(model: Model | None, answer: Answer) -> tuple[float, ...]:
    if model is None:
        return answer.natives
    out, cap = [], 1.0
    for native, cov, rank in answer.features:
        cap = min(cap, model(native, cov, rank))
        out.append(cap)
    return tuple(out)


# ---------------------------------------------------------------------------- reporting


def bucket_of(value: float) -> int:
    return next(i for i in range(len(BUCKETS) - 1) if value < BUCKETS[i + 1])


def table(answers_: Iterable[Answer], model: Model | None) -> list[tuple[str, int, float, float]]:
    """(bucket, share %, hit@1 %, hit@10 %) of the answers with results."""
    groups: dict[int, list[Answer]] = defaultdict(list)
    total = 0
    for a in answers_:
        if not a.hits:
            continue
        total += 1
        groups[bucket_of(calibrated(model, a)[0])].append(a)
    rows = []
    for i in range(len(BUCKETS) - 1):
        g = groups.get(i, [])
        label = f"[{BUCKETS[i]:.1f},{min(BUCKETS[i + 1], 1.0):.1f})"
        if not g:
            rows.append((label, 0, float("nan"), float("nan")))
            continue
        rows.append(
            (
                label,
                round(100 * len(g) / max(total, 1)),
                100 * sum(a.hits[0] for a in g) / len(g),
                100 * sum(any(a.hits[:10]) for a in g) / len(g),
            )
        )
    return rows


def print_table(name: str, answers_: list[Answer], model: Model | None, label: str) -> None:
    print(f"  {label:<10} bucket       share  hit@1  hit@10")
    for bucket, share, h1, h10 in table(answers_, model):
        print(f"  {'':<10} {bucket:<12} {share:>4}%  {h1:5.1f}  {h10:5.1f}")


# ---------------------------------------------------------------------------- replay


class Replayed(NamedTuple):
    dia_ids: tuple[frozenset[str], ...]
    hits: tuple[bool, ...]


def answer_value(values: Sequence[float], how: str = "top1") -> float:
    if how == "top1":
        return values[0]
    miss = 1.0
    for v in values[: int(how.removeprefix("noisyor"))]:
        miss *= 1 - v
    return 1 - miss


def replay_sequential(
    chain: Sequence[str], per_key: dict[str, dict], models: dict[str, Model | None], q: tuple, how: str = "top1"
) -> Replayed:
    tried = []
    for key in chain:
        a = per_key.get(key, {}).get(q)
        if a is None or not a.hits:
            continue
        values = calibrated(models.get(key), a)
        value = answer_value(values, how if models.get(key) is not None else "top1")
        tried.append((value, a))
        if value >= THRESHOLD:
            return Replayed(a.dia_ids, a.hits)
    if not tried:
        return Replayed((), ())
    best = max(tried, key=lambda t: t[0])[1]  # the earliest wins a tie
    return Replayed(best.dia_ids, best.hits)


def replay_fused(
    chain: Sequence[str],
    per_key: dict[str, dict],
    q: tuple,
    k: int = 60,
    limit: int = 10,
    models: dict[str, Model | None] | None = None,
) -> Replayed:
    """RRF over the chain's answers; with ``models``, each vote is weighted by the calibrated relevance."""
    scores: dict[Any, float] = defaultdict(float)
    info: dict[Any, tuple[frozenset[str], bool]] = {}
    for key in chain:
        a = per_key.get(key, {}).get(q)
        if a is None:
            continue
        weights = calibrated(models.get(key), a) if models else (1.0,) * len(a.hits)
        for rank, (ids, hit, weight) in enumerate(zip(a.dia_ids, a.hits, weights, strict=True), start=1):
            ident = (key, rank) if not ids else ids
            scores[ident] += weight / (k + rank)
            info[ident] = (ids, hit)
    order = sorted(scores, key=lambda i: -scores[i])[:limit]
    return Replayed(tuple(info[i][0] for i in order), tuple(info[i][1] for i in order))


def metrics(replays: list[tuple[Replayed, frozenset[str]]]) -> dict[str, float]:
    n = max(len(replays), 1)
    out = {}
    for k in (1, 5, 10):
        out[f"hit@{k}"] = 100 * sum(any(r.hits[:k]) for r, _ in replays) / n
    for k in (5, 10):
        out[f"recall@{k}"] = 100 * statistics.fmean(
            len(ev & frozenset().union(*r.dia_ids[:k])) / len(ev) if ev else 0.0 for r, ev in replays
        )
    return out


SPEC_CHAINS = {
    "exact_symbol": ["qmd:search", "totalrecall"],
    "relationship": ["qmd:vsearch", "totalrecall"],  # cognee is not in this tier
    "decision_recall": ["lossless", "totalrecall", "qmd:search"],
    "concept": ["qmd:vsearch", "qmd:query", "totalrecall"],
    "recent_context": ["totalrecall", "qmd:search"],
    "file_path": ["qmd:search", "totalrecall"],
    "default": ["qmd:query", "totalrecall"],
}
EXTENSIONS = {"default": ["lossless"]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=Path, default=Path("/work/data/locomo/records"))
    parser.add_argument("--write", type=Path, help="write the fitted maps to this calibration file")
    parser.add_argument("--extend", default=None, help='JSON {"rule_id": ["key", ...]} of extension steps to replay')
    args = parser.parse_args(argv)

    records = read_records(args.records)
    per_key = {key: answers(records[variant]) for variant, key in ALONE_KEYS.items() if variant in records}
    if not per_key:
        print(f"no alone:* records under {args.records}", file=sys.stderr)
        return 2
    models: dict[str, Model | None] = {}
    for key, recorded in per_key.items():
        models[key] = fit_key(samples_of(recorded.values()))
    pooled = fit_key([s for recorded in per_key.values() for s in samples_of(recorded.values())])
    print(f"calibration fitted on {', '.join(f'{k} ({len(v)})' for k, v in per_key.items())}")
    for key, recorded in per_key.items():
        print(f"\n{key}: model {dict(zip(('intercept', *FEATURES), models[key], strict=True))}")
        print_table(key, list(recorded.values()), None, "native")
        print_table(key, list(recorded.values()), models[key], "calibrated")

    extensions = orjson.loads(args.extend) if args.extend else EXTENSIONS
    rule_of = {}
    for variant in ("router", "router:spec"):
        for row in records.get(variant, []):
            rule = row.get("rule")
            rule_of[(str(row["conv"]), str(row["qid"]))] = rule.get("id") if isinstance(rule, dict) else rule
    questions = sorted(set().union(*(set(v) for v in per_key.values())))
    evidence = {q: a.evidence for v in per_key.values() for q, a in v.items()}
    native: dict[str, Model | None] = {k: None for k in per_key}
    print(f"\nreplay over {len(questions)} questions (rules from the router records: {len(rule_of)})")
    rows = []
    for key in per_key:
        rows.append((f"{key} alone", [(replay_sequential([key], per_key, native, q), evidence[q]) for q in questions]))
    if "bm25" in records:
        bm25 = answers(records["bm25"])
        rows.append(("bm25 alone", [(Replayed(bm25[q].dia_ids, bm25[q].hits), evidence[q]) for q in questions if q in bm25]))
    for label, ext, used, how in (
        ("spec table, native", False, native, "top1"),
        ("spec table, calibrated", False, models, "top1"),
        ("spec, calibrated noisyor3", False, models, "noisyor3"),
        ("extended, native", True, native, "top1"),
        ("extended, calibrated", True, models, "top1"),
        ("extended, cal. noisyor2", True, models, "noisyor2"),
        ("extended, cal. noisyor3", True, models, "noisyor3"),
        ("extended, cal. noisyor5", True, models, "noisyor5"),
    ):
        out = []
        for q in questions:
            rule = rule_of.get(q, "default")
            chain = SPEC_CHAINS.get(rule, SPEC_CHAINS["default"]) + (extensions.get(rule, []) if ext else [])
            out.append((replay_sequential(chain, per_key, used, q, how), evidence[q]))
        rows.append((label, out))
    for label, weighted, everything in (
        ("fused, extended chain", False, False),
        ("fused weighted, extended", True, False),
        ("fused, all backends", False, True),
        ("fused weighted, all", True, True),
    ):
        out = []
        for q in questions:
            rule = rule_of.get(q, "default")
            chain = SPEC_CHAINS.get(rule, SPEC_CHAINS["default"]) + extensions.get(rule, [])
            if everything:
                chain = list(per_key)
            out.append((replay_fused(chain, per_key, q, models=models if weighted else None), evidence[q]))
        rows.append((label, out))
    print(f"  {'configuration':<28} hit@1  hit@5  hit@10  rec@5  rec@10")
    for label, out in rows:
        m = metrics(out)
        print(
            f"  {label:<28} {m['hit@1']:5.1f}  {m['hit@5']:5.1f}  {m['hit@10']:6.1f}  {m['recall@5']:5.1f}  {m['recall@10']:6.1f}"
        )

    if args.write:
        data = {
            "format": FORMAT,
            "about": (
                "P(a result holds what was asked), per backend and mode: a logistic map over the native relevance, "
                "the query-term coverage and 1/rank (memory_router/calibration.py). Fitted by bench/fit_calibration.py "
                "on the LoCoMo development half (conversations 26, 30, 41, 42, 43; categories 1-4) only."
            ),
            "samples": {k: sum(len(a.hits) for a in v.values()) for k, v in per_key.items()},
            "maps": {k: dict(zip(("intercept", *FEATURES), m, strict=True)) for k, m in models.items() if m}
            | {"default": dict(zip(("intercept", *FEATURES), pooled, strict=True))},
        }
        args.write.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"\nwrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
