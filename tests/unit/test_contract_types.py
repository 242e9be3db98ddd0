"""The contract types without pydantic: Result, BackendResponse and Envelope check what they hold,
stay immutable, serialise in the spec's order, and read back from JSON strictly."""

from __future__ import annotations

import inspect
import math
import pickle
import subprocess
import sys

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.base import BackendResponse, InvalidResult, Result
from memory_router.core.envelope import Envelope, InvalidEnvelope, error_envelope

texts = st.text(max_size=20)
relevances = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
extras = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: k not in ("content", "relevance", "source", "timestamp")),
    st.one_of(st.none(), st.integers(-5, 5), texts, st.booleans()),
    max_size=3,
)
results = st.builds(lambda c, r, s, t, e: Result(c, r, s, t, **e), texts, relevances, texts, st.none() | texts, extras)


def test_a_result_keeps_extra_keys_after_the_contract_fields() -> None:
    hit = Result("schema notes", 0.8, "totalrecall", path="memory/a.md", line=3)
    assert list(hit.as_dict()) == ["content", "relevance", "source", "timestamp", "path", "line"]
    assert hit.extra == {"path": "memory/a.md", "line": 3}
    assert orjson.loads(orjson.dumps(hit.as_dict()))["line"] == 3


@pytest.mark.parametrize("bad", [1.5, -0.1, math.nan, math.inf, True, "0.9", None])
def test_a_result_refuses_a_relevance_outside_0_to_1(bad: object) -> None:
    with pytest.raises(InvalidResult, match="relevance"):
        Result("x", bad, "qmd")  # type: ignore[arg-type]


def test_a_result_refuses_wrong_types_for_content_source_and_timestamp() -> None:
    with pytest.raises(InvalidResult, match="content"):
        Result(b"x", 0.5, "qmd")  # type: ignore[arg-type]
    with pytest.raises(InvalidResult, match="source"):
        Result("x", 0.5, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidResult, match="timestamp"):
        Result("x", 0.5, "qmd", 20260101)  # type: ignore[arg-type]


def test_results_and_responses_are_immutable() -> None:
    hit = Result("x", 0.5, "qmd", path="a")
    with pytest.raises(AttributeError):
        hit.relevance = 0.9  # type: ignore[misc]
    with pytest.raises(TypeError):
        hit.extra["path"] = "b"  # type: ignore[index]
    response = BackendResponse.from_results("qmd", "q", [hit])
    with pytest.raises(AttributeError, match="immutable"):
        response.status = "error"  # type: ignore[misc]
    assert hit.replace(relevance=0.9).relevance == 0.9 and hit.relevance == 0.5


@given(results)
def test_a_result_survives_json_pickle_and_replace(hit: Result) -> None:
    assert Result.from_dict(orjson.loads(orjson.dumps(hit.as_dict()))) == hit
    assert pickle.loads(pickle.dumps(hit)) == hit
    assert hit.replace() == hit and hash(hit.replace()) == hash(hit)


@given(st.lists(results, max_size=6))
def test_from_results_orders_by_relevance_and_reports_the_best(hits: list[Result]) -> None:
    response = BackendResponse.from_results("b", "q", hits)
    assert [r.relevance for r in response.results] == sorted((h.relevance for h in hits), reverse=True)
    assert response.result_count == len(hits)
    assert response.status == ("success" if hits else "empty")
    assert response.normalized_relevance == max((h.relevance for h in hits), default=0.0)


def test_a_response_refuses_a_bad_status_or_relevance() -> None:
    ok = BackendResponse.failure("b", "q", "BACKEND_ERROR", "boom")
    with pytest.raises(InvalidResult, match="status"):
        ok.replace(status="partial")
    with pytest.raises(InvalidResult, match="normalized_relevance"):
        ok.replace(normalized_relevance=1.01)
    with pytest.raises(InvalidResult, match="Result"):
        ok.replace(results=({"content": "x"},))


