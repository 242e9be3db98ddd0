"""JSON output that a name holding bytes that are not UTF-8 cannot break.

Linux file names (and argv, and the environment) are bytes; Python hands the bytes that are not
UTF-8 over as lone surrogates (``b"bad\\xffname.md"`` becomes ``"bad\\udcffname.md"``, PEP 383),
and orjson refuses to write a lone surrogate. Such a string may reach any output: a memory file's
path in a result, a ``--config`` path in an error message. :func:`dumps` therefore writes each
lone surrogate as readable text instead, the byte it stands for as ``\\xff`` (as Python's
``backslashreplace`` shows it) and any other one as ``\\udxxx``, so the answer is still the
whole envelope, with the name escaped, never a traceback. The common case pays nothing: only a
value orjson refused is walked.
"""

from __future__ import annotations

from typing import Any


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written out as text (see the module's docstring)."""
    return "".join(_escaped_char(ch) if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def _escaped_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` if it can be written as UTF-8, else with its lone surrogates escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_surrogates(text)
    return text


def escaped(value: Any) -> Any:
    """A copy of JSON-ready ``value`` (dicts, lists, tuples, strings, scalars) with every string,
    keys included, passed through :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {escaped(k): escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escaped(v) for v in value]
    return value


def dumps(value: Any, option: int = 0) -> bytes:
    """``orjson.dumps(value, option=option)``; a string it refuses (a lone surrogate) is escaped
    rather than failing the whole answer. Any other unserialisable value still raises."""
    import orjson  # here, not at the top: the thin client imports this module without orjson

    try:
        return orjson.dumps(value, option=option)
    except TypeError:  # orjson.JSONEncodeError
        return orjson.dumps(escaped(value), option=option)
