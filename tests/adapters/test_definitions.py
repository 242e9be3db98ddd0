"""Definition detection and definition-first ranking (backends/common/definitions.py), and qmd's use of
it on hits in qmd's ``--json`` shape (backends/qmd/parse.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.common.definitions import (
    MENTION_FACTOR,
    definition_target,
    definitions_first_relevances,
    find_definition,
)
from memory_router.backends.qmd.parse import CollectionFiles, collection_roots, definitions_first, to_results


@pytest.mark.parametrize(
    ("query", "symbol"),
    [
        ("find the function reconcileManifest", "reconcileManifest"),
        ("find class ManifestLedger", "ManifestLedger"),
        ("find the method applyDemurrageFee", "applyDemurrageFee"),
        ("find the method applyDemurrageFee on BerthAllocator", "applyDemurrageFee"),
        ("BerthAllocator", "BerthAllocator"),
        ("parse_bill_of_lading", "parse_bill_of_lading"),
        ("search for releaseHold", "releaseHold"),
        ("where is computeDwellTime defined", "computeDwellTime"),
        ("find the definition of `TariffSchedule`", "TariffSchedule"),
        ("Ledger.reconcile", "reconcile"),
        ("reconcileManifest()", "reconcileManifest"),
        ("find class router", "router"),
        ("find the function called reconcileManifest", "reconcileManifest"),
    ],
)
def test_definition_queries_name_their_symbol(query: str, symbol: str) -> None:
    target = definition_target(query)
    assert target is not None and target.symbol == symbol


@pytest.mark.parametrize(
    "query",
    [
        "find all usages of BerthAllocator",
        "who calls reconcileManifest",
        "find references to ManifestLedger",
        "where is parseBillOfLading used",
        "find the function that parses bills of lading",
        "how does reconcileManifest work",
        "what did we decide about the database schema",
        "what was the last thing",
        "ledger",
        "",
    ],
)
def test_usage_and_other_queries_ask_for_no_definition(query: str) -> None:
    assert definition_target(query) is None


@pytest.mark.parametrize(
    ("code", "symbol", "line", "kind"),
    [
        ("// x\nexport function reconcileManifest(a: A): B {\n}", "reconcileManifest", 2, "function"),
        ("export default async function reconcileManifest(a) {", "reconcileManifest", 1, "function"),
        ("export class ManifestLedger extends Base {", "ManifestLedger", 1, "class"),
        ("class A {\n  public async applyFee(c: C, d: number): Promise<M> {\n  }\n}", "applyFee", 2, "method"),
        ("class A {\n  applyFee(c, d)\n  {\n  }\n}", "applyFee", 2, "method"),
        ("export const computeDwellTime = (a: Date): number => 1;", "computeDwellTime", 1, "function"),
        ("export const MAX_DWELL: number = 14;", "MAX_DWELL", 1, "const"),
        ("export interface ContainerRecord {", "ContainerRecord", 1, "interface"),
        ("export type VesselCallStatus = 'a' | 'b';", "VesselCallStatus", 1, "type"),
        ("def parse_token(raw):\n    pass", "parse_token", 1, "function"),
        ("class Ledger:\n    def reconcile(self):", "reconcile", 2, "function"),
        ("pub fn allocate_berth<T>(x: T) -> u8 {", "allocate_berth", 1, "function"),
        ("pub struct BerthPlan {", "BerthPlan", 1, "class"),
        ("func (s *Server) HandleCall(w W) {", "HandleCall", 1, "function"),
        ("type Server struct {", "Server", 1, "type"),
        ("public static void main(String[] args) throws Exception {", "main", 1, "function"),
        ("#define MAX_LEN 10", "MAX_LEN", 1, "macro"),
        ("MAX_LEN = 10", "MAX_LEN", 1, "variable"),
        ("const handlers = {\n  releaseHold: async (c) => {", "releaseHold", 2, "function"),
    ],
)
def test_definition_forms_of_common_languages(code: str, symbol: str, line: int, kind: str) -> None:
    found = find_definition(code, symbol)
    assert found is not None, code
    assert (found.line, found.kind) == (line, kind)


@pytest.mark.parametrize(
    ("code", "symbol"),
    [
        ("reconcileManifest(ledger, arrivals);", "reconcileManifest"),
        ("  await reconcileManifest(ledger)", "reconcileManifest"),
        ("if (reconcileManifest(a)) {", "reconcileManifest"),
        ("ledger.reconcileManifest(a, () => {", "reconcileManifest"),
        ("return reconcileManifest(a)", "reconcileManifest"),
        ("import { reconcileManifest } from './reconcile';", "reconcileManifest"),
        ("const berthAllocator = new BerthAllocator();", "BerthAllocator"),  # case matters
        ("class BerthAllocatorFactory {", "BerthAllocator"),
        ("// function reconcileManifest(a) {", "reconcileManifest"),
        ("  MAX_LEN == 10", "MAX_LEN"),
        ("router.post('/x', (req) => reconcileManifest(req.body));", "reconcileManifest"),
    ],
)
def test_calls_imports_and_comments_are_not_definitions(code: str, symbol: str) -> None:
    assert find_definition(code, symbol) is None


def test_markdown_definitions_are_code_only() -> None:
    text = (
        "# Notes\n"  # 1
        "\n"  # 2
        "class ManifestLedger keeps the ledger.\n"  # 3: prose, not code
        "function reconcileManifest(x) is called nightly\n"  # 4: prose
        "\n"  # 5
        "```ts\n"  # 6
        "export function reconcileManifest(x) {}\n"  # 7
        "```\n"  # 8
        "Use `class ManifestLedger` for it.\n"  # 9
    )
    in_fence = find_definition(text, "reconcileManifest", markdown=True)
    inline = find_definition(text, "ManifestLedger", markdown=True)
    assert in_fence is not None and in_fence.line == 7
    assert inline is not None and inline.line == 9
    assert find_definition("class ManifestLedger keeps it\n", "ManifestLedger", markdown=True) is None


def test_an_all_lowercase_symbol_matches_any_case() -> None:
    assert find_definition("export class ManifestLedger {", "manifestledger") is not None
    assert find_definition("export class ManifestLedger {", "manifestLedger") is None


relevance = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(st.lists(st.tuples(relevance, st.integers(min_value=0, max_value=2)), max_size=12))
def test_definitions_rank_strictly_above_everything_else(hits: list[tuple[float, int]]) -> None:
    relevances, strengths = [r for r, _ in hits], [s for _, s in hits]
    out = definitions_first_relevances(relevances, strengths)
    assert all(0.0 <= r <= 1.0 for r in out)
    top = max(strengths, default=0)
    if top == 0:
        assert out == relevances
        return
    best = max(relevances)
    leaders = [r for r, s in zip(out, strengths, strict=True) if s == top]
    others = [r for r, s in zip(out, strengths, strict=True) if s != top]
    assert all(r == best for r in leaders)  # as relevant as the best evidence, never above it
    if best > 0:
        assert all(o < min(leaders) for o in others)
    # The others are scaled by one factor: their order among themselves is kept.
    cap = math.nextafter(best, 0.0)
    assert [min(r * MENTION_FACTOR, cap) for r, s in hits if s != top] == others


def test_a_mention_stays_below_a_definition_at_the_float_floor() -> None:
    # 5e-324 * 0.9 rounds back to 5e-324: without the cap the mention would tie the definition.
    out = definitions_first_relevances([0.0, 5e-324], [1, 0])
    assert out[1] < out[0]


def _hit(path: str, snippet: str, score: float, line: int = 1) -> dict:
    """One hit as `qmd search --json` prints it."""
    return {
        "docid": "#abc123",
        "score": score,
        "file": f"qmd://port/{path}",
        "line": line,
        "title": path,
        "snippet": snippet,
    }


def test_qmd_hits_are_reranked_from_the_files_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "port"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ledger.ts").write_text("// ledger\n" + "\n" * 20 + "export class ManifestLedger {\n}\n")
    (root / "src" / "route.ts").write_text("new ManifestLedger(); new ManifestLedger();\n")
    config = tmp_path / "index.yml"
    config.write_text(f'collections:\n  port:\n    path: "{root}"\n    pattern: "**/*.ts"\nmodels:\n  embed: x\n')
    hits = [
        _hit("src/route.ts", "@@ -1,1 @@ (0 before, 0 after)\nnew ManifestLedger(); new ManifestLedger();", 0.9),
        _hit("src/ledger.ts", "@@ -1,1 @@ (0 before, 0 after)\n// ledger", 0.5),
    ]
    results = to_results(hits, "search", "qmd")
    out = definitions_first("find class ManifestLedger", hits, results, CollectionFiles(config))
    top = max(out, key=lambda r: r.relevance)
    assert top.path == "src/ledger.ts" and top.definition_line == 22 and top.line == 22
    assert top.definition_kind == "class" and "export class ManifestLedger {" in top.content
    assert top.relevance == max(r.relevance for r in results)
    caller = next(r for r in out if r.path == "src/route.ts")
    assert caller.relevance < top.relevance and not hasattr(caller, "definition_line")
    # A usage query keeps qmd's order and adds nothing.
    assert definitions_first("find all usages of ManifestLedger", hits, results, CollectionFiles(config)) == results


def test_qmd_falls_back_to_the_snippet_when_the_file_cannot_be_read(tmp_path: Path) -> None:
    hits = [
        _hit("src/route.ts", "@@ -1,1 @@ (0 before, 0 after)\nnew ManifestLedger();", 0.9),
        _hit("src/ledger.ts", "@@ -40,3 @@ (1 before, 1 after)\n\nexport class ManifestLedger {\n}", 0.4),
        _hit("../../etc/passwd", "@@ -1,1 @@\nclass ManifestLedger {", 0.3),
    ]
    results = to_results(hits, "search", "qmd")
    out = definitions_first("ManifestLedger", hits, results, CollectionFiles(tmp_path / "missing.yml"))
    ledger = next(r for r in out if r.path == "src/ledger.ts")
    assert ledger.definition_line == 41  # the snippet's second line; the blank first line counts
    assert ledger.content == results[1].content  # qmd's snippet already shows it


def test_collection_roots_reads_the_block_qmd_writes(tmp_path: Path) -> None:
    config = tmp_path / "index.yml"
    config.write_text(
        "collections:\n  kb:\n    path: /data/kb\n    pattern: '**/*.md'\n"
        '  "my notes":\n    pattern: "*.md"\n    path: "/data/my notes"\n'
        "models:\n  embed: hf:x\n"
    )
    assert collection_roots(config) == {"kb": Path("/data/kb"), "my notes": Path("/data/my notes")}
    assert collection_roots(tmp_path / "absent.yml") == {}
    (tmp_path / "flow.yml").write_text("collections: {kb: {path: /x}}\n")
    assert collection_roots(tmp_path / "flow.yml") == {}  # not qmd's shape: the snippet decides


code_pieces = st.sampled_from(
    [
        "reconcileManifest",
        "ReconcileManifest",
        "function ",
        "class ",
        "export ",
        "const ",
        "def ",
        " = ",
        "(",
        ")",
        "{",
        "}",
        ";",
        ":",
        "=>",
        "\n",
        "\n  ",
        "`",
        "```\n",
        "// ",
        "new ",
        ".",
        "x",
        " ",
    ]
)


@given(st.lists(code_pieces, max_size=40).map("".join), st.booleans())
def test_a_definition_found_is_a_line_naming_the_symbol(text: str, markdown: bool) -> None:
    found = find_definition(text, "reconcileManifest", markdown=markdown)
    if found is not None:
        lines = text.split("\n")
        assert 1 <= found.line <= len(lines)
        assert "reconcileManifest" in lines[found.line - 1]
        assert found.text and found.text in lines[found.line - 1].strip()


@given(st.text(max_size=80))
def test_any_query_is_read_without_error(query: str) -> None:
    target = definition_target(query)
    assert target is None or (target.symbol and target.symbol in query)


def test_pathological_texts_are_bounded() -> None:
    # Each would take minutes without the caps (parameter scan, candidates, inline-code lines).
    assert find_definition("reconcileManifest(a,\n" * 20000, "reconcileManifest") is None
    assert find_definition("`" * 100000 + " reconcileManifest", "reconcileManifest", markdown=True) is None
    calls = "reconcileManifest(x);\n" * 5000
    found = find_definition(calls + "function reconcileManifest() {}", "reconcileManifest")
    assert found is not None and found.line == 5001


def test_collection_files_reads_only_regular_files_inside_the_collection(tmp_path: Path) -> None:
    import os

    root = tmp_path / "port"
    root.mkdir()
    (root / "a.ts").write_text("export class A {}\n")
    os.mkfifo(root / "pipe.ts")  # opening it for reading would wait for a writer
    (root / "dir.ts").mkdir()
    (tmp_path / "secret.ts").write_text("class Secret {}\n")
    config = tmp_path / "index.yml"
    config.write_text(f"collections:\n  port:\n    path: {root}\n")
    files = CollectionFiles(config)
    assert files.read("port", "a.ts") == "export class A {}\n"
    for path in ("pipe.ts", "dir.ts", "../secret.ts", str(tmp_path / "secret.ts"), "a\0.ts", "gone.ts", ""):
        assert files.read("port", path) is None, path
    assert files.read("other", "a.ts") is None


def test_a_file_that_is_not_the_indexed_document_is_not_trusted(tmp_path: Path) -> None:
    # The local index.yml's "port" folder holds another ledger.ts (another index, or a rewrite):
    # its definition line must not be reported; qmd's snippet decides.
    root = tmp_path / "port"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ledger.ts").write_text("// other project\nexport class ManifestLedger {}\n")
    config = tmp_path / "index.yml"
    config.write_text(f"collections:\n  port:\n    path: {root}\n")
    hits = [
        _hit(
            "src/ledger.ts",
            "@@ -7,2 @@ (6 before, 0 after)\n/** The ledger of all manifests. */\nexport class ManifestLedger {",
            0.5,
        )
    ]
    (out,) = definitions_first("ManifestLedger", hits, to_results(hits, "search", "qmd"), CollectionFiles(config))
    assert out.definition_line == 8
