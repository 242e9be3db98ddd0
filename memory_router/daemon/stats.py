"""Counters for ``{"op": "stats"}``: requests by outcome, attempts per backend, latency
percentiles over the most recent queries. Updated from the event loop only (no locking)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping
from typing import Any

from memory_router.backends.base import QUERY_TIMEOUT
from memory_router.core.attempts import COOLDOWN, DEADLINE_EXCEEDED

LATENCY_WINDOW = 10_000  # queries kept for the percentiles


class Stats:
    def __init__(self) -> None:
        self.started = time.time()
        self.requests = 0  # every line / request handled, of any kind
        self.by_status: Counter[str] = Counter()  # envelope status, or "invalid"/"plan"/"stats"
        self.error_codes: Counter[str] = Counter()
        self.timeouts = 0  # attempts that hit the per-backend timeout
        self.deadlines = 0  # queries stopped by their overall deadline
        self.backends: dict[str, Counter[str]] = defaultdict(Counter)
        self.reloads: Counter[str] = Counter()
        self._latency_ms: deque[float] = deque(maxlen=LATENCY_WINDOW)

    def request(self, kind: str, error_code: str | None = None) -> None:
        self.requests += 1
        self.by_status[kind] += 1
        if error_code:
            self.error_codes[error_code] += 1

    def query(self, envelope: Mapping[str, Any], latency_ms: float) -> None:
        self.request(envelope["status"], envelope.get("error_code"))
        self._latency_ms.append(latency_ms)
        attempts: Iterable[Mapping[str, Any]] = envelope.get("attempts") or ()
        for attempt in attempts:
            counter = self.backends[attempt["backend"]]
            code = attempt.get("error_code")
            if code == COOLDOWN:
                counter["cooldown_skips"] += 1
                continue
            if code == DEADLINE_EXCEEDED and not attempt.get("duration_ms"):
                continue  # not called: the deadline had passed before this step
            counter["calls"] += 1
            counter[attempt["status"]] += 1
            if code == QUERY_TIMEOUT:
                counter["timeouts"] += 1
                self.timeouts += 1
            if code == DEADLINE_EXCEEDED:
                counter["deadline_cut"] += 1
        if envelope.get("error_code") == DEADLINE_EXCEEDED or any(
            a.get("error_code") == DEADLINE_EXCEEDED for a in attempts
        ):
            self.deadlines += 1

    def snapshot(self) -> dict[str, Any]:
        latencies = sorted(self._latency_ms)
        return {
            "uptime_s": round(time.time() - self.started, 3),
            "requests": self.requests,
            "by_status": dict(self.by_status),
            "errors": sum(n for status, n in self.by_status.items() if status in ("error", "invalid")),
            "error_codes": dict(self.error_codes),
            "timeouts": self.timeouts,
            "deadlines": self.deadlines,
            "backends": {name: dict(c) for name, c in sorted(self.backends.items())},
            "latency_ms": {
                "window": len(latencies),
                **{f"p{p}": _percentile(latencies, p) for p in (50, 90, 99)},
                "max": round(latencies[-1], 3) if latencies else None,
            },
            "reloads": dict(self.reloads),
        }


def _percentile(ordered: list[float], p: int) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not ordered:
        return None
    rank = max(1, -(-p * len(ordered) // 100))  # ceil(p/100 * n)
    return round(ordered[rank - 1], 3)
