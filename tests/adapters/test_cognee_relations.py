"""Reading relationship questions and scoring graph answers against them (no Cognee server).

tests/adapters/test_cognee_server.py asks the same kinds of question of a real Cognee server. The graph
contexts and Cypher rows below are copied from that server's answers (dataset "services").
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.cognee.explore import Explored, GraphSearch, explore
from memory_router.backends.cognee.paths import Path, Relationship, cypher_path, find_paths, rows_to_paths
from memory_router.backends.cognee.question import (
    UNKNOWN_CAP,
    family,
    parse_question,
    score_edge,
    score_path,
)
from memory_router.backends.cognee.results import to_results

# A real GRAPH_COMPLETION onlyContext answer for "what depends on the billing database" (shortened)
CONTEXT = (
    "Nodes:\nNode: BillingDatabase\n__node_content_start__\nInvoices, payments and ledger entries.\n"
    "__node_content_end__\n\nConnections:\n"
    "BillingService --[depends_on]--> BillingDatabase  (BillingService depends on BillingDatabase.)\n"
    "BillingDatabase --[is_a]--> Database  (BillingDatabase is a Database.)\n"
    "LedgerService --[depends_on]--> BillingDatabase  (LedgerService depends on BillingDatabase.)\n"
    "CheckoutService --[depends_on]--> OrdersDatabase  (CheckoutService depends on OrdersDatabase.)\n"
    "Checkout: the WebGateway calls CheckoutService, which calls... [calls, checkout, webgateway] --[contains]--> "
    "BillingService  (Checkout: the WebGateway calls CheckoutService, which calls BillingService and p contains "
    "BillingService.)\n"
    "PaymentsTeam --[owns]--> BillingDatabase  (PaymentsTeam owns BillingDatabase.)\n"
    "CheckoutService --[calls]--> BillingService  (CheckoutService calls BillingService.)\n"
    "BillingService --[calls]--> LedgerService  (BillingService calls LedgerService.)`"
)


def ranked(query: str, context: str = CONTEXT) -> list[tuple[str, float]]:
    results, _ = to_results([context], "graph", query, "cognee")
    return [(r.content.split("  (")[0], r.relevance) for r in results]


# --------------------------------------------------------------------------- reading the question


@pytest.mark.parametrize(
    "query, mentions, families, path, directed",
    [
        ("what depends on the billing database", [("billing database", "target")], {"depend"}, False, False),
        ("Kafka depends on what", [("Kafka", "source")], {"depend"}, False, False),
        ("dependencies of BillingService", [("BillingService", "source")], {"depend"}, False, False),
        ("BillingService's dependencies", [("BillingService", "source")], {"depend"}, False, False),
        ("dependents of the billing database", [("billing database", "target")], {"depend"}, False, False),
        ("what does BillingService call", [("BillingService", "source")], {"call"}, False, False),
        ("callers of InventoryService", [("InventoryService", "target")], {"call"}, False, False),
        ("what is owned by PlatformTeam", [("PlatformTeam", "source")], {"own"}, False, False),
        ("is BillingService owned by PaymentsTeam", [("BillingService", "target"), ("PaymentsTeam", "source")],
         {"own"}, False, False),
        ("does CheckoutService call BillingService", [("CheckoutService", "source"), ("BillingService", "target")],
         {"call"}, False, False),
        ("which services read from the topic", [("topic", "target")], {"read"}, False, False),
        ("how does A1 relate to B2", [("A1", "any"), ("B2", "any")], set(), False, False),
        ("trace the call chain from the web gateway to the ledger", [("web gateway", "any"), ("ledger", "any")],
         {"call"}, True, True),
        ("path between CheckoutService and ShippingService",
         [("CheckoutService", "any"), ("ShippingService", "any")], set(), True, False),
        ("show all dependencies", [], {"depend"}, False, False),
    ],
)  # fmt: skip
def test_reads_entities_relation_and_direction(query, mentions, families, path, directed):
    q = parse_question(query)
    assert [(m.text, m.role) for m in q.mentions] == mentions
    assert (set(q.families), q.path, q.directed) == (families, path, directed)


def test_edge_types_belong_to_the_family_of_their_first_word():
    assert [family(r) for r in ("depends_on", "reads_from", "publishes_to", "calls", "owns", "is_a")] == [
        "depend",
        "read",
        "publish",
        "call",
        "own",
        "is",
    ]


@given(st.text(max_size=120))
def test_any_question_parses_and_scores_within_0_1(query):
    q = parse_question(query)
    assert all(m.terms for m in q.mentions)
    for edge in (("A", "calls", "B"), ("Billing Database", "depends_on", "x"), (query[:20], "owns", query[-20:])):
        assert 0.0 <= score_edge(q, *edge) <= 1.0
    assert 0.0 <= score_path(q, ["calls", "owns"], all_forward=False) <= 1.0


# --------------------------------------------------------------------------- scoring


def test_the_relation_type_asked_ranks_first():
    assert ranked("what depends on the billing database")[:3] == [
        ("BillingService --[depends_on]--> BillingDatabase", 1.0),
        ("LedgerService --[depends_on]--> BillingDatabase", 1.0),
        ("PaymentsTeam --[owns]--> BillingDatabase", 0.6),
    ]
    assert ranked("who owns the billing database")[0] == ("PaymentsTeam --[owns]--> BillingDatabase", 1.0)


def test_direction_is_honoured():
    # BillingService's own dependencies first; what depends on *it* is at the wrong end: weak
    got = dict(ranked("dependencies of BillingService"))
    assert got["BillingService --[depends_on]--> BillingDatabase"] == 1.0
    assert got["BillingService --[calls]--> LedgerService"] == 0.6
    assert got["CheckoutService --[calls]--> BillingService"] == round(0.35 * 0.6, 4)
    got = dict(ranked("what calls BillingService"))
    assert max(got, key=lambda line: got[line]) == "CheckoutService --[calls]--> BillingService"
    assert got["BillingService --[calls]--> LedgerService"] == 0.35


def test_structural_edges_stay_weak():
    got = dict(ranked("how does BillingDatabase relate to Database"))
    assert got["BillingDatabase --[is_a]--> Database"] == 0.35


def test_an_entity_the_graph_does_not_know_makes_every_result_weak():
    got = ranked("how does BillingService relate to the FraudDetector")
    assert got and all(score <= UNKNOWN_CAP for _, score in got)
    # the same question about two known entities is strong
    assert ranked("how does BillingService relate to LedgerService")[0] == (
        "BillingService --[calls]--> LedgerService",
        1.0,
    )


# --------------------------------------------------------------------------- paths

EDGES = [
    Relationship("WebGateway", "calls", "CheckoutService"),
    Relationship("CheckoutService", "calls", "BillingService"),
    Relationship("BillingService", "calls", "LedgerService"),
    Relationship("CheckoutService", "publishes_to", "OrderEventsTopic"),
    Relationship("ShippingService", "reads_from", "OrderEventsTopic"),
    Relationship("WebGateway", "is_a", "Service"),
    Relationship("ShippingService", "is_a", "Service"),
]


def test_paths_walk_forwards_first_and_never_through_structural_edges():
    q = parse_question("trace the call chain from the web gateway to the ledger")
    assert q.ends is not None  # a path question: two ends
    [p] = find_paths(EDGES, *q.ends, directed=True)
    assert p.nodes == ("WebGateway", "CheckoutService", "BillingService", "LedgerService") and p.forward
    q = parse_question("path between WebGateway and ShippingService")
    assert q.ends is not None
    [p] = find_paths(EDGES, *q.ends, directed=False)  # not WebGateway -is_a-> Service <-is_a- ShippingService
    assert p.line == (
        "WebGateway --[calls]--> CheckoutService --[publishes_to]--> OrderEventsTopic <--[reads_from]-- ShippingService"
    )
    q = parse_question("trace the path from ShippingService to the web gateway")
    assert q.ends is not None
    assert find_paths(EDGES, *q.ends, directed=True)[0].forward is False  # no forward path: any direction


def test_a_path_question_answers_one_result_holding_the_whole_path():
    q = parse_question("trace the call chain from the web gateway to the ledger")
    assert q.ends is not None
    [p] = find_paths(EDGES, *q.ends, directed=True)
    explored = Explored(paths=[p], via="expand")
    context = "Connections:\n" + "\n".join(e.line for e in EDGES)
    results, _ = to_results([context], "graph", "trace the call chain from the web gateway to the ledger",
                                    "cognee", explored)  # fmt: skip
    first = results[0]
    assert (
        first.content
        == "WebGateway --[calls]--> CheckoutService --[calls]--> BillingService --[calls]--> LedgerService"
    )
    assert first.relevance == 1.0 and first.path_nodes == list(p.nodes) and len(first.path) == 3
    assert first.found_by == "expand"
    # a "from A to B" path that walks an edge backwards is still an answer, a weaker one
    assert score_path(q, ["calls", "calls"], all_forward=False) == 0.75


# Real rows of the Cypher statement below, from the services graph (CheckoutService -> ShippingService).
CYPHER_ROWS = [
    ["CheckoutService", {"offset": 2, "table": 0}, ["OrderEventsTopic"], [{"offset": 11, "table": 0}],
     ["publishes_to", "reads_from"], [{"offset": 2, "table": 0}, {"offset": 16, "table": 0}],
     "ShippingService", {"offset": 16, "table": 0}],
]  # fmt: skip


def test_cypher_path_rows_keep_each_edges_real_direction():
    [p] = rows_to_paths(CYPHER_ROWS, "services")
    assert p.nodes == ("CheckoutService", "OrderEventsTopic", "ShippingService")
    assert [(e.source, e.relation, e.target) for e in p.edges] == [
        ("CheckoutService", "publishes_to", "OrderEventsTopic"),
        ("ShippingService", "reads_from", "OrderEventsTopic"),
    ]
    assert rows_to_paths([["x"], None, ["a", 1, [], [], ["r", "s"], [1], "b", 2]]) == []  # other shapes skipped


_PATH_CYPHER = re.compile(
    r"MATCH \(a:Node\)-\[r\* ALL SHORTEST 1\.\.6 \(e, n \| WHERE NOT e\.relationship_name IN \[[^\]]+\]\)\]-?>?"
    r"\(b:Node\) WHERE (?:lower\([ab]\.name\) CONTAINS '\w+'(?: AND )?)+ AND id\(a\) <> id\(b\) "
    r"RETURN a\.name, id\(a\), .* LIMIT 10"
)


@given(st.text(max_size=40), st.text(max_size=40))
def test_a_question_cannot_change_the_path_statement(a, b):
    q = parse_question(f"path between Zz{a} and Yy{b}")
    if q.ends:
        assert _PATH_CYPHER.fullmatch(cypher_path(*q.ends, directed=False, limit=10))


# --------------------------------------------------------------------------- follow-up searches


def _graph_search(edges: list[Relationship], calls: list[str], delay: float = 0.0) -> GraphSearch:
    async def search(text: str, wide: bool = False) -> list[Relationship]:
        calls.append(text)
        await asyncio.sleep(delay)
        words = {w.lower() for w in text.split()}
        return [e for e in edges if e.source.lower() in words or e.target.lower() in words]

    return search


def test_without_cypher_a_path_is_found_by_expanding_from_both_ends():
    q = parse_question("path between WebGateway and ShippingService")
    calls: list[str] = []
    first = [EDGES[0], EDGES[4]]  # the question's nearest triplets: one edge at each end

    async def refused(_: str) -> None:
        return None

    out = asyncio.run(explore(q, first, _graph_search(EDGES, calls), refused, budget_s=5))
    assert out.via == "expand" and out.paths[0].nodes[0] == "WebGateway" and out.paths[0].nodes[-1] == "ShippingService"
    assert len(out.paths[0].edges) == 3 and calls  # it took further searches


def test_an_unknown_entity_is_looked_up_once_then_left_unknown():
    q = parse_question("how does CheckoutService relate to the FraudDetector")
    calls: list[str] = []
    out = asyncio.run(explore(q, EDGES[:2], _graph_search(EDGES, calls), None, budget_s=5))
    assert calls == ["FraudDetector"] and out.paths == []


def test_follow_ups_stop_at_the_budget():
    q = parse_question("path between WebGateway and ShippingService")
    calls: list[str] = []
    started = time.monotonic()
    out = asyncio.run(explore(q, [EDGES[0], EDGES[4]], _graph_search(EDGES, calls, delay=1.0), None, budget_s=0.3))
    assert time.monotonic() - started < 0.9 and out.paths == []


def test_cypher_that_finds_no_path_is_the_answer():
    q = parse_question("path between WebGateway and ShippingService")
    calls: list[str] = []

    async def no_path(_: str) -> list[Path]:
        return []

    out = asyncio.run(explore(q, [EDGES[0], EDGES[4]], _graph_search(EDGES, calls), no_path, budget_s=5))
    assert out.paths == [] and calls == []  # exact: no expansion after it


def _serial_search(
    edges: list[Relationship], calls: list[tuple[str, bool]], seconds: float, top_k: int = 10
) -> GraphSearch:
    """Like Cognee on a loaded machine (measured: four concurrent searches took four times one):
    one search at a time, ``seconds`` each; ``top_k`` triplets incident to a searched name (a wide
    search: four times as many)."""
    lock = asyncio.Lock()

    async def search(text: str, wide: bool = False) -> list[Relationship]:
        async with lock:
            calls.append((text, wide))
            await asyncio.sleep(seconds)
        words = {w.lower() for w in text.split()}
        hits = [e for e in edges if e.source.lower() in words or e.target.lower() in words]
        return hits[: top_k * (4 if wide else 1)]

    return search


def test_a_path_beyond_the_first_frontier_is_found_within_the_budget():
    """Issue 22, item 9: WebGateway -> 4 services -> LedgerService, every node with side edges,
    the first answer holding only edges at the two ends. Two frontiers out from each end are
    needed; four narrow searches a round did not fit the budget and left hops out."""
    chain = ["WebGateway", "CheckoutService", "OrderService", "BillingService", "PostingService", "LedgerService"]
    edges = [Relationship(a, "calls", b) for a, b in zip(chain, chain[1:], strict=False)]
    edges += [Relationship(n, "depends_on", f"Store{3 * k + i}") for k, n in enumerate(chain) for i in range(3)]
    first = [edges[0], edges[4], *(e for e in edges if e.source in (chain[0], chain[-1]) and e.relation != "calls")]
    q = parse_question("trace the call chain from the web gateway to the ledger")
    calls: list[tuple[str, bool]] = []
    # Cognee's measured ~0.4 s a search and a 3 s budget, both halved: the same three rounds fit.
    out = asyncio.run(explore(q, first, _serial_search(edges, calls, 0.2), None, budget_s=1.5, paths="expand"))
    assert out.paths and out.paths[0].nodes == tuple(chain), (calls, out.paths)
    assert all(wide for _, wide in calls) and len(calls) <= 6  # three rounds of two wide searches
