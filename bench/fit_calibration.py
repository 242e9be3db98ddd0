"""Fit the relevance calibration (memory_router/core/calibration.json) from LoCoMo bench records.

    python bench/fit_calibration.py [--records DIR] [--write memory_router/core/calibration.json]
                                    [--markdown FILE]

Input: the records ``bench/locomo.py`` writes (one JSON line per variant and question), from the
development half only. Its ``alone:*`` variants ran each backend and mode alone with
``"calibration": "off"``, so their results carry the backends' native relevance; each result is
labelled ``hit`` when it holds one of the question's evidence turns.

Per calibration key (``qmd:search``, ``qmd:vsearch``, ``qmd:query``, ``totalrecall``,
``lossless``):

1. a logistic model of ``hit`` per result over (native relevance, query-term coverage, 1/rank,
   the exact match of the query's identifiers and paths, the gap to the next result's native
   relevance), fitted by Newton's method (IRLS, a light ridge) with the native, coverage, exact
   and gap weights held non-negative (a negative one is pinned at 0 and the rest refitted):
   monotone in each;
2. the first result's step map: isotonic regression (pool adjacent violators, blocks of at least
   1/12 of the answers) of "the first result is a hit" on its logistic value.

Only measured configurations get a map (the router keeps the native relevance of any other).
Then the script prints, per key, the
calibration table before and after (relevance bucket -> share of answers, hit@1 and hit@10 of
the answers in the bucket) and replays the router's decision rule over the recorded answers with
the shipped code (memory_router.core.calibration): sequential fallback with the spec's table and with
the extended one, native and calibrated, and the fused strategy. Replayed figures are in-sample;
``--cv`` adds leave-one-conversation-out figures (fitted on four conversations, scored on the
fifth), the honest estimate. The bench itself (serve, real backends) gives the final figures.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import BENCH_DATA, auc  # noqa: E402

from memory_router.backends.base import BackendResponse, Result  # noqa: E402
from memory_router.config.paths import packaged_config  # noqa: E402
from memory_router.config.router_config import load_config  # noqa: E402
from memory_router.core.asked import Asked, asked, exact  # noqa: E402
from memory_router.core.calibration import FEATURES, FORMAT, Calibration, Model, coverage, gap  # noqa: E402
from memory_router.core.frozen import Frozen  # noqa: E402
from memory_router.core.fuse import RRF_K  # noqa: E402

BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)
ALONE_KEYS = {
    "alone:qmd:search": "qmd:search",
    "alone:qmd:vsearch": "qmd:vsearch",
    "alone:qmd:query": "qmd:query",
    "alone:totalrecall": "totalrecall",
    "alone:lossless": "lossless",
}
THRESHOLD = 0.4
ISOTONIC_BLOCKS = 12
# How much a benchmark's size counts: each answer weighs (its bench's answers) ** (BENCH_POWER - 1),
# so 0.0 makes every bench weigh the same whatever its size, 1.0 every answer the same, and 0.5 (the
# default, --bench-power) a bench as the square root of its size. Measured (docs/calibration.md):
# 0.0 let the 100 LongMemEval questions pull LoCoMo's hit@1 down 1.1 and CoSQA's right answers
# that say success from 18% to 12%; 0.5 keeps LoCoMo at 49.3 and CoSQA at 18%, and left out, code
# and CoSQA fare best under it.
BENCH_POWER = 0.5
RULES = load_config(packaged_config()).rules  # the packaged rule table: which rule's words a query drops


def _key(backend: str, mode: str | None) -> str:
    """A chain step's calibration key as the alone records name it (qmd's default mode is query)."""
    return f"qmd:{mode or 'query'}" if backend == "qmd" else backend


# The rule table on the bench's tier (Pro minus Cognee), by key: the spec's chains, and the chains
# as router-config.json extends them (its "extend" steps where it puts them).
SPEC_CHAINS = {
    r.id: [_key(s.backend, s.mode) for s in r.chain if not s.extension and s.backend != "cognee"] for r in RULES.rules
}
EXTENDED_CHAINS = {r.id: [_key(s.backend, s.mode) for s in r.chain if s.backend != "cognee"] for r in RULES.rules}
# A question's key: (bench, group, question id); the group (a conversation, a question's history, a
# repository folder) is what leave-one-out cross-validation holds out.
QKey = tuple[str, str, str]


FUSE_CANDIDATES = {
    "extended, calibrated, default rule fused": {"default"},
    "extended, calibrated, rules 3 5 7 fused": {"decision_recall", "recent_context", "default"},
    "extended, calibrated, rules 2 4 7 fused": {"relationship", "concept", "default"},
    "extended, calibrated, every rule fused (head kept)": {
        "exact_symbol",
        "relationship",
        "decision_recall",
        "concept",
        "recent_context",
        "file_path",
        "default",
    },
    "extended, calibrated, rules 3 5 7 fused (head kept)": {"decision_recall", "recent_context", "default"},
}


class Answer(Frozen):
    """One backend's recorded answer to one question."""

    question: QKey
    text: str
    rule: str
    wanted: Asked
    evidence: frozenset[str]
    response: BackendResponse  # native relevance
    hits: tuple[bool, ...]
    dia_ids: tuple[frozenset[str], ...]
    status: str = ""  # the envelope's, as recorded

    @property
    def judgeable(self) -> bool:
        """Whether the calibration judges this answer at all (a query with nothing to judge by
        keeps the backend's native value, so it is not fitted on either)."""
        return self.wanted.judgeable


