"""A small JSON5 reader, for OpenClaw's ``openclaw.json`` (which OpenClaw parses as JSON5).

memory-router reads one key of that file (``agents.defaults.workspace``), so a dependency for it
would be out of proportion; this parser covers what JSON5 adds to JSON: ``//`` and ``/* */``
comments, unquoted (identifier) keys, single-quoted strings, trailing commas, hexadecimal
numbers, leading or trailing decimal points, ``+`` signs, ``Infinity`` and ``NaN``, and escaped
line breaks in strings. Unicode escapes in identifier keys are not supported. Errors raise
:class:`JSON5Error` with the line and column.

A document beyond what any configuration needs (nested deeper than :data:`MAX_DEPTH`, a number
longer than :data:`MAX_NUMBER_CHARS` characters) raises :class:`JSON5Limit`, not a
``RecursionError`` or ``ValueError`` from deep inside the parser: a hostile or broken file costs a
clear error naming where, never a traceback.
"""

from __future__ import annotations

import math
import re
from typing import Any

_WHITESPACE = re.compile(r"(?:[\s\ufeff]+|//[^\n\r\u2028\u2029]*|/\*.*?\*/)+", re.S)
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_NUMBER = re.compile(
    r"[+-]?(?:Infinity|NaN|0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)",
)
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "0": "\0"}
_LITERALS = {"true": True, "false": False, "null": None}
# Where a string's plain run ends: its quote, an escape or a line break.
_STRING_STOP = {q: re.compile(f"[{q}\\\\\n\r]") for q in ("'", '"')}


MAX_DEPTH = 256  # objects and arrays inside each other; Python's own stack ends near 1,000
MAX_NUMBER_CHARS = 400  # digits (and sign, point, exponent) of one number; int() refuses > 4,300


class JSON5Error(ValueError):
    pass


class JSON5Limit(ValueError):
    """A document that is valid JSON5 but beyond the reader's limits (too deep, a huge number)."""


def loads(text: str) -> Any:
    parser = _Parser(text)
    value = parser.value()
    parser.skip()
    if parser.pos != len(text):
        parser.fail("unexpected text after the value")
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos, self.depth = text, 0, 0

    def where(self) -> str:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return f"line {line}, column {column}"

    def fail(self, what: str) -> None:
        raise JSON5Error(f"{what} at {self.where()}")

    def skip(self) -> None:
        if m := _WHITESPACE.match(self.text, self.pos):
            self.pos = m.end()
        if self.text.startswith("/*", self.pos):
            self.fail("unterminated comment")

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos : self.pos + 1]

    def value(self) -> Any:
        ch = self.peek()
        if ch == "{":
            return self.members("}", self.pair, dict)
        if ch == "[":
            return self.members("]", self.value, list)
        if ch in ("'", '"'):
            return self.string(ch)
        if m := _NUMBER.match(self.text, self.pos):
            if m.end() - m.start() > MAX_NUMBER_CHARS:
                raise JSON5Limit(
                    f"a number of {m.end() - m.start()} characters at {self.where()} (the limit is {MAX_NUMBER_CHARS})"
                )
            self.pos = m.end()
            return _number(m.group())
        if m := _IDENT.match(self.text, self.pos):
            if m.group() in _LITERALS:
                self.pos = m.end()
                return _LITERALS[m.group()]
        self.fail("expected a value" if ch else "unexpected end of input")

    def members(self, close: str, item: Any, build: type) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise JSON5Limit(f"objects and arrays nested more than {MAX_DEPTH} deep at {self.where()}")
        self.pos += 1
        items: list[Any] = []
        while self.peek() != close:
            if not self.peek():
                self.fail(f"missing {close!r}")
            items.append(item())
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != close:
                self.fail(f"expected ',' or {close!r}")
        self.pos += 1
        self.depth -= 1
        return build(items)

    def pair(self) -> tuple[str, Any]:
        ch = self.peek()
        if ch in ("'", '"'):
            key = self.string(ch)
        elif m := _IDENT.match(self.text, self.pos):
            key, self.pos = m.group(), m.end()
        else:
            self.fail("expected a key")
        if self.peek() != ":":
            self.fail("expected ':'")
        self.pos += 1
        return key, self.value()

    def string(self, quote: str) -> str:
        text, i = self.text, self.pos + 1
        out: list[str] = []
        while True:
            stop = _STRING_STOP[quote].search(text, i)
            j = stop.start() if stop else len(text)
            out.append(text[i:j])
            if j >= len(text) or text[j] in "\n\r":
                self.pos = j
                self.fail("unterminated string")
            if text[j] == quote:
                self.pos = j + 1
                return "".join(out)
            i = self.escape(j + 1, out)

    def escape(self, i: int, out: list[str]) -> int:
        """Append the escape starting after the backslash at ``i - 1``; return where text resumes."""
        text = self.text
        ch = text[i : i + 1]
        if ch in ("u", "x"):
            width = 4 if ch == "u" else 2
            digits = text[i + 1 : i + 1 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                self.pos = i
                self.fail("bad escape")
            code = int(digits, 16)
            low = text[i + 7 : i + 11] if text[i + 5 : i + 7] == "\\u" else ""
            if ch == "u" and 0xD800 <= code < 0xDC00 and len(low) == 4 and 0xDC00 <= _hex(low) < 0xE000:
                out.append(chr(0x10000 + ((code - 0xD800) << 10) + (_hex(low) - 0xDC00)))  # a surrogate pair
                return i + 11
            out.append(chr(code))
            return i + 1 + width
        if ch == "\r":  # an escaped line break continues the string
            return i + 2 if text[i + 1 : i + 2] == "\n" else i + 1
        if ch in ("\n", "\u2028", "\u2029"):
            return i + 1
        if not ch:
            self.pos = i
            self.fail("unterminated string")
        out.append(_ESCAPES.get(ch, ch))
        return i + 1


def _hex(digits: str) -> int:
    try:
        return int(digits, 16)
    except ValueError:
        return -1


def _number(token: str) -> float | int:
    sign = -1 if token.startswith("-") else 1
    body = token.lstrip("+-")
    if body == "Infinity":
        return sign * math.inf
    if body == "NaN":
        return math.nan
    if body[:2] in ("0x", "0X"):
        return sign * int(body, 16)
    if any(c in body for c in ".eE"):
        return sign * float(body)
    return sign * int(body)
