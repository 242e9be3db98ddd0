"""The plugin's picture of its host against the real OpenClaw's types: tsc over
openclaw-plugin/test/host/check.js, which asks that OpenClaw 2026.9.6's OpenClawPluginApi be the
plugin's HostApi (lib/host.js) and its entry an OpenClawPluginDefinition. A member the plugin calls
that OpenClaw lacks, an argument of the wrong shape, a tool or manager OpenClaw would not accept:
each is a type error here, before any Gateway starts."""

from __future__ import annotations

import subprocess

import pytest

from ._support import NODE24, PLUGIN_DIR, openclaw_missing

TSC = PLUGIN_DIR / "node_modules" / "typescript" / "bin" / "tsc"
NO_TSC = "no tsc in openclaw-plugin/node_modules (run: bash .ci/setup.d/60-plugin-dev.sh)"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or ""),
    pytest.mark.skipif(not TSC.exists(), reason=NO_TSC),
]


def test_openclaws_plugin_api_is_the_api_the_plugin_is_written_against() -> None:
    proc = subprocess.run(
        [str(NODE24), str(TSC), "-p", "test/host"],
        cwd=PLUGIN_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