def _envelope() -> dict:
    hit = Result("schema notes", 0.8, "totalrecall", path="memory/a.md")
    data = error_envelope("what schema", "X", "y").as_dict()
    return data | {
        "routed_to": "totalrecall",
        "results": [hit.as_dict()],
        "result_count": 1,
        "normalized_relevance": 0.8,
        "status": "success",
        "error_code": None,
        "error_message": None,
    }


def test_an_envelope_reads_back_what_it_wrote_in_the_spec_order() -> None:
    data = _envelope()
    envelope = Envelope.from_dict(data)
    assert envelope.as_dict() == data
    assert list(orjson.loads(envelope.to_json())) == [
        "query_echo", "routed_to", "routed_mode", "fallback_chain", "fallbacks_used", "results",
        "result_count", "normalized_relevance", "status", "error_code", "error_message",
        "router_duration_ms", "backend_duration_ms", "rule", "attempts",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("status", "maybe", "status"),
        ("result_count", -1, "result_count"),
        ("result_count", True, "result_count"),
        ("normalized_relevance", 1.5, "normalized_relevance"),
        ("routed_to", 3, "routed_to"),
        ("fallback_chain", ["qmd", 1], "fallback_chain"),
        ("results", [{"content": "x", "relevance": 2, "source": "s"}], "relevance"),
        ("results", [{"content": "x"}], "relevance, source"),
        ("attempts", ["x"], "attempts"),
        ("surprise", 1, "surprise"),
    ],
)
def test_an_envelope_with_a_bad_field_is_refused_by_name(field: str, value: object, says: str) -> None:
    with pytest.raises(InvalidEnvelope, match=says):
        Envelope.from_dict(_envelope() | {field: value})


def test_a_missing_envelope_field_is_named() -> None:
    data = _envelope()
    del data["fallbacks_used"]
    with pytest.raises(InvalidEnvelope, match="fallbacks_used"):
        Envelope.from_dict(data)


@pytest.mark.slow
def test_the_contract_types_do_not_import_pydantic() -> None:
    # Every cold query builds these; pydantic's import alone costs more than the rest of a query.
    code = "import sys, memory_router.core.envelope, memory_router.routing.router; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_extra_keys_read_as_attributes_and_unknown_names_are_attribute_errors() -> None:
    hit = Result("x", 0.5, "qmd", path="a.md")
    assert hit.path == "a.md"
    with pytest.raises(AttributeError, match="nope"):
        _ = hit.nope
    assert not hasattr(hit, "nope")


def test_the_reader_knows_the_type_of_every_envelope_field() -> None:
    from memory_router.core import envelope

    names = [*envelope.FIELD_NAMES, *envelope.OPTIONAL_FIELDS]
    assert list(envelope._FIELD_TYPES) == names == list(Envelope.__slots__)


def test_the_fields_the_reader_requires_are_those_without_a_default() -> None:
    from memory_router.core import envelope

    params = inspect.signature(Envelope).parameters
    assert list(params) == [*envelope.FIELD_NAMES, *envelope.OPTIONAL_FIELDS]
    assert [name for name, required in envelope.FIELDS if required] == [
        name for name, p in params.items() if p.default is inspect.Parameter.empty
    ]


