"""Total Recall over 100 / 1,000 / 10,000 memory files: cold and warm search time.

A generated memory root in Total Recall's layout (CLAUDE.local.md, memory/registers/*.md,
memory/daily/YYYY-MM-DD.md, memory/archive/**.md; ~12 entries per file) is searched through the
adapter. Words follow Zipf's law (frequency ~ 1/rank) over a 2,000-word vocabulary with the
domain words of the queries at ranks 10-110, so "database" is in ~10% of entries
(``--vocab realistic``); ``--vocab dense`` draws from those 100 domain words only, so the query
words are in most entries (a worst case for scoring).

* cold - a new backend instance per query (the CLI: every file read and parsed);
* warm - the same instance again (the daemon: files unchanged, so only the stat() walk that
  detects changes, and the scoring).

Warm also shows its two parts: ``refresh`` (glob + stat every file) and ``score``. Target: 10k
files under 50 ms warm.

    python bench/totalrecall_scale.py [--quick] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import gc
import random
import shutil
import tempfile
import threading
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from _common import environment_line, fmt, median, parser, repeats, table, verdict

from memory_router.backends.base import BackendRequest
from memory_router.backends.totalrecall.adapter import TotalRecallBackend
from memory_router.backends.totalrecall.score import score

TARGET_WARM_MS = 50.0
QUERIES = [
    "what did we decide about the database schema",
    "auth middleware token refresh",
    "parseAuthToken",
    "rate limiting strategy for the webhook queue",
    "what was the last thing",  # no content terms: the most recent entries
]
WORDS = (
    "database schema migration postgres index query cache redis auth token session middleware "
    "refresh login password webhook queue retry backoff rate limit billing invoice payment stripe "
    "deploy pipeline docker kubernetes staging release rollback logging metrics alert oncall "
    "frontend react component router api endpoint graphql pagination search ranking embedding "
    "vector model prompt latency timeout error handling validation test fixture flaky mobile "
    "ios android push notification email template customer onboarding pricing plan feature flag "
    "experiment dashboard admin permissions role audit compliance backup restore encryption key "
    "rotation secret vault config yaml parser tokenizer compiler cli daemon socket"
).split()
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana"]


GENERIC = "update fix added check issue work team today plan".split()


def vocabulary(kind: str) -> tuple[list[str], list[float]]:
    """(words, cumulative weights) for ``random.choices``."""
    if kind == "dense":
        words = list(WORDS)
        weights = [1 / (r + 1) ** 1.2 for r in range(len(words))]
    else:
        rng = random.Random(99)
        syllables = "ka lo mi ren sto vak pel dri nor tas qui bel zon fer gu lat".split()
        filler: set[str] = set()
        while len(filler) < 1900:
            filler.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 3))))
        domain = list(WORDS)
        rng.shuffle(domain)
        words = [*GENERIC, *domain, *sorted(filler)]
        weights = [1 / (r + 1) for r in range(len(words))]
    cumulative, acc = [], 0.0
    for w in weights:
        acc += w
        cumulative.append(acc)
    return words, cumulative


def make_sentence(rng: random.Random, vocab: tuple[list[str], list[float]]) -> str:
    words = rng.choices(vocab[0], cum_weights=vocab[1], k=rng.randint(6, 14))
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words)), rng.choice(["parseAuthToken", "UserService", "retry_with_backoff"]))
    return f"{rng.choice(PEOPLE)} " + " ".join(words)


def build_root(root: Path, files: int, seed: int = 3, vocab_kind: str = "realistic") -> Path:
    """A Total Recall memory root with ``files`` files (1 working, ~2% registers, ~60% daily, rest archive)."""
    rng = random.Random(seed)
    vocab = vocabulary(vocab_kind)

    def sentence(rng: random.Random) -> str:
        return make_sentence(rng, vocab)

    registers = max(1, files // 50)
    daily = max(1, (files - 1 - registers) * 6 // 10)
    archive = max(0, files - 1 - registers - daily)
    (root / "memory" / "registers").mkdir(parents=True)
    (root / "memory" / "daily").mkdir()
    (root / "memory" / "archive").mkdir()
    (root / "CLAUDE.local.md").write_text("# Working memory\n\n" + "".join(f"- {sentence(rng)}\n" for _ in range(12)))
    for i in range(registers):
        body = [f"# Register {i}\n"]
        for j in range(6):
            body.append(
                f"\n## {sentence(rng)[:40]}\n- **claim**: {sentence(rng)}\n"
                f"- **why**: {sentence(rng)}\n- **last_verified**: 2026-11-{1 + j:02d}\n"
            )
        (root / "memory" / "registers" / f"register-{i}.md").write_text("".join(body))
    today = date(2026, 12, 1)
    for i in range(daily):
        day = today - timedelta(days=i)
        lines = [f"# {day.isoformat()}\n\n"]
        for h in range(12):
            lines.append(f"- [{8 + h % 12:02d}:{rng.randrange(60):02d}] {sentence(rng)}\n")
        (root / "memory" / "daily" / f"{day.isoformat()}.md").write_text("".join(lines))
    for i in range(archive):
        folder = root / "memory" / "archive" / f"{2020 + i % 6}-q{1 + i % 4}"
        folder.mkdir(exist_ok=True)
        paras = "\n\n".join(sentence(rng) + ". " + sentence(rng) for _ in range(12))
        (folder / f"topic-{i}.md").write_text(f"# Archive {i}\n\n{paras}\n")
    return root


def timed_search(backend: TotalRecallBackend, query: str) -> float:
    request, never = BackendRequest(query=query, limit=10), threading.Event()
    t0 = time.perf_counter()
    response = backend.search_blocking(request, never)
    elapsed = (time.perf_counter() - t0) * 1000
    if response.status == "error":
        raise SystemExit(f"search failed: {response.error_message}")
    return elapsed


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", default=None, help="comma-separated file counts (default 100,1000,10000)")
    p.add_argument(
        "--vocab",
        choices=["realistic", "dense"],
        default="realistic",
        help="word distribution of the generated memory (see above)",
    )
    args = p.parse_args()
    sizes = [int(s) for s in (args.sizes or ("20,60" if args.quick else "100,1000,10000")).split(",")]
    reps = repeats(args, 5)
    rows, parts = [], []
    print(f"Total Recall scaling: {args.vocab} vocabulary; queries {QUERIES}; {environment_line()}")
    for size in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="mr-bench-tr-"))
        try:
            root = build_root(tmp, size, vocab_kind=args.vocab)
            entries = 0
            cold: list[float] = []
            cold_reps = reps if size < 10_000 else max(1, min(reps, 3))
            for r in range(cold_reps):
                backend = TotalRecallBackend("totalrecall", root)
                cold.append(timed_search(backend, QUERIES[r % len(QUERIES)]))
                entries = len(backend._index.entries)
            backend = TotalRecallBackend("totalrecall", root)
            timed_search(backend, QUERIES[0])
            warm_rep: list[tuple[float, float]] = []
            refresh_ms, score_ms = [], []
            gc.collect()
            for _ in range(reps):
                samples = [timed_search(backend, q) for q in QUERIES for _ in range(3)]
                warm_rep.append((median(samples), max(samples)))
                t0 = time.perf_counter()
                backend._index.refresh(root)
                t1 = time.perf_counter()
                for q in QUERIES:
                    score(backend._index, q, 10, datetime.now(timezone.utc))
                t2 = time.perf_counter()
                refresh_ms.append((t1 - t0) * 1000)
                score_ms.append((t2 - t1) * 1000 / len(QUERIES))
            warm = median(w[0] for w in warm_rep)
            rows.append(
                [
                    f"{size:,}",
                    f"{entries:,}",
                    fmt(median(cold)),
                    fmt(warm, 2),
                    fmt(median(w[1] for w in warm_rep), 2),
                    verdict(warm, TARGET_WARM_MS) if size >= 10_000 else "",
                ]
            )
            parts.append([f"{size:,}", fmt(median(refresh_ms), 2), fmt(median(score_ms), 2)])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    table(
        "Total Recall search, ms (median over queries and repeats)",
        ["files", "entries", "cold", "warm", "warm max", "10k warm < 50 ms"],
        rows,
        note="cold = new backend instance (read + parse every file); warm = same instance (daemon cache).",
    )
    table("Warm search split, ms", ["files", "refresh (glob+stat)", "score (mean/query)"], parts)


if __name__ == "__main__":
    main()
