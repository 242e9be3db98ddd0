"""`memory-router openclaw install`'s pieces that need no OpenClaw: what the wheel must carry of the
plugin, telling OpenClaw's copy from the bundle, and the error when OpenClaw is not found."""

from __future__ import annotations

import os
import shutil
from fnmatch import fnmatch
from pathlib import Path

import pytest

from memory_router.cli import openclaw_setup
from memory_router.contract import EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "openclaw-plugin"


# What the plugin's folder holds for its development only (its tests, tsc's config, the lock file
# `npm ci` installs from, and what it installs): never in the wheel, never copied into OpenClaw.
DEV_ONLY = ("package-lock.json", "tsconfig.json", "test/", "node_modules/")


def _on_disk(folder: Path) -> list[str]:
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "node_modules"]  # thousands of files, all development ones
        found += [str((Path(top) / name).relative_to(folder)) for name in files]
    return sorted(found)


def test_the_plugin_ships_package_jsons_files_and_the_wheel_carries_exactly_those() -> None:
    shipped = openclaw_setup.plugin_files(PLUGIN)
    assert {"index.js", "package.json", "openclaw.plugin.json", "README.md", "lib/router.js"} <= set(shipped)
    unsorted = [name for name in _on_disk(PLUGIN) if name not in shipped and not name.startswith(DEV_ONLY)]
    assert unsorted == [], "a plugin file neither shipped (package.json `files`) nor a development file (DEV_ONLY)"
    tomllib = pytest.importorskip("tomllib")  # 3.11+; the project supports 3.10
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"]["memory_router.openclaw_plugin"] == "openclaw-plugin"
    patterns = setuptools["package-data"]["memory_router.openclaw_plugin"]
    carried = [name for name in _on_disk(PLUGIN) if any(fnmatch(name, pattern) for pattern in patterns)]
    assert carried == shipped, "pyproject.toml's package-data for the plugin is not package.json's `files`"


def test_openclaw_is_given_a_copy_of_the_shipped_files_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """OpenClaw copies the folder it is given whole: a checkout's would bring node_modules."""
    source = tmp_path / "openclaw-plugin"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("node_modules"))
    (source / "node_modules" / "typescript").mkdir(parents=True)
    (source / "node_modules" / "typescript" / "package.json").write_text("{}")
    seen: dict[str, list[str]] = {}

    def run(argv: tuple[str, ...], **_: object) -> str:
        staged = Path(argv[-1])
        seen[argv[-1]] = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
        return ""

    monkeypatch.setattr(openclaw_setup, "run", run)
    argv = ("openclaw", "plugins", "install", "--force", "--accept-capabilities", str(source))
    assert openclaw_setup.install_plugin(argv, str(source)) == "done"
    ((staged, files),) = seen.items()
    assert staged != str(source) and not Path(staged).exists()  # a copy, removed afterwards
    assert files == openclaw_setup.plugin_files(PLUGIN)


def test_the_plugin_folder_of_a_checkout_is_its_openclaw_plugin() -> None:
    assert openclaw_setup.plugin_folder() == PLUGIN


def test_openclaws_copy_is_current_only_with_the_same_bytes(tmp_path: Path) -> None:
    copy = tmp_path / "memory-router"
    assert not openclaw_setup.same_plugin(PLUGIN, copy)
    shutil.copytree(PLUGIN, copy, ignore=shutil.ignore_patterns("node_modules"))
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
