"""Hints name the command that works for how this copy was installed (memory_router.config.installation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_router.config import installation


def test_this_checkout_is_recognised_as_one() -> None:
    assert installation.checkout_root() == Path(__file__).resolve().parents[2]
    assert installation.kind() == "checkout"


def test_pipx_and_uv_tool_environments_are_told_their_own_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(installation, "checkout_root", lambda: None)  # as an installed wheel
    pipx = tmp_path / "pipx"
    pipx.mkdir()
    (pipx / "pipx_metadata.json").write_text("{}")
    uv = tmp_path / "uv"
    uv.mkdir()
    (uv / "uv-receipt.toml").write_text("")
    kinds = {name: installation.kind.__wrapped__(str(tmp_path / name)) for name in ("pipx", "uv", "plain")}
    assert kinds == {"pipx": "pipx", "uv": "uv", "plain": "pip"}
    # pipx injects packages, not extras: the mcp extra's requirement as the metadata declares it.
    assert installation.extra_command("mcp", "pipx").startswith("pipx inject memory-router 'mcp")
    assert installation.extra_command("mcp", "uv") == "uv tool install --reinstall 'memory-router[mcp]'"
    assert installation.extra_command("mcp", "pip") == "pip install 'memory-router[mcp]'"
    monkeypatch.setattr(installation, "checkout_root", lambda: Path("/src/memory-router"))
    assert installation.extra_command("mcp", "checkout") == "pip install -e '/src/memory-router[mcp]'"
