"""`memory-router openclaw install`'s pieces that need no OpenClaw: what the wheel must carry of the
plugin, telling OpenClaw's copy from the bundle, and the error when OpenClaw is not found."""

from __future__ import annotations

import shutil
from fnmatch import fnmatch
from pathlib import Path

import pytest

from memory_router.cli import openclaw_setup
from memory_router.contract import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "openclaw-plugin"


def test_every_plugin_file_is_compared_and_shipped_in_the_wheel() -> None:
    on_disk = sorted(str(p.relative_to(PLUGIN)) for p in PLUGIN.rglob("*") if p.is_file())
    assert sorted(openclaw_setup.plugin_files(PLUGIN)) == on_disk
    tomllib = pytest.importorskip("tomllib")  # 3.11+; the project supports 3.10
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"]["memory_router.openclaw_plugin"] == "openclaw-plugin"
    patterns = setuptools["package-data"]["memory_router.openclaw_plugin"]
    unshipped = [name for name in on_disk if not any(fnmatch(name, pattern) for pattern in patterns)]
    assert unshipped == [], "plugin files the wheel would lack (pyproject.toml package-data)"


def test_the_plugin_folder_of_a_checkout_is_its_openclaw_plugin() -> None:
    assert openclaw_setup.plugin_folder() == PLUGIN


def test_openclaws_copy_is_current_only_with_the_same_bytes(tmp_path: Path) -> None:
    copy = tmp_path / "memory-router"
    assert not openclaw_setup.same_plugin(PLUGIN, copy)
    shutil.copytree(PLUGIN, copy)
    assert openclaw_setup.same_plugin(PLUGIN, copy)
    (copy / "lib" / "router.js").write_text("// an older plugin\n")
    assert not openclaw_setup.same_plugin(PLUGIN, copy)


def test_no_openclaw_names_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(openclaw_setup.Failed) as caught:
        openclaw_setup.find_openclaw(None)
    assert caught.value.code == EXIT_USAGE and caught.value.error_code == "OPENCLAW_NOT_FOUND"
    assert "npm install -g openclaw" in str(caught.value) and "--openclaw" in str(caught.value)
    with pytest.raises(openclaw_setup.Failed) as caught:
        openclaw_setup.find_openclaw(str(tmp_path / "openclaw"))
    assert caught.value.code == EXIT_USAGE
    launcher = tmp_path / "openclaw"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    assert openclaw_setup.find_openclaw(str(launcher)) == (str(launcher),)
    assert openclaw_setup.find_openclaw(None) == (str(launcher),)