def read_records(directories: Sequence[Path]) -> dict[str, list[dict[str, Any]]]:
    """Every variant's rows across the benches' record folders (a variant's rows from several
    benches are joined: a row names its bench, ``locomo`` when it does not)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for directory in directories:
        for path in sorted(directory.glob("*.jsonl")):
            rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
            if rows:
                out[rows[0]["variant"]] += rows
    return dict(out)


def read_alone_records(directories: Sequence[Path]) -> dict[str, list[dict[str, Any]]] | None:
    """:func:`read_records` of the folders that exist, or ``None`` (said on stderr) when none of
    them holds an ``alone:*`` variant, the recorded answers a replay needs."""
    records = read_records([d for d in directories if d.is_dir()])
    if not any(v in records for v in ALONE_KEYS):
        print(f"no alone:* records under {', '.join(map(str, directories))}", file=sys.stderr)
        return None
    return records


class Recorded:
    """The ``alone:*`` variants' answers by calibration key, each question's evidence and rule,
    and per bench the questions every store measured there was asked: what the offline replays
    (``bench/rule7_replay.py``, ``bench/fill_replay.py``) start from."""

    def __init__(self, records: dict[str, list[dict[str, Any]]]) -> None:
        self.per_key = {key: answers(records[v]) for v, key in ALONE_KEYS.items() if v in records}
        self.evidence = {q: a.evidence for v in self.per_key.values() for q, a in v.items()}
        self.rule = {q: a.rule for v in self.per_key.values() for q, a in v.items()}
        self.questions: dict[str, list[QKey]] = {}
        for bench in sorted({q[0] for q in self.evidence}):
            measured = [{q for q in v if q[0] == bench} for v in self.per_key.values()]
            self.questions[bench] = sorted(set.intersection(*[m for m in measured if m]))


def bench_of(row: dict[str, Any]) -> str:
    return str(row.get("bench") or "locomo")


def answers(rows: Iterable[dict[str, Any]]) -> dict[QKey, Answer]:
    out = {}
    for row in rows:
        results = row.get("results") or []
        hits = [Result(r.get("content") or "", float(r["relevance"]), str(r.get("source") or "")) for r in results]
        key = (bench_of(row), str(row["conv"]), str(row["qid"]))
        rule = RULES.match(row["question"]).rule
        out[key] = Answer(
            key,
            row["question"],
            rule.id,
            asked(row["question"], rule),
            frozenset(row["evidence"]),
            BackendResponse.from_results("bench", row["question"], hits)
            if hits
            else BackendResponse(query_echo=row["question"], status="empty", backend="bench"),
            tuple(bool(r["hit"]) for r in results),
            tuple(frozenset(r.get("dia_ids") or ()) for r in results),
            str(row.get("status") or ""),
        )
    return out


def features(answer: Answer) -> list[tuple[float, float, float, float, float]]:
    """Each result's features, in the order of ``FEATURES`` (memory_router.core.calibration)."""
    wanted = answer.wanted
    hits = answer.response.results
    return [
        (
            r.relevance,
            coverage(wanted.terms, r.content),
            1.0 / i,
            exact(wanted, r),
            gap(r.relevance, hits[i].relevance if i < len(hits) else 0.0),
        )
        for i, r in enumerate(hits, start=1)
    ]


