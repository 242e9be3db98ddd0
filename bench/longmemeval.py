"""LongMemEval retrieval benchmark: the router, each backend alone, fuse, the spec's table and a
BM25 baseline on the development half of LongMemEval S (issue 29).

Each question's chat history (~50 sessions, ~490 turns) is laid out as an OpenClaw agent holds it
(``_longmemeval_workspace``: every turn in lossless-claw's ``lcm.db``; each session saved in
``memory/`` as OpenClaw's bundled session-memory hook saves it on ``/new``, which keeps only the
session's last 15 messages). qmd is not installed in this scenario: ``backends.json`` lists
Total Recall (reading the agent's workspace) and Lossless as ready, nothing else. The question is
asked through a fresh ``memory-router serve`` per (question, variant), ``limit`` 10.

**Gold and labels.** Turn level: the turns LongMemEval marks ``has_answer`` (labels
``s<session>:t<turn>`` by position; no session id or ``has_answer`` reaches a backend). A result
holds a turn by the rule in ``_longmemeval_workspace.label``: a Lossless message by its
message_id; a BM25 row by its turn; a memory note when its content shows the turn's transcript
line whole, or at least 200 characters of it where the content is cut off inside the line.
``hit@k``: some result of the first k holds an evidence turn; ``R@10`` (turn recall@10): the share
of the question's evidence turns held by the first 10 results. Session level: ``s-hit@k``, a
result of the first k comes from an evidence session (``answer_session_ids``), a note from the
session it saves; ``s-R@10`` the share of evidence sessions among the first 10 results.

**Subset.** The default is 100 of the 235 questions, stratified by question_type: each type gets
its share of 100 (largest remainder), and within a type the questions come first by
``sha256("longmemeval-bench-subset-v1:" + question_id)``. ``--all``: all 235. ``--quick``: one
question of each of three types, three variants (a smoke run; figures meaningless).

Variants (``--variant``, repeatable; default ``router``, ``alone:totalrecall``, ``alone:lossless``,
``fuse``, ``spec``, ``bm25``): as in ``bench/locomo.py`` (``parse_variant``: ``alone:<backend>``,
``NAME=JSON`` patches), plus ``fuse`` (``{"strategy": "fuse"}``) and ``spec`` (``{"table":
"spec"}``). One JSON line per (variant, question) goes to ``<records>/<variant>.jsonl`` in the
shared record format (bench="longmemeval", conv = the question_id, never sent to a backend).

    python bench/longmemeval.py [--quick | --all] [--variant ...] [--json FILE] [--work DIR] [--records DIR]

Data: LongMemEval (Wu et al., ICLR 2025), MIT licence, Copyright (c) 2024 Di Wu; the notice is
in the data folder's LICENSE. Only the development half is read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import BENCH_DATA, REPO, environment_line, fmt, parser, router_report, scratch_dir, table
from _locomo_score import answered_by, hit_at, outcome, pct, percentile, quality, summarise
from _locomo_workspace import tool_env
from _longmemeval_workspace import Question, Workspace, build, labelled_results, load_questions, stratified
from _serve import ask_in_turn, serve
from locomo import Variant, ask_bm25, parse_variant, workspace_config
from locomo import record as locomo_record

BENCH = "longmemeval"
WORK = BENCH_DATA / "longmemeval"
DEFAULT_VARIANTS = ("router", "alone:totalrecall", "alone:lossless", "fuse", "spec", "bm25")
QUICK_VARIANTS = ("router", "alone:lossless", "bm25")
PATCHES = {"fuse": {"strategy": "fuse"}, "spec": {"table": "spec"}}
SUBSET = 100
QUICK_TYPES = ("knowledge-update", "single-session-user", "temporal-reasoning")
LIMIT = 10
QUERY_TIMEOUT_MS = 30_000
READY = ("totalrecall", "lossless")


def _shared_data() -> Path:
    """The development half in the shared folder beside the checkout, or beside an ancestor of
    it (a worktree); LONGMEMEVAL_DIR overrides."""
    for folder in REPO.parents:
        if (folder / "shared" / "data" / "longmemeval-dev").is_dir():
            return folder / "shared" / "data" / "longmemeval-dev"
    return REPO.parent / "shared" / "data" / "longmemeval-dev"


DATA = Path(os.environ.get("LONGMEMEVAL_DIR") or _shared_data())


def variant_of(spec: str) -> Variant:
    if spec in PATCHES:
        return parse_variant(f"{spec}@router={json.dumps(PATCHES[spec])}")
    return parse_variant(spec)


# --------------------------------------------------------------------------- running


def record(variant: str, ws: Workspace, q: Question, answer: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    """bench/locomo.py's record, relabelled by this bench's rule, with bench and the
    session-level gold added."""
    out = locomo_record(variant, ws, q, {**answer, "results": []}, duration_ms)
    out["results"] = labelled_results(answer.get("results") or [], ws, q.evidence)
    return {"bench": BENCH, **out, "evidence_sessions": list(q.evidence_sessions)}


async def ask_serve(variant: Variant, ws: Workspace, q: Question) -> dict[str, Any]:
    """One question through a fresh ``memory-router serve`` on this question's stores (qmd and
    Cognee are not installed here: not listed, so the router passes their steps over)."""
    state = ws.root.parent / "runs" / variant.file_name.removesuffix(".jsonl")
    config = workspace_config(variant, ws)

    def failed(exc: Exception) -> None:
        print(f"  {variant.name} on {ws.conv}: {exc}; recorded as an error", file=sys.stderr)

    async with serve(state, config, tier="pro", ready=READY, env=tool_env()) as ask:
        ((answer, elapsed),) = await ask_in_turn(
            ask, [q.question], limit=LIMIT, timeout_ms=QUERY_TIMEOUT_MS, on_error=failed
        )
    return record(variant.name, ws, q, answer, elapsed)


def ask_baseline(ws: Workspace, q: Question) -> dict[str, Any]:
    """bench/locomo.py's in-process BM25 over this question's turns, relabelled here."""
    (raw,) = ask_bm25(ws, [q])
    answer = {k: raw[k] for k in ("status", "normalized_relevance", "routed_to", "results")}
    return record("bm25", ws, q, answer, raw["duration_ms"])


def run_all(
    variants: Sequence[Variant], questions: Sequence[Question], work: Path, records: Path
) -> dict[str, list[dict[str, Any]]]:
    records.mkdir(parents=True, exist_ok=True)
    files = {v.name: records / v.file_name for v in variants}
    for path in files.values():
        path.write_bytes(b"")
    by_variant: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    started = time.perf_counter()
    for n, q in enumerate(questions, 1):
        ws = build(q, work, log=progress)
        for v in variants:
            rec = ask_baseline(ws, q) if v.config is None else asyncio.run(ask_serve(v, ws, q))
            with files[v.name].open("ab") as out:
                out.write(orjson.dumps(rec) + b"\n")
            by_variant[v.name].append(rec)
        progress(f"[{n}/{len(questions)}] {q.qid} ({q.category}) done, {time.perf_counter() - started:.0f} s")
    return by_variant


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- scoring


def session_hit(r: dict[str, Any], k: int) -> bool:
    wanted = set(r.get("evidence_sessions") or [])
    return any(wanted.intersection(x.get("sessions") or []) for x in r["results"][:k])


def session_recall(r: dict[str, Any], k: int) -> float:
    wanted = set(r.get("evidence_sessions") or [])
    found = {s for x in r["results"][:k] for s in x.get("sessions") or []}
    return len(wanted & found) / len(wanted) if wanted else math.nan


def status_truth(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Of the answers whose top-1 result holds evidence, the % that say ``success``; of the rest,
    the % that do not (targets >= 90 and >= 60)."""
    right = [r for r in records if hit_at(r, 1)]
    wrong = [r for r in records if not hit_at(r, 1)]
    return {
        "right": len(right),
        "right_success": pct(sum(r["status"] == "success" for r in right), len(right)),
        "wrong": len(wrong),
        "wrong_not_success": pct(sum(r["status"] != "success" for r in wrong), len(wrong)),
    }


