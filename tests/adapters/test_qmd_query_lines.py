"""A ``qmd query`` hit that no reranker scored shows its document's best lines, as a ``qmd search``
hit does (memory_router/backends/qmd/document_lines.py).

The premise, recorded from the real qmd 2.8.3 CLI on ``settle_source()`` (a 210-line module whose
docstring names "ledger", "retry" and "window" on separate lines in its first chunk, and whose
``replay_ledger_window`` holds all three on one line in its second): ``qmd query --no-rerank``
shows line 3 (the docstring, the best line of the keyword-richest chunk, which is the first on a
tie) where ``qmd search`` shows line 210. The fast tests replay that recorded output over the
file on disk (the transport is a stand-in that returns it, named so); the slow ones run the real
qmd, through the CLI and the warm engine, with the MiniLM embedding model, and compare the port
of qmd's ``extractSnippet`` with qmd's own function in Node."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.document_lines import document_snippet, snippet_query
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.parse import parse_hits, split_uri
from memory_router.backends.qmd.transports import Answer

from ..support.qmd import QMD, needs_qmd

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
QUERY = "ledger retry window"
DEFINITION = "def replay_ledger_window(ledger, window, retry=3):"


def settle_source() -> str:
    lines = [
        '"""Settlement helpers.',
        "",
        "The ledger keeps every entry; a retry happens on conflict;",
        "each window is one accounting period.",
        '"""',
        "",
        "import asyncio",
        "import logging",
        "",
    ]
    for i in range(40):
        lines += [
            f"def helper_{i}(value: int) -> int:",
            f'    """Return value plus {i} (a filler function number {i})."""',
            f"    total = value + {i}",
            "    return total",
            "",
        ]
    lines += [
        DEFINITION,
        '    """Replay the ledger over one window, with a retry budget."""',
        "    for attempt in range(retry):",
        "        ledger.apply(window)",
        "    return ledger",
        "",
    ]
    return "\n".join(lines)


CORPUS = {
    "settle.py": settle_source(),
    "other.py": "def unrelated():\n    return 'nothing about accounts'\n",
    "window.py": "class Window:\n    '''A time window.'''\n    pass\n",
}

# `qmd query --json --explain --no-rerank -n 2 -c code -- $'lex: ledger retry window\nvec: ...'`
# (qmd 2.8.3, MiniLM), the rrf traces' contributions left out.
RECORDED_QUERY = [
    {
        "docid": "#4434b9",
        "score": 1,
        "file": "qmd://code/settle.py",
        "line": 3,
        "title": "settle",
        "snippet": "@@ -2,4 @@ (1 before, 210 after)\n\nThe ledger keeps every entry; a retry happens on conflict;\n"
        'each window is one accounting period.\n"""',
        "explain": {
            "ftsScores": [0.583730626091044],
            "vectorScores": [0.4028507471084595],
            "rrf": {"rank": 1, "positionScore": 1, "weight": 1, "baseScore": 0.04918032786885246},
            "rerankScore": 0,
            "blendedScore": 1,
        },
    },
    {
        "docid": "#d81738",
        "score": 0.5,
        "file": "qmd://code/window.py",
        "line": 1,
        "title": "window",
        "snippet": "@@ -1,3 @@ (0 before, 1 after)\nclass Window:\n    '''A time window.'''\n    pass",
        "explain": {
            "ftsScores": [],
            "vectorScores": [0.12569260597229004],
            "rrf": {"rank": 2, "positionScore": 0.5, "weight": 1, "baseScore": 0.016129032258064516},
            "rerankScore": 0,
            "blendedScore": 0.5,
        },
    },
]
# `qmd search --json -n 2 -c code -- 'ledger retry window'`, the same index.
RECORDED_SEARCH_ROW = {
    "docid": "#4434b9",
    "score": 0.58,
    "file": "qmd://code/settle.py",
    "line": 210,
    "title": "settle",
    "snippet": "@@ -209,4 @@ (208 before, 3 after)\n\ndef replay_ledger_window(ledger, window, retry=3):\n"
    '    """Replay the ledger over one window, with a retry budget."""\n    for attempt in range(retry):',
}


