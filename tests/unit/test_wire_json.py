"""The thin client's JSON (memory_router.client.wire.dumps/loads: json's C half, without json or re)
reads and writes what json and orjson do."""

from __future__ import annotations

import json
import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.client.wire import dumps, loads

from ..support.budget import examples

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8")),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=examples(200))
@given(_values)
def test_dumps_writes_what_json_writes_compact_and_loads_reads_it_back(value: object) -> None:
    written = dumps(value)
    assert written == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert loads(written) == value
    assert loads(orjson.dumps(value)) == value  # what the daemon writes


@settings(max_examples=examples(100))
@given(st.text(max_size=30))  # lone surrogates included: argv bytes that are not UTF-8
def test_a_lone_surrogate_is_written_as_json_writes_it(text: str) -> None:
    expected = json.dumps({"query": text}, ensure_ascii=False, separators=(",", ":"))
    assert dumps({"query": text}) == expected.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize(
    "raw",
    [b"", b" ", b"NaN", b"[Infinity]", b'{"a":1} x', b'{"a" 1}', b'"\xff"', b"[1,]", b'"a\nb"', b"{'a':1}"],
)
def test_loads_refuses_what_is_not_strict_json_with_a_value_error(raw: bytes) -> None:
    with pytest.raises(ValueError):
        loads(raw)


def test_loads_allows_whitespace_around_the_value_and_dumps_refuses_what_is_not_json() -> None:
    assert loads(b' \n{"a": [1, 2.5e-7]}\r\n') == {"a": [1, 2.5e-7]}
    with pytest.raises(ValueError):
        dumps({"x": math.nan})
    with pytest.raises(TypeError):
        dumps({"x": {1, 2}})