# ---------------------------------------------------------------------------- fitting


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (5x5 at most)."""
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


def fit_logistic(
    xs: Sequence[Sequence[float]],
    ys: Sequence[bool],
    free: Sequence[bool],
    ridge: float = 1e-3,
    sample_weights: Sequence[float] | None = None,
) -> list[float]:
    """Weights [intercept, *features] by IRLS; a feature with ``free`` False is held at 0; each row
    counts ``sample_weights[i]`` times (default once)."""
    k = 1 + len(free)
    sw = sample_weights if sample_weights is not None else [1.0] * len(xs)
    total = sum(sw)
    active = [0] + [i + 1 for i, f in enumerate(free) if f]
    w = [0.0] * k
    for _ in range(50):
        grad = [0.0] * len(active)
        hess = [[0.0] * len(active) for _ in active]
        for x, y, weight in zip(xs, ys, sw, strict=True):
            row = (1.0, *x)
            z = sum(w[j] * row[j] for j in range(k))
            p = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
            g = weight * (p - (1.0 if y else 0.0))
            s = weight * p * (1 - p)
            for a, ja in enumerate(active):
                grad[a] += g * row[ja]
                for b, jb in enumerate(active):
                    hess[a][b] += s * row[ja] * row[jb]
        for a in range(len(active)):
            hess[a][a] += ridge * total
            grad[a] += ridge * total * w[active[a]]
        step = _solve(hess, grad)
        for a, ja in enumerate(active):
            w[ja] -= step[a]
        if max(abs(s) for s in step) < 1e-7:
            break
    return w


def isotonic(points: list[tuple[float, float]], blocks: int = ISOTONIC_BLOCKS) -> tuple[list[float], list[float]]:
    """Pool adjacent violators on (x, y): the non-decreasing step fit of y on x, as breakpoints
    (block mean x, block mean y). Equal x values are never split, and points are first grouped
    in runs of at least ``len / blocks`` so that a handful of answers cannot make a step of their
    own."""
    by_x: dict[float, list[float]] = defaultdict(list)
    for x, y in points:
        by_x[x].append(y)
    least = max(1, len(points) // blocks)
    runs: list[list[float]] = []  # [sum x, sum y, count]
    for x in sorted(by_x):
        ys = by_x[x]
        if not runs or runs[-1][2] >= least:
            runs.append([0.0, 0.0, 0])
        runs[-1][0] += x * len(ys)
        runs[-1][1] += sum(ys)
        runs[-1][2] += len(ys)
    if len(runs) > 1 and runs[-1][2] < least:  # a short tail joins its neighbour
        tail = runs.pop()
        runs[-1] = [a + b for a, b in zip(runs[-1], tail, strict=True)]
    stack: list[list[float]] = []
    for run in runs:
        stack.append(run)
        while len(stack) > 1 and stack[-2][1] / stack[-2][2] >= stack[-1][1] / stack[-1][2]:
            top = stack.pop()
            stack[-1] = [a + b for a, b in zip(stack[-1], top, strict=True)]
    # Each block's hit rate with one hit and one miss added (Laplace): a block of misses says "rare",
    # not "never", so no answer is ever called 0.0 and weak answers keep their order. The running
    # maximum keeps the map non-decreasing (smoothing moves small blocks more than large ones).
    rates: list[float] = []
    for block in stack:
        rates.append(max([(block[1] + 1) / (block[2] + 2), *rates[-1:]]))
    return [round(b[0] / b[2], 4) for b in stack], [round(y, 4) for y in rates]


DROPPED: frozenset[str] = frozenset()  # features held at weight 0 (--drop), to measure what one adds
MONOTONE = (0, 1, 3, 4)  # native, coverage, exact, gap: their weights must be >= 0


def fit_key(recorded: Iterable[Answer]) -> Model:
    listed = [a for a in recorded if a.judgeable and a.hits]
    if not listed:
        raise ValueError("no judgeable answer with results to fit on")
    # By default every benchmark weighs the same, whatever its size: a kind of memory with 760
    # questions must not drown one with 100 (each answer weighs 1 / its bench's answers).
    per_bench: dict[str, int] = defaultdict(int)
    for a in listed:
        per_bench[a.question[0]] += 1
    raw = {b: n ** (BENCH_POWER - 1.0) for b, n in per_bench.items()}
    scale = len(listed) / sum(raw[b] * n for b, n in per_bench.items())
    bench_weight = {b: w * scale for b, w in raw.items()}  # mean weight 1
    xs: list[tuple[float, ...]] = []
    ys: list[bool] = []
    sw: list[float] = []
    for a in listed:
        for f, h in zip(features(a), a.hits, strict=True):
            xs.append(f)
            ys.append(h)
            sw.append(bench_weight[a.question[0]])
    free = [name not in DROPPED for name in FEATURES]  # a dropped feature's weight stays 0
    while True:
        w = fit_logistic(xs, ys, free, sample_weights=sw)
        negative = [i for i in MONOTONE if free[i] and w[i + 1] < 0]
        if not negative:
            break
        for i in negative:
            free[i] = False
    intercept, native, cover, rank, exact_weight, gap_weight = (round(v, 4) for v in w)
    logistic = Model(intercept, native, cover, rank, exact_weight, gap=gap_weight)
    firsts = []  # the step map's points, each bench's repeated up to the largest bench's count
    for a in listed:
        repeat = max(
            1, round(bench_weight[a.question[0]] / bench_weight[min(per_bench, key=lambda b: bench_weight[b])])
        )
        firsts += [(logistic(*features(a)[0]), float(a.hits[0]))] * repeat
    first_x, first_y = isotonic(firsts)
    return logistic.replace(first_x=tuple(first_x), first_y=tuple(first_y))


def fit(per_key: dict[str, dict[QKey, Answer]], keep: Any = None) -> dict[str, Model]:
    """The maps per key, fitted on the questions ``keep`` accepts (all: None)."""

    def chosen(recorded: dict[QKey, Answer]) -> list[Answer]:
        return [a for q, a in recorded.items() if keep is None or keep(q)]

    return {key: fit_key(chosen(recorded)) for key, recorded in per_key.items()}


# ---------------------------------------------------------------------------- applying (the shipped code)


def calibrated(calibration: Calibration | None, key: str, answer: Answer) -> BackendResponse:
    if calibration is None:
        return answer.response
    return calibration.apply(key, answer.text, answer.response)


# ---------------------------------------------------------------------------- reporting


def bucket_of(value: float) -> int:
    return next(i for i in range(len(BUCKETS) - 1) if value < BUCKETS[i + 1])


def table(recorded: Iterable[Answer], calibration: Calibration | None, key: str) -> list[tuple[str, int, float, float]]:
    """(bucket, share %, hit@1 %, hit@10 %) of the answers with results, by normalized_relevance."""
    groups: dict[int, list[Answer]] = defaultdict(list)
    total = 0
    for a in recorded:
        if not a.hits:
            continue
        total += 1
        groups[bucket_of(calibrated(calibration, key, a).normalized_relevance)].append(a)
    rows = []
    for i in range(len(BUCKETS) - 1):
        g = groups.get(i, [])
        label = f"[{BUCKETS[i]:.1f},{min(BUCKETS[i + 1], 1.0):.1f})"
        share = round(100 * len(g) / max(total, 1))
        h1 = 100 * sum(a.hits[0] for a in g) / len(g) if g else float("nan")
        h10 = 100 * sum(any(a.hits[:10]) for a in g) / len(g) if g else float("nan")
        rows.append((label, share, h1, h10))
    return rows


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


# ---------------------------------------------------------------------------- replay


class Replayed(Frozen):
    dia_ids: tuple[frozenset[str], ...]
    hits: tuple[bool, ...]
    success: bool = False  # whether the router would say `success` (its relevance reached the threshold)
    relevance: float = 0.0  # the answer's normalized_relevance, which the status is decided on


NOTHING = Replayed((), ())
PerKey = dict[str, dict[QKey, Answer]]
"""Each backend and mode's recorded answers, by question."""
Row = tuple[str, list[tuple[Replayed, frozenset[str]]]]
"""A replayed configuration: its label, and per question what it answered and the evidence."""


