"""Load the test architecture graph into Cognee with Cognee's own ``add_data_points`` (no LLM).

Runs under the Cognee venv's Python (``.tools/cognee-venv``): ``serve.py`` calls :func:`load`
inside the API server's own start-up (one process: the graph database, Ladybug, takes an
exclusive file lock, and importing Cognee twice would double the start-up time). Standalone,
with the server's environment and while no server runs on the same storage root, it prints
one JSON line.

With access control on, data lives in a dataset owned by a user, so the points are written by a
``run_tasks`` pipeline over a dataset created for the default user, exactly as Cognee's own
pipelines do. A second dataset holds a few text chunks of one document (``DocumentChunk``
points, the same way), so the chunk searches have something to find.

    python load_graph.py [GRAPH_DATASET [CHUNK_DATASET]]     # arch, runbooks
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

# The graph: (name, description, depends_on). Every edge is a depends_on relationship.
COMPONENTS: list[tuple[str, str, list[str]]] = [
    ("ApiGateway", "Public HTTP entry point; routes requests to services.", ["AuthService", "OrderService"]),
    ("AuthService", "Login, sessions and token issuing.", ["Postgres", "Redis"]),
    ("OrderService", "Creates and tracks customer orders.", ["Postgres", "PaymentService"]),
    ("PaymentService", "Charges cards through the payment provider.", ["Kafka"]),
    ("BillingWorker", "Nightly invoice generation job.", ["Postgres", "Kafka"]),
    ("Postgres", "Primary relational database.", []),
    ("Redis", "In-memory cache and session store.", []),
    ("Kafka", "Event bus between services.", []),
]


# A third dataset, "services": a service graph with typed relations, as Cognee's cognify builds
# it: every entity has an ``is_a`` edge to its EntityType (Cognee's own structural edge), and
# one text chunk ``contains`` the entities it mentions. (name, type, description, {relation: targets}).
SERVICES_DATASET = "services"
SERVICES: list[tuple[str, str, str, dict[str, list[str]]]] = [
    ("WebGateway", "Service", "Public HTTPS entry point.", {"calls": ["CheckoutService", "CartService"]}),
    ("CartService", "Service", "Shopping carts.", {"depends_on": ["SessionCache"]}),
    (
        "CheckoutService",
        "Service",
        "Turns a cart into an order.",
        {
            "calls": ["BillingService", "InventoryService"],
            "publishes_to": ["OrderEventsTopic"],
            "depends_on": ["OrdersDatabase"],
        },
    ),
    (
        "BillingService",
        "Service",
        "Invoices and charges.",
        {"calls": ["LedgerService", "PaymentService"], "depends_on": ["BillingDatabase"]},
    ),
    ("PaymentService", "Service", "Card payments through the provider.", {"depends_on": ["BillingDatabase"]}),
    ("LedgerService", "Service", "Double-entry ledger.", {"depends_on": ["BillingDatabase"]}),
    ("InventoryService", "Service", "Stock levels.", {"reads_from": ["InventoryDatabase"]}),
    (
        "ShippingService",
        "Service",
        "Ships paid orders.",
        {"reads_from": ["OrderEventsTopic"]},
    ),
    ("NotificationService", "Service", "E-mails customers.", {"reads_from": ["OrderEventsTopic"]}),
    ("BillingDatabase", "Database", "Invoices, payments and ledger entries.", {}),
    ("OrdersDatabase", "Database", "Orders.", {}),
    ("InventoryDatabase", "Database", "Stock per warehouse.", {}),
    ("SessionCache", "Cache", "Cart sessions.", {}),
    ("OrderEventsTopic", "Topic", "Order lifecycle events.", {}),
    (
        "PaymentsTeam",
        "Team",
        "Owns billing and payments.",
        {"owns": ["BillingService", "PaymentService", "LedgerService", "BillingDatabase"]},
    ),
    ("PlatformTeam", "Team", "Owns the edge and the event bus.", {"owns": ["WebGateway", "OrderEventsTopic"]}),
]
SERVICE_RELATIONS = ("calls", "depends_on", "owns", "publishes_to", "reads_from")
SERVICES_NOTE = (
    "Checkout: the WebGateway calls CheckoutService, which calls BillingService and publishes to "
    "OrderEventsTopic; ShippingService reads the topic."
)


# A second dataset of text chunks (one runbook), for the chunks/lexical modes.
RUNBOOK = "runbook.md"
CHUNKS: list[str] = [
    "Postgres failover: promote the replica, then restart AuthService and OrderService so they reconnect.",
    "Flushing Redis logs every user out, because AuthService keeps its sessions there.",
    "Kafka carries payment events from PaymentService to BillingWorker; replay them after an outage.",
]


async def _write(dataset_name: str, points: list[object], user: object) -> str:
    from cognee.modules.data.methods import load_or_create_datasets
    from cognee.modules.pipelines import Task, run_tasks
    from cognee.tasks.storage import add_data_points

    [dataset] = await load_or_create_datasets([dataset_name], [], user)

    async def build(_data: object) -> list[object]:
        return points

    tasks = [Task(build, needs_llm=False), Task(add_data_points, needs_llm=False)]
    async for _info in run_tasks(tasks, dataset.id, data=[None], user=user, pipeline_name="router_test_data"):
        pass
    return str(dataset.id)


def _services_points() -> list[object]:
    """The services graph as Cognee DataPoints: typed relation fields become edges of that name."""
    from cognee.modules.chunking.models import DocumentChunk
    from cognee.modules.data.processing.document_types import TextDocument
    from cognee.modules.engine.models import Entity, EntityType

    # An Entity, as cognify makes them, so a chunk can ``contains`` it. (Cognee's classes are Any
    # to mypy: Cognee is installed in its own venv only.)
    class Service(Entity):  # type: ignore[misc]
        calls: list[Service] = []
        depends_on: list[Service] = []
        owns: list[Service] = []
        publishes_to: list[Service] = []
        reads_from: list[Service] = []

    Service.model_rebuild()
    types = {t: EntityType(name=t, description=f"{t} type") for t in {kind for _, kind, _, _ in SERVICES}}
    by_name = {name: Service(name=name, description=desc, is_a=types[kind]) for name, kind, desc, _ in SERVICES}
    for name, _, _, rels in SERVICES:
        for relation, targets in rels.items():
            setattr(by_name[name], relation, [by_name[t] for t in targets])
    doc = TextDocument(
        name="checkout.md", raw_data_location="checkout.md", external_metadata=None, mime_type="text/markdown"
    )
    mentioned = [n for n in by_name if n in SERVICES_NOTE]
    chunk = DocumentChunk(
        text=SERVICES_NOTE,
        chunk_size=len(SERVICES_NOTE.split()),
        chunk_index=0,
        cut_type="paragraph_end",
        is_part_of=doc,
        contains=[by_name[n] for n in mentioned],
        document_id=str(doc.id),
        document_name="checkout.md",
    )
    return [*by_name.values(), chunk]


async def load(graph_dataset: str = "arch", chunk_dataset: str = "runbooks") -> dict[str, dict[str, object]]:
    from cognee.low_level import DataPoint, setup
    from cognee.modules.chunking.models import DocumentChunk
    from cognee.modules.data.processing.document_types import TextDocument
    from cognee.modules.users.methods import get_default_user

    class Component(DataPoint):  # type: ignore[misc]  # Any to mypy, as Entity above
        name: str
        description: str
        depends_on: list[Component] = []
        metadata: dict[str, Any] = {"index_fields": ["name"]}

    Component.model_rebuild()

    by_name = {name: Component(name=name, description=desc) for name, desc, _ in COMPONENTS}
    for name, _, deps in COMPONENTS:
        by_name[name].depends_on = [by_name[d] for d in deps]

    doc = TextDocument(name=RUNBOOK, raw_data_location=RUNBOOK, external_metadata=None, mime_type="text/markdown")
    chunks = [
        DocumentChunk(
            text=text,
            chunk_size=len(text.split()),
            chunk_index=i,
            cut_type="paragraph_end",
            is_part_of=doc,
            contains=[],
            document_id=str(doc.id),
            document_name=RUNBOOK,
        )
        for i, text in enumerate(CHUNKS)
    ]

    await setup()
    user = await get_default_user()
    graph_id = await _write(graph_dataset, list(by_name.values()), user)
    chunks_id = await _write(chunk_dataset, chunks, user)
    services_id = await _write(SERVICES_DATASET, _services_points(), user)
    edges = sum(len(d) for _, _, d in COMPONENTS)
    return {
        SERVICES_DATASET: {
            "id": services_id,
            "entities": len(SERVICES),
            "edges": sum(len(t) for *_, rels in SERVICES for t in rels.values()),
        },
        graph_dataset: {"id": graph_id, "nodes": len(COMPONENTS), "edges": edges},
        chunk_dataset: {"id": chunks_id, "chunks": len(chunks)},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(load(*sys.argv[1:3]))), flush=True)
