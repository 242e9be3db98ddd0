"""Whose memory a query may read: the asking OpenClaw agent (and its session), checked once.

OpenClaw runs several agents in one Gateway, each with its own workspace and sessions
(``agents.list[]``). A request may carry a *scope*, ``{"agent": "<id>", "session_key": "<key>"}``
(both optional): ``query --agent ID --session-key KEY``, ``serve``'s and the socket's ``scope``
field, MCP's ``scope`` argument. It is parsed here once into an immutable :class:`Scope` and
handed to every backend through the one call's :class:`~memory_router.backends.base.BackendRequest`
(``request.scope``); each backend documents what it reads for an agent (docs/openclaw.md, *Agents*).
An unscoped query (no scope, or an empty one) reads what it always read.

Checks (``INVALID_SCOPE``, exit 2): an agent id is OpenClaw's canonical form (``[a-z0-9][a-z0-9_-]{0,63}``,
case-insensitive, kept lower-cased); a session key is 1..512 printable characters. A session key
of the form ``agent:<id>:...`` (OpenClaw's) names its agent: without ``agent`` that agent is the
scope's; with a different ``agent`` the scope is refused (one session never speaks for another
agent).
"""

from __future__ import annotations

import re
from typing import Any

from memory_router.contract import INVALID_SCOPE
from memory_router.core.errors import InvalidQuery
from memory_router.core.frozen import Frozen

AGENT_ID = r"[a-z0-9][a-z0-9_-]{0,63}"  # OpenClaw's VALID_ID_RE, matched case-insensitively


def is_agent_id(text: str) -> bool:
    """Whether ``text`` is an OpenClaw agent id. Compiled on first use (``re``'s cache keeps it):
    an unscoped query never asks, and compiling it at import cost every cold query 2.5M instructions
    (0.8%)."""
    return re.fullmatch(AGENT_ID, text, re.IGNORECASE) is not None


MAX_SESSION_KEY = 512
SCOPE_KEYS = ("agent", "session_key")


class Scope(Frozen):
    """A checked scope: ``agent`` (lower-case, OpenClaw's canonical id) and ``session_key``.

    ``agent`` is never ``None`` in a built scope: a session key that names no agent is refused
    (without an agent there is no boundary to keep). Build one with :func:`parse_scope`."""

    agent: str
    session_key: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The wire form (``serve``'s ``scope`` field): only the keys that are set."""
        return {"agent": self.agent, **({"session_key": self.session_key} if self.session_key else {})}

    def session_prefix(self) -> str:
        """The prefix every OpenClaw session key of this agent has: ``agent:<id>:``."""
        return f"agent:{self.agent}:"


def _agent_of_key(key: str) -> str | None:
    head, sep, rest = key.partition(":")
    if head.lower() != "agent" or not sep:
        return None
    agent, sep, _ = rest.partition(":")
    return agent if sep and is_agent_id(agent) else None


def parse_scope(agent: object = None, session_key: object = None) -> Scope | None:
    """The scope of ``agent`` and ``session_key`` (``None``/``""``: not given), ``None`` when
    neither is given, or :class:`~memory_router.core.errors.InvalidQuery` (``INVALID_SCOPE``)."""
    if agent in (None, "") and session_key in (None, ""):
        return None
    if agent not in (None, "") and (not isinstance(agent, str) or not is_agent_id(agent)):
        raise InvalidQuery(
            INVALID_SCOPE,
            f"the scope's agent must be an OpenClaw agent id ([a-z0-9][a-z0-9_-], at most 64 characters), "
            f"got {_short(agent)}",
        )
    key: str | None = None
    if session_key not in (None, ""):
        if not isinstance(session_key, str) or len(session_key) > MAX_SESSION_KEY or not session_key.isprintable():
            raise InvalidQuery(
                INVALID_SCOPE,
                f"the scope's session_key must be printable text of at most {MAX_SESSION_KEY} characters, "
                f"got {_short(session_key)}",
            )
        key = session_key
    of_key = _agent_of_key(key) if key else None
    named = of_key.lower() if of_key else None
    chosen = agent.lower() if isinstance(agent, str) and agent else named
    if chosen is None:
        raise InvalidQuery(
            INVALID_SCOPE,
            f"the session key {_short(key)} names no agent (OpenClaw's keys read agent:<id>:...); pass the agent too",
        )
    if named is not None and named != chosen:
        raise InvalidQuery(
            INVALID_SCOPE,
            f"the session key {_short(key)} belongs to agent {named!r}, not {chosen!r}: one agent's session "
            "cannot ask for another agent's memory",
        )
    return Scope(chosen, key)


def scope_from_wire(value: Any) -> Scope | None:
    """A request's ``scope`` field (a JSON object with ``agent``/``session_key``, or null)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidQuery(
            INVALID_SCOPE, f'"scope" must be an object {{"agent": ..., "session_key": ...}}, got {_short(value)}'
        )
    unknown = sorted(k for k in value if k not in SCOPE_KEYS)
    if unknown:
        raise InvalidQuery(INVALID_SCOPE, f"unknown scope key {unknown[0]!r} (known: {', '.join(SCOPE_KEYS)})")
    return parse_scope(value.get("agent"), value.get("session_key"))


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
