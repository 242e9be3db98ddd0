"""Relevance calibration: one scale for every backend, static data, never a failed query."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import BackendRequest, BackendResponse, Result
from memory_router.backends.common.words import stem
from memory_router.backends.mock import Handler, MockBackend, answer
from memory_router.config.calibration import load, packaged_path
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import parse_config, read_json
from memory_router.core.asked import asked
from memory_router.core.calibration import (
    Calibration,
    Model,
    coverage,
    parse,
    query_terms,
)
from memory_router.routing.router import Router

from ..conftest import STARTER, installed, make_router, write_json


class CalibratedMock(MockBackend):
    """A mock that names a calibration key, as the built-in adapters do."""

    def __init__(self, name: str, handler: Handler, key: str) -> None:
        super().__init__(name, handler)
        self.key = key

    def calibration_key(self, mode: str | None) -> str:
        return self.key


MINILM = "all-MiniLM-L6-v2-f16"  # the embedding model .ci/setup builds, the one LoCoMo was measured with


def _file(maps: dict) -> dict:
    return {"format": 1, "maps": maps}


def response(query: str, *relevances: float, text: str = "") -> BackendResponse:
    hits = [Result(f"{text} hit {i}", r, "qmd", path=f"notes/{i}.md") for i, r in enumerate(relevances)]
    return BackendResponse.from_results("qmd", query, hits)


# ---------------------------------------------------------------------------- the data file


def test_the_packaged_calibration_loads_and_maps_every_backend_the_bench_measured():
    calibration = load("packaged")
    assert calibration.problem is None, calibration.problem
    assert calibration.active
    for key in ("qmd:search", f"qmd:vsearch:{MINILM}", f"qmd:query:{MINILM}", "totalrecall", "lossless"):
        assert key in calibration.models, key
    # What was not measured keeps its own relevance rather than a guess.
    assert calibration.model_for("cognee") == ("native", None)


@pytest.mark.parametrize(
    ("maps", "message"),
    [
        ({"qmd:search": {"intercept": "x"}}, "maps.qmd:search.intercept must be a finite number"),
        ({"qmd:search": {"native": float("inf")}}, "maps.qmd:search.native must be a finite number"),
        ({"qmd:search": {"coverage": -1.0}}, "must be >= 0 (monotone)"),
        ({"qmd:search": []}, "maps.qmd:search must be an object"),
        ({}, '"maps" must be a non-empty object'),
        ({"lossless": {"first": {"x": [0.5, 0.2], "y": [0.1, 0.2]}}}, "first.x must be non-decreasing"),
        ({"lossless": {"first": {"x": [0.2, 0.5], "y": [0.3, 0.2]}}}, "first.y must be non-decreasing"),
        ({"lossless": {"first": {"x": [0.2], "y": [0.3, 0.4]}}}, "x and y must be lists of one length"),
        ({"lossless": {"first": {"x": [0.2], "y": [1.5]}}}, "first.y must hold numbers in 0..1"),
    ],
)
def test_a_bad_calibration_file_is_refused_with_the_field_named(maps, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(_file(maps))


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"format": 9, "maps": {}}', b"[]"])
def test_a_missing_or_unreadable_file_means_native_scores_and_says_why(tmp_path, content):
    path = tmp_path / "calibration.json"
    path.write_bytes(content)
    for calibration in (load(str(path)), load(str(tmp_path / "absent.json"))):
        assert not calibration.active
        assert calibration.problem and "native relevance" in calibration.problem
        assert str(tmp_path) in calibration.problem
        untouched = response("auth", 0.9, 0.3)
        key, model = calibration.model_for("qmd:query")
        assert (key, model) == ("native", None)
        assert calibration.apply("qmd:query", "auth", untouched) == untouched


def test_a_relative_calibration_path_is_read_beside_the_config(tmp_path):
    (tmp_path / "mine.json").write_bytes(orjson.dumps(_file({"default": {"intercept": 1.0}})))
    assert load("mine.json", tmp_path / "router-config.json").active


# ---------------------------------------------------------------------------- the map

unit = st.floats(0, 1)


@st.composite
def models(draw: st.DrawFn) -> Model:
    """A valid map: non-negative native and coverage weights, and a non-decreasing first-result step map."""
    size = draw(st.integers(0, 6))
    first_x = tuple(sorted(draw(st.lists(unit, min_size=size, max_size=size))))
    first_y = tuple(sorted(draw(st.lists(unit, min_size=size, max_size=size))))
    weights = draw(st.tuples(st.floats(-6, 6), st.floats(0, 8), st.floats(0, 8), st.floats(-3, 3), st.floats(0, 8)))
    return Model(*weights, first_x=first_x, first_y=first_y, gap=draw(st.floats(0, 8)))


@given(models(), unit, unit, unit, unit, unit)
def test_the_map_is_monotone_in_native_relevance_and_coverage(model, a, b, c, d, rank):
    lo_n, hi_n = sorted((a, b))
    lo_c, hi_c = sorted((c, d))
    assert model(lo_n, lo_c, rank) <= model(hi_n, lo_c, rank) + 1e-12
    assert model(lo_n, lo_c, rank) <= model(lo_n, hi_c, rank) + 1e-12
    assert 0.0 <= model(a, c, rank) <= 1.0
    # The first result's step map keeps the order too, and stays in 0..1.
    assert model.first(model(lo_n, lo_c, rank)) <= model.first(model(hi_n, hi_c, rank)) + 1e-12
    assert 0.0 <= model.first(model(a, c, rank)) <= 1.0


@given(models(), unit, unit, unit, unit)
def test_the_map_is_monotone_in_how_far_a_result_stands_out(model, native, cover, a, b):
    small, large = sorted((a, b))
    assert model(native, cover, 1.0, 0.0, small) <= model(native, cover, 1.0, 0.0, large) + 1e-12


def test_a_first_result_far_ahead_of_the_second_is_the_likelier_answer():
    """Two answers whose first results score the same natively: the one whose first result stands
    out from the rest (gap 0.6) is called likelier than the one among many alike (gap 0.0)."""
    calibration = Calibration({"lossless": Model(-2.0, 1.0, 1.0, 1.0, gap=2.0)}, "test")
    query = "the payments queue"
    alone = calibration.apply("lossless", query, response(query, 0.7, 0.1, text="payments queue"))
    crowded = calibration.apply("lossless", query, response(query, 0.7, 0.7, 0.7, text="payments queue"))
    assert alone.normalized_relevance > crowded.normalized_relevance


def test_a_file_written_before_the_gap_feature_reads_as_it_was_fitted():
    maps = {"lossless": {"intercept": -1.0, "native": 1.0, "coverage": 1.0, "rank": 1.0, "exact": 0.0}}
    assert parse(_file(maps))["lossless"].gap == 0.0
    with pytest.raises(ValueError, match="gap weights must be >= 0"):
        parse(_file({"lossless": {**maps["lossless"], "gap": -0.5}}))


def test_the_first_results_step_map_interpolates_its_breakpoints():
    model = Model(0.0, 0.0, 0.0, 0.0, first_x=(0.2, 0.4), first_y=(0.1, 0.5))
    # Below the first breakpoint the value falls to 0 at 0, so two weak answers keep their order.
    assert [model.first(v) for v in (0.0, 0.1, 0.2, 0.3, 0.4, 0.9)] == pytest.approx([0.0, 0.05, 0.1, 0.3, 0.5, 0.5])
    assert Model(0.0, 0.0, 0.0, 0.0).first(0.37) == 0.37  # no step map: the logistic value stands


@given(models(), st.lists(unit, min_size=1, max_size=12), st.text(max_size=40))
def test_calibrating_keeps_the_backends_order_the_contract_and_the_native_value(model, relevances, query):
    calibration = Calibration({"qmd:query": model}, "test")
    before = response(query, *relevances, text=query)
    after = calibration.apply("qmd:query", query, before)
    if not asked(query).judgeable:  # nothing to judge by: the backend's own values stand
        assert after == before
        return
    values = [r.relevance for r in after.results]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values, reverse=True)
    assert [r.content for r in after.results] == [r.content for r in before.results]
    assert after.normalized_relevance == values[0]
    assert [r.extra["native_relevance"] for r in after.results] == [r.relevance for r in before.results]
    assert after.result_count == before.result_count and after.status == before.status


def test_query_terms_drop_stopwords_and_words_about_when():
    terms = query_terms("What did Caroline recently say about her adoption plans?")
    assert terms == {stem("caroline"), "say", stem("adoption"), "plan"}


def test_coverage_is_the_share_of_query_terms_a_result_holds():
    terms = query_terms("adoption agency interviews")
    assert coverage(terms, "She passed the adoption agency interviews last Friday") == 1.0
    assert coverage(terms, "She went to an adoption meeting") == pytest.approx(1 / 3)
    assert coverage(terms, "unrelated text") == 0.0
    assert coverage(frozenset(), "anything") == 0.5


# ---------------------------------------------------------------------------- in the router


def _router(tmp_path: Path, calibration: str, backends: dict) -> Router:
    config = parse_config({**read_json(packaged_config()), "calibration": calibration}, packaged_config())
    return make_router(config, tmp_path, backends)


def test_a_calibrated_backend_whose_high_native_score_predicts_little_falls_back(tmp_path):
    cal = write_json(tmp_path / "cal.json", _file({"qmd:query": {"intercept": -3.0, "native": 1.0}}))
    qmd = CalibratedMock("qmd", answer(0.95), "qmd:query")
    totalrecall = CalibratedMock("totalrecall", answer(0.5), "totalrecall")
    envelope = asyncio.run(
        _router(tmp_path, str(cal), {"qmd": qmd, "totalrecall": totalrecall}).route("database", installed(*STARTER))
    )
    first, second = envelope.attempts
    assert (first["backend"], first["accepted"]) == ("qmd", False)
    assert first["normalized_relevance"] == pytest.approx(1 / (1 + math.exp(2.05)), abs=1e-4)  # one result
    # No map for totalrecall and no default: its native value stands, and is accepted.
    assert (envelope.routed_to, envelope.status, envelope.normalized_relevance) == ("totalrecall", "success", 0.5)
    assert envelope.results[0].relevance == 0.5 and "native_relevance" not in envelope.results[0].extra


def test_a_backend_without_a_calibration_key_is_taken_at_its_word(tmp_path):
    cal = write_json(tmp_path / "cal.json", _file({"default": {"intercept": -9.0}}))
    qmd = MockBackend("qmd", answer(0.7))
    envelope = asyncio.run(
        _router(tmp_path, str(cal), {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer())}).route(
            "database", installed(*STARTER)
        )
    )
    assert (envelope.routed_to, envelope.normalized_relevance, envelope.status) == ("qmd", 0.7, "success")


def test_calibration_off_keeps_native_scores_and_a_missing_file_never_fails_a_query(tmp_path):
    for setting in ("off", str(tmp_path / "absent.json")):
        qmd = CalibratedMock("qmd", answer(0.9), "qmd:query")
        router = _router(tmp_path, setting, {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer())})
        envelope = router.route_blocking("database", installed(*STARTER))
        assert (envelope.status, envelope.normalized_relevance) == ("success", 0.9)


def test_the_walk_hands_calibration_the_users_query_and_the_steps_mode(tmp_path):
    seen = []

    class Spy(CalibratedMock):
        def calibration_key(self, mode):
            seen.append(mode)
            return "qmd:query"

    cal = write_json(tmp_path / "cal.json", _file({"qmd:query": {"intercept": 0.0, "coverage": 4.0}}))
    qmd = Spy("qmd", lambda req: response(req.query, 0.2, text="database schema"), "qmd:query")
    router = _router(tmp_path, str(cal), {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer())})
    envelope = router.route_blocking("database schema", installed(*STARTER))
    assert seen == ["query"]
    # Full coverage: sigmoid(4) ~ 0.982 > 0.4, accepted although the native score was 0.2.
    assert envelope.status == "success" and envelope.normalized_relevance == pytest.approx(0.982, abs=1e-3)


def test_the_packaged_file_is_the_one_the_package_ships():
    assert packaged_path().name == "calibration.json"
    assert packaged_path().parent == Path(__import__("memory_router.core").core.__file__).parent


def test_the_request_is_unchanged_by_calibration(tmp_path):
    qmd = CalibratedMock("qmd", answer(0.9), "qmd:query")
    router = _router(tmp_path, "packaged", {"qmd": qmd, "totalrecall": MockBackend("totalrecall", answer())})
    router.route_blocking("database", installed(*STARTER))
    assert qmd.requests == [BackendRequest("database", "query", 10, 5.0, None)]


def test_qmd_names_its_embedding_model_and_reranker_in_its_calibration_key(tmp_path):
    from memory_router.backends import BackendContext, adapter_module
    from memory_router.backends.base import CalibratedBackend

    qmd_module = adapter_module("qmd")
    cache = tmp_path / "cache"
    # The key is read from the models' names and files; no qmd here, so no node is started to find one.
    no_qmd = str(tmp_path / "no-qmd.js")
    env = {
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(cache),
        "QMD_EMBED_MODEL": f"/models/{MINILM}.gguf",
        "MEMORY_ROUTER_QMD": no_qmd,
    }
    backend = qmd_module.create("qmd", qmd_module.Settings(), BackendContext(tmp_path / "state", env, tmp_path))
    assert isinstance(backend, CalibratedBackend)
    assert backend.calibration_key("search") == "qmd:search"
    assert backend.calibration_key("vsearch") == f"qmd:vsearch:{MINILM}"
    assert backend.calibration_key("query") == f"qmd:query:{MINILM}"
    (cache / "qmd" / "models").mkdir(parents=True)
    (cache / "qmd" / "models" / "hf_ggml-org_qwen3-reranker-0.6b-q8_0.gguf").write_bytes(b"gguf")
    assert backend.calibration_key("query") == f"qmd:query:{MINILM}:rerank"  # reranked scores: another map
    # qmd's own default embedding model was not measured: its relevance stays qmd's own.
    default = qmd_module.create(
        "qmd",
        qmd_module.Settings(),
        BackendContext(tmp_path / "s", {"HOME": str(tmp_path), "MEMORY_ROUTER_QMD": no_qmd}, tmp_path),
    )
    assert isinstance(default, CalibratedBackend)
    assert default.calibration_key("vsearch") == "qmd:vsearch:embeddinggemma-300M-Q8_0"
    assert load("packaged").model_for(default.calibration_key("vsearch"))[0] == "native"


def test_a_query_without_content_terms_keeps_the_native_relevance():
    """A query such as 'why did we do it that way' has no term to judge coverage by: nothing to go on."""
    calibration = Calibration({"lossless": Model(-9.0, 0.0, 0.0, 0.0)}, "test")
    before = response("why did we do it that way", 0.55, 0.5)
    assert calibration.apply("lossless", "why did we do it that way", before) == before
    assert calibration.apply("lossless", "why the schema", before).normalized_relevance < 0.01
