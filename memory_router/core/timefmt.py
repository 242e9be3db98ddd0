"""The one timestamp format the router writes: UTC, whole seconds, ``YYYY-MM-DDTHH:MM:SSZ``
(result ``timestamp`` fields and router.log lines). Standard library only."""

from __future__ import annotations

from datetime import datetime, timezone

ISO_Z = "%Y-%m-%dT%H:%M:%SZ"


def iso_z(ts: datetime) -> str:
    """``ts`` (aware) in UTC as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return ts.astimezone(timezone.utc).strftime(ISO_Z)


def now_iso_z() -> str:
    """The current time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.now(timezone.utc).strftime(ISO_Z)
