"""Total Recall answering "find the function X": entries whose code defines X come first, with
the definition's line in the memory file; usage queries keep the mention ranking."""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.totalrecall.adapter import TotalRecallBackend
from memory_router.backends.totalrecall.parse import parse_file

from ..support.budget import examples

TODAY = date.today().isoformat()


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def memory(root: Path, mentions: int = 6) -> Path:
    # Working memory and today's log mention the symbol often; only an archived note defines it.
    write(
        root,
        "CLAUDE.local.md",
        "# Focus\n" + "".join(f"- Calling reconcileManifest from route {i}.\n" for i in range(3)),
    )
    write(
        root,
        f"memory/daily/{TODAY}.md",
        "".join(
            f"[1{i}:00] reconcileManifest failed again on berth {i}; reran reconcileManifest.\n"
            for i in range(mentions)
        ),
    )
    write(
        root,
        "memory/archive/2025/ledger-notes.md",
        "# Ledger notes\n"  # 1
        "\n"  # 2
        "- The reconciler lives in src/manifest/reconcile.ts:\n"  # 3
        "\n"  # 4 (a blank line inside the list item)
        "  ```ts\n"  # 5
        "  export function reconcileManifest(ledger: Ledger): Discrepancy[] {\n"  # 6
        "  ```\n",  # 7
    )
    write(root, "memory/registers/people.md", "# People\n- Ana owns `class ManifestLedger` and the ledger code.\n")
    return root


def search(root: Path, query: str, limit: int = 10) -> BackendResponse:
    return asyncio.run(TotalRecallBackend("totalrecall", root).search(BackendRequest(query=query, limit=limit)))


def test_the_defining_entry_comes_first_with_its_file_line(tmp_path: Path) -> None:
    root = memory(tmp_path)
    usage = search(root, "reconcileManifest failures")
    assert usage.results[0].path != "memory/archive/2025/ledger-notes.md"  # the premise: mentions win
    response = search(root, "find the function reconcileManifest")
    top = response.results[0]
    assert top.path == "memory/archive/2025/ledger-notes.md"
    assert top.definition_line == 6 and top.definition_kind == "function" and top.line == 3
    assert all(r.relevance < top.relevance for r in response.results[1:])
    assert all(not hasattr(r, "definition_line") for r in response.results[1:])


def test_a_definition_below_the_limit_is_still_found(tmp_path: Path) -> None:
    root = memory(tmp_path, mentions=9)
    response = search(root, "reconcileManifest", limit=2)
    assert [r.path for r in response.results][0] == "memory/archive/2025/ledger-notes.md"
    assert response.result_count == 2


def test_inline_code_defines_and_names_its_line(tmp_path: Path) -> None:
    response = search(memory(tmp_path), "find class ManifestLedger")
    top = response.results[0]
    assert top.path == "memory/registers/people.md" and top.definition_line == 2 and top.definition_kind == "class"


def test_usage_queries_keep_ranking_mentions(tmp_path: Path) -> None:
    root = memory(tmp_path)
    response = search(root, "find all usages of reconcileManifest")
    assert response.results[0].path != "memory/archive/2025/ledger-notes.md"
    assert all(not hasattr(r, "definition_line") for r in response.results)


def test_entry_lines_map_to_file_lines_across_skipped_blank_lines() -> None:
    text = "- first line\n\n  second line\n  third line\n"
    (entry,) = parse_file("archive", "memory/archive/x.md", text, 0.0)
    assert entry.text.split("\n") == ["- first line", "second line", "third line"]
    assert [entry.file_line(i) for i in (1, 2, 3)] == [1, 3, 4]
    (para,) = parse_file("archive", "memory/archive/y.md", "# H\nalpha\nbeta\n", 0.0)
    assert para.line_map is None and para.file_line(2) == 3


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.lists(
        st.sampled_from(["find", "the", "function", "class", "do()", "reconcileManifest", "usages", "of", "`", "a"]),
        max_size=5,
    ).map(" ".join),
    limit=st.sampled_from([0, 1, 3, 10]),
)
def test_any_query_ranks_without_error(tmp_path: Path, query: str, limit: int) -> None:
    root = tmp_path / "m"
    if not root.exists():
        memory(root)
        write(root, "memory/archive/do.md", "- `def do(x):` and do it\n")
    response = search(root, query, limit)
    assert response.status in ("success", "empty") and response.result_count <= limit
    relevances = [r.relevance for r in response.results]
    assert relevances == sorted(relevances, reverse=True) and all(0 <= r <= 1 for r in relevances)
