"""LoCoMo recall benchmark: the router, each backend alone and a BM25 baseline on the development
half of LoCoMo (issue 25).

Each conversation (26, 30, 41, 42, 43) is laid out as an OpenClaw agent holds it (see
``_locomo_workspace``: raw turns in lossless-claw's ``lcm.db``, observations as daily notes,
indexed by real qmd with MiniLM, read by Total Recall), then every question of categories 1-4
is asked through ONE long-lived ``memory-router serve`` per (conversation, variant), ``limit``
10. Results are labelled with the dia_ids they hold (rule in ``_locomo_score``) and scored
against the question's evidence: hit@1/5/10, evidence recall@5/10, per category, latency, why the
router accepted or fell back, and a relevance calibration table per backend/mode.

Variants (``--variant``, repeatable; default: all built-ins):

* ``router`` - the packaged router-config.json as is;
* ``alone:<backend>[:<mode>]`` - every rule's chain is that one step (``alone:qmd:query``,
  ``alone:totalrecall``...), without extension steps; ``calibration: "off"`` is added when the
  packaged config knows that key, so the records carry the backends' native relevance;
* ``bm25`` - SQLite FTS5 over the raw turns (bm25 ranking, query terms OR'ed, stopwords dropped),
  in-process;
* ``NAME=JSON`` - the packaged config deep-merged with JSON (``null`` deletes a key); when NAME
  is a built-in the patch applies to it; ``NAME@BASE=JSON`` names a patched built-in.

One JSON line per (variant, question) goes to ``<records>/<variant>.jsonl``.

    python bench/locomo.py [--quick] [--variant ...] [--json FILE] [--work DIR] [--records DIR]

Data: LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0; only the development half is read.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from _common import BENCH_DATA, REPO, environment_line, fmt, parser, router_report, scratch_dir, table
from _locomo_data import CATEGORIES, Asked, Conversation, LocomoFileError, Question, load_conversation
from _locomo_score import (
    PAPER_OVERALL_WITH_ADVERSARIAL,
    PAPER_TABLE3,
    best_of,
    labelled_results,
    oracle,
    summarise,
)
from _locomo_workspace import LAYOUTS, Stores, Workspace, _from_manifest, build, tool_env
from _serve import ask_in_turn, serve

from memory_router.backends.common.words import STOPWORDS
from memory_router.config.paths import packaged_config
from memory_router.config.schema import ConfigSpec

CONVERSATIONS = ("26", "30", "41", "42", "43")


def _shared_data() -> Path:
    """The development half in the shared folder beside the checkout (CI's layout), or beside an
    ancestor of it (a git worktree in a folder of worktrees); LOCOMO_DIR overrides."""
    for folder in REPO.parents:
        if (folder / "shared" / "data" / "locomo-dev").is_dir():
            return folder / "shared" / "data" / "locomo-dev"
    return REPO.parent / "shared" / "data" / "locomo-dev"


DATA = Path(os.environ.get("LOCOMO_DIR") or _shared_data())
WORK = BENCH_DATA / "locomo"
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
BUILTIN = (
    "router",
    "alone:qmd:search",
    "alone:qmd:vsearch",
    "alone:qmd:query",
    "alone:totalrecall",
    "alone:lossless",
    "bm25",
)
QUICK_CONVERSATION, QUICK_QUESTIONS = "30", 20
QUICK_VARIANTS = ("router", "alone:qmd:search", "bm25")
LIMIT = 10
WARMUP_TIMEOUT_MS = 120_000


# --------------------------------------------------------------------------- variants


class Variant:
    """A named configuration: a router-config.json (``config``) or the in-process BM25 baseline."""

    def __init__(self, name: str, config: dict[str, Any] | None) -> None:
        self.name, self.config = name, config

    @property
    def file_name(self) -> str:
        return re.sub(r"[^A-Za-z0-9._:+-]", "_", self.name) + ".jsonl"


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` merged into a copy of ``base``: objects recursively, ``null`` deletes the key,
    anything else (lists included) replaces."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def packaged() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(packaged_config().read_text(encoding="utf-8"))
    return config


def knows_calibration(config: dict[str, Any]) -> bool:
    """Whether this router has a ``calibration`` key (so ``"off"`` can be asked for)."""
    return "calibration" in config or "calibration" in ConfigSpec.model_fields


def builtin(name: str) -> Variant:
    if name == "bm25":
        return Variant(name, None)
    config = packaged()
    if name == "router":
        return Variant(name, config)
    parts = name.split(":")
    if parts[0] != "alone" or len(parts) not in (2, 3) or parts[1] not in config["backends"]:
        raise SystemExit(
            f"unknown variant {name!r}: use router, bm25, alone:<backend>[:<mode>] "
            f"(backends: {', '.join(config['backends'])}) or NAME=JSON_PATCH"
        )
    step = {"backend": parts[1], **({"mode": parts[2]} if len(parts) == 3 else {})}
    # One step and nothing else: no extension steps ("extend"), no per-rule strategy.
    config["rules"] = [
        {**{k: v for k, v in rule.items() if k not in ("extend", "strategy")}, "chain": [step]}
        for rule in config["rules"]
    ]
    if knows_calibration(config):
        config["calibration"] = "off"
    return Variant(name, config)


def parse_variant(spec: str) -> Variant:
    if "=" not in spec:
        return builtin(spec)
    name, _, patch_text = spec.partition("=")
    name, _, base = name.partition("@")
    try:
        patch = json.loads(patch_text)
    except ValueError as exc:
        raise SystemExit(
            f"--variant {spec!r}: the patch is not JSON ({exc}); e.g. x='{{\"threshold\": 0.3}}'"
        ) from None
    if not isinstance(patch, dict):
        raise SystemExit(f"--variant {spec!r}: the patch must be a JSON object")
    base = base or (name if name in BUILTIN or name.startswith("alone:") else "router")
    start = builtin(base)
    if start.config is None:
        raise SystemExit(f"--variant {spec!r}: bm25 takes no config patch")
    return Variant(name, deep_merge(start.config, patch))


def workspace_config(variant: Variant, ws: Stores) -> dict[str, Any]:
    """The variant's config pointed at this conversation's stores; a key the variant sets itself
    wins, and a backend the variant removed stays removed."""
    assert variant.config is not None
    stores: dict[str, dict[str, Any]] = {
        "qmd": dict(ws.qmd),
        "totalrecall": {"root": str(ws.root)},
        "lossless": {"db_path": str(ws.lcm_db)},
    }
    config = copy.deepcopy(variant.config)
    backends = config.get("backends") or {}
    for name, settings in stores.items():
        if isinstance(backends.get(name), dict):
            own = {k: v for k, v in backends[name].items() if v is not None or k not in settings}
            backends[name] = {**settings, **own}
    return config


# --------------------------------------------------------------------------- running


def record(variant: str, ws: Stores, q: Asked, answer: dict[str, Any], duration_ms: float) -> dict[str, Any]:
    return {
        "variant": variant,
        "conv": ws.conv,
        "qid": q.qid,
        "category": q.category,
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
        "results": labelled_results(answer.get("results") or [], ws, q.evidence),
    }


async def ask_serve(variant: Variant, ws: Workspace, questions: Sequence[Question]) -> list[dict[str, Any]]:
    """Every question through one ``memory-router serve``, one at a time (so each latency is a
    query's own), after one warm-up query that is not scored (it loads qmd's model)."""
    state = ws.root / "runs" / variant.file_name.removesuffix(".jsonl")
    config = workspace_config(variant, ws)

    def failed(exc: Exception) -> None:
        print(f"  {variant.name} on {ws.conv}: {exc}; the remaining questions are recorded as errors", file=sys.stderr)

    async with serve(state, config, tier="pro", ready=("qmd", "totalrecall", "lossless"), env=tool_env()) as ask:
        texts = [q.question for q in questions]
        answers = await ask_in_turn(ask, texts, limit=LIMIT, warmup_timeout_ms=WARMUP_TIMEOUT_MS, on_error=failed)
    return [record(variant.name, ws, q, a, ms) for q, (a, ms) in zip(questions, answers, strict=True)]


def bm25_terms(query: str) -> list[str]:
    return [t for t in dict.fromkeys(re.findall(r"\w+", query.lower())) if t not in STOPWORDS]


def ask_bm25(ws: Stores, questions: Sequence[Asked]) -> list[dict[str, Any]]:
    """The plain baseline: FTS5 over the raw turns, terms OR'ed, bm25 order. Its relevance is
    ``|bm25| / (1 + |bm25|)`` (qmd's own squashing), for the calibration table only."""
    conn = sqlite3.connect(f"file:{ws.bm25_db}?mode=ro", uri=True)
    records = []
    try:
        for q in questions:
            t0 = time.perf_counter()
            terms = bm25_terms(q.question)
            rows = []
            if terms:
                match = " OR ".join('"' + t.replace('"', "") + '"' for t in terms)
                rows = conn.execute(
                    "SELECT dia_id, content, bm25(turns) FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?",
                    (match, LIMIT),
                ).fetchall()
            results = [
                {"content": c, "relevance": round(abs(s) / (1 + abs(s)), 4), "source": "bm25", "dia_id": d, "bm25": s}
                for d, c, s in rows
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


# --------------------------------------------------------------------------- report

QUALITY = ("questions", "hit@1", "hit@5", "hit@10", "recall@5", "recall@10")


def _cells(q: dict[str, float], keys: Sequence[str] = QUALITY) -> list[str]:
    return [str(int(q[k])) if k == "questions" else fmt(q[k]) for k in keys]


def report(
    summaries: dict[str, dict[str, Any]],
    oracles: dict[str, dict[str, float]],
) -> None:
    rows = [
        [name, *_cells(s["overall"]), fmt(s["latency_ms"]["median"]), fmt(s["latency_ms"]["p95"])]
        for name, s in summaries.items()
    ]
    rows += [[name, *_cells(q), "", ""] for name, q in oracles.items()]
    table(
        "LoCoMo dev half, categories 1-4: hit@k and evidence recall@k (%), latency (ms)",
        ["variant", *QUALITY, "median ms", "p95 ms"],
        rows,
        note="latency: request written -> answer read, one query at a time through `serve` (bm25: in-process).",
    )
    cats = list(CATEGORIES.values())
    for k in (5, 10):
        rows = [
            [name, *[fmt(s["per_category"].get(c, {}).get(f"recall@{k}", float("nan"))) for c in cats]]
            for name, s in summaries.items()
        ]
        rows += [
            [name, *[fmt(v[c]) for c in cats], fmt(PAPER_OVERALL_WITH_ADVERSARIAL[name])]
            for name, v in PAPER_TABLE3.items()
            if name.endswith(f"top-{k}")
        ]
        table(
            f"Evidence recall@{k} per category (%), beside the paper's Table 3",
            ["variant", *cats, "paper overall*"],
            [r + [""] * (len(cats) + 2 - len(r)) for r in rows],
            note="* the paper's overall includes adversarial questions (category 5), which are not scored here; "
            "its figures are on the 50-conversation first release.",
        )
    table(
        "hit@1 / hit@10 per category (%)",
        ["variant", *[f"{c} @1/@10" for c in cats]],
        [
            [
                name,
                *[
                    f"{fmt(s['per_category'].get(c, {}).get('hit@1', float('nan')))} / "
                    f"{fmt(s['per_category'].get(c, {}).get('hit@10', float('nan')))}"
                    for c in cats
                ],
            ]
            for name, s in summaries.items()
        ],
        note="questions per category: "
        + ", ".join(
            f"{c} {int(next(iter(summaries.values()))['per_category'].get(c, {}).get('questions', 0))}" for c in cats
        ),
    )
    router_report(
        summaries,
        unit="questions",
        sections=(
            ("rule", "rule fired"),
            ("routed_to", "answered by (routed_to/routed_mode)"),
            ("outcome", "why it answered so"),
            ("fallback_reasons", "steps passed over, and why"),
            ("fallbacks_used", "fallbacks_used"),
        ),
    )


# --------------------------------------------------------------------------- main


def load_all(data: Path, names: Sequence[str], *, adversarial: bool = False) -> list[Conversation]:
    convs = []
    for name in names:
        path = data / f"{name}.json"
        try:
            conv = load_conversation(path, adversarial=adversarial)
        except LocomoFileError as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        for problem in conv.problems:
            print(f"  {problem}", file=sys.stderr)
        convs.append(conv)
    return convs


def options() -> argparse.Namespace:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA, help=f"LoCoMo files (default {DATA}, or $LOCOMO_DIR)")
    p.add_argument("--work", type=Path, default=None, help=f"workspaces, reused (default {WORK}/work)")
    p.add_argument(
        "--records",
        type=Path,
        default=None,
        help=f"records directory (default {WORK}/records; with --conv/--questions {WORK}/records-subset)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the report as JSON here")
    p.add_argument("--status", type=Path, default=None, help=f"status line file (default {WORK}/STATUS)")
    p.add_argument("--variant", action="append", default=None, help="router | alone:<b>[:<m>] | bm25 | NAME=JSON")
    p.add_argument("--conv", action="append", default=None, help=f"conversations (default {' '.join(CONVERSATIONS)})")
    p.add_argument("--questions", type=int, default=None, help="at most this many questions per conversation")
    p.add_argument("--tr-layout", choices=LAYOUTS, default="daily", help="Total Recall: memory/daily/ symlinks or not")
    p.add_argument("--no-embed", action="store_true", help="skip qmd embedding (qmd search only)")
    p.add_argument("--replay", action="store_true", help="report on the records already in --records; ask nothing")
    p.add_argument(
        "--adversarial",
        action="store_true",
        help="ask only category 5 (adversarial: the conversation holds no answer) and score nothing; records in "
        f"{WORK}/records-adversarial (read by bench/abstention.py)",
    )
    return p.parse_args()


def run_all(
    variants: Sequence[Variant], convs: Sequence[Conversation], args: argparse.Namespace, embed: bool, records: Path
) -> dict[str, list[dict[str, Any]]]:
    """Ask every question of ``convs`` through every variant; append each conversation's records
    to ``<records>/<variant>.jsonl`` as soon as they are in."""
    records.mkdir(parents=True, exist_ok=True)
    files = {v.name: records / v.file_name for v in variants}
    for path in files.values():
        path.write_bytes(b"")
    by_variant: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    for conv in convs:
        t0 = time.perf_counter()
        ws = build(conv, args.work, layout=args.tr_layout, embed=embed, model=MODEL, log=progress)
        progress(f"conversation {conv.conv}: workspace {'reused' if ws.reused else 'built'} in {lap(t0)}")
        for variant in variants:
            t0 = time.perf_counter()
            if variant.config is None:
                recs = ask_bm25(ws, conv.questions)
            else:
                recs = asyncio.run(ask_serve(variant, ws, conv.questions))
            with files[variant.name].open("ab") as out:
                out.write(b"".join(orjson.dumps(r) + b"\n" for r in recs))
            by_variant[variant.name] += recs
            progress(f"  {variant.name}: {len(recs)} questions in {lap(t0)}")
    return by_variant


def replay(variants: Sequence[Variant], records: Path, work: Path) -> dict[str, list[dict[str, Any]]]:
    """The records already in ``records``, labelled again by the current rule from the workspaces
    in ``work`` (when they are there) and written back: a change of the labelling rule needs no
    new run."""
    workspaces: dict[str, Workspace | None] = {}
    by_variant = {}
    for v in variants:
        path = records / v.file_name
        if not path.is_file():
            raise SystemExit(f"--replay: no records for variant {v.name!r} ({path} is missing)")
        recs = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        for r in recs:
            if r["conv"] not in workspaces:
                workspaces[r["conv"]] = existing_workspace(work, r["conv"])
            ws = workspaces[r["conv"]]
            if ws is not None:
                r["results"] = labelled_results(r["results"], ws, r["evidence"])
        scratch = path.with_suffix(".jsonl.tmp")
        scratch.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
        scratch.replace(path)
        by_variant[v.name] = recs
    missing = sorted(conv for conv, ws in workspaces.items() if ws is None)
    if missing:
        progress(f"--replay: no workspace for conversations {missing} in {work}: their labels are kept as recorded")
    return by_variant


def existing_workspace(work: Path, conv: str) -> Workspace | None:
    try:
        manifest = json.loads((work / conv / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return _from_manifest(conv, work / conv, manifest, reused=True)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def lap(t0: float) -> str:
    return f"{time.perf_counter() - t0:.1f} s"


def oracles_of(variants: Sequence[Variant], by_variant: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    singles = [v.name for v in variants if v.name == "bm25" or v.name.startswith("alone:")]
    out = {}
    if len(singles) > 1:
        out["oracle: best single configuration per question"] = oracle(by_variant, singles)
    for v in variants:
        if v.config is not None and not v.name.startswith("alone:"):
            chain = chain_oracle(v, by_variant)
            if chain:
                out[f"oracle: best step of the rule's chain ({v.name})"] = chain
    return out


def chain_oracle(variant: Variant, by_variant: dict[str, list[dict[str, Any]]]) -> dict[str, float] | None:
    """Per question, the best of the ``alone:`` records of the steps of the rule the router fired
    (steps not run alone, Cognee here, are left out). None when a rule has no such step."""
    assert variant.config is not None

    def alone(step: dict[str, Any]) -> str:
        mode = f":{step.get('mode') or 'query'}" if step["backend"] == "qmd" else ""  # qmd's default mode
        return f"alone:{step['backend']}{mode}"

    extended = variant.config.get("table", "extended") != "spec"
    chains = {
        rule["number"]: [alone(s) for s in [*rule["chain"], *(rule.get("extend", []) if extended else [])]]
        for rule in variant.config["rules"]
    }
    index = {n: {r["qid"]: r for r in recs} for n, recs in by_variant.items() if n.startswith("alone:")}
    candidates = []
    for r in by_variant[variant.name]:
        steps = [n for n in chains.get((r.get("rule") or {}).get("number"), []) if n in index]
        if not steps:
            return None
        candidates.append([index[n][r["qid"]] for n in steps if r["qid"] in index[n]])
    return best_of(candidates) if candidates else None


def main() -> int:
    args = options()
    quick = args.quick
    if not args.replay and not (args.data / f"{(args.conv or [QUICK_CONVERSATION])[0]}.json").is_file():
        print(f"LoCoMo data not found in {args.data} (--data or $LOCOMO_DIR); nothing measured.")
        return 0
    variants = [parse_variant(v) for v in (args.variant or (QUICK_VARIANTS if quick else BUILTIN))]
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise SystemExit(f"variant names must be distinct: {names}")
    embed = not (args.no_embed or quick) and MODEL.is_file()
    args.work = args.work or (scratch_dir("mr-locomo-") if quick else WORK / "work")
    # A subset run never overwrites the full run's records (the calibration is fitted on those).
    subset = bool(args.conv or args.questions) and not args.replay
    records = args.records or (args.work / "records" if quick else WORK / ("records-subset" if subset else "records"))
    if args.adversarial and not args.records:
        records = WORK / "records-adversarial"  # never the scored records the calibration is fitted on
    limit = args.questions or (QUICK_QUESTIONS if quick else None)

    print(f"LoCoMo recall bench; {environment_line()}")
    started = time.perf_counter()
    if args.replay:
        by_variant = replay(variants, records, args.work)
        evidence = {}
        print(f"replaying the records in {records}")
    else:
        convs = load_all(
            args.data, args.conv or ([QUICK_CONVERSATION] if quick else CONVERSATIONS), adversarial=args.adversarial
        )
        for conv in convs:
            conv.questions = conv.questions[:limit] if limit else conv.questions
        evidence = {
            "conversations": [c.conv for c in convs],
            "repaired": sum(c.repaired for c in convs),
            "dropped": sum(c.dropped for c in convs),
            "questions_skipped": sum(c.skipped_questions for c in convs),
        }
        print(
            f"{len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions of "
            f"{'category 5 (adversarial)' if args.adversarial else 'categories 1-4'}; "
            f"evidence ids: {evidence['repaired']} repaired, {evidence['dropped']} dropped; "
            f"{evidence['questions_skipped']} questions skipped (no usable evidence; named on stderr)"
        )
        if not embed:
            print("qmd embedding: off (qmd vsearch/query answer BACKEND_UNAVAILABLE)")
        by_variant = run_all(variants, convs, args, embed, records)
        if args.adversarial:  # nothing to score recall against: bench/abstention.py reads the records
            print(f"records: {records}/<variant>.jsonl; {time.perf_counter() - started:.0f} s (bench/abstention.py)")
            return 0

    summaries = {name: summarise(recs) for name, recs in by_variant.items()}
    oracles = oracles_of(variants, by_variant)
    report(summaries, oracles)
    print(f"\nrecords: {records}/<variant>.jsonl; {time.perf_counter() - started:.0f} s")
    questions = len(next(iter(by_variant.values()), []))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "environment": environment_line(),
            "data": str(args.data),
            "questions": questions,
            "evidence": evidence,
            "embedded": embed,
            "tr_layout": args.tr_layout,
            "records": str(records),
            "variants": summaries,
            "oracles": oracles,
            "paper_table3": PAPER_TABLE3,
        }
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    status = args.status or (None if quick or args.replay else WORK / "STATUS")
    if status:
        write_status(status, summaries, questions, records, args.json)
    return 0


def write_status(
    path: Path, summaries: dict[str, dict[str, Any]], questions: int, records: Path, js: Path | None
) -> None:
    headline = "; ".join(
        f"{n} hit@1 {fmt(s['overall']['hit@1'])} hit@10 {fmt(s['overall']['hit@10'])} "
        f"R@10 {fmt(s['overall']['recall@10'])}"
        for n, s in summaries.items()
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(
            f"{stamp} bench/locomo.py finished: {questions} questions, variants {', '.join(summaries)}; "
            f"records {records}/<variant>.jsonl" + (f"; report JSON {js}" if js else "") + f". Headline: {headline}\n"
        )


if __name__ == "__main__":
    sys.exit(main())