def replay_sequential(chain: Sequence[str], per_key: PerKey, calibration: Calibration | None, q: QKey) -> Replayed:
    """The spec's Fallback Logic over the recorded answers (an error or empty answer moves on)."""
    tried = []
    for key in chain:
        a = per_key.get(key, {}).get(q)
        if a is None or not a.hits:
            continue
        value = calibrated(calibration, key, a).normalized_relevance
        tried.append((value, a))
        if value >= THRESHOLD:
            return Replayed(a.dia_ids, a.hits, True, value)
    if not tried:
        return NOTHING
    value, best = max(tried, key=lambda t: t[0])  # the earliest wins a tie
    return Replayed(best.dia_ids, best.hits, False, value)


def replay_fused(
    chain: Sequence[str], per_key: PerKey, calibration: Calibration | None, q: QKey, weighted: bool
) -> Replayed:
    """The fused strategy over the recorded answers: (weighted) RRF, duplicates by evidence id."""
    scores: dict[Any, float] = defaultdict(float)
    info: dict[Any, tuple[frozenset[str], bool]] = {}
    for key in chain:
        a = per_key.get(key, {}).get(q)
        if a is None or not a.hits:
            continue
        response = calibrated(calibration, key, a)
        for rank, (ids, hit, result) in enumerate(zip(a.dia_ids, a.hits, response.results, strict=True), start=1):
            ident = ids or (key, rank)
            scores[ident] += (result.relevance if weighted else 1.0) / (RRF_K + rank)
            info[ident] = (ids, hit)
    order = sorted(scores, key=lambda i: -scores[i])[:10]
    best = max((r.relevance for k in chain for r in _results(per_key, calibration, k, q)), default=0.0)
    return Replayed(tuple(info[i][0] for i in order), tuple(info[i][1] for i in order), best >= THRESHOLD, best)


