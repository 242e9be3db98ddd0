"""Dead-backend cooldown: stop paying a dead backend's timeout on every query.

A long-lived router (the daemon) keeps one :class:`Cooldown`, keyed by backend name, or
``backend/mode`` for a step with a mode (one mode of qmd can be broken while another works).
After ``failures`` consecutive
failed calls (status ``error``: an error response or a timeout) a backend is *cooling down* for
``seconds``: :meth:`Cooldown.admit` refuses it and the attempt is recorded with the ``COOLDOWN``
code instead of being called. When the time is up exactly one *trial* call is let through (other
concurrent queries keep skipping it meanwhile); its outcome decides: success or empty brings the
backend back, another failure starts a new cooldown at once.

A call cut short by the query's overall deadline or cancelled says nothing about the backend's
health: :meth:`Cooldown.release` just frees the trial slot.

The one-shot CLI has no use for this (its state would die with the process) and runs without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

EventSink = Callable[[str, str], None]  # (kind, message), e.g. RouterLog.event


class _Health:
    """One backend's recent record (mutable; a plain slotted class, cheaper to define than a
    dataclass on the cold query path)."""

    __slots__ = ("failures", "last_error", "last_message", "until", "trial")

    def __init__(self) -> None:
        self.failures = 0  # consecutive
        self.last_error = ""
        self.last_message = ""
        self.until: float | None = None  # monotonic end of the current cooldown; None: not cooling
        self.trial = False  # a trial call is in flight


class Cooldown:
    def __init__(
        self,
        failures: int = 3,
        seconds: float = 30.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_event: EventSink | None = None,
    ) -> None:
        self.failures = failures
        self.seconds = seconds
        self._clock = clock
        self._on_event = on_event
        self._health: dict[str, _Health] = {}

    def configure(self, failures: int, seconds: float) -> None:
        """New thresholds (a config reload); current health is kept."""
        self.failures, self.seconds = failures, seconds

    def forget(self, backend: str) -> None:
        """Drop what we know about a backend, all its modes included (its settings changed: it
        is a new backend)."""
        for key in [k for k in self._health if k == backend or k.startswith(backend + "/")]:
            del self._health[key]

    def admit(self, backend: str) -> str | None:
        """``None`` if ``backend`` may be called now, else why it is skipped."""
        health = self._health.get(backend)
        if health is None or health.until is None:
            return None
        left = health.until - self._clock()
        if left > 0:
            return (
                f"skipped: {backend} failed {health.failures} times in a row (last: {health.last_error}"
                f"{': ' + health.last_message[:300] if health.last_message else ''}); "
                f"cooling down for another {left:.1f} s, then one trial call decides whether it is back"
            )
        if health.trial:
            return f"skipped: {backend} is cooling down and a trial call to it is in progress"
        health.trial = True
        return None

    def record(self, backend: str, failed: bool, error: str = "", message: str = "") -> None:
        """The outcome of a call that :meth:`admit` let through."""
        health = self._health.get(backend)
        if not failed:
            if health is not None:
                del self._health[backend]
                if health.until is not None:
                    self._emit("RECOVERED", f"backend {backend} answered again; cooldown over")
            return
        if health is None:
            health = self._health[backend] = _Health()
        health.failures += 1
        health.last_error, health.last_message = error, message
        was_trial = health.until is not None and health.trial
        if was_trial or (health.until is None and health.failures >= self.failures):
            health.until = self._clock() + self.seconds
            health.trial = False
            what = "the trial call failed" if was_trial else f"{health.failures} consecutive failures"
            self._emit(
                "COOLDOWN",
                f"backend {backend}: {what} (last: {error}); skipped for {self.seconds:g} s, then one trial call",
            )

    def release(self, backend: str) -> None:
        """An admitted call ended without a verdict (deadline, cancellation)."""
        health = self._health.get(backend)
        if health is not None:
            health.trial = False

    def snapshot(self) -> dict[str, dict[str, object]]:
        """Backends with recent failures: for ``{"op": "stats"}`` and ``explain``."""
        now = self._clock()
        return {
            name: {
                "consecutive_failures": h.failures,
                "last_error": h.last_error,
                "cooling_down": h.until is not None and h.until > now,
                "cooldown_left_s": round(max(0.0, h.until - now), 3) if h.until is not None else None,
                "trial_in_flight": h.trial,
            }
            for name, h in self._health.items()
        }

    def _emit(self, kind: str, message: str) -> None:
        if self._on_event is not None:
            self._on_event(kind, message)
