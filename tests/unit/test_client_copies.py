"""The thin client (stdlib only) keeps copies of two facts the in-process CLI owns: the error
envelope it prints when it must answer itself, and which error codes exit 2. These tests hold
the copies to the originals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_router.client import thin as client
from memory_router.core import errors, query
from memory_router.core.envelope import error_envelope

# Lone surrogates included: a path that is not UTF-8 reaches a message as one (PEP 383).
_text = st.text(max_size=60)


@given(_text, st.sampled_from(["DAEMON_UNAVAILABLE", "BACKEND_ERROR", "X"]), _text)
def test_the_clients_error_envelope_is_the_in_process_one_byte_for_byte(q: str, code: str, message: str) -> None:
    assert client._error_envelope(q, code, message) == error_envelope(q, code, message).to_json()


def _usage_error_codes() -> set[str]:
    """Every error code the in-process CLI exits 2 for."""
    codes: set[str] = set()
    pending = [errors.RouterError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not errors.RouterError and "error_code" in vars(cls) and cls.exit_code == 2:
            codes.add(vars(cls)["error_code"])
    # InvalidQuery carries its code per instance: the query checks' codes and unreadable stdin.
    return codes | {query.EMPTY_QUERY, query.QUERY_TOO_LONG, "INVALID_UTF8"}


def test_the_clients_usage_codes_are_the_in_process_ones() -> None:
    assert client._USAGE_CODES - {client.DAEMON_UNAVAILABLE} == _usage_error_codes()