def replay_headed(chain: Sequence[str], per_key: PerKey, calibration: Calibration | None, q: QKey) -> Replayed:
    """The fused strategy with the sequential decision's first result kept first ("fuse_head"):
    every step is asked, the walk's winner gives the top result, weighted RRF the rest."""
    head = replay_sequential(chain, per_key, calibration, q)
    fused = replay_fused(chain, per_key, calibration, q, True)
    if not head.hits:
        return fused
    return _headed(head.dia_ids[0], head.hits[0], fused, head.success, head.relevance)  # fill's status is the walk's


def _headed(first_ids: frozenset[str], first_hit: bool, fused: Replayed, success: bool, relevance: float) -> Replayed:
    """``fused`` with ``(first_ids, first_hit)`` put first and its duplicate dropped, cut at 10."""
    rest = [(i, h) for i, h in zip(fused.dia_ids, fused.hits, strict=True) if not (first_ids and i == first_ids)]
    ids = (first_ids, *(i for i, _ in rest))[:10]
    hits = (first_hit, *(h for _, h in rest))[:10]
    return Replayed(ids, hits, success, relevance)


def replay_best_head(chain: Sequence[str], per_key: PerKey, calibration: Calibration | None, q: QKey) -> Replayed:
    """Fill with another head: the most relevant first result of every step (the earliest wins a
    tie) instead of the walk's winner; weighted RRF the rest."""
    tried = []
    for key in chain:
        a = per_key.get(key, {}).get(q)
        if a is not None and a.hits:
            tried.append((calibrated(calibration, key, a).normalized_relevance, a))
    fused = replay_fused(chain, per_key, calibration, q, True)
    if not tried:
        return fused
    value, best = max(tried, key=lambda t: t[0])
    return _headed(best.dia_ids[0], best.hits[0], fused, value >= THRESHOLD, value)


def _results(per_key: PerKey, calibration: Calibration | None, key: str, q: QKey) -> tuple[Result, ...]:
    a = per_key.get(key, {}).get(q)
    return calibrated(calibration, key, a).results if a is not None and a.hits else ()


def metrics(replays: list[tuple[Replayed, frozenset[str]]]) -> dict[str, float]:
    n = max(len(replays), 1)
    out = {}
    right = [r for r, _ in replays if r.hits[:1] == (True,)]
    wrong = [r for r, _ in replays if r.hits[:1] != (True,)]
    # The status against the truth: right top-1 answers that say success, wrong ones that do not.
    out["right say success"] = 100 * sum(r.success for r in right) / len(right) if right else float("nan")
    out["wrong do not"] = 100 * sum(not r.success for r in wrong) / len(wrong) if wrong else float("nan")
    out["AUC"] = auc([r.relevance for r in right], [r.relevance for r in wrong])
    for k in (1, 5, 10):
        out[f"hit@{k}"] = 100 * sum(any(r.hits[:k]) for r, _ in replays) / n
    for k in (5, 10):
        out[f"recall@{k}"] = 100 * statistics.fmean(
            len(ev & frozenset().union(*r.dia_ids[:k])) / len(ev) if ev else 0.0 for r, ev in replays
        )
    return out


