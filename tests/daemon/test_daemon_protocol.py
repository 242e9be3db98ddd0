"""The daemon's JSON-lines request parser: every line is either a Request or a BadRequest with a
precise code, never an exception of any other kind; ids survive."""

from __future__ import annotations

import asyncio
import os
import threading

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.client.wire import Oversized
from memory_router.daemon.protocol import (
    INVALID_JSON,
    INVALID_REQUEST,
    INVALID_UTF8,
    REQUEST_TOO_LARGE,
    BadRequest,
    Request,
    parse_line,
    sniff_id,
)
from memory_router.daemon.stdio import _Eof, read_lines

from ..support.budget import examples

LIMIT = 4096

json_ids = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=30),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def outcome(line: bytes) -> Request | BadRequest:
    try:
        return parse_line(line, LIMIT)
    except BadRequest as exc:
        return exc


@settings(max_examples=examples(400))
@given(st.binary(max_size=300))
def test_any_bytes_parse_or_fail_cleanly(line: bytes) -> None:
    result = outcome(line)
    if isinstance(result, BadRequest):
        assert result.code in (INVALID_JSON, INVALID_UTF8, INVALID_REQUEST, REQUEST_TOO_LARGE)
        assert result.message
    else:
        assert isinstance(result.query, str) or result.op == "stats"


@given(
    rid=json_ids,
    query=st.text(max_size=200),
    timeout_ms=st.none() | st.integers(1, 600_000),
    limit=st.none() | st.integers(1, 1000),
    explain=st.booleans(),
)
def test_valid_requests_round_trip(
    rid: object, query: str, timeout_ms: int | None, limit: int | None, explain: bool
) -> None:
    data: dict[str, object] = {"id": rid, "query": query, "explain": explain}
    if timeout_ms is not None:
        data["timeout_ms"] = timeout_ms
    if limit is not None:
        data["limit"] = limit
    try:
        line = orjson.dumps(data)
    except orjson.JSONEncodeError:  # lone surrogates cannot be sent as UTF-8 JSON at all
        return
    request = parse_line(line, 1 << 20)
    assert (request.id, request.query, request.timeout_ms, request.limit, request.explain) == (
        rid,
        query,
        timeout_ms,
        limit,
        explain,
    )


@given(value=json_values)
def test_any_json_value_is_a_request_or_invalid_request(value: object) -> None:
    result = outcome(orjson.dumps(value))
    if isinstance(value, str):
        assert isinstance(result, Request) and result.query == value and result.id is None
    elif isinstance(value, dict) and set(value) == {"query"} and isinstance(value["query"], str):
        assert isinstance(result, Request)
    elif not (
        isinstance(value, dict)
        and (set(value) <= {"id", "op", "query", "timeout_ms", "limit", "deadline_ms", "explain"})
    ):
        assert isinstance(result, BadRequest) and result.code in (INVALID_REQUEST, REQUEST_TOO_LARGE)


@given(
    rid=st.integers(-(10**17), 10**17)
    | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40),
    junk=st.binary(max_size=50),
)
def test_id_is_recovered_from_broken_lines_when_it_comes_first(rid: int | str, junk: bytes) -> None:
    prefix = b'{"id": ' + orjson.dumps(rid) + b', "query": "'
    line = prefix + b"\xff\xfe" + junk  # invalid UTF-8 and (usually) broken JSON
    result = outcome(line)
    assert isinstance(result, BadRequest)
    assert result.id == rid


def refused(line: bytes) -> BadRequest:
    """The daemon's answer to a line it must refuse (the test fails if it took the line)."""
    result = outcome(line)
    assert isinstance(result, BadRequest), result
    return result


