"""The plugin's own Node tests (openclaw-plugin/test/, run by `node --test` in .ci/plugin) stand on
the daemon's real answers, not hand-made ones: test/fixtures/hello.json is what memory-router's
socket server answers to `hello` for a fixed context, regenerated with
``MR_WRITE_DOCS=1 python3 -m pytest -q tests/openclaw/test_plugin_package.py``. And the envelope
fields the plugin's types name are the contract's."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import orjson

from memory_router import contract
from memory_router.client.wire import context
from memory_router.daemon.socket_server import SocketServer

from ._support import PLUGIN_DIR

HELLO = PLUGIN_DIR / "test" / "fixtures" / "hello.json"
# The context the fixture's daemon serves: test/wire.test.js computes the same from these settings.
ENV = {"HOME": "/home/u", "PATH": "/usr/bin", "OPENCLAW_REPO_ROOT": "/ws", "QMD_FORCE_CPU": "1"}
FIXED = {"pid": 4242, "started": 1767225600.0, "uptime_s": 12.5, "clients": 1}


class _Fixed(SocketServer):
    """A socket server that was never started, serving a fixed context: enough to answer `hello`."""

    context = context(  # in place of the property, which needs a live service
        cwd="/ws",
        environ=ENV,
        state_dir="/ws/state",
        backends_json="/ws/state/backends.json",
        config="/ws/state/router-config.json",
        salt="s4lt",
    )


def real_hello() -> dict[str, Any]:
    server: Any = object.__new__(_Fixed)
    server.path, server.started, server.connections = Path("/ws/state/router.sock"), 0.0, set()
    hello: dict[str, Any] = orjson.loads(server._transport_op(b'{"op": "hello", "protocol": 1, "id": 1}'))
    return {**hello, **FIXED}  # the live values (pid, clock) fixed, so the file does not churn


def test_the_node_tests_hello_is_the_daemons() -> None:
    text = json.dumps(real_hello(), indent=2) + "\n"
    if os.environ.get("MR_WRITE_DOCS") == "1":
        HELLO.write_text(text, encoding="utf-8")
        return
    assert HELLO.read_text(encoding="utf-8") == text, (
        "openclaw-plugin/test/fixtures/hello.json is not what the daemon answers; regenerate it: "
        "MR_WRITE_DOCS=1 python3 -m pytest -q tests/openclaw/test_plugin_package.py"
    )


def test_the_plugins_envelope_type_names_only_the_contracts_fields() -> None:
    mapping = (PLUGIN_DIR / "lib" / "mapping.js").read_text(encoding="utf-8")
    block = re.search(r"@typedef \{object\} Envelope\n(.*?)\*/", mapping, re.S)
    assert block is not None, "lib/mapping.js lost its Envelope typedef"
    named = re.findall(r"@property \{[^}]*\} \[?(\w+)", block.group(1))
    fields = {name for name, _ in contract.ENVELOPE_FIELDS} | set(contract.OPTIONAL_ENVELOPE_FIELDS)
    assert named and [n for n in named if n not in fields] == []
