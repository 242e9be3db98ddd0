"""What choosing a long note's excerpt costs a Total Recall search (memory_router/backends/totalrecall/shown.py).

A memory root of session notes as OpenClaw's session-memory hook writes them (``memory/
YYYY-MM-DD-HHMM.md``: a header, then the session's last fifteen messages, one per line, ~10,000
characters a note) is searched through the adapter, warm (the daemon's case: the index built, no
file changed), ten results a query. Each query is timed twice in a row, paired: once as shipped
(the result shows the note's first lines and the part that holds the query) and once showing the
plain first 2,000 characters (``shown_part`` replaced by the plain cut), and the ratio of the
medians is printed. A query that names a word of a later message makes every hit's excerpt move.

    python bench/totalrecall_excerpt.py [--quick] [--notes 50] [--repeat 30]
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import environment_line, fmt, median, parser, repeats, scratch_dir, table

from memory_router.backends.base import BackendRequest
from memory_router.backends.totalrecall import shown
from memory_router.backends.totalrecall.adapter import TotalRecallBackend
from memory_router.backends.totalrecall.parse import Entry
from memory_router.backends.totalrecall.shown import Shown

TOPICS = "trip budget recipe garden guitar marathon laptop vet painting wedding".split()
FILLER = (
    "That sounds like a good plan; here are a few things to keep in mind, step by step, with the "
    "details you asked for and a short list of options to compare before you decide. "
)
QUERIES = [
    "How much did I spend on the guitar lessons?",  # a topic word: in the later messages of some notes
    "What did I say about the marathon training plan?",
    "Which recipe did I try for the garden party?",
]


def session_note(rng: random.Random, n: int) -> str:
    """One note: fifteen messages, a topic named in the opening one and again in a later one."""
    topic, later = rng.sample(TOPICS, 2)
    messages = [f"I'm thinking about my {topic} this week. {FILLER}"]
    for i in range(1, 15):
        word = later if i == 11 else rng.choice(TOPICS)
        messages.append(f"Message {i} about the {word}. {FILLER * 3}")
    lines = [f"# Session: 2023-05-{1 + n % 28:02d} 10:{n % 60:02d}:00 UTC", "", "## Conversation Summary", ""]
    lines += [f"{'user' if i % 2 == 0 else 'assistant'}: {json.dumps(m)}" for i, m in enumerate(messages)]
    return "\n".join(lines) + "\n"


def build(root: Path, notes: int) -> None:
    rng = random.Random(29)
    (root / "memory").mkdir(parents=True)
    for n in range(notes):
        (root / "memory" / f"2023-05-{1 + n % 28:02d}-{1000 + n}.md").write_text(session_note(rng, n))


SHIPPED = shown.shown_part


def show_with(choose: Callable[[Entry, Any], Shown]) -> None:
    """Makes the adapter's results show what ``choose`` picks (the adapter looks ``shown_part`` up
    in its module at each long entry)."""
    vars(shown)["shown_part"] = choose


def timed(backend: TotalRecallBackend, query: str) -> float:
    started = time.perf_counter()
    response = asyncio.run(backend.search(BackendRequest(query=query, limit=10)))
    assert response.results, "the generated notes answer every query"
    return (time.perf_counter() - started) * 1000


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=50, help="session notes in the memory root (default 50)")
    args = p.parse_args()
    notes = 10 if args.quick else args.notes
    n = repeats(args, 30)
    root = scratch_dir("mr-tr-excerpt-")
    build(root, notes)
    backend = TotalRecallBackend("totalrecall", root)

    def plain(entry: Entry, weights: Any) -> Shown:
        return Shown(entry.text)  # the plain first 2,000 characters

    rows = []
    for query in QUERIES:
        timed(backend, query)  # builds the index once
        excerpt_ms, plain_ms = [], []
        for _ in range(n):
            show_with(SHIPPED)
            excerpt_ms.append(timed(backend, query))
            show_with(plain)
            plain_ms.append(timed(backend, query))
        show_with(SHIPPED)
        moved = sum(
            1
            for r in asyncio.run(backend.search(BackendRequest(query=query, limit=10))).results
            if "end_line" in r.extra
        )
        rows.append(
            [
                query,
                str(moved),
                fmt(median(plain_ms), 2),
                fmt(median(excerpt_ms), 2),
                fmt(median(excerpt_ms) / median(plain_ms), 2),
            ]
        )
    print(environment_line())
    table(
        f"Total Recall warm search over {notes} session notes: plain cut vs excerpt (median ms of {n} paired runs)",
        ["query", "hits with an excerpt", "plain ms", "excerpt ms", "ratio"],
        rows,
        note="excerpt: the note's first lines and the later part holding the most of the query (what ships).",
    )


if __name__ == "__main__":
    main()
