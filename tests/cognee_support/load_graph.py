"""Load the test architecture graph into Cognee with Cognee's own ``add_data_points`` (no LLM).

Runs under the Cognee venv's Python (``.tools/cognee-venv``): ``serve.py`` calls :func:`load`
inside the API server's own start-up (one process: the graph database, Ladybug, takes an
exclusive file lock, and importing Cognee twice would double the start-up time). Standalone,
with the server's environment and while no server runs on the same storage root, it prints
one JSON line.

With access control on, data lives in a dataset owned by a user, so the points are written by a
``run_tasks`` pipeline over a dataset created for the default user, exactly as Cognee's own
pipelines do. Prints one JSON line: the dataset id and the counts.

    python load_graph.py arch
"""

from __future__ import annotations

import asyncio
import json
import sys

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


async def load(dataset_name: str) -> dict:
    from cognee.low_level import DataPoint, setup
    from cognee.modules.data.methods import load_or_create_datasets
    from cognee.modules.pipelines import Task, run_tasks
    from cognee.modules.users.methods import get_default_user
    from cognee.tasks.storage import add_data_points

    class Component(DataPoint):
        name: str
        description: str
        depends_on: list["Component"] = []
        metadata: dict = {"index_fields": ["name"]}

    Component.model_rebuild()

    by_name = {name: Component(name=name, description=desc) for name, desc, _ in COMPONENTS}
    for name, _, deps in COMPONENTS:
        by_name[name].depends_on = [by_name[d] for d in deps]

    await setup()
    user = await get_default_user()
    [dataset] = await load_or_create_datasets([dataset_name], [], user)

    async def build(_data: object) -> list:
        return list(by_name.values())

    tasks = [Task(build, needs_llm=False), Task(add_data_points, needs_llm=False)]
    async for _info in run_tasks(tasks, dataset.id, data=[None], user=user, pipeline_name="router_test_graph"):
        pass
    edges = sum(len(d) for _, _, d in COMPONENTS)
    return {"dataset_id": str(dataset.id), "dataset_name": dataset_name, "nodes": len(COMPONENTS), "edges": edges}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(load(sys.argv[1] if len(sys.argv) > 1 else "arch"))), flush=True)
