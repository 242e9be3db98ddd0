"""Labels, metrics and tables of ``bench/locomo.py``.

**Labelling rule.** A result is labelled with the dia_ids it holds:

* a raw turn (Lossless message hit: ``message_id``; the BM25 baseline: ``dia_id``) -> that turn's
  id, from the bench's map (the id is never in the stored text);
* a daily-note hit (qmd, Total Recall) -> every ``D<n>:<k>`` written in its content, plus, when the
  result gives ``path`` and ``line``, the ids of the note's bullets that its content shows: the
  bullets within a content's length of ``line`` whose text is a content line, or starts with one
  (a line cut off by qmd's snippet, its label lost). The note is found by file name, so Total
  Recall's ``memory/daily/`` symlink and qmd's collection path both lead to it.

A result *hits* when one of its labels is an evidence id of the question. Per question:
``hit@k`` = some result of the first k hits; ``recall@k`` = the share of the question's evidence
ids found among the labels of the first k results. Both are averaged over questions (in %).
"""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from _locomo_data import CATEGORIES
from _locomo_workspace import Stores, labels_in

BUCKETS = ((0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.0))
KS = (1, 5, 10)
TIMEOUT_CODES = frozenset({"QUERY_TIMEOUT", "DEADLINE_EXCEEDED"})

# The paper's Table 3 (RAG, evidence recall@k; on the 50-conversation first release). Its
# "overall" includes the adversarial category, which is not scored here.
PAPER_TABLE3 = {
    "paper: dialogs, top-5": {"single-hop": 66.2, "multi-hop": 34.4, "temporal": 89.2, "open-domain": 38.5},
    "paper: dialogs, top-10": {"single-hop": 72.8, "multi-hop": 47.4, "temporal": 97.3, "open-domain": 53.8},
    "paper: observations, top-5": {"single-hop": 52.9, "multi-hop": 40.1, "temporal": 81.1, "open-domain": 38.5},
    "paper: observations, top-10": {"single-hop": 57.4, "multi-hop": 53.1, "temporal": 83.8, "open-domain": 46.2},
}
PAPER_OVERALL_WITH_ADVERSARIAL = {
    "paper: dialogs, top-5": 58.8,
    "paper: dialogs, top-10": 67.5,
    "paper: observations, top-5": 49.6,
    "paper: observations, top-10": 57.1,
}


def label(result: dict[str, Any], ws: Stores) -> list[str]:
    """The dia_ids a result holds, by the rule in the module docstring."""
    ids: list[str] = []
    mid = result.get("message_id")
    if isinstance(mid, int) and mid in ws.message_dia:
        ids.append(ws.message_dia[mid])
    if isinstance(result.get("dia_id"), str):
        ids.append(result["dia_id"])
    raw = result.get("content")
    content = raw if isinstance(raw, str) else ""
    path, line = result.get("path"), result.get("line")
    if isinstance(path, str) and path.endswith(".md"):
        ids += labels_in(content)
        name = PurePosixPath(path).name
        if isinstance(line, int) and name in ws.note_lines:
            ids += covered_bullets(ws.note_lines[name], note_text(str(ws.memory / name)), line, content)
    return list(dict.fromkeys(ids))


def covered_bullets(
    bullets: Mapping[int, tuple[str, ...]], note: tuple[str, ...], line: int, content: str
) -> list[str]:
    """The ids of the note's bullets that the content shows, near ``line``. qmd's ``line`` is its
    best-matching line, not the snippet's first (which starts a line or so earlier), so lines are
    matched by text around it: a content line equal to the bullet, or a cut-off start of it (a
    label lost to truncation)."""
    shown = [t.strip().removesuffix("...") for t in content.splitlines() if t.strip()]
    ids: list[str] = []
    for n in range(max(1, line - len(shown) - 1), line + len(shown) + 2):
        if n not in bullets or n > len(note):
            continue
        bullet = note[n - 1].strip()
        if any(t == bullet or (len(t) >= 8 and bullet.startswith(t)) for t in shown):
            ids += bullets[n]
    return ids


