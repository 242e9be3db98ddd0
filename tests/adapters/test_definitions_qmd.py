"""Definition-first on the real qmd CLI: the generated port-operations project of
tests/support/definition_corpus.py (about 30 TypeScript + markdown files, callers mentioning each symbol
more often than its definition does) indexed with qmd, queried through the router.

Skips only when qmd/Node 22 are genuinely not installed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.parse import split_uri
from memory_router.config.installed import load_installed
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import load_config
from memory_router.core.envelope import Envelope
from memory_router.routing.router import Router

from ..support.definition_corpus import SYMBOLS, Symbol, definition_line, write_corpus
from ..support.qmd import needs_qmd

pytestmark = [pytest.mark.slow, needs_qmd]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("defs")
    files = write_corpus(base / "port")
    settings = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "collections": ["port"],
    }
    context = BackendContext(state_dir=base / "state", cwd=base)
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), context)
    build_collection(backend.transport(), base / "port", "port", "**/*.{md,ts}", base / "idx" / "index.lock")
    config = json.loads(packaged_config().read_text())
    config["backends"]["qmd"] = {"type": "qmd", **settings}
    config["backends"]["totalrecall"]["root"] = str(base / "no-memory")
    (base / "no-memory").mkdir()
    (base / "rc.json").write_text(json.dumps(config))
    (base / "backends.json").write_text(
        json.dumps({"tier": "starter", "backends": {"qmd": {"status": "ready"}, "totalrecall": {"status": "ready"}}})
    )
    router = Router(load_config(base / "rc.json"), context=context)
    return {"base": base, "files": files, "router": router, "installed": load_installed(base / "backends.json")}


def route(project: dict, query: str) -> Envelope:
    return asyncio.run(project["router"].route(query, project["installed"]))


def test_the_corpus_is_one_where_bm25_prefers_callers(project: dict) -> None:
    # The premise: qmd's own order puts a file that merely uses the symbol first.
    assert 25 <= len(project["files"]) <= 40
    backend = project["router"].backend("qmd")
    answer = asyncio.run(backend.transport().search("search", "reconcileManifest", 10, ("port",)))
    paths = [split_uri(h["file"])[1] for h in answer.hits]
    assert paths[0] != "src/manifest/reconcile.ts" and "src/manifest/reconcile.ts" in paths


@pytest.mark.parametrize("symbol", SYMBOLS, ids=[s.name for s in SYMBOLS])
def test_find_x_answers_with_the_definition_first(project: dict, symbol: Symbol) -> None:
    envelope = route(project, symbol.query)
    assert envelope.rule is not None and envelope.rule["number"] == 1
    assert (envelope.routed_to, envelope.routed_mode) == ("qmd", "search")
    top = envelope.results[0]
    assert top.path == symbol.path
    line = definition_line(project["base"] / "port", symbol)
    assert top.definition_line == line and top.line == line
    assert symbol.definition.strip() in top.content
    assert all(top.relevance > r.relevance for r in envelope.results[1:])
    assert all(not hasattr(r, "definition_line") for r in envelope.results[1:] if r.path.startswith("src/routes/"))


def test_find_all_usages_keeps_ranking_usages(project: dict) -> None:
    envelope = route(project, "find all usages of BerthAllocator")
    assert envelope.rule is not None and envelope.rule["number"] == 1 and envelope.routed_to == "qmd"
    assert envelope.results[0].path != "src/berths/allocator.ts"
    assert all(not hasattr(r, "definition_line") for r in envelope.results)
    scores = [r.qmd_score for r in envelope.results]
    assert scores == sorted(scores, reverse=True)  # qmd's BM25 order, untouched


def test_definition_in_a_markdown_code_block_ranks_below_the_source(project: dict, tmp_path: Path) -> None:
    # A design note quoting the signature in a fenced block is a definition of lower rank.
    base = project["base"]
    note = base / "port" / "docs" / "design-ledger.md"
    note.write_text(
        "# Ledger design\n\nManifestLedger ManifestLedger ManifestLedger.\n\n"
        "```ts\nexport class ManifestLedger {}\n```\n"
    )
    try:
        backend = project["router"].backend("qmd")
        build_collection(backend.transport(), base / "port", "port", "**/*.{md,ts}", base / "idx" / "index.lock")
        response = asyncio.run(backend.search(BackendRequest("find class ManifestLedger", mode="search")))
        paths = [r.path for r in response.results]
        assert paths[0] == "src/manifest/ledger.ts"
        doc = response.results[paths.index("docs/design-ledger.md")]
        assert doc.definition_line == 6 and doc.definition_kind == "class"
    finally:
        note.unlink()
        build_collection(backend.transport(), base / "port", "port", "**/*.{md,ts}", base / "idx" / "index.lock")
