"""Relationship questions over the "services" test graph (``load_graph.SERVICES``) and their answers.

Shared by ``tests/adapters/test_cognee_server.py`` and ``bench/cognee_relations.py``: each question says
which edge a person would put first (any of ``best``), which path answers it, or that it names
an entity the graph does not know (so the answer must be weak and the chain fall back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Edge = tuple[str, str, str]


@dataclass(frozen=True)
class EdgeQuestion:
    """The rank-1 result must be one of ``best`` (a relation type and a direction question)."""

    query: str
    best: frozenset[Edge]
    kind: str  # "type", "direction", "relate"


@dataclass(frozen=True)
class PathQuestion:
    """The rank-1 result must be the whole path ``nodes`` (in this order), one result."""

    query: str
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class UnknownQuestion:
    """Names an entity the graph does not have: every result below 0.4."""

    query: str


def _e(*edges: Edge) -> frozenset[Edge]:
    return frozenset(edges)


BDB = "BillingDatabase"
EDGE_QUESTIONS: tuple[EdgeQuestion, ...] = (
    EdgeQuestion(
        "what depends on the billing database",
        _e(
            ("BillingService", "depends_on", BDB),
            ("LedgerService", "depends_on", BDB),
            ("PaymentService", "depends_on", BDB),
        ),
        "type",
    ),
    EdgeQuestion("who owns the billing database", _e(("PaymentsTeam", "owns", BDB)), "type"),
    EdgeQuestion(
        "what does BillingService call",
        _e(("BillingService", "calls", "LedgerService"), ("BillingService", "calls", "PaymentService")),
        "direction",
    ),
    EdgeQuestion("what calls BillingService", _e(("CheckoutService", "calls", "BillingService")), "direction"),
    EdgeQuestion("dependencies of BillingService", _e(("BillingService", "depends_on", BDB)), "direction"),
    EdgeQuestion(
        "what does CheckoutService depend on", _e(("CheckoutService", "depends_on", "OrdersDatabase")), "direction"
    ),
    EdgeQuestion(
        "what reads from the order events topic",
        _e(
            ("ShippingService", "reads_from", "OrderEventsTopic"),
            ("NotificationService", "reads_from", "OrderEventsTopic"),
        ),
        "type",
    ),
    EdgeQuestion(
        "what does CheckoutService publish to", _e(("CheckoutService", "publishes_to", "OrderEventsTopic")), "type"
    ),
    EdgeQuestion("who owns WebGateway", _e(("PlatformTeam", "owns", "WebGateway")), "direction"),
    EdgeQuestion(
        "what does PaymentsTeam own",
        _e(*(("PaymentsTeam", "owns", t) for t in ("BillingService", "PaymentService", "LedgerService", BDB))),
        "direction",
    ),
    EdgeQuestion("which services call the ledger", _e(("BillingService", "calls", "LedgerService")), "direction"),
    EdgeQuestion(
        "what does the inventory service read from",
        _e(("InventoryService", "reads_from", "InventoryDatabase")),
        "direction",
    ),
    EdgeQuestion(
        "what does the cart service depend on", _e(("CartService", "depends_on", "SessionCache")), "direction"
    ),
    EdgeQuestion(
        "how does WebGateway relate to CheckoutService", _e(("WebGateway", "calls", "CheckoutService")), "relate"
    ),
    EdgeQuestion(
        "what is owned by PlatformTeam",
        _e(("PlatformTeam", "owns", "WebGateway"), ("PlatformTeam", "owns", "OrderEventsTopic")),
        "direction",
    ),
    EdgeQuestion("callers of InventoryService", _e(("CheckoutService", "calls", "InventoryService")), "direction"),
    EdgeQuestion(
        "what publishes to OrderEventsTopic", _e(("CheckoutService", "publishes_to", "OrderEventsTopic")), "type"
    ),
    EdgeQuestion(
        "dependents of the billing database",
        _e(
            ("BillingService", "depends_on", BDB),
            ("LedgerService", "depends_on", BDB),
            ("PaymentService", "depends_on", BDB),
        ),
        "direction",
    ),
)

PATH_QUESTIONS: tuple[PathQuestion, ...] = (
    PathQuestion(
        "trace the call chain from the web gateway to the ledger",
        ("WebGateway", "CheckoutService", "BillingService", "LedgerService"),
    ),
    PathQuestion(
        "path between CheckoutService and ShippingService", ("CheckoutService", "OrderEventsTopic", "ShippingService")
    ),
    PathQuestion(
        "trace the path from WebGateway to the billing database",
        ("WebGateway", "CheckoutService", "BillingService", BDB),
    ),
    PathQuestion(
        "how is the cart service connected to the inventory service",
        ("CartService", "WebGateway", "CheckoutService", "InventoryService"),
    ),
    PathQuestion(
        "trace the call chain from CheckoutService to PaymentService",
        ("CheckoutService", "BillingService", "PaymentService"),
    ),
)

# Paths whose ends the first answer and the first expansion round (four narrow searches) did not
# join: the expansion has to go beyond its first frontier (issue 22, item 9). By Cypher they are
# one query; tests/faults/test_faults_names_caches_hangups.py asks them of a server that refuses Cypher.
FAR_PATH_QUESTIONS: tuple[PathQuestion, ...] = (
    PathQuestion(
        "path between SessionCache and LedgerService",
        ("SessionCache", "CartService", "WebGateway", "CheckoutService", "BillingService", "LedgerService"),
    ),
    PathQuestion(
        "how is the cart service connected to the payment service",
        ("CartService", "WebGateway", "CheckoutService", "BillingService", "PaymentService"),
    ),
    PathQuestion(
        "path between NotificationService and LedgerService",
        ("NotificationService", "OrderEventsTopic", "CheckoutService", "BillingService", "LedgerService"),
    ),
)

UNKNOWN_QUESTIONS: tuple[UnknownQuestion, ...] = (
    UnknownQuestion("how does CheckoutService relate to the FraudDetector"),
    UnknownQuestion("what depends on the RecommendationEngine"),
    UnknownQuestion("path between WebGateway and the SearchIndex"),
)


def edge_of(result: dict[str, Any]) -> Edge | None:
    rel = result.get("relationship")
    return (rel["source"], rel["relation"], rel["target"]) if rel else None


def path_of(result: dict[str, Any]) -> tuple[str, ...] | None:
    nodes = result.get("path_nodes")
    return tuple(nodes) if nodes else None
