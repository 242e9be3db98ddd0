"""One version for the whole package: pyproject.toml's (the wheel's), ``memory_router.__version__``
(the daemon's ``hello`` and ``--version``) and the OpenClaw plugin's package.json (which the plugin
reads to introduce itself to the daemon, openclaw-plugin/lib/router.js ``PLUGIN_VERSION``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import memory_router

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "openclaw-plugin"


def test_the_package_and_the_plugin_carry_pyprojects_version() -> None:
    tomllib = pytest.importorskip("tomllib")  # 3.11+; the project supports 3.10
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert memory_router.__version__ == version
    assert json.loads((PLUGIN / "package.json").read_text(encoding="utf-8"))["version"] == version


def test_the_plugin_reads_its_version_from_package_json_only() -> None:
    sources = [PLUGIN / "index.js", *sorted((PLUGIN / "lib").glob("*.js"))]
    spelled = [str(p.relative_to(ROOT)) for p in sources if re.search(r"""["']\d+\.\d+\.\d+["']""", p.read_text())]
    assert spelled == [], "a version string in the plugin's code: read package.json's instead"
    router = (PLUGIN / "lib" / "router.js").read_text(encoding="utf-8")
    assert 'new URL("../package.json", import.meta.url)' in router
