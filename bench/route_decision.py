"""Route decision per query, in-process: check/normalise + rule match + plan.

Over a seeded corpus of realistic queries (bench/corpus.py), each query is timed on its own with
``perf_counter_ns`` (timer cost, ~0.1 us, included); the whole corpus is repeated and the table
shows the median over repeats of each statistic. Target: median under 20 us.

    python bench/route_decision.py            # 3,000 queries x 7 repeats
    python bench/route_decision.py --quick    # smoke test
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import environment_line, fmt, median, parser, percentile, repeats, table, verdict
from corpus import generate

from memory_router.config.installed import parse_installed
from memory_router.config.router_config import load_config
from memory_router.core.plan import Plan, make_plan
from memory_router.core.query import check_query

TARGET_MEDIAN_US = 20.0


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=None, help="corpus size (default 3000)")
    args = p.parse_args()
    n = args.queries or (200 if args.quick else 3000)
    reps = repeats(args, 7)

    config = load_config()  # the packaged router-config.json: the real rule table
    rules, max_chars = config.rules, config.max_query_chars
    # Pro tier with cognee degraded and lossless missing: the plan drops a step now and then.
    installed = parse_installed(
        {
            "tier": "pro",
            "backends": {
                "qmd": {"status": "ready"},
                "totalrecall": {"status": "ready"},
                "cognee": {"status": "degraded"},
            },
        },
        Path(tempfile.gettempdir()) / "backends.json",
    )
    corpus = [q for _, q in generate(n)]

    def decide(q: str) -> Plan:
        return make_plan(rules.match(check_query(q, max_chars)), installed.unusable_reason)

    for q in corpus:  # warm-up: regex caches, first-call costs
        decide(q)

    per_rep_all: list[tuple[float, float, float]] = []
    per_rep_rule: dict[str, list[tuple[float, float]]] = defaultdict(list)
    stage_us: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = {}
    clock = time.perf_counter_ns
    gc.disable()  # a collection in the middle of a 10 us call is noise, not routing cost
    try:
        for _ in range(reps):
            samples: list[float] = []
            by_rule: dict[str, list[float]] = defaultdict(list)
            for q in corpus:
                t0 = clock()
                plan = decide(q)
                t1 = clock()
                us = (t1 - t0) / 1000
                samples.append(us)
                by_rule[f"{plan.match.rule.number} {plan.match.rule.id} ({plan.match.strength})"].append(us)
            per_rep_all.append((median(samples), percentile(samples, 99), max(samples)))
            for key, values in by_rule.items():
                per_rep_rule[key].append((median(values), percentile(values, 99)))
                counts[key] = len(values)

            # The stages, each timed over the whole corpus at once (no per-call timer cost).
            cleaned = [check_query(q, max_chars) for q in corpus]
            t0 = clock()
            for q in corpus:
                check_query(q, max_chars)
            t1 = clock()
            matches = [rules.match(q) for q in cleaned]
            t2 = clock()
            for q in cleaned:
                rules.match(q)
            t3 = clock()
            for m in matches:
                make_plan(m, installed.unusable_reason)
            t4 = clock()
            stage_us["check_query (validate + normalise)"].append((t1 - t0) / 1000 / n)
            stage_us["rules.match (two-pass regex)"].append((t3 - t2) / 1000 / n)
            stage_us["make_plan (tier filter)"].append((t4 - t3) / 1000 / n)
    finally:
        gc.enable()

    med = median(r[0] for r in per_rep_all)
    p99 = median(r[1] for r in per_rep_all)
    print(f"route decision: {n} queries x {reps} repeats; {environment_line()}")
    table(
        "Route decision per query (check + match + plan), us",
        ["", "median", "p99", "max", "target", ""],
        [
            [
                "all queries",
                fmt(med, 2),
                fmt(p99, 2),
                fmt(median(r[2] for r in per_rep_all), 1),
                f"< {TARGET_MEDIAN_US:.0f} median",
                verdict(med, TARGET_MEDIAN_US),
            ]
        ],
    )
    rows = []
    for key in sorted(per_rep_rule, key=lambda k: (int(k.split()[0]), k)):
        reps_of_rule = per_rep_rule[key]  # (median, p99) of each repeat
        rows.append(
            [key, counts[key], fmt(median(v[0] for v in reps_of_rule), 2), fmt(median(v[1] for v in reps_of_rule), 2)]
        )
    table(
        "By matched rule, us",
        ["rule (strength)", "queries", "median", "p99"],
        rows,
        note="'default' runs every strong and weak regex first: it is the slowest path.",
    )
    table("By stage, mean us per query", ["stage", "mean"], [[k, fmt(median(v), 2)] for k, v in stage_us.items()])


if __name__ == "__main__":
    main()
