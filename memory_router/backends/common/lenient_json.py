"""JSON from a backend program that is valid except for broken characters.

qmd cuts a snippet at 297 UTF-16 units, which can split an emoji: ``JSON.stringify`` then writes
its lone high surrogate as the escape ``\\ud83d``. That is legal JSON text, but it decodes to no
Unicode character, and orjson refuses the whole document, losing every hit for one character.
:func:`loads` keeps orjson for every well-formed document (the fast path) and, only for what
orjson refuses, parses again with the standard library (which accepts such escapes) and replaces
each lone surrogate, and each byte that is not UTF-8, with U+FFFD. Whatever is still not JSON
raises ``ValueError`` as before.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(data: bytes | str) -> Any:
    """``orjson.loads``, with broken characters replaced by U+FFFD instead of refused."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as refused:
        import json

        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except ValueError:
            raise refused from None  # orjson's message: the document is not JSON at all
        return _repaired(value)


def _no_constant(name: str) -> Any:
    # orjson refuses NaN and Infinity; so must the second reading, or it would accept more.
    raise ValueError(f"{name} is not JSON")


def _repaired(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys included) replaced by U+FFFD.
    (A valid pair such as ``\\ud83d\\ude00`` was already joined into one character by the parser.)"""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    return value