def chain_for(rule: str, extended: bool) -> list[str]:
    chains = EXTENDED_CHAINS if extended else SPEC_CHAINS
    return list(chains.get(rule, chains["default"]))


# Fill variants measured before one ships (rows of the replay tables): the chain of a rule as it
# would be, and the head the answer would take.
FILL_CANDIDATES: dict[str, tuple[Any, dict[str, list[str]]]] = {
    "fill, Lossless last in rule 7 (after Total Recall)": (
        "walk",
        {"default": ["qmd:query", "totalrecall", "lossless"]},
    ),
    "fill, head = most relevant first result": ("best", {}),
    "fill, default rule + qmd:search": ("walk", {"default": [*EXTENDED_CHAINS["default"], "qmd:search"]}),
    "fill, default rule + qmd:search and qmd:vsearch": (
        "walk",
        {"default": [*EXTENDED_CHAINS["default"], "qmd:search", "qmd:vsearch"]},
    ),
    "fill, most relevant head, rule 7 + qmd:search and qmd:vsearch, rule 4 + qmd:search": (
        "best",
        {
            "default": [*EXTENDED_CHAINS["default"], "qmd:search", "qmd:vsearch"],
            "concept": [*EXTENDED_CHAINS["concept"], "qmd:search"],
        },
    ),
}


def _fill_rows(
    per_key: PerKey,
    calibration_for: Callable[[QKey], Calibration | None],
    questions: list[QKey],
    rule_of: dict[QKey, str],
    evidence: dict[QKey, frozenset[str]],
) -> list[Row]:
    """The rows of ``FILL_CANDIDATES``: each variant replayed over every question."""
    rows = []
    for label, (head, chains) in FILL_CANDIDATES.items():
        replay = replay_best_head if head == "best" else replay_headed
        out = []
        for q in questions:
            rule = rule_of.get(q, "default")
            chain = chains.get(rule) or chain_for(rule, True)
            out.append((replay(chain, per_key, calibration_for(q), q), evidence[q]))
        rows.append((label, out))
    return rows


def replays(
    per_key: PerKey,
    records: dict[str, list[dict[str, Any]]],
    calibration_for: Callable[[QKey], Calibration | None],
    questions: list[QKey],
    rule_of: dict[QKey, str],
    evidence: dict[QKey, frozenset[str]],
) -> list[Row]:
    """(label, [(replayed, evidence)]) rows; ``calibration_for(q)`` gives the calibration to score q with."""
    rows = []
    for key in per_key:
        rows.append((f"{key} alone", [(replay_sequential([key], per_key, None, q), evidence[q]) for q in questions]))
    for variant in sorted(v for v in records if v not in ALONE_KEYS):  # as recorded by the bench, not replayed
        got = answers(records[variant])
        rows.append(
            (
                f"[recorded] {variant}",
                [
                    (
                        Replayed(
                            got[q].dia_ids,
                            got[q].hits,
                            got[q].status == "success",
                            got[q].response.normalized_relevance,  # as the router gave it
                        )
                        if q in got
                        else NOTHING,
                        evidence[q],
                    )
                    for q in questions
                ],
            )
        )
    for label, extended, calibrate in (
        ("spec table, native relevance", False, False),
        ("spec table, calibrated", False, True),
        ("extended, native relevance", True, False),
        ("extended, calibrated", True, True),
    ):
        out = []
        for q in questions:
            chain = chain_for(rule_of.get(q, "default"), extended)
            out.append((replay_sequential(chain, per_key, calibration_for(q) if calibrate else None, q), evidence[q]))
        rows.append((label, out))
    # Candidate packaged strategies: fuse some rules' chains, the rest sequential (router-config.json's
    # per-rule "strategy"); measured here on every bench before one ships.
    for label, fused_rules in FUSE_CANDIDATES.items():
        out = []
        for q in questions:
            rule = rule_of.get(q, "default")
            chain = chain_for(rule, True)
            calibration = calibration_for(q)
            if rule in fused_rules and label.endswith("(head kept)"):
                out.append((replay_headed(chain, per_key, calibration, q), evidence[q]))
            elif rule in fused_rules:
                out.append((replay_fused(chain, per_key, calibration, q, True), evidence[q]))
            else:
                out.append((replay_sequential(chain, per_key, calibration, q), evidence[q]))
        rows.append((label, out))
    rows += _fill_rows(per_key, calibration_for, questions, rule_of, evidence)
    for label, weighted in (("fused (plain RRF), extended", False), ("fused (weighted RRF), extended", True)):
        out = [
            (
                replay_fused(chain_for(rule_of.get(q, "default"), True), per_key, calibration_for(q), q, weighted),
                evidence[q],
            )
            for q in questions
        ]
        rows.append((label, out))
    return rows


