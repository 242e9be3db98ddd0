"""The words for a backend's runtime facts (qmd's warm engine and its warm-up), shared by
``daemon status`` (:mod:`.control`), ``memory-router backends`` (:mod:`memory_router.cli.main`) and the
daemon's own stderr (:mod:`.service`). Standard library only, and importing nothing of the
project: both the CLI and the daemon sit above it, so neither imports the other for it.
"""

from __future__ import annotations

from typing import Any


def describe_runtime(facts: Any) -> str:
    """One line for a backend's runtime facts (qmd's warm engine) in ``daemon status``/``backends``."""
    if not isinstance(facts, dict):
        return "?"
    if facts.get("transport") == "http":
        return f"answered by the qmd server at {facts.get('url')}"
    engine = facts.get("engine")
    refresh = facts.get("refresh")
    fresh = f"; index {describe_refresh(refresh)}" if isinstance(refresh, dict) else ""
    if facts.get("transport") != "engine" or not isinstance(engine, dict):
        return f"transport {facts.get('transport')}" + (f" ({facts['error']})" if facts.get("error") else "") + fresh
    warmup = facts.get("warmup")
    warm = f"; warm-up {describe_warmup(warmup)}" if isinstance(warmup, dict) and warmup.get("state") else ""
    warm += fresh
    if engine.get("state") != "running":
        text = f"engine {engine.get('state')}"
        return text + (f" (last failure: {engine['last_failure']})" if engine.get("last_failure") else "") + warm
    loaded = [role for role, on in (engine.get("models") or {}).items() if on]
    return (
        f"engine running: pid {engine.get('pid')}, RSS {engine.get('rss_mib')} MiB, up {engine.get('uptime_s')} s, "
        f"{engine.get('served')} served, {engine.get('starts')} start(s), models loaded: {', '.join(loaded) or 'none'}"
        + warm
    )


def describe_warmup(warmup: dict[str, Any]) -> str:
    """qmd's start-up warm-up (``runtime_facts()["warmup"]``) in a few words: ``ready in 3.1 s
    (embed 2.9 s)``, ``warming (embed, rerank)``, ``failed: ...``, ``skipped: ...``."""
    state = warmup.get("state")
    models = ", ".join(str(m) for m in warmup.get("models") or ())
    if state == "ready":
        loaded = warmup.get("loaded_ms")
        loaded = loaded if isinstance(loaded, dict) else {}
        per_model = ", ".join(f"{role} {ms / 1000:.1f} s" for role, ms in loaded.items() if isinstance(ms, int | float))
        return f"ready in {warmup.get('seconds')} s ({per_model or models})"
    if state == "warming":
        return f"warming ({models})"
    why = warmup.get("error") or warmup.get("reason")
    return f"{state}" + (f": {why}" if why else "")


def describe_refresh(refresh: dict[str, Any]) -> str:
    """qmd's index freshness (``runtime_facts()["refresh"]``, or ``backends``' one-shot look):
    ``kb: 0 pending, updated 2026-12-04T22:50:01Z; refresh running (update)`` or ``...; last
    refresh failed: qmd update exited with code 1: ...``."""
    parts = []
    for name, c in (refresh.get("collections") or {}).items():
        if not isinstance(c, dict):
            continue
        if c.get("error"):
            parts.append(f"{name}: {c['error']}")
            continue
        pending = "? pending" if c.get("pending") is None else f"{c['pending']} pending"
        updated = f"updated {c['last_updated']}" if c.get("last_updated") else "never updated by memory-router"
        parts.append(f"{name}: {pending}, {updated}")
    text = "; ".join(parts) or "no collection to follow"
    if refresh.get("running"):
        text += f"; refresh running ({refresh.get('phase') or 'qmd'})"
    elif refresh.get("waiting_for_lock"):
        text += "; refresh waiting for the index lock (another writer holds it)"
    elif refresh.get("locked"):
        text += "; a writer holds the index lock (an update is under way)"
    if refresh.get("failed"):
        text += f"; last refresh failed: {refresh.get('error')}"
    if refresh.get("enabled") is False:
        text += " (refresh off)"
    return text
