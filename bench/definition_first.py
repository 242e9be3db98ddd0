"""Top-1 of "find the function X" queries on real qmd, with and without definition-first ranking.

    python3 bench/definition_first.py [--quick] [--repeat N]

Writes the generated project of ``tests/support/definition_corpus.py`` (about 30 TypeScript + markdown
files in which callers mention each symbol more often than its definition does), indexes it with
the real qmd CLI, and routes the twelve queries through the router (rule 1 -> ``qmd search``):

* before: definition-first switched off (the adapter's previous ranking: qmd's BM25 order);
* after:  as shipped.

The same twelve queries then go to Total Recall directly, over a memory about the same project
(today's log and working memory mention each symbol; an archived note per module quotes its
definition in a code block), before and after.

Prints, per query, the top hit before and after and whether it is the defining file, then the
top-1 counts, the median router time per query (wall clock, dominated by the qmd process) and
the median time of the definition-first step alone (reading the hits' files and scanning them,
on qmd's answer to the query). ``--quick`` runs three queries once (CI smoke; figures meaningless).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from datetime import date
from pathlib import Path
from unittest.mock import patch

from _common import REPO, median, parser, repeats, table

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd import parse as _qmd_parse
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.totalrecall import adapter as totalrecall
from memory_router.backends.totalrecall import score as totalrecall_score
from memory_router.config.installed import load_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config
from memory_router.routing.router import Router

sys.path.insert(0, str(REPO))  # the corpus the tests use, tests/support/definition_corpus.py
from tests.support.definition_corpus import QUERIES, SYMBOLS, memory_note, write_corpus, write_memory  # noqa: E402


def no_target(query: str) -> None:
    """Definition-first off: no query names a definition to put first."""
    return None


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = repeats(args, 5)
    queries = QUERIES[:3] if args.quick else QUERIES
    tmp = Path(tempfile.mkdtemp(prefix="defs-bench-"))
    try:
        context = BackendContext(state_dir=tmp / "state", cwd=tmp)
        settings = {
            "index_path": str(tmp / "idx" / "index.sqlite"),
            "config_dir": str(tmp / "idx" / "cfg"),
            "collections": ["port"],
        }
        backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context)
        try:
            transport = backend.transport()
        except qmd_adapter.QmdNotFound as exc:
            print(f"qmd is not installed ({exc}); nothing measured", file=sys.stderr)
            return 0
        files = write_corpus(tmp / "port")
        build_collection(transport, tmp / "port", "port", "**/*.{md,ts}", tmp / "idx" / "index.lock")
        config = json.loads(packaged_config().read_text())
        config["backends"]["qmd"] = {"type": "qmd", **settings}
        config["backends"]["totalrecall"]["root"] = str(tmp / "no-memory")
        (tmp / "no-memory").mkdir()
        (tmp / "rc.json").write_text(json.dumps(config))
        (tmp / "backends.json").write_text(
            json.dumps(
                {"tier": "starter", "backends": {"qmd": {"status": "ready"}, "totalrecall": {"status": "ready"}}}
            )
        )
        router = Router(load_config(tmp / "rc.json"), context=context)
        installed = load_installed(tmp / "backends.json")

        def run(query: str, enabled: bool) -> tuple[str, int | None, float, int]:
            # off: qmd's parser finds no definition target (where it looks the function up)
            with nullcontext() if enabled else patch.object(_qmd_parse, "definition_target", no_target):
                times = []
                for _ in range(n):
                    started = time.perf_counter()
                    envelope = asyncio.run(router.route(query, installed))
                    times.append((time.perf_counter() - started) * 1000)
            envelope_sent[query] = str(envelope.attempts[0]["query_sent"])
            top = envelope.results[0] if envelope.results else None
            extra = top.extra if top else {}
            assert envelope.rule is not None  # a query that runs matched a rule (the default at least)
            return str(extra.get("path", "-")), extra.get("definition_line"), median(times), envelope.rule["number"]

        files_reader = _qmd_parse.CollectionFiles(backend.config_file(transport.env))

        def hook_ms(query: str) -> float:
            """The definition-first step alone, on qmd's answer to the query's keyword form."""
            sent = envelope_sent[query]
            answer = asyncio.run(transport.search("search", sent, 10, ("port",)))
            hits_ = answer.hits or []
            results = _qmd_parse.to_results(hits_, "search", "qmd")
            samples = []
            for _ in range(max(n, 5)):
                started = time.perf_counter()
                _qmd_parse.definitions_first(
                    query, hits_, results, _qmd_parse.CollectionFiles(files_reader.config_file)
                )
                samples.append((time.perf_counter() - started) * 1000)
            return median(samples)

        envelope_sent: dict[str, str] = {}
        rows = []
        hits = {"before": 0, "after": 0}
        times: dict[str, list[float]] = {"before": [], "after": []}
        for query, defining in queries:
            before, _, before_ms, rule = run(query, False)
            after, line, after_ms, _ = run(query, True)
            hits["before"] += before == defining
            hits["after"] += after == defining
            times["before"].append(before_ms)
            times["after"].append(after_ms)
            rows.append(
                [
                    query,
                    str(rule),
                    before + (" *" if before == defining else ""),
                    after + (" *" if after == defining else "") + (f" :{line}" if line else ""),
                ]
            )
        step_ms = [hook_ms(query) for query, _ in queries]
        print(f"{len(files)} files; real qmd search through the router; * = the file defining the symbol\n")
        table("Top hit per query", ["query", "rule", "before", "after (:definition line)"], rows)
        table(
            "Top-1 and time",
            ["ranking", "top-1 correct", "median ms/query"],
            [
                ["before (BM25 order)", f"{hits['before']}/{len(queries)}", f"{median(times['before']):.1f}"],
                ["after (definition-first)", f"{hits['after']}/{len(queries)}", f"{median(times['after']):.1f}"],
            ],
        )
        table(
            "Definition-first step alone (ms per answer of up to 10 hits)",
            ["median", "max"],
            [[f"{median(step_ms):.2f}", f"{max(step_ms):.2f}"]],
        )
        total_recall(tmp / "memory", queries)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def total_recall(root: Path, queries: tuple[tuple[str, str], ...]) -> None:
    """Top-1 of Total Recall over the project's memory, definition-first off and on."""
    write_memory(root, date.today().isoformat())
    backend = totalrecall.TotalRecallBackend("totalrecall", root)
    notes = {s.query: memory_note(s) for s in SYMBOLS}
    rows, hits = [], {"before": 0, "after": 0}
    for query, _ in queries:
        tops = []
        for label in ("before", "after"):
            # before: Total Recall's scorer finds no definition target (where it looks the function up)
            with (
                patch.object(totalrecall_score, "definition_target", no_target) if label == "before" else nullcontext()
            ):
                response = backend.search_blocking(BackendRequest(query=query, limit=10), threading.Event())
            top = response.results[0].extra if response.results else {}
            hits[label] += top.get("path") == notes[query]
            tops.append(f"{top.get('path', '-')}" + (f" :{top['definition_line']}" if "definition_line" in top else ""))
        rows.append([query, *tops])
    table(
        "Total Recall top hit per query (the note quoting the definition is right)", ["query", "before", "after"], rows
    )
    table(
        "Total Recall top-1",
        ["ranking", "top-1 correct"],
        [["before", f"{hits['before']}/{len(queries)}"], ["after", f"{hits['after']}/{len(queries)}"]],
    )


if __name__ == "__main__":
    raise SystemExit(main())
