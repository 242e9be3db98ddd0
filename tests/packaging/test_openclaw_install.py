"""`memory-router openclaw install` from a wheel (issue 31, item 1): a wheel built from this
checkout, installed in a fresh venv (no checkout: the plugin must come out of the wheel), a fresh
HOME holding an OpenClaw agent's memory files, and the real OpenClaw 2026.9.6 from .tools.

One command must leave OpenClaw's memory slot answered by memory-router (`openclaw memory search
--json` returns the plugin's hit from the agent's qmd collection), a second changes nothing, and
`uninstall` gives memory-core back (the same search is answered by memory-core again).
"""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

import pytest

from memory_router.cli.openclaw_setup import plugin_files
from tests.openclaw._support import NODE24, OPENCLAW_MJS, QUIET_GATEWAY, openclaw_missing

from .test_wheel import NODE22, QMD_PACKAGE, REPO, _run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or ""),
    pytest.mark.skipif(not (QMD_PACKAGE.is_dir() and NODE22), reason="qmd is not installed (.ci/setup.d/20-qmd.sh)"),
]

FACT = "The staging database is named heliotrope-7; we moved it off the old cluster."


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel (which must carry the plugin, byte for byte), installed in a fresh venv whose
    dependencies come from the system's site-packages (the machine is offline)."""
    out = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO)])
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = out.glob("memory_router-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for name in plugin_files(REPO / "openclaw-plugin"):
            inside = f"memory_router/openclaw_plugin/{name}"
            assert z.read(inside) == (REPO / "openclaw-plugin" / name).read_bytes(), f"the wheel's {inside} differs"
    root = tmp_path_factory.mktemp("venv") / "v"
    made = _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--system-site-packages", str(root)])
    assert made.returncode == 0, made.stderr
    installed = _run([str(root / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])
    assert installed.returncode == 0, installed.stderr[-3000:]
    return root


def scratch(home: Path, venv: Path) -> dict[str, str]:
    """A user's shell: a fresh HOME, `openclaw` on PATH (a launcher of .tools' OpenClaw on Node
    24), the venv's memory-router, qmd found through $MEMORY_ROUTER_QMD (a wheel has no .tools)."""
    bin_dir = home / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "openclaw"
    launcher.write_text(f'#!/bin/sh\nexec "{NODE24}" "{OPENCLAW_MJS}" "$@"\n')
    launcher.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_", "QMD_", "XDG_"))}
    env.pop("PYTHONPATH", None)
    return {
        **env,
        **QUIET_GATEWAY,
        "HOME": str(home),
        "PATH": f"{bin_dir}:{venv / 'bin'}:/usr/bin:/bin",
        "NO_COLOR": "1",
        "MEMORY_ROUTER_QMD": str(QMD_PACKAGE),
        "MEMORY_ROUTER_NODE": str(NODE22[0]),
    }


def cli(env: dict[str, str], home: Path, *argv: str) -> tuple[int, dict, str]:
    proc = _run(list(argv), env=env, cwd=home)
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"{argv[:3]} printed no JSON (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    return proc.returncode, out, proc.stderr


def openclaw_json(home: Path) -> dict:
    return json.loads((home / ".openclaw" / "openclaw.json").read_text())


def test_one_command_gives_openclaw_memory_router_and_uninstall_gives_memory_core_back(
    venv: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    workspace = home / ".openclaw" / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(f"# Memory\n\n{FACT}\n")
    (workspace / "memory" / "2026-11-02.md").write_text("Paired with Ana on the release checklist.\n")
    env = scratch(home, venv)
    mr = str(venv / "bin" / "memory-router")
    state = home / ".openclaw" / "state"
    timings: dict[str, float] = {}

    code, plan, _ = cli(env, home, mr, "openclaw", "install", "--dry-run")
    assert code == 0 and plan["dry_run"] is True
    assert [s["id"] for s in plan["steps"]][:3] == ["record", "plugin", "configure"]
    plugin_argv = plan["steps"][1]["argv"]
    assert plugin_argv[1:5] == ["plugins", "install", "--force", "--accept-capabilities"]
    assert plugin_argv[5].startswith(str(venv)) and plugin_argv[5].endswith("memory_router/openclaw_plugin")
    assert not (home / ".openclaw" / "openclaw.json").exists() and not state.exists(), "--dry-run changed something"

    started = time.monotonic()
    code, done, stderr = cli(env, home, mr, "openclaw", "install")
    timings["install"] = time.monotonic() - started
    try:
        assert code == 0 and done["ok"] is True, (done, stderr[-3000:])
        assert [s["id"] for s in done["steps"]] == [
            "record",
            "plugin",
            "configure",
            "router-config",
            "qmd-collection",
            "backends",
        ]
        assert done["changed"] is True and done["check"]["doctor"] == {"ok": True, "problems": []}
        assert done["check"]["search"]["routing"]["via"] in ("daemon", "exec")
        config = openclaw_json(home)["plugins"]
        assert config["slots"]["memory"] == "memory-router"
        assert config["entries"]["memory-core"]["enabled"] is False
        assert config["entries"]["memory-router"]["config"] == {"command": mr, "stateDir": str(state)}
        statuses = json.loads((state / "backends.json").read_text())["backends"]
        assert statuses["qmd"]["status"] == "ready" and statuses["totalrecall"]["status"] == "ready", statuses

        # Idempotent: nothing to plan, nothing changed.
        code, again, _ = cli(env, home, mr, "openclaw", "install", "--no-check")
        assert (code, again["changed"], again["steps"]) == (0, False, [])

        # The real OpenClaw's memory search, answered by memory-router from the agent's qmd collection.
        started = time.monotonic()
        code, found, stderr = cli(env, home, "openclaw", "memory", "search", "--json", "search for heliotrope")
        timings["search"] = time.monotonic() - started
        assert code == 0, stderr[-2000:]
        top = found["results"][0]
        assert "heliotrope-7" in top["snippet"], found
        assert top["memoryRouter"]["backend"] == "qmd" and top["path"].endswith("openclaw-main-memory/MEMORY.md")
        assert found["routing"]["rule"]["id"] == "exact_symbol"
    finally:
        _run([mr, "daemon", "stop", "--state-dir", str(state)], env=env, cwd=home)

    started = time.monotonic()
    code, undone, stderr = cli(env, home, mr, "openclaw", "uninstall")
    timings["uninstall"] = time.monotonic() - started
    assert code == 0 and undone["ok"] is True, (undone, stderr[-3000:])
    assert [s["id"] for s in undone["steps"]] == ["plugin", "forget", "memory-core", "record"]
    config = openclaw_json(home)["plugins"]
    assert config.get("slots", {}).get("memory") in (None, "memory-core")
    assert "enabled" not in config["entries"].get("memory-core", {}) and "memory-router" not in config["entries"]
    assert not (home / ".openclaw" / "extensions" / "memory-router").exists()
    code, back, _ = cli(env, home, mr, "openclaw", "uninstall", "--dry-run")
    assert (code, back["steps"]) == (0, [])

    # memory-core answers again: its own hit shape (no memoryRouter block, no routing).
    code, core, stderr = cli(env, home, "openclaw", "memory", "search", "--json", "heliotrope")
    assert code == 0, stderr[-2000:]
    assert "routing" not in core and core["results"], core
    assert core["results"][0]["path"] == "MEMORY.md" and "memoryRouter" not in core["results"][0]
    print(f"timings (s): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")


def test_install_without_openclaw_says_what_to_do(venv: Path, tmp_path: Path) -> None:
    env = scratch(tmp_path, venv)
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"  # no openclaw
    code, out, stderr = cli(env, tmp_path, str(venv / "bin" / "memory-router"), "openclaw", "install")
    assert code == 2 and out["ok"] is False and out["error_code"] == "OPENCLAW_NOT_FOUND"
    assert "npm install -g openclaw" in out["error_message"] and "--openclaw" in stderr