def top1_kind(r: dict[str, Any], work: Path) -> str:
    """What the first result is against the gold: the turn, or the right session without it
    (split by whether the note it names holds an evidence turn past what the result shows)."""
    if not r["results"]:
        return "no result"
    top = r["results"][0]
    if top["hit"]:
        return "holds an evidence turn"
    if not set(r.get("evidence_sessions") or []) & set(top.get("sessions") or []):
        return "another session"
    if isinstance(top.get("path"), str):
        held = {lab for labs in note_turns(work, r["conv"]).get(Path(top["path"]).name, {}).values() for lab in labs}
        if held & set(r["evidence"]):
            return "an evidence session's note: the turn is in it, past the content shown"
        return "an evidence session's note without the turn"
    return "an evidence session's other turn"


_MANIFESTS: dict[tuple[Path, str], dict[str, Any]] = {}


def note_turns(work: Path, qid: str) -> dict[str, Any]:
    key = (work, qid)
    if key not in _MANIFESTS:
        try:
            _MANIFESTS[key] = json.loads((work / qid / "manifest.json").read_text(encoding="utf-8"))["note_lines"]
        except (OSError, ValueError, KeyError):
            _MANIFESTS[key] = {}
    return _MANIFESTS[key]


def score(records: Sequence[dict[str, Any]], work: Path) -> dict[str, Any]:
    summary = summarise(records)
    summary["top1"] = dict(Counter(top1_kind(r, work) for r in records).most_common())
    recalls = [session_recall(r, 10) for r in records]
    n = len(records)
    summary["session"] = {
        "s-hit@1": pct(sum(session_hit(r, 1) for r in records), n),
        "s-hit@10": pct(sum(session_hit(r, 10) for r in records), n),
        "s-R@10": 100 * sum(x for x in recalls if not math.isnan(x)) / max(1, sum(not math.isnan(x) for x in recalls)),
    }
    summary["per_type"] = {
        c: quality([r for r in records if r["category"] == c]) for c in sorted({r["category"] for r in records})
    }
    summary["status_truth"] = status_truth(records)
    summary["answered_by_notes"] = sum(
        1 for r in records if r["results"] and (r["results"][0].get("source") or "") == "totalrecall"
    )
    return summary


