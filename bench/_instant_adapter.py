"""An instant in-process backend type for benchmarking `memory-router serve` itself.

Registered as adapter type ``"instant"`` by ``serve_throughput.py``'s launcher with
``register_adapter`` (benchmarks only): every search returns a prepared three-result ``success`` response at
once, so what the daemon's throughput measures is the daemon and the router, not a backend.
"""

from __future__ import annotations

from memory_router.backends import BackendContext
from memory_router.backends.base import BackendRequest, BackendResponse, Probe, Result
from memory_router.backends.common.settings import AdapterSettings

MODES = None
ENV_VARS: frozenset[str] = frozenset()
demo_setup = None


class Settings(AdapterSettings):
    relevance: float = 0.9


class InstantBackend:
    def __init__(self, name: str, relevance: float) -> None:
        self.name = name
        self._response = BackendResponse.from_results(
            name, "", [Result(content=f"hit {i}", relevance=relevance - 0.05 * i, source=name) for i in range(3)]
        )

    async def search(self, request: BackendRequest) -> BackendResponse:
        return self._response

    def probe(self) -> Probe:
        return Probe(True, "instant benchmark backend")


def create(name: str, settings: Settings, context: BackendContext) -> InstantBackend:
    return InstantBackend(name, settings.relevance)
