"""memory_router.output.jsonout without orjson: what json's C half writes where orjson is not
loaded (a cold query's envelope) is orjson's bytes, and what it reads (the config files) is the
value orjson reads; wherever the two would differ, orjson itself answers."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.output import jsonout

from ..support.budget import examples

_floats = st.one_of(
    st.floats(),  # NaN, infinities, subnormals
    st.floats(min_value=-1e-3, max_value=1e-3),  # around orjson's switch of notation at 1e-4
    st.floats(min_value=0, max_value=1).map(lambda x: round(x, 4)),  # relevances
    st.sampled_from([1e-4, -1e-4, 9.999999999999999e-05, 1e16, 1e15, 1e-7, 0.0, -0.0, 5e-324]),
)
_ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70), st.sampled_from([2**64 - 1, 2**64]))
_scalars = st.one_of(st.none(), st.booleans(), _ints, _floats, st.text(max_size=12))  # lone surrogates too
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(st.integers(0, 9), inner, min_size=1, max_size=2),  # keys orjson refuses
    ),
    max_leaves=20,
)


def _orjson(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value)
    except TypeError:
        return None


@settings(max_examples=examples(400))
@given(_values)
def test_what_the_c_half_writes_is_orjsons_bytes_or_it_leaves_the_value_to_orjson(value: Any) -> None:
    written = jsonout.written_alike(value)
    if written is not None:
        assert written == _orjson(value)


def test_the_envelopes_own_values_are_written_without_orjson() -> None:
    """What an envelope holds is never left to orjson (else a cold query would import it)."""
    envelope = {
        "query_echo": "what did we décide \u2028 \x00\n",
        "results": [{"content": "x", "relevance": 0.6102, "native_relevance": 0.9988, "line": 3, "kind": None}],
        "fallback_chain": ("lossless", "totalrecall"),
        "normalized_relevance": 0.0,
        "router_duration_ms": 12,
        "rule": {"number": 3, "id": "decision_recall"},
    }
    assert jsonout.written_alike(envelope) == orjson.dumps(envelope)
    for tiny in (9.99e-05, 1e-9):  # orjson writes 0.0000999 and 1e-9; repr 9.99e-05 and 1e-09
        assert jsonout.written_alike({"relevance": tiny}) is None
    assert jsonout.written_alike({"bad": "\udcff"}) is None  # escaped by dumps, as orjson refuses it


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 is not 1.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


_texts = st.one_of(
    _values.map(lambda v: json.dumps(v, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")),
    _values.map(lambda v: json.dumps(v, ensure_ascii=True, default=str).encode()),  # "\ud800" escapes
    st.sampled_from([b"1e400", b"[-1e400]", b"18446744073709551616", b"-9223372036854775809", b"\xef\xbb\xbf{}"]),
    st.binary(max_size=20),
)


@settings(max_examples=examples(400))
@given(_texts)
def test_what_the_c_half_reads_is_the_value_orjson_reads_or_it_leaves_the_text_to_orjson(data: bytes) -> None:
    value = jsonout.read_alike(data)
    if value is jsonout._DIFFERS:
        return
    assert _same(value, orjson.loads(data)), data


def test_loads_as_orjson_raises_orjsons_own_error() -> None:
    try:
        jsonout.loads_as_orjson(b'{"a": }')
    except orjson.JSONDecodeError as exc:
        assert (exc.lineno, exc.colno) == (1, 7)
    else:
        raise AssertionError("no error")