@functools.lru_cache(maxsize=256)
def note_text(path: str) -> tuple[str, ...]:
    """A daily note's lines (empty when it cannot be read: then only labels in the content count)."""
    try:
        return tuple(Path(path).read_text(encoding="utf-8").split("\n"))
    except OSError:
        return ()


def labelled_results(results: Sequence[dict[str, Any]], ws: Stores, evidence: Iterable[str]) -> list[dict[str, Any]]:
    """Envelope results -> the records' results: rank, relevance, source, content, dia_ids, hit,
    then every other key the result carried (path, line, message_id, ...)."""
    wanted = set(evidence)
    out = []
    for rank, r in enumerate(results, 1):
        ids = label(r, ws)
        first = {
            "rank": rank,
            "relevance": r.get("relevance"),
            "source": r.get("source"),
            "content": r.get("content"),
            "dia_ids": ids,
            "hit": bool(wanted.intersection(ids)),
        }
        out.append({**first, **{k: v for k, v in r.items() if k not in first}})
    return out


# --------------------------------------------------------------------------- per question


def hit_at(record: dict[str, Any], k: int) -> bool:
    return any(r["hit"] for r in record["results"][:k])


def recall_at(record: dict[str, Any], k: int) -> float:
    evidence = set(record["evidence"])
    found = {i for r in record["results"][:k] for i in r["dia_ids"]}
    return len(evidence & found) / len(evidence)


def outcome(record: dict[str, Any]) -> str:
    """Why the router answered as it did: ``accepted at step k (backend/mode)``, or, when no step
    was accepted, what the answer is."""
    attempts = record.get("attempts") or []
    merged = [a for a in attempts if a.get("accepted")]
    if len(merged) > 1:  # the fused strategy: every answering step is merged
        return f"fused: {len(merged)} of {len(attempts)} steps answered"
    for k, a in enumerate(attempts, 1):
        if a.get("accepted"):
            return f"accepted at step {k} ({step_name(a)})"
    if record["status"] in ("success", "partial"):
        return "no step accepted: best weak answer returned"
    if record["status"] == "empty":
        return "no step accepted: empty"
    return f"no step accepted: error {record.get('error_code')}"


def fallback_reason(attempt: dict[str, Any]) -> str:
    """Why the router went past this step."""
    code = attempt.get("error_code")
    if attempt.get("status") == "error":
        return "timeout" if code in TIMEOUT_CODES else f"error {code}"
    if attempt.get("status") == "empty" or not attempt.get("result_count"):
        return "empty"
    return "low relevance"


def rule_name(record: dict[str, Any]) -> str:
    rule = record.get("rule")
    if isinstance(rule, dict):
        return f"{rule.get('number')} {rule.get('id')} ({rule.get('strength')})"
    return str(rule) if rule else "-"


def step_name(attempt: dict[str, Any]) -> str:
    return f"{attempt.get('backend')}/{attempt.get('mode')}" if attempt.get("mode") else str(attempt.get("backend"))


# --------------------------------------------------------------------------- per variant


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else math.nan


