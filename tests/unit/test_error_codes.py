"""The one table of error codes (memory_router.contract.ERROR_CODES) is the only place a code is
spelled, and everything that speaks codes is read from it: the exit codes, the thin client's
retry set, the table in docs/cli.md, the daemon's ``hello`` and the OpenClaw plugin.

docs/cli.md's table is generated: ``MR_WRITE_DOCS=1 python3 -m pytest -q tests/unit/test_error_codes.py``
rewrites it from the table (between its two marker comments).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from memory_router import contract
from memory_router.contract import BY_CODE, ERROR_CODES, ErrorCode
from memory_router.core import errors
from memory_router.daemon.socket_server import SocketServer

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = ROOT / "docs" / "cli.md"
BEGIN = re.compile(r"<!-- generated from memory_router/contract\.py ERROR_CODES.*?-->\n", re.S)
END = "<!-- end of the generated table -->"
PLUGIN = ROOT / "openclaw-plugin"
PLUGIN_CODES = PLUGIN / "lib" / "codes.js"
# A quoted upper-case word in the plugin's JavaScript: an error code when the table has it.
JS_WORD = re.compile(r"""["'`]([A-Z][A-Z0-9_]*)["'`]""")
# Whole string literals in memory_router/ equal to a code that are not that code.
NOT_A_CODE = {("memory_router/core/cooldown.py", "COOLDOWN"): "the kind of a router.log line"}


def test_every_row_is_one_code_named_by_its_constant_and_cannot_change() -> None:
    codes = [row.code for row in ERROR_CODES]
    assert len(codes) == len(set(codes)), "a code has two rows"
    for row in ERROR_CODES:
        assert getattr(contract, row.code) == row.code, f"contract.{row.code} is not {row.code!r}"
        assert row.origin in contract.ORIGINS
        assert row.exit in (contract.EXIT_ERROR, contract.EXIT_USAGE, None)
        assert row.meaning and "\n" not in row.meaning and "|" not in row.meaning
        assert (row.exit is None) == (row.origin == contract.PLUGIN), row  # only the plugin's never reach `query`
    with pytest.raises(AttributeError):
        ERROR_CODES[0].retry = True  # a Frozen row
    constants = {v for k, v in vars(contract).items() if k.isupper() and isinstance(v, str) and k == v}
    assert constants == set(codes), "a code constant in contract.py without a row (or the reverse)"


def test_a_code_is_spelled_only_in_the_table() -> None:
    spelled = []
    for path in sorted((ROOT / "memory_router").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "memory_router/contract.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in BY_CODE and (rel, node.value) not in NOT_A_CODE:
                spelled.append(f"{rel}:{node.lineno} {node.value!r}")
    assert spelled == [], f"use memory_router.contract's constant instead of the literal: {spelled}"


def test_exit_codes_and_the_retry_set_are_the_tables_columns() -> None:
    for row in ERROR_CODES:
        assert contract.exit_code(row.code) == (row.exit or contract.EXIT_ERROR)
        assert (row.code in contract.RETRY_IN_PROCESS) == row.retry
    assert contract.exit_code("SOME_PROGRAMS_OWN_CODE") == contract.EXIT_ERROR
    assert contract.exit_code(None) == contract.EXIT_ERROR
    assert {"SHUTTING_DOWN", "INTERNAL_ERROR", "INVALID_REQUEST", "REQUEST_TOO_LARGE"} <= contract.RETRY_IN_PROCESS


def _router_errors() -> list[type[errors.RouterError]]:
    found, pending = [], [errors.RouterError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        found.append(cls)
    return found


@pytest.mark.parametrize("cls", [c for c in _router_errors() if "error_code" in vars(c)], ids=lambda c: c.__name__)
def test_every_error_class_names_a_usage_code_of_the_table(cls: type[errors.RouterError]) -> None:
    row = BY_CODE[cls.error_code]
    assert row.exit == contract.EXIT_USAGE and row.origin in (contract.ROUTER, contract.CONFIG)


def _docs_table(text: str) -> tuple[int, int]:
    begin = BEGIN.search(text)
    assert begin is not None, "docs/cli.md lost the marker comment before its error-code table"
    end = text.index(END, begin.end())
    return begin.end(), end


def test_the_docs_table_is_the_generated_one() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    start, end = _docs_table(text)
    generated = contract.error_code_table()
    if os.environ.get("MR_WRITE_DOCS") == "1":
        CLI_DOC.write_text(text[:start] + generated + text[end:], encoding="utf-8")
        return
    assert text[start:end] == generated, (
        "docs/cli.md's error-code table differs from memory_router/contract.py ERROR_CODES; regenerate it: "
        "MR_WRITE_DOCS=1 python3 -m pytest -q tests/unit/test_error_codes.py"
    )


class _Bare(SocketServer):
    """A socket server that was never started: enough to answer the transport's ops."""

    context = {"cwd": "/"}  # in place of the property, which needs a live service


def test_hello_carries_the_table_for_the_plugin() -> None:
    server: Any = object.__new__(_Bare)
    server.path, server.started, server.connections = Path("/run/x.sock"), 0.0, set()
    hello = orjson.loads(server._transport_op(b'{"op": "hello", "protocol": 1, "id": 3}'))
    assert (hello["op"], hello["id"], hello["protocol"]) == ("hello", 3, 1)
    assert hello["error_codes"] == {
        row.code: {"exit": row.exit, "origin": row.origin, "retry": row.retry} for row in ERROR_CODES
    }
    retry = {code for code, facts in hello["error_codes"].items() if facts["retry"]}
    assert retry == contract.RETRY_IN_PROCESS


def _plugin_sources() -> list[Path]:
    """The plugin's own modules (not its tests, not node_modules)."""
    return [PLUGIN / "index.js", *sorted((PLUGIN / "lib").glob("*.js"))]


def _plugin_literals() -> list[tuple[str, int, str]]:
    found = []
    for path in _plugin_sources():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            rel = str(path.relative_to(ROOT))
            found += [(rel, number, word) for word in JS_WORD.findall(line) if word in BY_CODE]
    return found


def test_the_plugins_codes_module_is_the_generated_one() -> None:
    generated = contract.plugin_codes_module()
    assert all("*/" not in row.meaning for row in ERROR_CODES), "a meaning would end lib/codes.js's doc comment"
    if os.environ.get("MR_WRITE_DOCS") == "1":
        PLUGIN_CODES.write_text(generated, encoding="utf-8")
        return
    assert PLUGIN_CODES.read_text(encoding="utf-8") == generated, (
        "openclaw-plugin/lib/codes.js differs from memory_router/contract.py ERROR_CODES; regenerate it: "
        "MR_WRITE_DOCS=1 python3 -m pytest -q tests/unit/test_error_codes.py"
    )


def test_the_plugin_spells_a_code_only_in_its_codes_module() -> None:
    literals = _plugin_literals()
    in_module = {code for path, _, code in literals if path.endswith("lib/codes.js")}
    assert in_module == set(BY_CODE), "the scan no longer finds lib/codes.js's codes: is the pattern still right?"
    elsewhere = [f"{path}:{n} {code}" for path, n, code in literals if not path.endswith("lib/codes.js")]
    assert elsewhere == [], f"use CODES.<name> from openclaw-plugin/lib/codes.js instead of the literal: {elsewhere}"
    named = {
        (str(path.relative_to(ROOT)), code)
        for path in _plugin_sources()
        for code in re.findall(r"\bCODES\.([A-Z][A-Z0-9_]*)", path.read_text(encoding="utf-8"))
    }
    assert named, "the plugin names no CODES.<name>: is the pattern still right?"
    assert [f"{path} {code}" for path, code in sorted(named) if code not in BY_CODE] == []


def test_the_plugin_reads_the_retry_codes_from_hello_and_keeps_one_fallback() -> None:
    router = (PLUGIN / "lib" / "router.js").read_text(encoding="utf-8")
    fallback = re.search(r"const RETRY_WITHOUT_TABLE = Object\.freeze\(\[([^\]]*)\]\);", router)
    assert fallback is not None, "router.js: the fallback for a daemon whose hello has no table moved"
    kept = set(re.findall(r"CODES\.([A-Z_]+)", fallback.group(1)))
    # What daemons meant before hello carried the table: still retried by today's.
    assert kept == {contract.SHUTTING_DOWN, contract.INTERNAL_ERROR} and kept <= contract.RETRY_IN_PROCESS
    assert "hello?.error_codes" in router


def test_error_code_rows_print_their_columns() -> None:
    assert repr(ErrorCode("X_Y", 1, contract.DAEMON, "m", retry=True)) == "ErrorCode('X_Y', 1, 'daemon', retry=True)"