def test_responses_and_envelopes_replace_compare_hash_and_pickle() -> None:
    hits = [Result("a", 0.3, "qmd", path="x.md"), Result("b", 0.9, "tr")]
    response = BackendResponse.from_results("qmd", "q", hits, duration_ms=4, query_sent="kw")
    assert pickle.loads(pickle.dumps(response)) == response
    assert response.replace() == response and hash(response.replace()) == hash(response)
    assert response.replace(backend="tr").backend == "tr" and response.backend == "qmd"
    assert response.replace(results=hits).results == tuple(hits)  # a list is kept as a tuple
    assert list(response.as_dict()) == [
        "query_echo", "results", "result_count", "status", "error_message", "error_code",
        "backend_duration_ms", "normalized_relevance", "backend", "query_sent",
    ]  # fmt: skip
    assert response.as_dict()["results"] == [hits[1].as_dict(), hits[0].as_dict()]
    assert repr(response).startswith("BackendResponse(query_echo='q', results=(Result(content='b'")
    with pytest.raises(TypeError):
        BackendResponse("q", status="empty", backend="b")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        response.replace(nope=1)
    with pytest.raises(AttributeError, match="immutable"):
        del response.status
    envelope = Envelope.from_dict(_envelope())
    assert pickle.loads(pickle.dumps(envelope)) == envelope
    assert envelope.replace() == envelope and envelope.replace(status="partial").status == "partial"
    assert error_envelope("q", "X", "y").attempts == () and error_envelope("q", "X", "y") != envelope
    assert repr(envelope).startswith("Envelope(query_echo='what schema', routed_to='totalrecall'")
    with pytest.raises(AttributeError, match="immutable"):
        envelope.status = "error"  # type: ignore[misc]


_BACKENDS = ("qmd", "totalrecall", "lossless", "cognee")
_answers = st.one_of(
    st.builds(
        lambda backend, hits: BackendResponse.from_results(backend, "q", hits),
        st.sampled_from(_BACKENDS),
        st.lists(results, max_size=3),
    ),
    st.builds(
        lambda backend, code: BackendResponse.failure(backend, "q", code, f"{code} from {backend}"),
        st.sampled_from(_BACKENDS),
        st.sampled_from(("BACKEND_ERROR", "BACKEND_UNAVAILABLE", "QUERY_TIMEOUT")),
    ),
)


@given(
    st.lists(st.sampled_from(_BACKENDS), min_size=1, max_size=4),
    st.lists(_answers, min_size=4, max_size=4),
    st.sampled_from(("sequential", "fuse")),
)
def test_envelopes_from_any_attempts_are_immutable_and_round_trip_through_json(
    chain: list[str], answers: list[BackendResponse], strategy: str
) -> None:
    # Envelopes the fallback machine builds from arbitrary answers (either strategy): nothing in
    # one can be changed in place, and its JSON reads back to an equal envelope.
    from memory_router.core.attempts import Policy
    from memory_router.core.fallback import Fallback
    from memory_router.core.plan import Plan
    from memory_router.core.rules import ChainStep, Rule, RuleMatch

    steps = tuple(ChainStep(name) for name in chain)
    plan = Plan(RuleMatch(Rule(7, "default", "", (), (), steps), "default"), steps, ())
    machine = Fallback("q", plan, Policy(), now=0.0, strategy=strategy)
    while calls := machine.next_calls(0.0):
        machine.receive([(answers[i].replace(backend=call.backend), i) for i, call in enumerate(calls)])
    envelope = machine.envelope(3)
    for name in ("fallback_chain", "results", "attempts"):
        assert type(getattr(envelope, name)) is tuple
    with pytest.raises(AttributeError, match="immutable"):
        envelope.results = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        envelope.results.append(None)  # type: ignore[attr-defined]
    data = envelope.to_json()
    assert Envelope.from_dict(orjson.loads(data)) == envelope
    assert Envelope.from_dict(orjson.loads(data)).to_json() == data
    assert pickle.loads(pickle.dumps(envelope)) == envelope


def test_an_envelope_built_from_lists_equals_one_built_from_tuples_and_writes_the_same_json() -> None:
    hit = Result("a", 0.5, "qmd")
    attempt = {"backend": "qmd", "accepted": True}
    as_lists = Envelope("q", "qmd", None, ["qmd"], 0, [hit], 1, 0.5, "success", attempts=[attempt])
    as_tuples = Envelope("q", "qmd", None, ("qmd",), 0, (hit,), 1, 0.5, "success", attempts=(attempt,))
    assert as_lists == as_tuples and as_lists.to_json() == as_tuples.to_json()
    assert orjson.loads(as_lists.to_json())["fallback_chain"] == ["qmd"]
    assert as_lists.as_dict()["attempts"] == [attempt]
