"""An in-process backend for tests and benchmarks, in the spirit of ``httpx.MockTransport``.

``MockBackend(name, handler)`` calls ``handler(request)`` (sync or async) for every query and
records the requests it saw. The helpers build the handlers the tests need::

    MockBackend("qmd", answer(0.8))          # one result of relevance 0.8
    MockBackend("qmd", fail("BACKEND_ERROR", "exit 1"))
    MockBackend("qmd", hang())               # never returns; the router's timeout must end it

``BlockingMockBackend`` is the same as a :class:`~.base.BlockingAdapter`: it implements
``search_blocking`` (the one-shot CLI's driver calls it) and gets ``search`` from the seam, as
Total Recall and Lossless do.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable

from memory_router.backends.base import (
    BACKEND_ERROR,
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    Probe,
    Result,
)

Handler = Callable[[BackendRequest], BackendResponse | Awaitable[BackendResponse]]


class MockBackend:
    def __init__(self, name: str, handler: Handler, *, probe_ok: bool = True) -> None:
        self.name = name
        self.handler = handler
        self.requests: list[BackendRequest] = []
        self._probe_ok = probe_ok

    async def search(self, request: BackendRequest) -> BackendResponse:
        self.requests.append(request)
        response = self.handler(request)
        if inspect.isawaitable(response):
            response = await response
        # The handler may be shared between backends: stamp this backend's name on the answer.
        return response.replace(backend=self.name)

    def probe(self) -> Probe:
        return Probe(self._probe_ok, "mock backend")


class BlockingMockBackend(BlockingAdapter, MockBackend):
    """A :class:`MockBackend` whose search is blocking (a :class:`~.base.BlockingAdapter`): the
    one-shot CLI's driver calls :meth:`search_blocking`, the async driver the ``search`` the seam
    builds on it. An async handler runs on a loop of its own in the calling thread, cut off one
    second after the router's timeout so a ``hang()`` does not keep its thread forever."""

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        self.requests.append(request)
        response = self.handler(request)
        if inspect.isawaitable(response):
            response = asyncio.run(_at_most(response, request.timeout_s + 1.0))
        return response.replace(backend=self.name)


async def _at_most(awaitable: Awaitable[BackendResponse], seconds: float) -> BackendResponse:
    return await asyncio.wait_for(awaitable, seconds)


def answer(*relevances: float, delay_s: float = 0.0) -> Handler:
    """Answer with one result per relevance (none: an ``empty`` response)."""

    async def handler(request: BackendRequest) -> BackendResponse:
        if delay_s:
            await asyncio.sleep(delay_s)
        results = [
            Result(content=f"hit {i} for {request.query}", relevance=r, source="mock") for i, r in enumerate(relevances)
        ]
        return BackendResponse.from_results("mock", request.query, results)

    return handler


def fail(code: str = BACKEND_ERROR, message: str = "mock failure") -> Handler:
    def handler(request: BackendRequest) -> BackendResponse:
        return BackendResponse.failure("mock", request.query, code, message)

    return handler


def hang() -> Handler:
    async def handler(request: BackendRequest) -> BackendResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return handler
