"""The qmd adapter's failure paths: qmd/Node missing or too old, vsearch/query without models
(answered at once, not after qmd's ~12-minute download retries), qmd's CI refusal, and an index
without embeddings. All with the real qmd CLI where qmd is involved."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.locate import DEFAULT_MODELS, QmdCommand
from memory_router.backends.qmd.transports import CliTransport

from ..support.qmd import needs_qmd

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)


def backend(tmp_path: Path, environ: dict[str, str] | None = None, **settings: object) -> QmdBackend:
    base = {
        "index_path": str(tmp_path / "index.sqlite"),
        "config_dir": str(tmp_path / "cfg"),
        "cache_dir": str(tmp_path / "cache"),
    }
    env = dict(os.environ if environ is None else environ)
    return QmdBackend(
        "qmd",
        _settings.validate(qmd_adapter.Settings, {**base, **settings}),
        BackendContext(state_dir=tmp_path / "state", environ=env),
    )


def ask(b: QmdBackend, query: str, mode: str) -> tuple[BackendResponse, float]:
    started = time.perf_counter()
    response = asyncio.run(b.search(BackendRequest(query, mode=mode)))
    return response, time.perf_counter() - started


def test_qmd_missing_is_unavailable_with_the_install_hint(tmp_path: Path) -> None:
    b = backend(tmp_path, qmd=str(tmp_path / "no-such-qmd.js"))
    response, _ = ask(b, "consensus", "search")
    assert response.status == "error" and response.error_code == "BACKEND_UNAVAILABLE"
    assert response.error_message is not None
    assert "qmd not found" in response.error_message and "20-qmd.sh" in response.error_message
    assert not b.probe().ok


def test_nothing_installed_anywhere_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_router.backends.qmd import locate as _qmd_locate

    monkeypatch.setattr(_qmd_locate, "TOOLS", tmp_path / "no-tools")
    b = backend(tmp_path, environ={"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)})
    response, _ = ask(b, "consensus", "search")
    assert response.error_code == "BACKEND_UNAVAILABLE"
    assert response.error_message is not None
    assert "qmd is not installed" in response.error_message and "@tobilu/qmd@2.8.3" in response.error_message


@pytest.mark.parametrize("mode", ["search", "vsearch", "query", "hybrid"])
@pytest.mark.parametrize("missing", ["qmd", "everything"])
def test_a_one_shot_router_whose_qmd_cannot_run_answers_as_the_backend_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, missing: str
) -> None:
    # The one-shot CLI's qmd where qmd cannot run: the same answer and probe as QmdBackend's, from
    # a BlockingBackend (no event loop, no transports: tests/unit/test_cold_start.py pins the imports).
    from memory_router.backends.base import BlockingBackend
    from memory_router.backends.qmd import locate as _qmd_locate

    if missing == "qmd":
        environ, settings = None, {"qmd": str(tmp_path / "no-such-qmd.js")}
    else:
        monkeypatch.setattr(_qmd_locate, "TOOLS", tmp_path / "no-tools")
        environ, settings = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)}, {}
    b = backend(tmp_path, environ=environ, **settings)
    one_shot = qmd_adapter.create("qmd", b.settings, b.context)
    assert isinstance(one_shot, qmd_adapter.QmdUnavailable) and isinstance(one_shot, BlockingBackend)
    assert not isinstance(qmd_adapter.create("qmd", b.settings, b.context.replace(long_lived=True)), BlockingBackend)
    request = BackendRequest("consensus", mode=mode)
    import threading

    blocking = one_shot.search_blocking(request, threading.Event())
    expected, _ = ask(b, "consensus", mode)
    assert blocking.replace(backend_duration_ms=0) == expected.replace(backend_duration_ms=0)
    assert blocking.error_code == ("BACKEND_ERROR" if mode == "hybrid" else "BACKEND_UNAVAILABLE")
    assert one_shot.probe() == b.probe()
    assert one_shot.calibration_key(mode) == b.calibration_key(mode)


def _fake_node(tmp_path: Path, version: str) -> Path:
    node = tmp_path / "bin" / "node"
    node.parent.mkdir(parents=True, exist_ok=True)
    node.write_text(f"#!/bin/sh\necho {version}\n")
    node.chmod(node.stat().st_mode | stat.S_IXUSR)
    return node


@needs_qmd
def test_node_older_than_22_is_unavailable_not_a_segfault(tmp_path: Path) -> None:
    # qmd 2.x under Node 20 segfaults silently; the adapter refuses it up front.
    b = backend(tmp_path, node=str(_fake_node(tmp_path, "v20.20.2")))
    response, _ = ask(b, "consensus", "search")
    assert response.error_code == "BACKEND_UNAVAILABLE"
    assert response.error_message is not None
    assert "v20.20.2" in response.error_message and ">= 22" in response.error_message


@needs_qmd
@pytest.mark.parametrize("mode", ["vsearch", "query"])
def test_missing_models_answer_at_once_with_the_fix(tmp_path: Path, mode: str) -> None:
    response, elapsed = ask(backend(tmp_path), "leader election", mode)
    assert response.status == "error" and response.error_code == "BACKEND_UNAVAILABLE"
    assert response.error_message is not None
    assert "qmd pull" in response.error_message and "embeddinggemma-300M-Q8_0.gguf" in response.error_message
    assert response.error_message is not None
    assert str(tmp_path / "cache" / "qmd" / "models") in response.error_message
    assert elapsed < 2.0  # qmd itself would retry the download for ~12 minutes


def _fake_models(tmp_path: Path, roles: tuple[str, ...] = ("embed", "generate", "rerank")) -> None:
    # Files named as node-llama-cpp stores hf: downloads; the adapter only checks presence.
    models = tmp_path / "cache" / "qmd" / "models"
    models.mkdir(parents=True, exist_ok=True)
    for role in roles:
        uri = DEFAULT_MODELS[role]
        owner = uri.split("/")[0][3:]
        (models / f"hf_{owner}_{uri.rsplit('/', 1)[-1]}").write_bytes(b"GGUF" + b"\0" * 60)


@needs_qmd
def test_a_missing_reranker_is_skipped_not_unavailable(tmp_path: Path) -> None:
    # The reranker is optional: without it `qmd query` runs with --no-rerank (qmd would otherwise
    # retry its download for ~12 minutes) and the attempt says so.
    _fake_models(tmp_path, roles=("embed", "generate"))
    b = backend(tmp_path, environ={**os.environ, "CI": "true"})
    facts = b.probe().facts
    assert facts["modes_ready"] == ["search", "vsearch", "query"] and facts["rerank"].startswith("skipped: no rerank")
    assert facts["models_missing"] == [
        f"rerank: no rerank model in {tmp_path / 'cache' / 'qmd' / 'models'} ({DEFAULT_MODELS['rerank']})"
    ]
    assert b.transport().command_for("query", "q", 5, (), True, False)[1][-1] == "--no-rerank"
    response, _ = ask(b, "leader election", "query")
    assert response.note is not None
    assert "rerank" not in (response.error_message or "") and response.note.startswith("reranking skipped")
    assert response.query_sent == "leader election"  # the generate model is there: qmd expands


@needs_qmd
def test_ci_refusal_of_model_work_is_a_clean_unavailable(tmp_path: Path) -> None:
    # Models "present" (so the pre-check passes) and CI=true: qmd refuses in a fraction of a
    # second with an uncaught stack trace; the adapter turns that into one clear sentence.
    _fake_models(tmp_path)
    b = backend(tmp_path, environ={**os.environ, "CI": "true"})
    build_collection(b.transport(), _corpus(tmp_path), "kb", "**/*.md", tmp_path / "lock")
    response, elapsed = ask(b, "leader election", "query")
    assert response.status == "error" and response.error_code == "BACKEND_UNAVAILABLE"
    assert response.error_message is not None
    assert "LLM operations are disabled in CI" in response.error_message and "Unset CI" in response.error_message
    assert response.error_message is not None
    assert "    at " not in response.error_message  # no stack trace in the envelope
    assert elapsed < 10


@needs_qmd
def test_vsearch_on_an_index_without_embeddings_says_run_embed(tmp_path: Path) -> None:
    _fake_models(tmp_path)
    b = backend(tmp_path)
    build_collection(b.transport(), _corpus(tmp_path), "kb", "**/*.md", tmp_path / "lock")
    response, _ = ask(b, "leader election", "vsearch")
    assert response.error_message is not None
    assert response.error_code == "BACKEND_UNAVAILABLE" and "qmd embed" in response.error_message


def _corpus(tmp_path: Path) -> Path:
    src = tmp_path / "notes"
    src.mkdir(exist_ok=True)
    (src / "raft.md").write_text("# Raft\n\nLeader election uses randomized timeouts.\n")
    return src


def test_unknown_mode_is_a_backend_error(tmp_path: Path) -> None:
    response, _ = ask(backend(tmp_path), "x", "hybrid")
    assert response.error_message is not None
    assert response.error_code == "BACKEND_ERROR" and "no mode 'hybrid'" in response.error_message


def test_settings_reject_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="colections"):
        _settings.validate(qmd_adapter.Settings, {"colections": ["a"]})


@given(st.text(max_size=40), st.lists(st.text(min_size=1, max_size=8), max_size=3))
def test_argv_puts_options_first_then_double_dash_then_the_query(query: str, collections: list[str]) -> None:
    command = QmdCommand(("/n/node", "/q/qmd.js"), Path("/q/qmd.js"), Path("/n/node"), "v22.0.0")
    transport = CliTransport(command, env={}, cwd=Path("/tmp"), index="index")
    options = ["--json", "-n", "5"] + [x for c in collections for x in ("-c", c)]
    argv = transport.argv("search", options, query)
    assert argv[:5] == ["/n/node", "/q/qmd.js", "--index", "index", "search"]
    assert argv[5:-2] == options and argv[-2:] == ["--", query]


@needs_qmd
def test_query_without_expansion_needs_no_generate_model_and_sends_a_typed_document(tmp_path: Path) -> None:
    # query_expansion=false: `qmd query` gets "lex: <keywords>\nvec: <query>", which skips the
    # 1.7B expansion model. With embed + rerank present (and CI set, so qmd stops before loading
    # them) qmd accepts the document and gets as far as model work.
    _fake_models(tmp_path, roles=("embed", "rerank"))
    b = backend(tmp_path, environ={**os.environ, "CI": "true"}, query_expansion=False)
    build_collection(b.transport(), _corpus(tmp_path), "kb", "**/*.md", tmp_path / "lock")
    response, _ = ask(b, "-leader election", "query")
    assert response.query_sent == "lex: leader election\nvec: leader election"
    assert response.error_message is not None
    assert response.error_code == "BACKEND_UNAVAILABLE" and "disabled in CI" in response.error_message
    # with query_expansion on, the missing generate model is skipped on its own (no download
    # attempt, no BACKEND_UNAVAILABLE for it): the same typed document, and a note
    expanding = backend(tmp_path, environ={**os.environ, "CI": "true"})
    response, _ = ask(expanding, "-leader election", "query")
    assert response.query_sent == "lex: leader election\nvec: leader election"
    assert response.note is not None
    assert response.note.startswith("query expansion skipped: no generate model in ")
    assert "generate:" not in (response.error_message or "")


def test_a_fifo_or_huge_index_yml_reads_as_no_models_block(tmp_path: Path) -> None:
    """qmd's index.yml is read for its models block; a FIFO there must not hang `backends` or a
    query (no writer ever comes), and a huge file must not be read whole."""
    import threading

    from memory_router.backends.qmd.locate import DEFAULT_MODELS, SMALL_FILE_BYTES, configured_models

    fifo = tmp_path / "index.yml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.yml"
    huge.write_text("models:\n  embed: hf:huge/model.gguf\n" + "#" * (SMALL_FILE_BYTES + 1))
    seen: dict[str, dict[str, str]] = {}
    worker = threading.Thread(
        target=lambda: seen.update(fifo=configured_models(fifo, {}), huge=configured_models(huge, {})), daemon=True
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "reading a FIFO index.yml blocked"
    assert seen == {"fifo": DEFAULT_MODELS, "huge": DEFAULT_MODELS}
