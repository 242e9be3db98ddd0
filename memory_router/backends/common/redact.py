"""Keeping secrets out of text that leaves an adapter (error messages, probe facts, reprs).

A server may echo a secret back in any encoding: a form body (``password=p%40ss+word``), JSON
(``"p\\"ss"``, ``\\u0040``), HTML (``&amp;``), Basic auth (base64 of ``user:password``). A
:class:`Redactor` matches each secret character by character in every one of those encodings,
mixed (lower- or upper-case hex too), and replaces the whole match with ``***``. Redact *before*
cutting a message short: a cut secret is no longer whole and would leak its prefix.

:func:`strip_userinfo` removes ``user:password@`` from a URL; :meth:`Redactor.redact` also strips
it from every URL in the text it is given.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

MIN_SECRET_CHARS = 4  # shorter values would redact ordinary words
MASK = "***"
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@\"'<>]*@")
_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def strip_userinfo(url: str) -> str:
    """``http://user:secret@host:8000/x`` -> ``http://host:8000/x`` (other URLs unchanged)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_USERINFO.sub(r"\1", url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def userinfo_secrets(url: str) -> list[str]:
    """The password in a URL's userinfo, as written and percent-decoded, and the Basic auth
    credential an HTTP client builds from it; empty when there is none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if parts.password is None:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password)
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [parts.password, password, basic]


def _hex(byte: int) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in f"{byte:02X}")


def _char_forms(ch: str) -> str:
    """A regex for one character of a secret in any of the encodings a server may echo."""
    forms = [re.escape(ch)]
    forms.append("".join("%" + _hex(b) for b in ch.encode("utf-8")))  # percent-encoding
    if ch == " ":
        forms.append(r"\+")  # form encoding
    if ch in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[ch]))
    code = ord(ch)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    forms.append("".join(r"\\u" + "".join(_hex(b) for b in unit.to_bytes(2, "big")) for unit in units))  # JSON
    if ch in _HTML_NAMED:
        forms.append(f"&{_HTML_NAMED[ch]};")
    forms.append(f"&#0*{code};")
    forms.append(f"&#[xX]0*(?i:{code:x});")
    return "(?:" + "|".join(forms) + ")"


class Redactor:
    """Replaces every occurrence of the given secrets, in any encoding, with ``***``."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        kept = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        self._pattern = re.compile("|".join("".join(_char_forms(ch) for ch in s) for s in kept)) if kept else None

    def redact(self, text: str) -> str:
        if "@" in text:
            text = _URL_USERINFO.sub(r"\1", text)
        return self._pattern.sub(MASK, text) if self._pattern is not None else text