def test_each_kind_of_bad_line_has_its_code() -> None:
    assert refused(b"").code == INVALID_REQUEST
    assert refused(b"   ").code == INVALID_REQUEST
    assert refused(b"{not json").code == INVALID_JSON
    bad_utf8 = refused(b'{"id": 4, "query": "caf\xe9"}')
    assert (bad_utf8.code, bad_utf8.id) == (INVALID_UTF8, 4)
    assert refused(b'{"id": 5}').code == INVALID_REQUEST and refused(b'{"id": 5}').id == 5
    assert refused(b'{"id": 6, "query": 3}').code == INVALID_REQUEST
    assert refused(b'{"id": 7, "query": "a", "timout_ms": 5}').message.startswith("unknown key 'timout_ms'")
    assert refused(b'{"id": 8, "query": "a", "timeout_ms": true}').code == INVALID_REQUEST
    assert refused(b'{"id": 9, "query": "a", "limit": 0}').code == INVALID_REQUEST
    assert refused(b'{"id": 10, "op": "reboot"}').code == INVALID_REQUEST
    assert refused(b"[1, 2]").code == INVALID_REQUEST
    big = refused(b'{"id": 11, "query": "' + b"x" * LIMIT + b'"}')
    assert (big.code, big.id) == (REQUEST_TOO_LARGE, 11)


@pytest.mark.parametrize("line", [b'{"op": "stats"}', b'{"id": "s", "op": "stats"}'])
def test_stats_request(line: bytes) -> None:
    assert parse_line(line, LIMIT).op == "stats"


def test_sniff_id_ignores_a_later_id_key() -> None:
    assert sniff_id(b'{"query": "x", "id": 3') is None
    assert sniff_id(b'{"id": "a\\"b", "query"') == 'a"b'


# ------------------------------------------------------------------ the stdin line splitter


@settings(max_examples=examples(150), deadline=None)
@given(
    lines=st.lists(st.binary(max_size=120).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    max_line=st.integers(1, 100),
    trailing_newline=st.booleans(),
    chunk=st.integers(1, 50),
)
def test_read_lines_splits_any_stream_and_flags_long_lines(
    lines: list[bytes], max_line: int, trailing_newline: bool, chunk: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    read_fd, write_fd = os.pipe()

    def writer() -> None:
        for i in range(0, len(data), chunk):  # arbitrary write boundaries
            os.write(write_fd, data[i : i + chunk])
        os.close(write_fd)

    got: list[object] = []

    def keep(item: object) -> bool:
        got.append(item)
        return True  # read on

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        read_lines(read_fd, max_line, keep)
    finally:
        thread.join()
        os.close(read_fd)
    assert isinstance(got.pop(), _Eof)
    expected = list(lines)
    if expected and expected[-1] == b"" and not trailing_newline:
        expected.pop()  # a stream ending in "\n" has no empty last line
    assert len(got) == len(expected)
    for item, line in zip(got, expected, strict=True):
        if len(line) > max_line:
            assert isinstance(item, Oversized) and item.length == len(line) and line.startswith(item.prefix)
        else:
            assert item == line


@settings(max_examples=examples(150), deadline=None)
@given(
    lines=st.lists(st.binary(max_size=120).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=30),
    max_line=st.integers(1, 100),
    chunk=st.integers(1, 50),
)
def test_the_socket_reads_the_same_lines_as_stdin(lines: list[bytes], max_line: int, chunk: int) -> None:
    """Both transports split with wire.LineSplitter; the socket also drops a "\\r" before "\\n"."""
    from memory_router.daemon.socket_server import _lines

    data = b"\n".join(lines) + b"\n"

    async def read() -> list[object]:
        reader = asyncio.StreamReader()
        for i in range(0, len(data), chunk):
            reader.feed_data(data[i : i + chunk])
        reader.feed_eof()
        return [item async for item in _lines(reader, max_line)]

    got = asyncio.run(read())
    assert len(got) == len(lines)
    for item, line in zip(got, lines, strict=True):
        if len(line) > max_line:
            assert isinstance(item, Oversized) and item.length == len(line) and line.startswith(item.prefix)
        else:
            assert item == (line[:-1] if line.endswith(b"\r") else line)
