"""Properties of the lenient JSON reader of backend output (backends/common/lenient_json.py)."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.common import lenient_json as _lenient_json

# Any text, lone surrogates included (what JSON.stringify escapes as \udXXX).
texts = st.text(st.characters(codec=None, exclude_categories=()))
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


def repaired(value):
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    if isinstance(value, list):
        return [repaired(v) for v in value]
    if isinstance(value, dict):
        return {repaired(k): repaired(v) for k, v in value.items()}
    return value


@given(values)
def test_every_json_text_is_read_with_only_its_lone_surrogates_replaced(value: object) -> None:
    document = json.dumps(value, ensure_ascii=True)  # lone surrogates as \udXXX escapes, like Node
    assert _lenient_json.loads(document.encode()) == repaired(value)


@given(values)
def test_a_well_formed_document_reads_exactly_as_orjson_reads_it(value: object) -> None:
    document = orjson.dumps(repaired(value))
    assert _lenient_json.loads(document) == orjson.loads(document)


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a": NaN}', b"[Infinity]", b"<html>", b'{"a": "\\ud83d"'])
def test_what_is_not_json_is_still_refused_with_orjsons_error(bad: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        _lenient_json.loads(bad)


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    assert _lenient_json.loads(b'["caf\xe9", "\\ud83d\\ude00"]') == ["caf\ufffd", "\U0001f600"]