# --------------------------------------------------------------------------- report


def report(summaries: dict[str, dict[str, Any]]) -> None:
    rows = []
    for name, s in summaries.items():
        q, ses = s["overall"], s["session"]
        rows.append(
            [
                name,
                str(int(q["questions"])),
                fmt(q["hit@1"]),
                fmt(q["hit@5"]),
                fmt(q["hit@10"]),
                fmt(q["recall@5"]),
                fmt(q["recall@10"]),
                fmt(ses["s-hit@1"]),
                fmt(ses["s-hit@10"]),
                fmt(ses["s-R@10"]),
                fmt(s["latency_ms"]["median"]),
                fmt(s["latency_ms"]["p95"]),
            ]
        )
    table(
        "LongMemEval S dev: turn hit@k, turn recall@k (R@k), session-level hit and recall (%), latency (ms)",
        ["variant", "questions", "hit@1", "hit@5", "hit@10", "R@5", "R@10", "s-hit@1", "s-hit@10", "s-R@10"]
        + ["median ms", "p95 ms"],
        rows,
        note="latency: request written -> answer read through a fresh `serve` (bm25: in-process); "
        "the first query of each daemon, so it includes opening the stores.",
    )
    types = sorted({t for s in summaries.values() for t in s["per_type"]})
    table(
        "hit@1 / turn R@10 per question_type (%)",
        ["variant", *types],
        [
            [
                name,
                *[f"{fmt(s['per_type'][t]['hit@1'])} / {fmt(s['per_type'][t]['recall@10'])}" for t in types],
            ]
            for name, s in summaries.items()
        ],
        note="questions per type: "
        + ", ".join(f"{t} {int(next(iter(summaries.values()))['per_type'][t]['questions'])}" for t in types),
    )
    table(
        "Status against the truth (targets: >= 90% of right top-1 answers say success, >= 60% of wrong ones do not)",
        ["variant", "top-1 right", "% success", "top-1 wrong", "% not success", "statuses"],
        [
            [
                name,
                s["status_truth"]["right"],
                fmt(s["status_truth"]["right_success"]),
                s["status_truth"]["wrong"],
                fmt(s["status_truth"]["wrong_not_success"]),
                ", ".join(f"{k} {v}" for k, v in sorted(s["status"].items())),
            ]
            for name, s in summaries.items()
        ],
    )
    kinds = list(dict.fromkeys(k for s in summaries.values() for k in s["top1"]))
    table(
        "The first result against the gold (questions)",
        ["first result", *summaries],
        [[k, *[s["top1"].get(k, 0) for s in summaries.values()]] for k in kinds],
        note="a memory note's content is what Total Recall returns of it: an entry's first 2000 characters, or its"
        " first lines and the later part holding most of the query (memory_router/backends/totalrecall/shown.py).",
    )
    router_report(
        summaries, unit="questions", sections=(("routed_to", "answered by"), ("outcome", "why it answered so"))
    )


