"""CoSQA code-search benchmark: the router, each backend alone and a BM25 baseline on the development
half of CoSQA (issue 29).

The corpus (6,267 Python functions) is laid out as a user's code workspace: one module per function,
``src/<package>/<name>.py`` (see ``_cosqa_workspace``), indexed by real qmd (collection ``code``,
mask ``**/*.{py,md}``) and embedded with MiniLM; Total Recall's root is the workspace (it has no
memory notes, so it answers ``empty``, as it would for this user) and Lossless reads an empty
``lcm.db``. The index is built once and cached under ``.bench-data/cosqa/work/``. Each of the 500
dev queries (real web queries: "python check if a variable is iterable") is sent as it is through
ONE long-lived ``memory-router serve`` per variant, ``limit`` 10.

**Labelling rule.** A result is labelled with the workspace path of the file it comes from (qmd's
``qmd://code/src/...`` and an absolute path under the workspace both become ``src/...``); it *hits*
when that path is the query's gold function's ``path``. hit@k: a hit among the first k results;
MRR@10: 1/rank of the first hit within 10 (0 without one). Status against the truth: of the answers
whose first result hits, the share whose ``status`` is ``success``; of the others (wrong first
result, or none), the share that does NOT say ``success``.

Variants (``--variant``, repeatable; default all built-ins): ``router`` (packaged config),
``alone:qmd:search|vsearch|query``, ``alone:totalrecall`` (one-step chains, ``calibration: off``),
``fuse`` (``"strategy": "fuse"``), ``spec`` (``"table": "spec"``), ``bm25`` (SQLite FTS5 over the
functions, content words OR'ed, in-process), or ``NAME=JSON`` patches as in ``bench/locomo.py``.

One JSON line per (variant, query) goes to ``<records>/<variant>.jsonl`` (bench ``cosqa``; ``conv``
is one of five buckets by a hash of the query id, for cross-validation).

    python bench/cosqa.py [--quick] [--variant ...] [--queries N] [--distractors N] [--json FILE]

``--quick``: 5 queries over their gold functions plus 30 distractors, in a scratch directory (a
smoke test; its figures mean nothing). ``--distractors N`` keeps every gold function of the chosen
queries plus N other functions picked by a hash of their index (deterministic).

Data: CoSQA (Huang et al., ACL 2021), MIT licence (Copyright (c) 2021 Jun-jie-Huang; the notice is
in the data folder's LICENSE-CoSQA.txt); only the development half is read.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
from _common import BENCH_DATA, REPO, environment_line, fmt, parser, router_report, scratch_dir, table
from _cosqa_workspace import COLLECTION, Query, Workspace, build, data_checksum, env, load_corpus, load_queries, subset
from _locomo_score import calibration, pct, result_calibration, summarise
from _serve import ask_in_turn, serve
from locomo import Variant, bm25_terms, deep_merge, parse_variant
from locomo import builtin as locomo_builtin


def _shared_data() -> Path:
    """The development half in the shared folder beside the checkout or one of its ancestors
    (a worktree); COSQA_DIR overrides."""
    for folder in REPO.parents:
        if (folder / "shared" / "data" / "cosqa-dev").is_dir():
            return folder / "shared" / "data" / "cosqa-dev"
    return REPO.parent / "shared" / "data" / "cosqa-dev"


DATA = Path(os.environ.get("COSQA_DIR") or _shared_data())
WORK = BENCH_DATA / "cosqa"
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
BUILTIN = (
    "router",
    "alone:qmd:search",
    "alone:qmd:vsearch",
    "alone:qmd:query",
    "alone:totalrecall",
    "fuse",
    "spec",
    "bm25",
)
PATCHES: dict[str, dict[str, Any]] = {"fuse": {"strategy": "fuse"}, "spec": {"table": "spec"}}
QUICK_QUERIES, QUICK_DISTRACTORS = 5, 30
QUICK_VARIANTS = ("router", "alone:qmd:vsearch", "bm25")
BUCKETS = 5
LIMIT = 10
WARMUP_TIMEOUT_MS = 120_000


def variant(spec: str) -> Variant:
    if spec in PATCHES:
        return Variant(spec, deep_merge(locomo_builtin("router").config or {}, PATCHES[spec]))
    return parse_variant(spec)


def group_of(qid: str) -> str:
    """The query's cross-validation group: one of BUCKETS, by a hash of its id (stable)."""
    return f"b{int(hashlib.sha256(qid.encode()).hexdigest(), 16) % BUCKETS}"