def reranked(hits: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded hits as a real reranker's answer shapes them (qmd's blend weights for ranks 1-3,
    the reranker's own scores)."""
    out = []
    for hit, score in zip(hits, (0.91, 0.12), strict=True):
        explain = hit["explain"] | {"rrf": hit["explain"]["rrf"] | {"weight": 0.75}, "rerankScore": score}
        out.append(hit | {"explain": explain})
    return out


class RecordedQmd:
    """A stand-in transport (not qmd): answers every call with the recorded hits of real qmd."""

    def __init__(self, hits: list[dict[str, Any]]) -> None:
        self.hits = hits
        self.sent: list[str] = []

    async def search(self, mode: str, query: str, limit: int, collections: Sequence[str], **_: Any) -> Answer:
        self.sent.append(query)
        return Answer(parse_hits(orjson.dumps(self.hits)))


def corpus_on_disk(base: Path) -> dict[str, Any]:
    """The corpus under ``base/src`` and an index.yml naming it as collection ``code``: qmd's
    settings for a backend reading those files."""
    source = base / "src"
    source.mkdir(parents=True, exist_ok=True)
    for name, text in CORPUS.items():
        (source / name).write_text(text)
    return {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),
        "collections": ["code"],
        "query_expansion": False,
    }


def recorded_backend(tmp_path: Path, hits: list[dict[str, Any]]) -> tuple[QmdBackend, RecordedQmd]:
    settings = corpus_on_disk(tmp_path)
    config = Path(settings["config_dir"]) / "index.yml"
    config.parent.mkdir(parents=True)
    config.write_text(f'collections:\n  code:\n    path: {tmp_path / "src"}\n    pattern: "**/*.py"\n')
    backend = QmdBackend("qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=tmp_path))
    fake = RecordedQmd(hits)
    backend.answering = lambda: fake  # type: ignore[method-assign]
    return backend, fake


def ask(backend: QmdBackend, mode: str = "query") -> BackendResponse:
    return asyncio.run(backend.search(BackendRequest(QUERY, mode=mode)))


# --------------------------------------------------------------------------- fast: recorded qmd


def test_the_port_gives_qmd_search_s_own_row_for_the_document() -> None:
    line, snippet = document_snippet(CORPUS["settle.py"], QUERY)
    assert (line, snippet) == (RECORDED_SEARCH_ROW["line"], RECORDED_SEARCH_ROW["snippet"])


def test_an_unreranked_query_hit_shows_the_document_s_best_lines_with_qmd_s_score(tmp_path: Path) -> None:
    backend, fake = recorded_backend(tmp_path, RECORDED_QUERY)
    answer = ask(backend)
    assert fake.sent == [f"lex: {QUERY}\nvec: {QUERY}"]
    top = answer.results[0]
    assert (top.path, top.line) == ("settle.py", 210)
    assert DEFINITION in top.content and "accounting period" not in top.content
    # qmd's score and the relevance from its retrieval evidence are what they were
    assert top.qmd_score == 1.0
    assert answer.results[1].line == 1 and answer.results[1].content.startswith("class Window:")
    search_backend, _ = recorded_backend(tmp_path / "s", [RECORDED_SEARCH_ROW])
    search_top = ask(search_backend, "search").results[0]
    assert (top.line, top.content) == (search_top.line, search_top.content)  # as a search row shows it


def test_the_relevance_is_qmd_s_evidence_whatever_the_lines(tmp_path: Path) -> None:
    backend, _ = recorded_backend(tmp_path, RECORDED_QUERY)
    unread, _ = recorded_backend(tmp_path / "unread", RECORDED_QUERY)
    (tmp_path / "unread" / "src" / "settle.py").unlink()  # qmd's row stays: its file is not there
    shown, kept = ask(backend).results, ask(unread).results
    assert kept[0].line == 3 and "accounting period" in kept[0].content
    assert [r.relevance for r in shown] == [r.relevance for r in kept]
    assert [r.qmd_score for r in shown] == [r.qmd_score for r in kept]


def test_a_reranked_hit_keeps_the_chunk_the_reranker_scored(tmp_path: Path) -> None:
    backend, _ = recorded_backend(tmp_path, reranked(RECORDED_QUERY))
    top = ask(backend).results[0]
    assert top.line == 3 and "accounting period" in top.content
    assert top.relevance == 0.91  # the reranker's score for that chunk


def test_a_file_changed_since_it_was_indexed_keeps_qmd_s_row(tmp_path: Path) -> None:
    backend, _ = recorded_backend(tmp_path, RECORDED_QUERY)
    # the snippet's longest line, rewritten since qmd indexed the file
    (tmp_path / "src" / "settle.py").write_text(CORPUS["settle.py"].replace("keeps every entry", "holds each entry"))
    top = ask(backend).results[0]
    assert top.line == 3 and "accounting period" in top.content


def test_the_snippet_query_is_the_text_qmd_made_its_row_from() -> None:
    assert snippet_query(f"lex: {QUERY}\nvec: how do we replay it") == QUERY
    assert snippet_query("vec: how do we replay it") == "how do we replay it"
    assert snippet_query("how do we replay the ledger") == "how do we replay the ledger"


# --------------------------------------------------------------------------- slow: real qmd


def _node_extract(cases: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """qmd's own ``extractSnippet(body, query, 300)`` for each case, run in Node."""
    assert QMD is not None and QMD.node is not None
    store = QMD.qmd.parent.parent / "store.js"
    script = (
        f"import {{ extractSnippet }} from {json.dumps(store.as_uri())};\n"
        "let data = ''; process.stdin.on('data', (d) => (data += d));\n"
        "process.stdin.on('end', () => { const out = JSON.parse(data).map(([b, q]) => extractSnippet(b, q, 300));\n"
        "  process.stdout.write(JSON.stringify(out.map((r) => [r.line, r.snippet]))); });\n"
    )
    done = subprocess.run(
        [str(QMD.node), "--input-type=module", "-e", script],
        input=json.dumps(cases).encode(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    return [{"line": line, "snippet": snippet} for line, snippet in json.loads(done.stdout)]


def _case(rng: random.Random) -> tuple[str, str]:
    words = ["ledger", "Retry", "window", "wíndow", "x", "😀", "ab", "", "  ", "\t", "é", "long" * 40]
    lines = [" ".join(rng.choices(words, k=rng.randint(0, 12))) for _ in range(rng.randint(1, 12))]
    query = " ".join(rng.choices(words[:7], k=rng.randint(0, 4)))
    return "\n".join(lines), query


@pytest.mark.slow
@needs_qmd
def test_the_port_matches_qmd_s_extract_snippet_in_node() -> None:
    rng = random.Random(15)
    cases = [_case(rng) for _ in range(400)] + [(CORPUS["settle.py"], QUERY), ("", ""), ("😀" * 400, "😀")]
    for (body, query), theirs in zip(cases, _node_extract(cases), strict=True):
        line, snippet = document_snippet(body, query)
        assert {"line": line, "snippet": snippet} == theirs or _same_after_cut(snippet, theirs["snippet"]), (
            body,
            query,
        )


def _same_after_cut(ours: str, theirs: str) -> bool:
    """qmd's cut inside a surrogate pair leaves a lone surrogate, which the adapter reads as U+FFFD."""
    return ours == theirs.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@pytest.fixture(scope="module")
def real_index(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real qmd index of CORPUS embedded with MiniLM; no rerank model on disk."""
    if not MODEL.is_file():
        pytest.skip(f"{MODEL} absent: run `bash .ci/setup.d/30-qmd-models.sh`")
    base = tmp_path_factory.mktemp("qmdlines")
    settings = corpus_on_disk(base)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    cli = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base / "s", environ=env)
    ).transport()
    cli.env["QMD_EMBED_MODEL"] = str(MODEL)
    cli.env["QMD_EMBED_CONTEXT_SIZE"] = "384"
    build_collection(cli, base / "src", "code", "**/*.py", base / "idx" / "lock")
    done = subprocess.run(cli.argv("embed", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-500:]
    return {"base": base, "settings": settings, "env": env}


@pytest.mark.slow
@needs_qmd
@pytest.mark.parametrize("long_lived", [False, True], ids=["cli", "engine"])
def test_real_qmd_query_shows_the_line_qmd_search_shows(real_index: dict[str, Any], long_lived: bool) -> None:
    settings = _settings.validate(qmd_adapter.Settings, real_index["settings"])
    context = BackendContext(state_dir=real_index["base"] / "s", environ=real_index["env"], long_lived=long_lived)

    async def main() -> tuple[Answer, BackendResponse, BackendResponse]:
        backend = QmdBackend("qmd", settings, context)
        try:
            raw = await backend.answering().search("query", f"lex: {QUERY}\nvec: {QUERY}", 10, ("code",), rerank=False)
            query = await backend.search(BackendRequest(QUERY, mode="query", timeout_s=120))
            search = await backend.search(BackendRequest(QUERY, mode="search", timeout_s=60))
            return raw, query, search
        finally:
            await backend.aclose()

    raw, query, search = asyncio.run(main())
    assert raw.hits is not None
    qmd_row = next(h for h in raw.hits if split_uri(h["file"])[1] == "settle.py")
    assert qmd_row["line"] == 3  # the premise: qmd's own row, confined to the first chunk
    assert query.note is not None and "reranking skipped" in query.note
    top = next(r for r in query.results if r.path == "settle.py")
    assert DEFINITION in top.content
    assert (top.line, top.content) == (search.results[0].line, search.results[0].content)
    assert top.qmd_score == qmd_row["score"]
