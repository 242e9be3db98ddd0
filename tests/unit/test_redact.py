"""The redaction helper (backends/common/redact.py): a secret in any encoding a server may echo it in,
mixed into arbitrary text, never survives; text without secrets is unchanged."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from urllib.parse import quote, quote_plus

from hypothesis import given
from hypothesis import strategies as st

from memory_router.backends.common.redact import Redactor, strip_userinfo, userinfo_secrets

secrets = st.text(st.characters(blacklist_categories=["Cs"]), min_size=4, max_size=40)
around = st.text(max_size=30)
ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": lambda s: s,
    "percent": lambda s: quote(s, safe=""),
    "percent-lower": lambda s: quote(s, safe="").replace("%2F", "%2f").replace("%40", "%40"),
    "form": quote_plus,
    "json": lambda s: json.dumps(s)[1:-1],
    "json-ascii": lambda s: json.dumps(s, ensure_ascii=True)[1:-1],
    "html": html.escape,
}


@given(secret=secrets, before=around, after=around, encoding=st.sampled_from(sorted(ENCODINGS)))
def test_a_secret_in_any_encoding_is_redacted(secret: str, before: str, after: str, encoding: str) -> None:
    encoded = ENCODINGS[encoding](secret)
    out = Redactor([secret]).redact(before + encoded + after)
    assert encoded not in out and "***" in out


@given(text=st.text(alphabet="abcdefgh xyz.:/-", max_size=60))
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert Redactor(["QQQQ-secret"]).redact(text) == text


def test_userinfo_is_stripped_and_its_password_is_a_secret() -> None:
    url = "http://bob:p%40ss@cognee.local:8000/api"
    assert strip_userinfo(url) == "http://cognee.local:8000/api"
    assert strip_userinfo("http://cognee.local:8000") == "http://cognee.local:8000"
    basic = base64.b64encode(b"bob:p@ss").decode()
    assert userinfo_secrets(url) == ["p%40ss", "p@ss", basic]
    r = Redactor(userinfo_secrets(url))
    assert r.redact(f"GET {url} with Basic {basic}, form password=p%40ss") == (
        "GET http://cognee.local:8000/api with Basic ***, form password=***"
    )