# --------------------------------------------------------------------------- labels


def workspace_path(result: dict[str, Any], workspace: Path) -> str | None:
    """The workspace-relative path of the file a result comes from, or None (no path, or a file
    outside the workspace)."""
    raw = result.get("path")
    if not isinstance(raw, str) or not raw:
        return None
    prefix = f"qmd://{COLLECTION}/"
    if raw.startswith(prefix):
        return raw[len(prefix) :]
    path = PurePosixPath(raw)
    if path.is_absolute():
        try:
            return str(path.relative_to(workspace))
        except ValueError:
            return None
    return str(path)


def labelled_results(results: Sequence[dict[str, Any]], workspace: Path, gold: str) -> list[dict[str, Any]]:
    """Envelope results -> the records' results: rank, relevance, source, content, dia_ids (the
    result's function path), hit, then every other key the result carried."""
    out = []
    for rank, r in enumerate(results, 1):
        path = workspace_path(r, workspace)
        first = {
            "rank": rank,
            "relevance": r.get("relevance"),
            "source": r.get("source"),
            "content": r.get("content"),
            "dia_ids": [path] if path else [],
            "hit": path == gold,
        }
        out.append({**first, **{k: v for k, v in r.items() if k not in first}})
    return out


def record(name: str, ws: Workspace, q: Query, gold: str, answer: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    return {
        "variant": name,
        "bench": "cosqa",
        "conv": group_of(q.qid),
        "qid": q.qid,
        "category": "web query",
        "question": q.query,
        "evidence": [gold],
        "status": answer.get("status", "error"),
        "error_code": answer.get("error_code"),
        "normalized_relevance": answer.get("normalized_relevance", 0.0),
        "rule": answer.get("rule"),
        "routed_to": answer.get("routed_to"),
        "routed_mode": answer.get("routed_mode"),
        "fallbacks_used": answer.get("fallbacks_used", 0),
        "duration_ms": round(duration_ms, 2),
        "attempts": answer.get("attempts") or [],
        "results": labelled_results(answer.get("results") or [], ws.workspace, gold),
    }


# --------------------------------------------------------------------------- running


def workspace_config(v: Variant, ws: Workspace) -> dict[str, Any]:
    """The variant's config pointed at the workspace's stores (a key the variant sets wins)."""
    assert v.config is not None
    stores: dict[str, dict[str, Any]] = {
        "qmd": dict(ws.qmd),
        "totalrecall": {"root": str(ws.workspace)},
        "lossless": {"db_path": str(ws.lcm_db)},
    }
    config: dict[str, Any] = json.loads(json.dumps(v.config))  # a deep copy
    backends = config.get("backends") or {}
    for name, settings in stores.items():
        if isinstance(backends.get(name), dict):
            own = {k: val for k, val in backends[name].items() if val is not None or k not in settings}
            backends[name] = {**settings, **own}
    return config


async def ask_serve(v: Variant, ws: Workspace, queries: Sequence[Query], gold: dict[int, str]) -> list[dict[str, Any]]:
    """Every query through one ``memory-router serve``, one at a time, after one unscored warm-up
    query (it loads qmd's model). qmd's embedding settings are in the daemon's environment."""
    state = ws.root / "runs" / v.file_name.removesuffix(".jsonl")
    config = workspace_config(v, ws)
    async with serve(state, config, tier="pro", ready=("qmd", "totalrecall", "lossless"), env=env()) as ask:
        answers = await ask_in_turn(
            ask,
            [q.query for q in queries],
            limit=LIMIT,
            warmup_timeout_ms=WARMUP_TIMEOUT_MS,
            on_error=lambda exc: progress(f"  {v.name}: {exc}; the remaining queries are recorded as errors"),
        )
    return [record(v.name, ws, q, gold[q.gold], a, ms) for q, (a, ms) in zip(queries, answers, strict=True)]


def ask_bm25(ws: Workspace, queries: Sequence[Query], gold: dict[int, str]) -> list[dict[str, Any]]:
    """The plain baseline: FTS5 over the functions, content words OR'ed, bm25 order. Its relevance
    is ``|bm25| / (1 + |bm25|)`` (qmd's own squashing), for the calibration table only."""
    conn = sqlite3.connect(f"file:{ws.bm25_db}?mode=ro", uri=True)
    out = []
    try:
        for q in queries:
            t0 = time.perf_counter()
            terms = bm25_terms(q.query)
            rows = []
            if terms:
                match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
                rows = conn.execute(
                    "SELECT path, content, bm25(functions) FROM functions WHERE functions MATCH ? "
                    "ORDER BY bm25(functions) LIMIT ?",
                    (match, LIMIT),
                ).fetchall()
            results = [
                {"content": c, "relevance": round(abs(s) / (1 + abs(s)), 4), "source": "bm25", "path": p, "bm25": s}
                for p, c, s in rows
            ]
            answer = {
                "status": "success" if results else "empty",
                "normalized_relevance": results[0]["relevance"] if results else 0.0,
                "routed_to": "bm25",
                "results": results,
            }
            out.append(record("bm25", ws, q, gold[q.gold], answer, (time.perf_counter() - t0) * 1000))
    finally:
        conn.close()
    return out


# --------------------------------------------------------------------------- scores


def first_hit(r: dict[str, Any], k: int = LIMIT) -> int | None:
    return next((x["rank"] for x in r["results"][:k] if x["hit"]), None)


def quality(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = len(records)
    ranks = [first_hit(r) for r in records]
    return {
        "queries": n,
        "hit@1": pct(sum(k == 1 for k in ranks), n),
        "hit@10": pct(sum(k is not None for k in ranks), n),
        "mrr@10": pct(sum(1 / k for k in ranks if k), n),
    }


def status_truth(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Of the answers whose first result hits: how many, and the % that say ``success``; of the
    others (wrong first result or none): how many, and the % that do not."""
    right = [r for r in records if first_hit(r, 1)]
    wrong = [r for r in records if not first_hit(r, 1)]
    return {
        "right": len(right),
        "right_success": pct(sum(r["status"] == "success" for r in right), len(right)),
        "wrong": len(wrong),
        "wrong_not_success": pct(sum(r["status"] != "success" for r in wrong), len(wrong)),
    }


def summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    base = summarise(records)  # rule, routed_to, outcome, fallbacks, latency, status counts
    return {
        **{k: v for k, v in base.items() if k != "per_category"},
        "overall": quality(records),
        "status_truth": status_truth(records),
        "calibration": calibration(records),
        "result_calibration": result_calibration(records),
    }


def report(summaries: dict[str, dict[str, Any]], corpus: int) -> None:
    table(
        f"CoSQA dev: hit@k and MRR@10 (%) over {corpus} functions, latency (ms)",
        ["variant", "queries", "hit@1", "hit@10", "MRR@10", "median ms", "p95 ms"],
        [
            [
                name,
                int(s["overall"]["queries"]),
                *(fmt(s["overall"][k]) for k in ("hit@1", "hit@10", "mrr@10")),
                fmt(s["latency_ms"]["median"]),
                fmt(s["latency_ms"]["p95"]),
            ]
            for name, s in summaries.items()
        ],
        note="latency: request written -> answer read, one query at a time through `serve` (bm25: in-process).",
    )
    table(
        "Status against the truth (targets: >= 90% of right top-1 say success, >= 60% of wrong do not)",
        ["variant", "right top-1", "% success", "wrong top-1", "% not success"],
        [
            [name, t["right"], fmt(t["right_success"]), t["wrong"], fmt(t["wrong_not_success"])]
            for name, s in summaries.items()
            for t in [s["status_truth"]]
        ],
        note="wrong top-1 includes answers without results (empty, error).",
    )
    router_report(
        summaries,
        unit="queries",
        sections=(
            ("rule", "rule fired"),
            ("routed_to", "answered by (routed_to/routed_mode)"),
            ("outcome", "why it answered so"),
            ("fallback_reasons", "steps passed over, and why"),
        ),
        holds="that hit",
    )


# --------------------------------------------------------------------------- main


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help=f"CoSQA files (default {DATA}, or $COSQA_DIR)")
    p.add_argument("--work", type=Path, default=None, help=f"workspaces, reused (default {WORK}/work)")
    p.add_argument("--records", type=Path, default=None, help=f"records directory (default {WORK}/records)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--variant", action="append", default=None, help="router | alone:<b>[:<m>] | fuse | spec | bm25")
    p.add_argument("--queries", type=int, default=None, help="the first N dev queries (default all 500)")
    p.add_argument("--distractors", type=int, default=None, help="gold functions plus N others (default all)")
    p.add_argument("--no-embed", action="store_true", help="skip qmd embedding (qmd search only)")
    return p.parse_args()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> int:
    args = options()
    quick = args.quick
    if not (args.data / "corpus.jsonl.gz").is_file():
        print(f"CoSQA data not found in {args.data} (--data or $COSQA_DIR); nothing measured.")
        return 0
    variants = [variant(v) for v in (args.variant or (QUICK_VARIANTS if quick else BUILTIN))]
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names must be distinct: {names}")
    n_queries = args.queries or (QUICK_QUERIES if quick else None)
    distractors = QUICK_DISTRACTORS if quick and args.distractors is None else args.distractors
    embed = not args.no_embed and MODEL.is_file()
    work = args.work or (scratch_dir("mr-cosqa-") if quick else WORK / "work")
    partial = bool(n_queries or distractors is not None)
    records_dir = args.records or (work / "records" if quick else WORK / ("records-subset" if partial else "records"))

    print(f"CoSQA code-search bench; {environment_line()}")
    started = time.perf_counter()
    corpus = load_corpus(args.data)
    queries = load_queries(args.data)[:n_queries] if n_queries else load_queries(args.data)
    functions = subset(corpus, {q.gold for q in queries}, distractors)
    gold = {f.idx: f.path for f in corpus}
    name = "full" if distractors is None else f"gold{len(queries)}-plus{distractors}"
    ws = build(functions, work / name, checksum=data_checksum(args.data), embed=embed, model=MODEL, log=progress)
    progress(f"workspace {ws.root}: {ws.functions} functions, {'reused' if ws.reused else 'built'} ({lap(started)})")
    print(
        f"{len(queries)} dev queries over {ws.functions} functions"
        + ("" if distractors is None else f" (every gold function plus {distractors} distractors)")
        + ("" if embed else "; qmd embedding off (qmd vsearch/query answer BACKEND_UNAVAILABLE)")
    )
    records_dir.mkdir(parents=True, exist_ok=True)
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for v in variants:
        t0 = time.perf_counter()
        recs = ask_bm25(ws, queries, gold) if v.config is None else asyncio.run(ask_serve(v, ws, queries, gold))
        (records_dir / v.file_name).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
        by_variant[v.name] = recs
        progress(f"  {v.name}: {len(recs)} queries in {lap(t0)}")

    summaries = {n: summary(recs) for n, recs in by_variant.items()}
    report(summaries, ws.functions)
    print(f"\nrecords: {records_dir}/<variant>.jsonl; {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "environment": environment_line(),
            "data": str(args.data),
            "queries": len(queries),
            "functions": ws.functions,
            "embedded": embed,
            "records": str(records_dir),
            "variants": summaries,
        }
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    if not quick:
        write_status(WORK / "STATUS", summaries, len(queries), ws.functions, records_dir)
    return 0


def lap(t0: float) -> str:
    return f"{time.perf_counter() - t0:.1f} s"


def write_status(path: Path, summaries: dict[str, dict[str, Any]], queries: int, functions: int, records: Path) -> None:
    headline = "; ".join(
        f"{n} hit@1 {fmt(s['overall']['hit@1'])} hit@10 {fmt(s['overall']['hit@10'])} "
        f"MRR@10 {fmt(s['overall']['mrr@10'])} right-success {fmt(s['status_truth']['right_success'])}"
        for n, s in summaries.items()
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(
            f"{stamp} bench/cosqa.py finished: {queries} queries over {functions} functions; "
            f"records {records}/<variant>.jsonl. Headline: {headline}\n"
        )


if __name__ == "__main__":
    sys.exit(main())