COLUMNS = ("hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "right say success", "wrong do not", "AUC")


def print_rows(rows: list[Row]) -> list[str]:
    lines = ["| configuration | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for label, got in rows:
        m = metrics(got)
        cells = [label, *(f"{m[k]:.3f}" if k == "AUC" and not math.isnan(m[k]) else _pct(m[k]) for k in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def shipped_key(key: str, embed_model: str) -> str:
    """The key the adapter names at run time (QmdBackend.calibration_key): vector modes carry
    their embedding model; the records' qmd had no reranker on disk."""
    return f"{key}:{embed_model}" if key in ("qmd:vsearch", "qmd:query") else key


def weights(model: Model) -> tuple[float, ...]:
    """The logistic's intercept and weights, in the order ``("intercept", *FEATURES)``."""
    return (model.intercept, model.native, model.coverage, model.rank, model.exact, model.gap)


def as_json(model: Model) -> dict[str, Any]:
    return dict(zip(("intercept", *FEATURES), weights(model), strict=True)) | {
        "first": {"x": list(model.first_x), "y": list(model.first_y)}
    }


def calibration_tables(per_key: PerKey, models: dict[str, Model], calibration: Calibration) -> list[str]:
    lines = []
    for key, recorded in per_key.items():
        listed = list(recorded.values())
        before, after = table(listed, None, key), table(listed, calibration, key)
        shown = ", ".join(f"{n} {v:+.3f}" for n, v in zip(("intercept", *FEATURES), weights(models[key]), strict=True))
        lines += [f"**{key}** ({sum(1 for a in listed if a.hits)} answers with results; logistic: {shown})", ""]
        lines += ["| normalized_relevance | native: share | hit@1 | hit@10 | calibrated: share | hit@1 | hit@10 |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for (label, s0, a1, a10), (_, s1, b1, b10) in zip(before, after, strict=True):
            lines.append(f"| {label} | {s0}% | {_pct(a1)} | {_pct(a10)} | {s1}% | {_pct(b1)} | {_pct(b10)} |")
        lines.append("")
    return lines


def _weighing() -> str:
    if BENCH_POWER == 0.0:
        return "every bench weighing the same"
    if BENCH_POWER == 1.0:
        return "every answer weighing the same"
    return f"each bench weighing its size to the power {BENCH_POWER:g}"


def main(argv: Sequence[str] | None = None) -> int:  # noqa: C901 - one report, section by section
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--records",
        type=Path,
        action="append",
        help="a bench's records folder (repeatable; default .bench-data/locomo/records)",
    )
    parser.add_argument("--write", type=Path, help="write the fitted maps to this calibration file")
    parser.add_argument("--markdown", type=Path, help="also write the tables as markdown")
    parser.add_argument("--cv", action="store_true", help="add leave-one-group-out replays within each bench")
    parser.add_argument(
        "--embed-model",
        default="all-MiniLM-L6-v2-f16",
        help="the embedding model the records' qmd used (vector modes' keys name it)",
    )
    parser.add_argument(
        "--bench-power",
        type=float,
        default=BENCH_POWER,
        help="0: every bench weighs the same (default); 1: every answer does; 0.5: a bench weighs sqrt(its size)",
    )
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        choices=FEATURES,
        help="fit with this feature's weight held at 0 (repeatable): what the feature adds",
    )
    args = parser.parse_args(argv)
    globals()["BENCH_POWER"] = args.bench_power  # read by fit_key
    globals()["DROPPED"] = frozenset(args.drop)  # read by fit_key
    folders = args.records or [BENCH_DATA / "locomo" / "records"]

    records = read_records(folders)
    per_key = {key: answers(records[variant]) for variant, key in ALONE_KEYS.items() if variant in records}
    if not per_key:
        print(f"no alone:* records under {', '.join(map(str, folders))}", file=sys.stderr)
        return 2
    models = fit(per_key)
    calibration = Calibration(models, "fitted here")
    evidence = {q: a.evidence for v in per_key.values() for q, a in v.items()}
    rule_of = {q: a.rule for v in per_key.values() for q, a in v.items()}
    benches = sorted({q[0] for q in evidence})
    # Per bench, the questions every backend measured on it answered (a bench without qmd has no qmd keys).
    questions_of: dict[str, list[QKey]] = {}
    for bench in benches:
        measured = [set(q for q in v if q[0] == bench) for v in per_key.values()]
        measured = [m for m in measured if m]
        questions_of[bench] = sorted(set.intersection(*measured))
    counts = ", ".join(f"{b} {len(questions_of[b])}" for b in benches)
    lines = [f"Fitted on {sum(len(v) for v in questions_of.values())} questions ({counts}), {_weighing()}: "]
    lines[0] += ", ".join(f"{k} ({len(v)})" for k, v in per_key.items())
    lines.append("")
    lines += calibration_tables(per_key, models, calibration)
    for bench in benches:
        questions = questions_of[bench]
        bench_keys = {k: {q: a for q, a in v.items() if q[0] == bench} for k, v in per_key.items()}
        bench_keys = {k: v for k, v in bench_keys.items() if v}
        bench_records = {v: [r for r in rows if bench_of(r) == bench] for v, rows in records.items()}
        bench_records = {v: rows for v, rows in bench_records.items() if rows}
        lines += ["", f"**{bench}**: replayed over {len(questions)} questions (in-sample: fitted on every bench):", ""]
        lines += print_rows(replays(bench_keys, bench_records, lambda q: calibration, questions, rule_of, evidence))
    if len(benches) > 1:
        lines += ["", "**Leave one benchmark out**: each bench scored with maps fitted on the others only:", ""]
        lobo_rows = []
        for bench in benches:
            others = {k: {q: a for q, a in v.items() if q[0] != bench} for k, v in per_key.items()}
            others = {k: v for k, v in others.items() if any(a.hits for a in v.values())}
            held = Calibration(fit(others), f"without {bench}")
            # A key no other bench measured keeps its in-sample map (nothing else to fit it on).
            held = Calibration({**models, **held.models}, held.source)
            bench_keys = {k: {q: a for q, a in v.items() if q[0] == bench} for k, v in per_key.items()}
            bench_keys = {k: v for k, v in bench_keys.items() if v}

            def held_for(q: QKey, c: Calibration = held) -> Calibration:
                return c

            rows = replays(bench_keys, {}, held_for, questions_of[bench], rule_of, evidence)
            lobo_rows += [
                (f"{bench}: {label}", got) for label, got in rows if "calibrated" in label or "weighted" in label
            ]
        lines += print_rows(lobo_rows)
    if args.cv:
        lines += ["", "Leave one group out within each bench (a conversation, a history, a folder):", ""]
        cv_rows = []
        for bench in benches:
            folds = sorted({q[1] for q in questions_of[bench]})
            held_out = {
                g: Calibration(fit(per_key, keep=lambda q, b=bench, g=g: not (q[0] == b and q[1] == g)), f"without {g}")
                for g in folds
            }
            bench_keys = {k: {q: a for q, a in v.items() if q[0] == bench} for k, v in per_key.items()}
            bench_keys = {k: v for k, v in bench_keys.items() if v}

            def fold_of(q: QKey, h: dict[str, Calibration] = held_out) -> Calibration:
                return h[q[1]]  # the maps fitted without q's group

            rows = replays(bench_keys, {}, fold_of, questions_of[bench], rule_of, evidence)
            cv_rows += [(f"{bench}: {label}", got) for label, got in rows if not label.endswith(" alone")]
        lines += print_rows(cv_rows)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.write:
        data = {
            "format": FORMAT,
            "about": (
                "P(a result holds what was asked), per backend and mode: a logistic map over the native relevance, "
                "the query-term coverage (the matched rule's own words set aside), 1/rank, the exact match of the "
                "query's identifiers and paths and the gap to the next result's native relevance, then an isotonic "
                "step map of the first result "
                "(memory_router/core/calibration.py). Fitted by bench/fit_calibration.py on development halves only, "
                f"{_weighing()}: {counts}."
            ),
            "answers": {shipped_key(k, args.embed_model): len(v) for k, v in per_key.items()},
            "maps": {shipped_key(k, args.embed_model): as_json(m) for k, m in models.items()},
        }
        args.write.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
