"""The router caps every backend's results at the request's limit (issue 22, item 10), whatever
the backend sent: a property over backends that send any number of results, in any order."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends.base import BackendRequest, BackendResponse, Result
from memory_router.backends.mock import BlockingMockBackend, Handler, MockBackend

from ..conftest import STARTER, installed, make_router
from ..support.budget import examples

RELEVANCES = st.lists(st.integers(0, 100).map(lambda n: n / 100), min_size=1, max_size=25)


def unsorted(relevances: list[float]) -> Handler:
    """A backend that ignores the limit and answers in its own order (not by relevance)."""

    def handler(request: BackendRequest) -> BackendResponse:
        results = tuple(Result(content=f"hit {i}", relevance=r, source="mock") for i, r in enumerate(relevances))
        return BackendResponse(
            query_echo=request.query,
            results=results,
            result_count=len(results),
            status="success",
            normalized_relevance=max(relevances),
            backend="mock",
        )

    return handler


@settings(max_examples=examples(120), deadline=None)
@given(RELEVANCES, st.integers(1, 30), st.booleans())
def test_at_most_limit_results_the_best_ones_in_the_backends_order(
    config, tmp_path_factory, relevances, limit, blocking
):
    tmp_path = tmp_path_factory.mktemp("cap")
    kind = BlockingMockBackend if blocking else MockBackend
    router = make_router(
        config, tmp_path, {"qmd": kind("qmd", unsorted(relevances)), "totalrecall": kind("tr", unsorted([0.0]))}
    )
    if blocking:
        env = router.route_blocking("database", installed(*STARTER), limit=limit)
    else:
        env = asyncio.run(router.route("database", installed(*STARTER), limit=limit))
    answered = next(a for a in env.attempts if a["backend"] == "qmd")
    kept = [int(r.content.split()[1]) for r in env.results] if env.routed_to == "qmd" else None
    assert answered["result_count"] == min(len(relevances), limit)
    if kept is not None:
        assert env.result_count == len(kept) == min(len(relevances), limit)
        assert kept == sorted(kept)  # the backend's order
        assert sorted((relevances[i] for i in kept), reverse=True) == sorted(relevances, reverse=True)[:limit]
        assert env.normalized_relevance == max(relevances) == max(r.relevance for r in env.results)