# --------------------------------------------------------------------------- main


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help=f"the data folder (default {DATA}, or $LONGMEMEVAL_DIR)")
    p.add_argument("--all", action="store_true", help="all 235 development questions (default: 100, stratified)")
    p.add_argument("--questions", type=int, default=None, help="this many questions, stratified (default 100)")
    p.add_argument("--work", type=Path, default=None, help=f"workspaces, reused (default {WORK}/work)")
    p.add_argument("--records", type=Path, default=None, help=f"records directory (default {WORK}/records)")
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--variant", action="append", default=None, help="router | alone:<b> | fuse | spec | bm25 | N=JSON")
    p.add_argument("--replay", action="store_true", help="report on the records in --records, relabelled; ask nothing")
    p.add_argument(
        "--abstention",
        action="store_true",
        help="ask the development abstention questions (abstention.jsonl.xz, qid *_abs: the history does not "
        f"hold the answer) instead; records in {WORK}/records-abstention (read by bench/abstention.py)",
    )
    return p.parse_args()


def pick(questions: list[Question], args: argparse.Namespace) -> list[Question]:
    if args.quick:
        return [stratified([q for q in questions if q.category == t], 1)[0] for t in QUICK_TYPES]
    if args.all:
        return stratified(questions, len(questions))
    return stratified(questions, args.questions or SUBSET)


def replay(variants: Sequence[Variant], records: Path, questions: dict[str, Question], work: Path) -> dict[str, Any]:
    """The records already in ``records``, relabelled by the current rule from the cached
    workspaces (rebuilt when missing) and written back."""
    by_variant = {}
    cache: dict[str, Workspace] = {}
    for v in variants:
        path = records / v.file_name
        if not path.is_file():
            raise SystemExit(f"--replay: no records for variant {v.name!r} ({path} is missing)")
        recs = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        for r in recs:
            q = questions[r["conv"]]
            ws = cache.get(q.qid) or cache.setdefault(q.qid, build(q, work, log=progress))
            r["results"] = labelled_results(r["results"], ws, q.evidence)
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
        by_variant[v.name] = recs
    return by_variant


def main() -> int:
    args = options()
    source = args.data / ("abstention.jsonl.xz" if args.abstention else "questions.jsonl.xz")
    if not source.is_file():
        print(f"LongMemEval data not found in {args.data} (--data or $LONGMEMEVAL_DIR); nothing measured.")
        return 0
    variants = [variant_of(v) for v in (args.variant or (QUICK_VARIANTS if args.quick else DEFAULT_VARIANTS))]
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names must be distinct: {names}")
    work = args.work or (scratch_dir("mr-longmemeval-") if args.quick else WORK / "work")
    subset = bool(args.questions or args.all) and not args.replay
    records = args.records or (work / "records" if args.quick else WORK / ("records-other" if subset else "records"))
    if args.abstention and not args.records:
        records = WORK / "records-abstention"  # never the answerable records the calibration is fitted on
    print(f"LongMemEval recall bench; {environment_line()}")
    started = time.perf_counter()
    everything = list(load_questions(source))
    chosen = everything if args.abstention else pick(everything, args)
    print(
        f"{len(chosen)} of {len(everything)} development questions "
        f"({', '.join(f'{k} {v}' for k, v in sorted(Counter(q.category for q in chosen).items()))}); "
        f"backends ready: {', '.join(READY)} (qmd not installed)"
    )
    # The workspaces hold copies of the data: the licence notice goes with them.
    if (args.data / "LICENSE").is_file():
        work.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.data / "LICENSE", work / "LICENSE")
    if args.replay:
        by_variant = replay(variants, records, {q.qid: q for q in everything}, work)
    else:
        by_variant = run_all(variants, chosen, work, records)
    if args.abstention:  # no evidence to score recall against: bench/abstention.py reads the records
        print(f"records: {records}/<variant>.jsonl; {time.perf_counter() - started:.0f} s (bench/abstention.py)")
        return 0
    summaries = {name: score(recs, work) for name, recs in by_variant.items()}
    report(summaries)
    latencies = [r["duration_ms"] for recs in by_variant.values() for r in recs]
    print(f"\nrecords: {records}/<variant>.jsonl; {time.perf_counter() - started:.0f} s")
    print(f"median latency over every variant: {fmt(percentile(latencies, 50))} ms")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "environment": environment_line(),
            "data": str(args.data),
            "questions": len(next(iter(by_variant.values()), [])),
            "qids": [r["qid"] for r in next(iter(by_variant.values()), [])],
            "records": str(records),
            "variants": summaries,
            "answered_by": {n: dict(Counter(answered_by(r) for r in recs)) for n, recs in by_variant.items()},
            "outcomes": {n: dict(Counter(outcome(r) for r in recs)) for n, recs in by_variant.items()},
        }
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return 0


if __name__ == "__main__":
    sys.exit(main())
