"""Whose memory a query may read (memory_router.core.scope, issue 30): an agent id in OpenClaw's
canonical form, a session key that names its agent, and the one refusal that keeps agents apart:
a session key of another agent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.core.errors import InvalidQuery
from memory_router.core.scope import MAX_SESSION_KEY, Scope, parse_scope, scope_from_wire

from ..support.budget import examples

AGENT_IDS = st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}", fullmatch=True)
KEY_TAILS = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=40)


def refused(agent: object = None, session_key: object = None) -> str:
    with pytest.raises(InvalidQuery) as caught:
        parse_scope(agent, session_key)
    assert caught.value.error_code == "INVALID_SCOPE"
    return str(caught.value)


def test_nothing_given_is_no_scope() -> None:
    assert parse_scope(None, None) is None and parse_scope("", "") is None
    assert scope_from_wire(None) is None and scope_from_wire({}) is None


@given(AGENT_IDS)
@settings(max_examples=examples(200))
def test_an_agent_id_is_kept_in_openclaw_s_lower_case_form(agent: str) -> None:
    assert parse_scope(agent) == Scope(agent.lower())


@given(AGENT_IDS, KEY_TAILS)
@settings(max_examples=examples(200))
def test_a_session_key_names_its_agent(agent: str, tail: str) -> None:
    key = f"agent:{agent}:{tail}"
    scope = parse_scope(None, key)
    assert scope == Scope(agent.lower(), key)
    assert parse_scope(agent.upper(), key) == scope  # the same agent, however it is spelled
    assert scope_from_wire(scope.as_dict()) == scope  # the wire form round-trips


@given(AGENT_IDS, AGENT_IDS, KEY_TAILS)
@settings(max_examples=examples(200))
def test_one_agent_s_session_never_speaks_for_another(asking: str, owner: str, tail: str) -> None:
    if asking.lower() == owner.lower():
        return
    message = refused(asking, f"agent:{owner}:{tail}")
    assert f"belongs to agent {owner.lower()!r}" in message


@pytest.mark.parametrize(
    "agent",
    ["", "-alice", "_bob", "alice bob", "alice/../bob", "a" * 65, "älice", 7, ["alice"]],
)
def test_an_agent_that_is_not_an_openclaw_id_is_refused(agent: object) -> None:
    if agent == "":
        assert parse_scope(agent) is None
        return
    assert "OpenClaw agent id" in refused(agent)


def test_a_session_key_must_be_printable_bounded_text_that_names_an_agent() -> None:
    assert "printable" in refused("alice", "agent:alice:\x1b[31m")
    assert "printable" in refused("alice", "k" * (MAX_SESSION_KEY + 1))
    assert "printable" in refused("alice", 12)
    assert "names no agent" in refused(None, "telegram:group:42")  # no agent: no boundary to keep
    # A key that is not OpenClaw's is kept as given when the agent is named.
    assert parse_scope("alice", "telegram:group:42") == Scope("alice", "telegram:group:42")


@pytest.mark.parametrize("wire", ["alice", ["alice"], 1, {"agent": "alice", "user": "x"}])
def test_a_wire_scope_is_an_object_of_known_keys(wire: object) -> None:
    with pytest.raises(InvalidQuery) as caught:
        scope_from_wire(wire)
    assert caught.value.error_code == "INVALID_SCOPE"
