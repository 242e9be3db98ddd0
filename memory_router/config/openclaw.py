"""Each OpenClaw agent's workspace, as OpenClaw 2026.9 resolves it from ``openclaw.json``.

For a query scoped to an agent (:mod:`memory_router.core.scope`), Total Recall reads that agent's
workspace (:func:`agent_workspace`); the file is read by :mod:`.openclaw_file` (never a blocking
``open()``, limits on depth and numbers, cached by its stat).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from memory_router.config import paths
from memory_router.config.openclaw_file import OpenClawConfigInvalid as OpenClawConfigInvalid
from memory_router.config.openclaw_file import _dict, _text, default_workspace_setting, read


def _roster(data: Mapping[str, Any] | None) -> tuple[str, object] | None:
    """The agent roster as OpenClaw 2026.9 reads it (``readAgentRosterProperty``): the keyed
    ``agents.entries`` object (what ``openclaw config set agents.list ...`` writes since 2026.9)
    when present, else the legacy ``agents.list[]`` array; ``None`` when the file names neither."""
    agents = _dict(_dict(data).get("agents"))
    for kind in ("entries", "list"):
        if agents.get(kind) is not None:
            return kind, agents[kind]
    return None


def _agent_entries(data: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """Each configured agent's entry, with its ``id`` (a keyed entry's key), in file order."""
    roster = _roster(data)
    if roster is None:
        return []
    kind, value = roster
    if kind == "entries":
        if not isinstance(value, dict):
            return []
        return [{**entry, "id": key} for key, entry in value.items() if isinstance(entry, dict)]
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _where(data: Mapping[str, Any] | None, agent: str) -> str:
    roster = _roster(data)
    return f"agents.entries.{agent}" if roster is not None and roster[0] == "entries" else f"agents.list[{agent}]"


def _normal(agent_id: object) -> str | None:
    return agent_id.strip().lower() if isinstance(agent_id, str) and agent_id.strip() else None


def _owner(data: Mapping[str, Any] | None) -> str | None:
    """The agent that owns the default workspace (OpenClaw's legacy data owner): the one entry
    marked ``default: true``, else the sole agent, else ``main`` when no agent is listed."""
    agents = _dict(_dict(data).get("agents"))
    entries = _agent_entries(data)
    if agents.get("ownership") != "explicit":
        marked = [e for e in entries if e.get("default") is True]
        if len(marked) == 1:
            return _normal(marked[0].get("id"))
    if not entries:
        return None if _roster(data) is not None else "main"
    return _normal(entries[0].get("id")) if len(entries) == 1 else None


def agent_workspace(agent: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The workspace of OpenClaw agent ``agent`` (a canonical id) and where that came from, as
    OpenClaw 2026.9 resolves it (``resolveAgentWorkspaceDir``): the agent's roster entry's
    ``workspace`` (``agents.entries.<id>`` or ``agents.list[]``); for the agent owning the default
    workspace (the one marked ``default: true``, else the sole agent, else ``main``), the default workspace; else
    ``<agents.defaults.workspace>/<id>``; else ``<OpenClaw root>/workspace-<id>``. Raises
    :class:`OpenClawConfigInvalid` for a file that cannot be used."""
    config = paths.openclaw_config_file(environ)
    data = read(config)
    for entry in _agent_entries(data):
        if _normal(entry.get("id")) == agent and (own := _text(entry.get("workspace"))):
            return paths._expand(own, environ), f"{_where(data, agent)}.workspace in {config}"
    if agent == _owner(data):
        return paths.openclaw_workspace(environ)
    if fallback := default_workspace_setting(data):
        return os.path.join(paths._expand(fallback, environ), agent), f"agents.defaults.workspace/{agent} in {config}"
    return os.path.join(paths.openclaw_root(environ), f"workspace-{agent}"), f"OpenClaw's default for agent {agent}"
