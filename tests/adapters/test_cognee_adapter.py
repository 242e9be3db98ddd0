"""The Cognee adapter's own logic: answer shapes, parsing, relevance, error mapping, settings.

These need no Cognee server (tests/adapters/test_cognee_server.py runs the real one). The sample
contexts and error bodies below are copied from a real Cognee 1.6.5 server's answers.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends import BackendContext, DemoUnavailable
from memory_router.backends.base import BackendRequest, BackendResponse, Stopwatch
from memory_router.backends.cognee import adapter
from memory_router.backends.cognee.paths import Relationship
from memory_router.backends.cognee.question import cypher_for
from memory_router.backends.cognee.results import (
    distance_relevance,
    entity_terms,
    parse_connections,
    parse_nodes,
    relevance,
    to_results,
    unwrap,
)
from memory_router.backends.common import settings as _settings
from memory_router.config.paths import packaged_config
from memory_router.config.router_config import parse_config
from memory_router.core.errors import InvalidConfig

# A real GRAPH_COMPLETION onlyContext answer (dataset "arch", access control on), shortened.
REAL_CONTEXT = (
    "The question is: `What depends on Postgres?`\nand here is the context provided with a set of relationships "
    "from a knowledge graph separated by \\n---\\n each represented as node1 -- relation -- node2 triplet: `Nodes:\n"
    "Node: OrderService\n__node_content_start__\nCreates and tracks customer orders.\n__node_content_end__\n\n"
    "Node: Postgres\n__node_content_start__\nPrimary relational database.\n__node_content_end__\n\n"
    "Node: Redis\n__node_content_start__\nIn-memory cache and session store.\n__node_content_end__\n\n\n"
    "Connections:\n"
    "OrderService --[depends_on]--> Postgres  (OrderService depends on Postgres.)\n"
    "AuthService --[depends_on]--> Postgres  (AuthService depends on Postgres.)\n"
    "AuthService --[depends_on]--> Redis  (AuthService depends on Redis.)`"
)
WRAPPED = [
    {
        "dataset_id": "c1215075-2f96-5ccd-818a-6d2efc4037a7",
        "dataset_name": "arch",
        "dataset_tenant_id": None,
        "search_result": REAL_CONTEXT,
    }
]


def backend(**settings: object) -> adapter.CogneeBackend:
    env = {"COGNEE_BASE_URL": "http://127.0.0.1:9", "COGNEE_API_KEY": "sekrit-key-123"}
    return adapter.CogneeBackend("cognee", _settings.validate(adapter.Settings, settings), env)


# --------------------------------------------------------------------------- parsing


def test_parses_the_connections_and_nodes_of_a_real_graph_context():
    rels = parse_connections(REAL_CONTEXT)
    assert rels == [
        Relationship("OrderService", "depends_on", "Postgres", "OrderService depends on Postgres."),
        Relationship("AuthService", "depends_on", "Postgres", "AuthService depends on Postgres."),
        Relationship("AuthService", "depends_on", "Redis", "AuthService depends on Redis."),
    ]
    assert parse_nodes(REAL_CONTEXT)["Postgres"] == "Primary relational database."


_name = (
    st.text(st.sampled_from("abcXYZ019_ -.:"), min_size=1, max_size=20)
    .map(str.strip)
    .filter(lambda s: s and "--" not in s and not s.endswith("-"))
)


@given(
    st.lists(
        st.tuples(
            _name,
            st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True),
            _name,
            st.one_of(
                st.none(),
                st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40)
                .map(str.strip)
                .filter(bool),
            ),
        ),
        max_size=8,
        unique_by=lambda t: (t[0], t[1], t[2]),
    )
)
def test_connection_lines_round_trip(edges):
    lines = [f"{s} --[{r}]--> {t}" + (f"  ({text})" if text else "") for s, r, t, text in edges]
    context = "Nodes:\nNode: x\n\nConnections:\n" + "\n".join(lines) + "`"
    assert parse_connections(context) == [Relationship(s, r, t, text) for s, r, t, text in edges]


def test_unwraps_the_per_dataset_shape_and_the_bare_list():
    answers, errors = unwrap(
        WRAPPED + [{"dataset_id": "x", "dataset_name": "other", "search_result": None, "error": "boom"}]
    )
    assert [(a.dataset, a.result) for a in answers] == [("arch", REAL_CONTEXT)]
    assert errors == ["dataset other: boom"]
    answers, errors = unwrap([REAL_CONTEXT])  # access control off
    assert [(a.dataset, a.result) for a in answers] == [(None, [REAL_CONTEXT])] and errors == []


def test_a_dataset_with_no_data_of_that_kind_is_empty_not_failing():
    # real answer: CHUNKS over all datasets, one of which holds only a graph
    no_chunks: dict[str, object] = {
        "dataset_id": "9a",
        "dataset_name": "arch",
        "dataset_tenant_id": None,
        "search_result": [],
        "error": "No data found in the system, please add data first.",
    }
    chunk = {"text": "Postgres failover: promote the replica", "document_name": "runbook.md", "score": 0.3}
    with_chunks = {"dataset_id": "fb", "dataset_name": "runbooks", "dataset_tenant_id": None, "search_result": [chunk]}
    results, errors = to_results([no_chunks, with_chunks], "chunks", "postgres failover", "cognee")
    assert errors == [] and [(r.dataset, r.relevance) for r in results] == [("runbooks", 0.7)]
    r = mapped(200, json=[no_chunks])
    assert (r.status, r.error_code) == ("empty", None)


def test_access_control_off_gives_the_same_results_without_a_dataset():
    on, _ = to_results(WRAPPED, "graph", "what depends on Postgres", "cognee")
    off, _ = to_results([REAL_CONTEXT], "graph", "what depends on Postgres", "cognee")
    assert [r.content for r in on] == [r.content for r in off]
    assert {r.dataset for r in on} == {"arch"}
    assert all(not hasattr(r, "dataset") for r in off)


# --------------------------------------------------------------------------- relevance


def test_relevance_is_the_coverage_of_the_query_entities():
    results, _ = to_results(WRAPPED, "graph", "what depends on Postgres", "cognee")
    # the Redis edge names no queried entity: dropped, not scored 0
    assert [(r.relationship["source"], r.relevance) for r in results] == [("OrderService", 1.0), ("AuthService", 1.0)]
    results, _ = to_results(WRAPPED, "graph", "how does AuthService relate to Postgres", "cognee")
    assert [r.relevance for r in results] == [1.0, 0.5, 0.5]  # AuthService->Postgres first
    assert results[0].content.startswith("AuthService --[depends_on]--> Postgres")


def test_entity_terms_drop_stopwords_and_relation_words_and_split_identifiers():
    assert [t.stem for t in entity_terms("what depends on Postgres")] == ["postgr"]
    assert [t.stem for t in entity_terms("how does ApiGateway relate to AuthService")] == ["apigateway", "authservic"]
    assert entity_terms("show all the dependencies and connections") == []
    # "api gateway" in the query is covered by the node ApiGateway, and ApiGateway by "Api Gateway"
    assert relevance(entity_terms("what calls the api gateway"), "ApiGateway depends_on AuthService") == 1.0
    assert relevance(entity_terms("what calls ApiGateway"), "Api Gateway depends_on AuthService") == 1.0


def test_structural_edges_are_never_strong():
    context = (
        "Connections:\nPostgres failover: promote the replica... [postgres, failover] --[is_part_of]--> runbook.md\n"
        "AuthService --[depends_on]--> Postgres  (AuthService depends on Postgres.)"
    )
    results, _ = to_results([context], "graph", "what depends on Postgres", "cognee")
    # the chunk names Postgres, but at the source end of an edge that is no dependency:
    # 0.35 (wrong end) x 0.6 (another relation type) = 0.21, and never more than 0.35
    assert [(r.relationship["relation"], r.relevance) for r in results] == [("depends_on", 1.0), ("is_part_of", 0.21)]
    results, _ = to_results([context], "graph", "how does Postgres relate to runbook.md", "cognee")
    assert [(r.relationship["relation"], r.relevance) for r in results] == [("depends_on", 0.5), ("is_part_of", 0.35)]


def test_a_query_naming_no_entity_is_weak_everywhere():
    results, _ = to_results(WRAPPED, "graph", "show all dependencies", "cognee")
    assert len(results) == 3 and {r.relevance for r in results} == {0.35}


@given(st.text(max_size=80), st.text(max_size=200))
def test_relevance_is_a_probability(query, text):
    assert 0.0 <= relevance(entity_terms(query), text) <= 1.0


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none()))
def test_distance_relevance_is_a_probability(score):
    assert 0.0 <= distance_relevance(score) <= 1.0


def test_chunks_score_is_a_distance_and_lexical_chunks_use_coverage():
    chunks = [
        {"text": "Postgres stores orders", "document_name": "a.md", "chunk_index": 0, "score": 0.25},
        {"text": "Redis caches sessions", "document_name": "b.md", "chunk_index": 3, "score": 0.9},
        {"text": "far away", "score": 1.4},
    ]
    results, _ = to_results(
        [{"dataset_id": "d", "dataset_name": "docs", "search_result": chunks}], "chunks", "postgres orders", "cognee"
    )
    assert [(r.content, r.relevance, r.document_name) for r in results] == [
        ("Postgres stores orders", 0.75, "a.md"),
        ("Redis caches sessions", 0.1, "b.md"),
    ]
    for bare in (chunks, [chunks]):  # access control off: the list itself, or a list of lists
        results, _ = to_results(bare, "lexical", "postgres orders", "cognee")
        assert [(r.content, r.relevance) for r in results] == [("Postgres stores orders", 1.0)]


def test_cypher_rows_and_completion_answers():
    rows = [["ApiGateway", "depends_on", "AuthService"], ["AuthService", "depends_on", "Postgres"], [3, None]]
    for bare in (rows, [rows]):
        results, _ = to_results(bare, "cypher", "what depends on AuthService", "cognee")
        assert [r.content for r in results] == [
            "ApiGateway --[depends_on]--> AuthService",
            "AuthService --[depends_on]--> Postgres",
        ]
    results, _ = to_results(
        [["AuthService and OrderService depend on Postgres."]], "completion", "what depends on Postgres", "cognee"
    )
    assert [(r.content, r.relevance) for r in results] == [("AuthService and OrderService depend on Postgres.", 1.0)]


_CYPHER = re.compile(
    r"MATCH \(a:Node\)-\[r\]->\(b:Node\) WHERE "
    r"lower\(a\.name\) CONTAINS '(\w+)' OR lower\(b\.name\) CONTAINS '\1'"
    r"(?: OR lower\(a\.name\) CONTAINS '(\w+)' OR lower\(b\.name\) CONTAINS '\2')*"
    r" RETURN a\.name, r\.relationship_name, b\.name LIMIT 10"
)


@given(st.text(max_size=120))
def test_a_query_cannot_change_the_cypher_statement(query):
    statement = cypher_for(query, 10)
    assert statement == "" or _CYPHER.fullmatch(statement), statement


# --------------------------------------------------------------------------- HTTP answers -> contract


def respond(status: int, **kw: Any) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "http://x/api/v1/search"), **kw)


def mapped(status: int, b: adapter.CogneeBackend | None = None, **kw: Any) -> BackendResponse:
    b = b or backend()
    return b._response(BackendRequest("what depends on Postgres"), "graph", respond(status, **kw), Stopwatch(), None)


def test_http_errors_map_to_the_contract():
    r = mapped(500, json={"detail": "LLM connection failed [InternalServerError]"})
    assert (r.status, r.error_code) == ("error", "BACKEND_ERROR")
    assert r.error_message == "Cognee search failed (HTTP 500): LLM connection failed [InternalServerError]"
    r = mapped(422, json={"detail": [{"type": "missing", "loc": ["body", "query"], "msg": "Field required"}]})
    assert r.error_message == "Cognee search failed (HTTP 422): body.query: Field required"
    r = mapped(404, json={"detail": "No searchable memory in dataset 'arch': No data found [NoDataError]"})
    assert (r.status, r.error_code, r.result_count) == ("empty", None, 0)
    r = mapped(401, json={"detail": "Authentication required"})
    message = r.error_message or ""
    assert r.error_code == "BACKEND_ERROR" and "COGNEE_API_KEY" in message and "HTTP 401" in message
    r = mapped(200, text="<html>proxy</html>")
    assert r.error_message is not None
    assert r.error_code == "BACKEND_ERROR" and "not JSON" in r.error_message
    r = mapped(200, json=[{"dataset_id": "d", "dataset_name": "arch", "search_result": None, "error": "graph gone"}])
    assert r.error_message is not None
    assert r.error_code == "BACKEND_ERROR" and "dataset arch: graph gone" in r.error_message
    r = mapped(200, json=WRAPPED)
    assert (r.status, r.result_count, r.normalized_relevance) == ("success", 2, 1.0)


def test_secrets_are_redacted_even_when_cognee_echoes_them():
    r = mapped(500, json={"detail": "bad header X-Api-Key: sekrit-key-123"})
    assert r.error_message is not None
    assert "sekrit-key-123" not in r.error_message and "***" in r.error_message
    b = backend(api_key="in-config-key-456")
    assert "in-config-key-456" not in repr(b) + repr(b.settings) + str(b.settings)


async def _silent_server() -> tuple[asyncio.AbstractServer, int, list]:
    closed: list[bool] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # take the request, never answer; returns at EOF: the client hung up
        closed.append(True)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], closed


def test_the_routers_cancellation_ends_the_request_and_closes_the_connection():
    async def scenario() -> list:
        server, port, closed = await _silent_server()
        b = adapter.CogneeBackend("cognee", adapter.Settings(), {"COGNEE_BASE_URL": f"http://127.0.0.1:{port}"})
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.search(BackendRequest("what depends on Postgres", timeout_s=30)), 0.3)
        for _ in range(50):
            if closed:
                break
            await asyncio.sleep(0.02)
        server.close()
        return closed

    assert asyncio.run(scenario()) == [True]


def test_connection_refused_is_backend_unavailable():
    b = adapter.CogneeBackend("cognee", adapter.Settings(base_url="http://127.0.0.1:9"), {})
    r = asyncio.run(b.search(BackendRequest("what depends on Postgres")))
    assert (r.status, r.error_code) == ("error", "BACKEND_UNAVAILABLE")
    assert r.error_message is not None
    assert "Connection refused" in r.error_message and "COGNEE_BASE_URL" in r.error_message
    probe = b.probe()
    assert not probe.ok and "Connection refused" in probe.detail


def test_a_base_url_without_a_scheme_from_the_environment_is_a_clear_error():
    b = adapter.CogneeBackend("cognee", adapter.Settings(), {"COGNEE_BASE_URL": "127.0.0.1:8000"})
    r = asyncio.run(b.search(BackendRequest("what depends on Postgres")))
    assert r.error_code == "BACKEND_ERROR"
    assert r.error_message is not None
    assert "COGNEE_BASE_URL='127.0.0.1:8000' is not an http://" in r.error_message


def test_demo_setup_needs_a_reachable_server(monkeypatch):
    monkeypatch.setenv("COGNEE_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(DemoUnavailable, match="no Cognee server at http://127.0.0.1:9"):
        adapter.demo_setup(None, None)


# --------------------------------------------------------------------------- settings


def _config(cognee: dict, mode: str | None = None) -> dict:
    import orjson

    data = orjson.loads(packaged_config().read_bytes())
    data["backends"]["cognee"] = {"type": "cognee", **cognee}
    if mode:
        data["rules"][1]["chain"][0]["mode"] = mode
    return data


def test_settings_come_from_config_then_environment():
    cfg = parse_config(
        _config({"base_url": "http://cognee:9000/", "datasets": ["arch"], "top_k": 5}), packaged_config()
    )
    b = adapter.create(
        "cognee",
        cfg.backends["cognee"].settings,
        BackendContext(state_dir=packaged_config().parent, environ={"COGNEE_BASE_URL": "http://other"}),
    )
    assert b.base_url == "http://cognee:9000" and b.auth_kind == "none"
    body, sent = b._body("graph", "q")
    assert body == {
        "query": "q",
        "topK": 5,
        "datasets": ["arch"],
        "searchType": "GRAPH_COMPLETION",
        "onlyContext": True,
    }
    env = {"COGNEE_USERNAME": "me@example.com", "COGNEE_PASSWORD": "pw"}
    b = adapter.create("cognee", adapter.Settings(), BackendContext(state_dir=packaged_config().parent, environ=env))
    assert b.base_url == adapter.DEFAULT_BASE_URL and b.auth_kind == "login"
    assert b._body("chunks", "q")[0]["searchType"] == "CHUNKS"
    assert "onlyContext" not in b._body("completion", "q")[0]


@pytest.mark.parametrize(
    "cognee, mode, where",
    [
        ({"apikey": "x"}, None, "backends.cognee.apikey"),
        ({"default_mode": "insights"}, None, "backends.cognee.default_mode"),
        ({"graph_search_type": "INSIGHTS"}, None, "backends.cognee.graph_search_type"),
        ({"top_k": 0}, None, "backends.cognee.top_k"),
        ({"base_url": "127.0.0.1:8000"}, None, "backends.cognee.base_url"),
        ({}, "vector", "rules[1] (relationship).chain[0].mode"),
    ],
)
def test_bad_settings_are_refused_with_the_field(cognee, mode, where):
    with pytest.raises(InvalidConfig) as info:
        parse_config(_config(cognee, mode), packaged_config())
    assert where in str(info.value)
