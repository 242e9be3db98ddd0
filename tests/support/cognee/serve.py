"""Run Cognee's own API app (``cognee.api.client:app``) with the test graph loaded at start-up.

Runs under the Cognee venv's Python. Cognee's lifespan runs first (database migrations, the
default user and its password); then :func:`load_graph.load` writes the test graph with
``add_data_points``; only then does uvicorn accept connections, so ``GET /health`` answering
means the graph is there. Host, port, datasets: ``HTTP_API_HOST``, ``HTTP_API_PORT``, argv[1:3] (graph, chunks).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(datasets: list[str]) -> None:
    import uvicorn
    from cognee.api.client import app, lifespan

    if TYPE_CHECKING:  # what the import below finds, beside this file (sys.path above)
        from tests.support.cognee.load_graph import load
    else:  # Cognee's venv has none of the tests package's dependencies: load_graph alone
        from load_graph import load

    @asynccontextmanager
    async def lifespan_with_graph(application: object) -> AsyncIterator[None]:
        async with lifespan(application):
            info = await load(*datasets)
            print("LOADED " + json.dumps(info), flush=True)
            yield

    app.router.lifespan_context = lifespan_with_graph
    host, port = os.environ.get("HTTP_API_HOST", "127.0.0.1"), int(os.environ["HTTP_API_PORT"])
    sock = socket.create_server((host, port))  # held from now on: no other server can take it
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1:3])
