"""The plugin's retry set comes from the daemon's ``hello`` (memory_router.contract.ERROR_CODES),
and a daemon from before hello carried the table still gets the two codes it always meant."""

from __future__ import annotations

import json
import subprocess

import pytest

from memory_router import contract

from ._support import PLUGIN_DIR, any_node

NODE = any_node()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="no Node >= 22 in .tools (run: bash .ci/setup.d/20-qmd.sh)"),
]


def test_the_plugin_retries_exactly_the_codes_hello_marks() -> None:
    hello = {"op": "hello", "protocol": 1, "error_codes": contract.hello_codes()}
    program = (
        f'import {{ retryCodes }} from "{PLUGIN_DIR}/lib/router.js";\n'
        'const hello = JSON.parse((await import("node:fs")).readFileSync(0, "utf8"));\n'
        "process.stdout.write(JSON.stringify([[...retryCodes(hello)], [...retryCodes({ op: 'hello' })]]));"
    )
    proc = subprocess.run(
        [str(NODE), "--input-type=module", "-e", program],
        input=json.dumps(hello),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    from_table, without = json.loads(proc.stdout)
    assert set(from_table) == contract.RETRY_IN_PROCESS
    assert set(without) == {contract.SHUTTING_DOWN, contract.INTERNAL_ERROR}
