"""The seam's BlockingAdapter: an adapter writes only ``search_blocking`` and gets the async
``search`` (and ``aclose``) from backends/base.py, so the daemon's and the one-shot CLI's calls
run one body. Total Recall, Lossless and BlockingMockBackend are built on it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memory_router.backends.base import (
    BackendRequest,
    BackendResponse,
    BlockingAdapter,
    BlockingBackend,
    ClosableBackend,
    Probe,
    Result,
)
from memory_router.backends.lossless.adapter import LosslessBackend
from memory_router.backends.mock import BlockingMockBackend, answer
from memory_router.backends.totalrecall.adapter import TotalRecallBackend


class Recorder(BlockingAdapter):
    """Answers with the name of the thread it ran in; waits for ``stop`` when asked to hang."""

    def __init__(self, name: str, *, hang: bool = False) -> None:
        self.name = name
        self.hang = hang
        self.stopped = threading.Event()

    def search_blocking(self, request: BackendRequest, stop: threading.Event) -> BackendResponse:
        if self.hang:
            if stop.wait(10):
                self.stopped.set()
            return BackendResponse.failure(self.name, request.query, "QUERY_TIMEOUT", "stopped")
        where = threading.current_thread().name
        return BackendResponse.from_results(self.name, request.query, [Result(where, 0.9, self.name)])

    def probe(self) -> Probe:
        return Probe(True, "recorder")


def test_the_async_search_runs_search_blocking_on_the_instances_own_threads() -> None:
    backend = Recorder("rec")
    response = asyncio.run(backend.search(BackendRequest("q")))
    assert response.status == "success"
    assert response.results[0].content.startswith("memory-router-rec")  # its WorkerPool's thread
    asyncio.run(backend.aclose())


def test_cancelling_the_async_search_sets_stop() -> None:
    backend = Recorder("rec", hang=True)

    async def call() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(backend.search(BackendRequest("q")), 0.05)

    asyncio.run(call())
    assert backend.stopped.wait(5)  # the worker saw stop and ended, instead of waiting its 10 s


def test_an_adapter_without_search_blocking_is_refused_by_name() -> None:
    class Forgetful(BlockingAdapter):
        name = "forgetful"

    with pytest.raises(NotImplementedError, match="Forgetful must implement search_blocking"):
        asyncio.run(Forgetful().search(BackendRequest("q")))


@pytest.mark.parametrize("cls", [Recorder, BlockingMockBackend, TotalRecallBackend, LosslessBackend])
def test_blocking_adapters_implement_one_method_and_get_the_rest(cls: type) -> None:
    assert issubclass(cls, BlockingAdapter)
    assert cls.search is BlockingAdapter.search and cls.aclose is BlockingAdapter.aclose
    assert cls.search_blocking is not BlockingAdapter.search_blocking
    # What a subclass may add is a blocking half too: close_blocking (Lossless's connections).
    assert not hasattr(cls, "search_sync")


def test_a_blocking_adapter_is_a_blocking_and_closable_backend() -> None:
    for backend in (Recorder("rec"), BlockingMockBackend("mock", answer(0.9))):
        assert isinstance(backend, BlockingBackend) and isinstance(backend, ClosableBackend)
