"""The warm qmd engine with a real embedding model: all-MiniLM-L6-v2 converted to GGUF by
.ci/setup.d/30-qmd-models.sh (a real sentence embedder, so rankings mean something).

The index is built and embedded with the real qmd CLI (`qmd collection add`, `qmd embed`); the
queries go through the engine the daemon uses. CI is removed from the engine's environment (qmd
refuses model work when it is set). Skips only when the model file, qmd or Node 22 is absent."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_router.backends import BackendContext
from memory_router.backends.base import BACKEND_UNAVAILABLE, BackendRequest, BackendResponse
from memory_router.backends.common import settings as _settings
from memory_router.backends.qmd import adapter as qmd_adapter
from memory_router.backends.qmd.backend import QmdBackend
from memory_router.backends.qmd.indexing import build_collection
from memory_router.backends.qmd.parse import vsearch_relevance

from ..support.qmd import needs_qmd, warm_engine
from .test_qmd_engine import request, start_serve

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / ".tools" / "models" / "all-MiniLM-L6-v2-f16.gguf"
pytestmark = [
    pytest.mark.slow,
    needs_qmd,
    pytest.mark.skipif(not MODEL.is_file(), reason=f"{MODEL} absent: run `bash .ci/setup.d/30-qmd-models.sh`"),
]
ENV = {k: v for k, v in os.environ.items() if k != "CI"}

NOTES = {
    "api-errors.md": "# API error handling\n\nEvery endpoint of the API layer returns errors as a JSON body with a "
    "machine-readable code and a message. Exceptions raised in handlers are caught by the error middleware and "
    "mapped to HTTP status codes: validation failures become 400, missing resources 404, and unexpected failures "
    "500 with a request id for the logs.\n",
    "gardening.md": "# Gardening schedule\n\nWater the tomatoes every morning in summer. Prune the roses in March, "
    "plant garlic in October, and mulch the beds before the first frost.\n",
    "raft.md": "# Raft consensus\n\nRaft is a consensus algorithm for managing a replicated log. A leader is "
    "elected with randomized timeouts and followers replicate its entries.\n",
    "deploy.md": "# Deployment checklist\n\nTag the release, build the container image, run the migrations, then "
    "roll out to staging before production. Keep the previous image for rollback.\n",
    "fitness.md": "# Running plan\n\nThree easy runs a week, one long run on Sunday, and a rest day after every "
    "hard session. Increase weekly distance by ten percent at most.\n",
    "music.md": "# Guitar practice\n\nPractice scales for ten minutes, then work on the fingerpicking pattern for "
    "the new song. Restring the guitar this weekend.\n",
}
CONCEPT = "how does error handling work in the API layer"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A real qmd index of NOTES, embedded with a private copy of the MiniLM GGUF (so a test may
    corrupt the copy)."""
    base = tmp_path_factory.mktemp("qmdmodels")
    source = base / "notes"
    source.mkdir()
    for name, text in NOTES.items():
        (source / name).write_text(text)
    model = base / "models" / MODEL.name
    model.parent.mkdir()
    shutil.copyfile(MODEL, model)
    settings = {
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),
        "collections": ["notes"],
        "query_expansion": False,
    }
    cli = QmdBackend(
        "qmd", _settings.validate(qmd_adapter.Settings, settings), BackendContext(state_dir=base / "s", environ=ENV)
    ).transport()
    cli.env["QMD_EMBED_MODEL"] = str(model)  # written into index.yml's models block by this first run
    cli.env["QMD_EMBED_CONTEXT_SIZE"] = "512"
    build_collection(cli, source, "notes", "**/*.md", base / "idx" / "lock")
    done = subprocess.run(cli.argv("embed", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-500:]
    assert str(model) in (base / "idx" / "cfg" / "index.yml").read_text()
    return {"base": base, "settings": settings, "model": model}


def engine(embedded: dict, tmp_path: Path, **overrides: object) -> QmdBackend:
    settings = _settings.validate(qmd_adapter.Settings, {**embedded["settings"], **overrides})
    return QmdBackend("qmd", settings, BackendContext(state_dir=tmp_path / "state", environ=ENV, long_lived=True))


async def ask(backend: QmdBackend, query: str, mode: str, timeout_s: float = 60.0) -> BackendResponse:
    return await backend.search(BackendRequest(query, mode=mode, timeout_s=timeout_s))


def test_concept_query_finds_the_note_by_meaning_with_cosine_relevance(embedded: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = engine(embedded, tmp_path)
        try:
            answer = await ask(backend, CONCEPT, "vsearch")
            assert answer.status == "success", answer.error_message
            top = answer.results[0]
            assert top.path == "api-errors.md"
            assert top.relevance >= 0.4  # usable: the chain stops at qmd
            # relevance is qmd's cosine through the documented mapping, not a rank position
            assert top.relevance == pytest.approx(vsearch_relevance(top.qmd_score), abs=0.011)
            assert all(r.path != "gardening.md" for r in answer.results)  # cosine < 0.3: dropped
            facts = (await backend.runtime_facts())["engine"]
            assert facts["models"]["embed"] is True and facts["models"]["generate"] is False
            # a paraphrase without the note's keywords
            answer = await ask(backend, "getting ready for a marathon", "vsearch")
            assert answer.results[0].path == "fitness.md"
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_query_mode_without_reranker_scores_by_retrieval_evidence(embedded: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = engine(embedded, tmp_path)
        try:
            answer = await ask(backend, CONCEPT, "query")
            assert answer.status == "success", answer.error_message
            assert answer.results[0].path == "api-errors.md" and answer.results[0].relevance >= 0.4
            # the others are rank-2.. RRF entries (qmd score 1/rank) with no evidence: not inflated
            assert all(r.relevance < 0.4 for r in answer.results[1:])
            assert answer.query_sent is not None
            assert answer.query_sent.startswith("lex: ") and "\nvec: " in answer.query_sent
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_models_are_unloaded_after_the_idle_period_and_reloaded_on_demand(embedded: dict, tmp_path: Path) -> None:
    async def main() -> None:
        backend = engine(embedded, tmp_path, engine_idle_s=1)
        try:
            first = await ask(backend, CONCEPT, "vsearch")
            assert first.status == "success", first.error_message
            loaded = warm_engine(backend).facts()  # as of the answer (every answer carries it)
            assert loaded["models"]["embed"] is True
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                facts = await backend.runtime_facts()
                if not facts["engine"]["models"]["embed"]:
                    break
            assert facts["engine"]["models"]["embed"] is False, "models still loaded after the idle period"
            assert facts["engine"]["pid"] == loaded["pid"]  # same engine, models given back
            answer = await ask(backend, CONCEPT, "vsearch")
            assert answer.results[0].path == "api-errors.md"
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_corrupt_model_file_is_unavailable_with_the_fix(embedded: dict, tmp_path: Path) -> None:
    model: Path = embedded["model"]
    good = model.read_bytes()
    model.write_bytes(good[:4096])  # truncated: a download cut short

    async def main() -> None:
        backend = engine(embedded, tmp_path)
        try:
            answer = await ask(backend, CONCEPT, "vsearch")
            assert answer.status == "error" and answer.error_code == BACKEND_UNAVAILABLE
            assert answer.error_message is not None
            assert "could not load a model" in answer.error_message and "qmd pull" in (answer.error_message or "")
            assert (await ask(backend, "error middleware", "search")).status == "success"  # still serving
        finally:
            await backend.aclose()

    try:
        asyncio.run(main())
    finally:
        model.write_bytes(good)


def test_rule_4_is_answered_by_qmd_vsearch_through_the_daemon(embedded: dict, tmp_path: Path) -> None:
    config = json.loads((REPO / "router-config.json").read_text())
    # The engine and its models are under test here, not the relevance policy (tests/unit/test_calibration.py):
    # native scores, so a good vsearch answer is accepted as the spec's rule 4 says.
    config["calibration"] = "off"
    config["backends"]["qmd"] = {"type": "qmd", **embedded["settings"]}
    config["backends"]["totalrecall"]["root"] = str(tmp_path / "memory")
    (tmp_path / "memory").mkdir()
    (tmp_path / "router-config.json").write_text(json.dumps(config))
    (tmp_path / "backends.json").write_text(
        json.dumps({"backends": {"qmd": {"status": "ready"}, "totalrecall": {"status": "ready"}}})
    )
    proc = start_serve(tmp_path)
    try:
        for i in range(2):  # the first call loads the model; the second is warm
            answer = request(proc, {"id": i, "query": CONCEPT, "timeout_ms": 30000})
            assert answer["rule"]["number"] == 4, answer["rule"]
            assert (answer["routed_to"], answer["routed_mode"], answer["status"]) == ("qmd", "vsearch", "success"), (
                answer
            )
            assert answer["results"][0]["path"] == "api-errors.md"
            assert answer["fallbacks_used"] == 0
    finally:
        proc.kill()
        proc.wait(10)


# ------------------------------------------------ no generate model, no reranker (what .ci/setup gives)

SKIPPED_EXPANSION = "query expansion skipped: no generate model in "


def cli_backend(embedded: dict, tmp_path: Path, **overrides: object) -> QmdBackend:
    settings = _settings.validate(qmd_adapter.Settings, {**embedded["settings"], **overrides})
    return QmdBackend("qmd", settings, BackendContext(state_dir=tmp_path / "state", environ=ENV))


@pytest.mark.parametrize("long_lived", [True, False], ids=["engine", "cli"])
def test_hybrid_query_with_expansion_on_answers_without_a_generate_model(
    embedded: dict, tmp_path: Path, long_lived: bool
) -> None:
    """query_expansion: true (the shipped default) and only the embedding model on disk: the query
    is answered, expansion skipped on its own, and the attempt says so (query_sent + note)."""

    async def main() -> None:
        backend = (engine if long_lived else cli_backend)(embedded, tmp_path, query_expansion=True)
        try:
            answer = await ask(backend, CONCEPT, "query")
            assert answer.status == "success", answer.error_message
            assert answer.results[0].path == "api-errors.md" and answer.results[0].relevance >= 0.4
            assert answer.query_sent is not None
            assert answer.query_sent.startswith("lex: ") and "\nvec: " in answer.query_sent
            assert answer.note is not None
            assert answer.note.startswith(SKIPPED_EXPANSION) and "reranking skipped" in answer.note
        finally:
            await backend.aclose()

    asyncio.run(main())


def test_cli_vsearch_answers_without_a_generate_model_by_cosine(embedded: dict, tmp_path: Path) -> None:
    """`qmd vsearch` always expands; without the generate model the one-shot CLI's vsearch runs
    the same vector search as a typed vec: query and still reports cosine relevance."""

    async def main() -> None:
        answer = await ask(cli_backend(embedded, tmp_path), CONCEPT, "vsearch")
        assert answer.status == "success", answer.error_message
        top = answer.results[0]
        assert top.path == "api-errors.md" and top.relevance >= 0.4
        assert top.relevance == pytest.approx(vsearch_relevance(top.qmd_score), abs=0.011)
        assert all(r.qmd_score >= 0.3 for r in answer.results) and (answer.note or "").startswith(SKIPPED_EXPANSION)
        engine_answer = await ask(engine(embedded, tmp_path), CONCEPT, "vsearch")  # same ranking as the engine
        assert [r.path for r in answer.results][:3] == [r.path for r in engine_answer.results][:3]

    asyncio.run(main())


def test_backends_probe_reports_the_skipped_optional_models(embedded: dict, tmp_path: Path) -> None:
    probe = cli_backend(embedded, tmp_path, query_expansion=True).probe()
    assert probe.ok and probe.facts["modes_ready"] == ["search", "vsearch", "query"]
    assert probe.facts["query_expansion"].startswith("skipped: no generate model in ")
    assert probe.facts["rerank"].startswith("skipped: no rerank model in ")
    assert "skipped on their own: query expansion (no generate model), reranking (no rerank model)" in probe.detail


def test_only_a_missing_embedding_model_makes_vector_modes_unavailable(embedded: dict, tmp_path: Path) -> None:
    # A config without the models block and an empty model cache: qmd's default embedding model is absent.
    settings = {**embedded["settings"], "config_dir": str(tmp_path / "cfg"), "cache_dir": str(tmp_path / "cache")}
    backend = cli_backend({"settings": settings}, tmp_path)
    for mode in ("vsearch", "query"):
        answer = asyncio.run(ask(backend, CONCEPT, mode))
        assert answer.error_message is not None
        assert answer.error_code == BACKEND_UNAVAILABLE and "embed: hf:" in answer.error_message
        assert answer.error_message is not None
        assert "generate" not in answer.error_message and "rerank" not in answer.error_message
    assert backend.probe().facts["modes_ready"] == ["search"]


def test_default_rule_through_the_daemon_answers_and_the_attempt_says_expansion_was_skipped(
    embedded: dict, tmp_path: Path
) -> None:
    config = json.loads((REPO / "router-config.json").read_text())
    # The engine and its models are under test here, not the relevance policy (tests/unit/test_calibration.py):
    # native scores, so a good vsearch answer is accepted as the spec's rule 4 says.
    config["calibration"] = "off"
    config["backends"]["qmd"] = {"type": "qmd", **embedded["settings"], "query_expansion": True}
    config["backends"]["totalrecall"]["root"] = str(tmp_path / "memory")
    (tmp_path / "router-config.json").write_text(json.dumps(config))
    (tmp_path / "backends.json").write_text(json.dumps({"backends": {"qmd": {"status": "ready"}}}))
    proc = start_serve(tmp_path)
    try:
        answer = request(proc, {"id": 1, "query": "api error middleware status codes", "timeout_ms": 30000})
        assert answer["rule"]["number"] == 7, answer["rule"]
        assert (answer["routed_to"], answer["routed_mode"], answer["status"]) == ("qmd", "query", "success"), answer
        assert answer["attempts"][0]["note"].startswith(SKIPPED_EXPANSION)
    finally:
        proc.kill()
        proc.wait(10)


# ------------------------------------------------ a warm daemon is warm (the start-up warm-up)


def daemon_state(embedded: dict, tmp_path: Path, **qmd: object) -> Path:
    config = json.loads((REPO / "router-config.json").read_text())
    # The engine and its models are under test here, not the relevance policy (tests/unit/test_calibration.py):
    # native scores, so a good vsearch answer is accepted as the spec's rule 4 says.
    config["calibration"] = "off"
    config["backends"]["qmd"] = {"type": "qmd", **embedded["settings"], **qmd}
    config["backends"]["totalrecall"]["root"] = str(tmp_path / "memory")
    (tmp_path / "router-config.json").write_text(json.dumps(config))
    (tmp_path / "backends.json").write_text(json.dumps({"backends": {"qmd": {"status": "ready"}}}))
    return tmp_path


def wait_for_warmup(ask_stats: Callable[[], dict], timeout_s: float = 180.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        qmd = ask_stats()["runtime"]["qmd"]
        if qmd.get("warmup", {}).get("state") not in (None, "warming") or time.monotonic() > deadline:
            return qmd
        time.sleep(0.2)


def test_serve_loads_the_models_at_start_up_before_any_query(embedded: dict, tmp_path: Path) -> None:
    proc = start_serve(daemon_state(embedded, tmp_path))
    try:
        qmd = wait_for_warmup(lambda: request(proc, {"id": 0, "op": "stats"})["stats"])
        warmup, engine = qmd["warmup"], qmd["engine"]
        # loaded before anything was asked of qmd: no query served, one engine start, embed loaded
        assert warmup["state"] == "ready" and warmup["models"] == ["embed"], warmup  # no reranker/generate here
        assert warmup["loaded_ms"]["embed"] > 0 and engine["served"] == 0 and engine["starts"] == 1
        assert engine["models"] == {"embed": True, "generate": False, "rerank": False}
        answer = request(proc, {"id": 1, "query": CONCEPT, "timeout_ms": 30000})
        assert (answer["routed_to"], answer["routed_mode"], answer["status"]) == ("qmd", "vsearch", "success")
        engine = request(proc, {"id": 2, "op": "stats"})["stats"]["runtime"]["qmd"]["engine"]
        # every qmd step the query asked ("fill" asks rule 4's vsearch and query) used the warmed engine
        asked = sum(a["backend"] == "qmd" for a in answer["attempts"])
        assert asked >= 1 and engine["starts"] == 1 and engine["served"] == asked, (engine, answer["attempts"])
    finally:
        proc.kill()
        proc.wait(10)


def test_engine_warmup_false_keeps_the_engine_for_the_first_call(embedded: dict, tmp_path: Path) -> None:
    proc = start_serve(daemon_state(embedded, tmp_path, engine_warmup=False))
    try:
        request(proc, {"id": 0, "query": "find the function mapErrors", "timeout_ms": 30000})  # a keyword call
        qmd = request(proc, {"id": 1, "op": "stats"})["stats"]["runtime"]["qmd"]
        assert "warmup" not in qmd and qmd["engine"]["models"]["embed"] is False  # started by the call, no load
    finally:
        proc.kill()
        proc.wait(10)


def test_a_failed_warm_up_is_reported_and_the_daemon_keeps_answering(embedded: dict, tmp_path: Path) -> None:
    model: Path = embedded["model"]
    good = model.read_bytes()
    model.write_bytes(good[:4096])  # a download cut short
    proc = start_serve(daemon_state(embedded, tmp_path))
    try:
        qmd = wait_for_warmup(lambda: request(proc, {"id": 0, "op": "stats"})["stats"])
        assert qmd["warmup"]["state"] == "failed" and qmd["warmup"]["error"], qmd
        answer = request(proc, {"id": 1, "query": "find the function mapErrors", "timeout_ms": 30000})
        assert answer["attempts"][0]["backend"] == "qmd" and answer["attempts"][0]["status"] != "error", answer
    finally:
        proc.kill()
        proc.wait(10)
        model.write_bytes(good)


def test_mcp_starts_the_engine_and_loads_the_model_before_the_first_tool_call(embedded: dict, tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    state = daemon_state(embedded, tmp_path)
    index = embedded["settings"]["index_path"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_router", "mcp", "--state-dir", str(state), "--config", str(state / "router-config.json")],
        env={**ENV, "MEMORY_ROUTER_DAEMON": "off"},
    )

    def model_mapped() -> bool:
        """Whether this session's engine (its argv names our index) has the model file mapped."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if any(b"qmd_engine.mjs" in a for a in argv) and any(index.encode() in a for a in argv):
                    return MODEL.name in Path(f"/proc/{pid}/maps").read_text()
            except OSError:
                continue
        return False

    async def run() -> dict:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                deadline = time.monotonic() + 180
                # the engine runs and has loaded (mapped) the model before any tool was called
                while not model_mapped() and time.monotonic() < deadline:
                    await asyncio.sleep(0.5)
                assert model_mapped(), "no warmed engine before the first tool call"
                result = await session.call_tool("memory_query", {"query": CONCEPT, "timeout_ms": 30000})
                return result.structured_content or {}

    answer = asyncio.run(asyncio.wait_for(run(), timeout=300))
    assert (answer["routed_to"], answer["routed_mode"], answer["status"]) == ("qmd", "vsearch", "success")


# ------------------------------------------------ documents without vectors are named, not hidden


def _copied_index(embedded: dict, tmp_path: Path) -> dict:
    """A private copy of the embedded index (its notes folder included), so one test may add a
    note the others never see."""
    base = tmp_path / "copy"
    shutil.copytree(embedded["base"], base, ignore=shutil.ignore_patterns("s", "state"))
    yml = base / "idx" / "cfg" / "index.yml"
    # the copy's collection reads the copied notes; its embedding model stays the one it was embedded with
    yml.write_text(yml.read_text().replace(str(embedded["base"] / "notes"), str(base / "notes")))
    settings = {
        **embedded["settings"],
        "index_path": str(base / "idx" / "index.sqlite"),
        "config_dir": str(base / "idx" / "cfg"),
        "cache_dir": str(base / "cache"),
    }
    return {**embedded, "base": base, "settings": settings}


def test_documents_not_embedded_yet_are_named_in_the_vector_answer(embedded: dict, tmp_path: Path) -> None:
    """A note indexed by `qmd update` but not embedded: vsearch answers from the rest, and the
    answer says how many documents it could not see and what to run, on both transports."""
    copy = _copied_index(embedded, tmp_path)
    (copy["base"] / "notes" / "late.md").write_text("# Late note\n\nThe deploy freeze starts on Fridays at noon.\n")
    cli = cli_backend(copy, tmp_path).transport()
    Path(cli.cwd).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(cli.argv("update", []), cwd=cli.cwd, env=cli.env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-500:]

    # qmd's CLI counts what lacks vectors for the model its environment names (else its default)
    environ = {**ENV, "QMD_EMBED_MODEL": str(embedded["model"])}
    settings = _settings.validate(qmd_adapter.Settings, copy["settings"])
    one_shot_backend = QmdBackend("qmd", settings, BackendContext(state_dir=tmp_path / "s", environ=environ))

    async def main() -> None:
        one_shot = await ask(one_shot_backend, CONCEPT, "vsearch")
        warm = engine(copy, tmp_path)
        try:
            engined = await ask(warm, CONCEPT, "vsearch")
        finally:
            await warm.aclose()
        for answer in (one_shot, engined):
            assert answer.status == "success", answer.error_message
            assert answer.results[0].path == "api-errors.md"  # the embedded notes still answer
            assert answer.note is not None
            assert "1 documents" in answer.note and "no embeddings yet" in answer.note, answer.note
            assert answer.note is not None
            assert "qmd embed" in answer.note

    asyncio.run(main())
