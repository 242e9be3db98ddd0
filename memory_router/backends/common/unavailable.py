"""A backend whose adapter cannot run: every call is a clean ``BACKEND_UNAVAILABLE`` so the
router's fallback path is exercised for real rather than crashing."""

from __future__ import annotations

from memory_router.backends.base import BACKEND_UNAVAILABLE, BackendRequest, BackendResponse, Probe


class UnavailableBackend:
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    async def search(self, request: BackendRequest) -> BackendResponse:
        return BackendResponse.failure(self.name, request.query, BACKEND_UNAVAILABLE, self.reason)

    def probe(self) -> Probe:
        return Probe(False, self.reason)
