"""Code-memory benchmark: the router, each backend alone and a BM25 baseline on a real Python
repository, with queries in the spec's phrasings generated from its AST (issue 29).

The repository is anyio 4.16.0 (MIT), exactly as its wheel ships it (``_code_workspace``: copied,
checked against the wheel's RECORD, indexed by real qmd and embedded with MiniLM, cached under
``--work``). The queries and their ground truth come from its AST (``_code_queries``: rules 1, 4,
6 and 7 of the spec's table - find the function/method/class X, find all usages of X, how does
... work, explain how to ..., search in <dir>/*.py for ..., X in <file>.py, and plain phrases;
gold = the definition's head or span, or every reference's lines). Every query is asked through
ONE long-lived ``memory-router serve`` per variant, ``limit`` 10; results are labelled by file and
line overlap and scored: hit@1, hit@10, MRR@10 overall, per rule and per kind of query; the
calibration table; the status against the truth (of right top-1 answers, the % that say
``success``; of wrong ones, the % that do not).

The agent here is a Starter tier one (``backends.json``: qmd and Total Recall): qmd over the
code (collection ``code``), Total Recall rooted at the repository, which holds no memory files
(so it answers ``BACKEND_UNAVAILABLE``, as it would in such a checkout).

Variants (``--variant``, repeatable; default all): ``router``, ``alone:qmd:search``,
``alone:qmd:vsearch``, ``alone:qmd:query``, ``alone:totalrecall`` (one-step chains, calibration
off), ``fuse`` (``"strategy": "fuse"``), ``spec`` (``"table": "spec"``), ``bm25`` (in-process SQLite
FTS5 over 40-line windows of the files, query words OR'ed, stopwords dropped), or ``NAME=JSON``
as in ``bench/locomo.py``. One JSON line per (variant, query) goes to ``<records>/<variant>.jsonl``
(bench ``code``; conv = the gold file's top-level package or subfolder; category = the rule id
the query is written for, plus ``kind``).

    python bench/code_memory.py [--quick] [--variant ...] [--json FILE] [--work DIR] [--records DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _code_queries import PER_KIND, RULE_OF_KIND, Query, generate, labelled_results
from _code_workspace import PACKAGE, CodeWorkspace, build, distribution, qmd_env
from _common import BENCH_DATA, REPO, environment_line, fmt, parser, router_report, scratch_dir, table
from _locomo_score import calibration, hit_at, summarise
from _serve import ask_in_turn, serve
from locomo import Variant, bm25_terms, oracles_of, parse_variant

from memory_router.backends import BackendContext
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.config.router_config import load_config

WORK = BENCH_DATA / "code_memory"
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
BUILTIN = (
    "router",
    "alone:qmd:search",
    "alone:qmd:vsearch",
    "alone:qmd:query",
    "alone:totalrecall",
    'fuse={"strategy": "fuse"}',
    'spec={"table": "spec"}',
    "bm25",
)
QUICK_VARIANTS = ("router", "alone:qmd:search", "bm25")
QUICK_PER_KIND = 1
LIMIT = 10
WARMUP_TIMEOUT_MS = 120_000
KINDS = tuple(PER_KIND)
RULES = tuple(dict.fromkeys(RULE_OF_KIND.values()))


# --------------------------------------------------------------------------- running


def record(variant: str, ws: CodeWorkspace, q: Query, answer: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    return {
        "variant": variant,
        "bench": "code",
        "conv": q.group,
        "qid": q.qid,
        "category": q.category,
        "kind": q.kind,
        "question": q.question,
        "evidence": list(q.evidence),
        "status": answer.get("status", "error"),
        "error_code": answer.get("error_code"),
        "normalized_relevance": answer.get("normalized_relevance", 0.0),
        "rule": answer.get("rule"),
        "routed_to": answer.get("routed_to"),
        "routed_mode": answer.get("routed_mode"),
        "fallbacks_used": answer.get("fallbacks_used", 0),
        "duration_ms": round(duration_ms, 2),
        "attempts": answer.get("attempts") or [],
        "results": labelled_results(answer.get("results") or [], ws.repo, q.evidence),
        "repository": ws.name,
    }


def workspace_config(variant: Variant, ws: CodeWorkspace) -> dict[str, Any]:
    """The variant's config pointed at the repository's stores (a key the variant sets wins)."""
    assert variant.config is not None
    config: dict[str, Any] = json.loads(json.dumps(variant.config))  # a deep copy
    backends = config.get("backends") or {}
    for name, settings in {"qmd": dict(ws.qmd), "totalrecall": {"root": str(ws.repo)}}.items():
        if isinstance(backends.get(name), dict):
            own = {k: v for k, v in backends[name].items() if v is not None or k not in settings}
            backends[name] = {**settings, **own}
    return config


async def ask_serve(variant: Variant, ws: CodeWorkspace, queries: Sequence[Query]) -> list[dict[str, Any]]:
    """Every query through one ``memory-router serve``, one at a time, after one warm-up query
    that is not scored (it loads qmd's model)."""
    state = ws.root / "runs" / variant.file_name.removesuffix(".jsonl")
    config = workspace_config(variant, ws)

    def failed(exc: Exception) -> None:
        print(f"  {variant.name}: {exc}; the remaining queries are recorded as errors", file=sys.stderr)

    async with serve(state, config, tier="starter", ready=("qmd", "totalrecall"), env=qmd_env()) as ask:
        texts = [q.question for q in queries]
        answers = await ask_in_turn(ask, texts, limit=LIMIT, warmup_timeout_ms=WARMUP_TIMEOUT_MS, on_error=failed)
    return [record(variant.name, ws, q, a, ms) for q, (a, ms) in zip(queries, answers, strict=True)]


def ask_bm25(ws: CodeWorkspace, queries: Sequence[Query]) -> list[dict[str, Any]]:
    """The plain baseline: FTS5 over 40-line windows, words OR'ed, bm25 order; relevance is
    ``|bm25| / (1 + |bm25|)`` (qmd's squashing), for the calibration table only."""
    conn = sqlite3.connect(f"file:{ws.fts_db}?mode=ro", uri=True)
    records = []
    try:
        for q in queries:
            t0 = time.perf_counter()
            terms = bm25_terms(q.question)
            rows = []
            if terms:
                match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
                rows = conn.execute(
                    "SELECT path, line, content, bm25(windows) FROM windows WHERE windows MATCH ? "
                    "ORDER BY bm25(windows) LIMIT ?",
                    (match, LIMIT),
                ).fetchall()
            results = [
                {"content": c, "relevance": round(abs(s) / (1 + abs(s)), 4), "source": "bm25", "path": p, "line": n}
                for p, n, c, s in rows
            ]
            answer = {
                "status": "success" if results else "empty",
                "normalized_relevance": results[0]["relevance"] if results else 0.0,
                "routed_to": "bm25",
                "results": results,
            }
            records.append(record("bm25", ws, q, answer, (time.perf_counter() - t0) * 1000))
    finally:
        conn.close()
    return records


# --------------------------------------------------------------------------- scoring


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else math.nan


def reciprocal_rank(r: dict[str, Any], k: int = LIMIT) -> float:
    for rank, result in enumerate(r["results"][:k], 1):
        if result["hit"]:
            return 1.0 / rank
    return 0.0


def quality(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = len(records)
    return {
        "queries": n,
        "hit@1": pct(sum(hit_at(r, 1) for r in records), n),
        "hit@10": pct(sum(hit_at(r, 10) for r in records), n),
        "MRR@10": pct(sum(reciprocal_rank(r) for r in records), n),
    }


def status_truth(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Of the answers whose top-1 result is right, the % that say ``success``; of the others
    (wrong top-1, or no result), the % that do not say ``success`` (targets 90 and 60)."""
    right = [r for r in records if hit_at(r, 1)]
    wrong = [r for r in records if not hit_at(r, 1)]
    return {
        "right": len(right),
        "right_success": pct(sum(r["status"] == "success" for r in right), len(right)),
        "wrong": len(wrong),
        "wrong_not_success": pct(sum(r["status"] != "success" for r in wrong), len(wrong)),
    }


def score(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "overall": quality(records),
        "per_rule": {c: quality([r for r in records if r["category"] == c]) for c in RULES},
        "per_kind": {k: quality([r for r in records if r["kind"] == k]) for k in KINDS},
        "status_truth": status_truth(records),
        "status_truth_per_rule": {c: status_truth([r for r in records if r["category"] == c]) for c in RULES},
        "status_truth_per_kind": {k: status_truth([r for r in records if r["kind"] == k]) for k in KINDS},
    }
    # summarise() is LoCoMo's: its rule/outcome/fallback/calibration tables carry over as they are.
    locomo = summarise(records)
    for key in ("status", "error_codes", "rule", "routed_to", "outcome", "fallback_reasons", "latency_ms"):
        out[key] = locomo[key]
    out["calibration"] = calibration(records)
    out["result_calibration"] = locomo["result_calibration"]
    return out


# --------------------------------------------------------------------------- report


def _q(q: dict[str, float]) -> list[str]:
    return [str(int(q["queries"])), fmt(q["hit@1"]), fmt(q["hit@10"]), fmt(q["MRR@10"])]


def _st(s: dict[str, float]) -> str:
    return f"{fmt(s['right_success'], 0)} of {s['right']} / {fmt(s['wrong_not_success'], 0)} of {s['wrong']}"


def report(scores: dict[str, dict[str, Any]], oracles: dict[str, dict[str, float]], repository: str) -> None:
    rows = [
        [name, *_q(s["overall"]), fmt(s["latency_ms"]["median"]), fmt(s["latency_ms"]["p95"])]
        for name, s in scores.items()
    ]
    rows += [
        [name, str(int(o["questions"])), fmt(o["hit@1"]), fmt(o["hit@10"]), "-", "", ""] for name, o in oracles.items()
    ]
    table(
        f"Code memory ({repository}): hit@k and MRR@10 (%), latency (ms)",
        ["variant", "queries", "hit@1", "hit@10", "MRR@10", "median ms", "p95 ms"],
        rows,
        note="latency: request written -> answer read, one query at a time through `serve` (bm25: in-process).",
    )
    for title, key, groups in (("rule", "per_rule", RULES), ("kind of query", "per_kind", KINDS)):
        table(
            f"hit@1 / hit@10 / MRR@10 per {title} (%)",
            ["variant", *groups],
            [
                [
                    name,
                    *[
                        f"{fmt(s[key][g]['hit@1'])}/{fmt(s[key][g]['hit@10'])}/{fmt(s[key][g]['MRR@10'])}"
                        for g in groups
                    ],
                ]
                for name, s in scores.items()
            ],
            note="queries: " + ", ".join(f"{g} {int(next(iter(scores.values()))[key][g]['queries'])}" for g in groups),
        )
    table(
        "Status against the truth: right top-1 answers saying `success` (% of n) / wrong ones NOT saying it (% of n)",
        ["variant", "all", *RULES],
        [
            [name, _st(s["status_truth"]), *[_st(s["status_truth_per_rule"][c]) for c in RULES]]
            for name, s in scores.items()
        ],
        note="targets: >= 90% of right top-1 answers say success; >= 60% of wrong ones do not.",
    )
    table(
        "Status against the truth per kind of query (right saying success / wrong not saying it)",
        ["variant", *KINDS],
        [[name, *[_st(s["status_truth_per_kind"][k]) for k in KINDS]] for name, s in scores.items()],
    )
    router_report(
        scores,
        unit="queries",
        sections=(
            ("rule", "rule fired"),
            ("routed_to", "answered by"),
            ("outcome", "why it answered so"),
            ("fallback_reasons", "steps passed over, and why"),
        ),
    )


# --------------------------------------------------------------------------- main


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=None, help=f"workspace, reused (default {WORK}/work)")
    p.add_argument("--records", type=Path, default=None, help=f"records directory (default {WORK}/records)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--variant", action="append", default=None, help="router | alone:<b>[:<m>] | bm25 | NAME=JSON")
    p.add_argument("--no-embed", action="store_true", help="skip qmd embedding (qmd search only)")
    return p.parse_args()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def missing_tools() -> str | None:
    """What the bench cannot run without (the repository's package, qmd), said as a sentence."""
    try:
        distribution()
    except importlib.metadata.PackageNotFoundError:
        return f"{PACKAGE} is not installed (the repository this bench copies)"
    context = BackendContext(state_dir=Path("/nonexistent"), cwd=REPO)
    probe = qmd_adapter.create("qmd", qmd_adapter.Settings(), context).probe()
    return None if probe.ok else f"qmd is not available ({probe.detail})"


def queries_for(ws: CodeWorkspace, quick: bool) -> list[Query]:
    table_ = load_config().rules  # the packaged table: each query must fire the rule it is written for
    per_kind = {k: QUICK_PER_KIND for k in PER_KIND} if quick else None
    return generate(ws.repo, lambda text: table_.match(text).rule.id, per_kind)


def main() -> int:
    args = options()
    quick = args.quick
    variants = [parse_variant(v) for v in (args.variant or (QUICK_VARIANTS if quick else BUILTIN))]
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names must be distinct: {names}")
    embed = not (args.no_embed or quick) and MODEL.is_file()
    work = args.work or (scratch_dir("mr-code-") if quick else WORK / "work")
    records_dir = args.records or (work / "records" if quick else WORK / "records")
    print(f"Code-memory bench; {environment_line()}")
    missing = missing_tools()
    if missing:
        print(f"{missing}; nothing measured.")
        return 0
    started = time.perf_counter()
    t0 = time.perf_counter()
    ws = build(work, embed=embed, model=MODEL, log=progress)
    progress(f"workspace {ws.root} {'reused' if ws.reused else 'built'} in {time.perf_counter() - t0:.1f} s")
    queries = queries_for(ws, quick)
    print(
        f"repository {ws.name} ({ws.repo}); {len(queries)} queries: "
        + ", ".join(f"{k} {n}" for k, n in Counter(q.kind for q in queries).items())
        + ("" if embed else "; qmd embedding off (vsearch/query answer BACKEND_UNAVAILABLE)")
    )
    records_dir.mkdir(parents=True, exist_ok=True)
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for variant in variants:
        t0 = time.perf_counter()
        recs = ask_bm25(ws, queries) if variant.config is None else asyncio.run(ask_serve(variant, ws, queries))
        (records_dir / variant.file_name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
        by_variant[variant.name] = recs
        progress(f"  {variant.name}: {len(recs)} queries in {time.perf_counter() - t0:.1f} s")
    scores = {name: score(recs) for name, recs in by_variant.items()}
    oracles = oracles_of(variants, by_variant)
    report(scores, oracles, ws.name)
    print(f"\nrecords: {records_dir}/<variant>.jsonl; {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "environment": environment_line(),
            "repository": ws.name,
            "queries": len(queries),
            "embedded": embed,
            "records": str(records_dir),
            "variants": scores,
            "oracles": oracles,
        }
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