def quality(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = len(records)
    out: dict[str, float] = {"questions": n}
    for k in KS:
        out[f"hit@{k}"] = pct(sum(hit_at(r, k) for r in records), n)
    for k in (5, 10):
        out[f"recall@{k}"] = pct(sum(recall_at(r, k) for r in records), n)
    return out


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Everything the report says about one variant."""
    durations = [float(r["duration_ms"]) for r in records if r.get("duration_ms") is not None]
    per_category = {
        CATEGORIES[c]: quality([r for r in records if r["category"] == c])
        for c in CATEGORIES
        if any(r["category"] == c for r in records)
    }
    statuses = Counter(r["status"] for r in records)
    summary: dict[str, Any] = {
        "overall": quality(records),
        "per_category": per_category,
        "latency_ms": {"median": percentile(durations, 50), "p95": percentile(durations, 95)},
        "status": dict(statuses),
        "error_codes": dict(Counter(r["error_code"] for r in records if r.get("error_code"))),
        "rule": dict(Counter(rule_name(r) for r in records).most_common()),
        "routed_to": dict(Counter(answered_by(r) for r in records if r.get("routed_to")).most_common()),
        "outcome": dict(Counter(outcome(r) for r in records).most_common()),
        "fallback_reasons": dict(
            Counter(
                f"step {k} {step_name(a)}: {fallback_reason(a)}"
                for r in records
                for k, a in enumerate(r.get("attempts") or [], 1)
                if not a.get("accepted")
            ).most_common()
        ),
        "fallbacks_used": {
            str(k): v for k, v in sorted(Counter(r.get("fallbacks_used") or 0 for r in records).items())
        },
        "calibration": calibration(records),
        "result_calibration": result_calibration(records),
    }
    return summary


def bucket_of(value: float) -> int:
    return min(len(BUCKETS) - 1, max(0, int(value / 0.2)))


def calibration(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per answering backend/mode: normalized_relevance bucket -> share of the answers in it,
    hit@10 and hit@1 rates in it. Only answers with results count (an empty or failed answer
    has no relevance to calibrate)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["results"]:
            groups[answered_by(r)].append(r)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, rs in sorted(groups.items()):
        rows = []
        for i, (lo, hi) in enumerate(BUCKETS):
            inside = [r for r in rs if bucket_of(float(r.get("normalized_relevance") or 0.0)) == i]
            rows.append(
                {
                    "bucket": f"[{lo:.1f},{hi:.1f}{']' if i == len(BUCKETS) - 1 else ')'}",
                    "answers": len(inside),
                    "share": pct(len(inside), len(rs)),
                    "hit@10": pct(sum(hit_at(r, 10) for r in inside), len(inside)),
                    "hit@1": pct(sum(hit_at(r, 1) for r in inside), len(inside)),
                }
            )
        above = [r for r in rs if float(r.get("normalized_relevance") or 0.0) >= 0.4]
        rows.append(
            {
                "bucket": ">= 0.4",
                "answers": len(above),
                "share": pct(len(above), len(rs)),
                "hit@10": pct(sum(hit_at(r, 10) for r in above), len(above)),
                "hit@1": pct(sum(hit_at(r, 1) for r in above), len(above)),
            }
        )
        out[name] = rows
    return out


def result_calibration(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per answering backend/mode, each *result's* own relevance bucket -> how many results and
    the share of them that hold an evidence id (the per-result precision)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[answered_by(r)] += r["results"]
    out: dict[str, list[dict[str, Any]]] = {}
    for name, results in sorted(groups.items()):
        if not results:
            continue
        rows = []
        for i, (lo, hi) in enumerate(BUCKETS):
            inside = [x for x in results if bucket_of(float(x.get("relevance") or 0.0)) == i]
            rows.append(
                {
                    "bucket": f"[{lo:.1f},{hi:.1f}{']' if i == len(BUCKETS) - 1 else ')'}",
                    "results": len(inside),
                    "hit": pct(sum(x["hit"] for x in inside), len(inside)),
                }
            )
        out[name] = rows
    return out


def answered_by(record: dict[str, Any]) -> str:
    backend = record.get("routed_to") or (record["results"][0].get("source") if record["results"] else None)
    mode = record.get("routed_mode")
    return f"{backend}/{mode}" if mode else str(backend)


def best_of(candidates: Sequence[Sequence[dict[str, Any]]]) -> dict[str, float]:
    """Per question (one list of candidate records each) and per metric, the best candidate: an
    upper bound for any way of picking one of them per question."""
    n = len(candidates)
    out: dict[str, float] = {"questions": n}
    for k in KS:
        out[f"hit@{k}"] = pct(sum(any(hit_at(r, k) for r in c) for c in candidates), n)
    for k in (5, 10):
        out[f"recall@{k}"] = pct(sum(max((recall_at(r, k) for r in c), default=0.0) for c in candidates), n)
    return out


def oracle(by_variant: dict[str, list[dict[str, Any]]], names: Sequence[str]) -> dict[str, float]:
    """Per question, the best of the variants ``names``."""
    index = {n: {r["qid"]: r for r in by_variant[n]} for n in names}
    qids = sorted({qid for n in names for qid in index[n]})
    return best_of([[index[n][q] for n in names if q in index[n]] for q in qids])
