"""`memory-router openclaw install` from a wheel (issue 31, item 1): a wheel built from this
checkout, installed in a fresh venv (no checkout: the plugin must come out of the wheel), a fresh
HOME holding an OpenClaw agent's memory files, and the real OpenClaw 2026.9.6 from .tools.

One command must leave OpenClaw's memory slot answered by memory-router (`openclaw memory search
--json` returns the plugin's hit from the agent's qmd collection; in a Gateway started afterwards,
the agent's `memory_search` tool and the `memory.search` RPC too), a second changes nothing, and
`uninstall` gives memory-core back (the same search is answered by memory-core again). In that
Gateway, a note written into the agent's memory is found by qmd within seconds (the index follows
the files), the tool's floor and budget hold on qmd's answer, and its time window keeps the notes
of the days asked for (`memory_search` and `openclaw memory search`, `since` / `until`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_router.cli.openclaw_setup import plugin_files
from tests.openclaw._support import (
    NODE24,
    OPENCLAW_MJS,
    QUIET_GATEWAY,
    TOKEN,
    RunningGateway,
    gateway_run,
    openclaw_missing,
)

from .test_wheel import NODE22, QMD_PACKAGE, REPO, _run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(openclaw_missing() is not None, reason=openclaw_missing() or ""),
    pytest.mark.skipif(not (QMD_PACKAGE.is_dir() and NODE22), reason="qmd is not installed (.ci/setup.d/20-qmd.sh)"),
]

FACT = "The staging database is named heliotrope-7; we moved it off the old cluster."
FRESH_WITHIN_S = 30.0  # a note written into the agent's memory, findable through the Gateway (debounce 1.5 s)


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


class Gateway:
    """A loopback Gateway the user starts after `install` (`openclaw gateway run`, from PATH)."""

    def __init__(self, env: dict[str, str], home: Path, running: RunningGateway) -> None:
        self.env, self.home, self.port = env, home, running.port

    def tool(self, args: dict[str, Any]) -> dict[str, Any]:
        """The agent's memory_search tool, as a model's tool call reaches it (POST /tools/invoke)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/tools/invoke",
            data=json.dumps({"tool": "memory_search", "args": args}).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            body = json.loads(response.read())
        assert body.get("ok") is True, body
        details: dict[str, Any] = body["result"]["details"]
        return details

    def rpc(self, params: dict[str, Any]) -> dict[str, Any]:
        """The Gateway RPC `memory.search` (`openclaw gateway call`)."""
        call = ["openclaw", "gateway", "call", "memory.search", "--port", str(self.port), "--token", TOKEN]
        call += ["--params", json.dumps(params), "--json", "--timeout", "90000"]
        code, out, stderr = cli(self.env, self.home, *call)
        assert code == 0, stderr[-2000:]
        return out


@contextmanager
def gateway(env: dict[str, str], home: Path) -> Iterator[Gateway]:
    with gateway_run(env, home, openclaw=("openclaw",)) as running:
        running.wait_listening(240)
        yield Gateway(env, home, running)


def from_qmd(results: list[dict[str, Any]], path_end: str) -> list[dict[str, Any]]:
    return [r for r in results if r["memoryRouter"]["backend"] == "qmd" and r["path"].endswith(path_end)]


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

        # A Gateway started afterwards: the tool and the RPC are memory-router's too.
        started = time.monotonic()
        with gateway(env, home) as g:
            timings["gateway"] = time.monotonic() - started
            tool = g.tool({"query": "search for heliotrope", "maxResults": 3})
            assert tool["provider"] == "memory-router" and tool["routing"]["rule"]["id"] == "exact_symbol"
            assert from_qmd(tool["results"], "openclaw-main-memory/MEMORY.md"), tool
            rpc = g.rpc({"query": "search for heliotrope", "maxResults": 3})
            assert rpc["provider"] == "memory-router" and from_qmd(rpc["results"], "openclaw-main-memory/MEMORY.md")

            # Freshness: a note the agent writes now is found by qmd through the Gateway.
            word, today = f"quokkaplan{os.getpid()}", date.today()  # today's daily note
            assert not from_qmd(g.tool({"query": f"search for {word}"})["results"], f"{today}.md")
            written = time.monotonic()
            (workspace / "memory" / f"{today}.md").write_text(f"# {today}\n\n- Ana named the {word} rollout.\n")
            while not from_qmd(g.tool({"query": f"search for {word}"})["results"], f"memory/{today}.md"):
                assert time.monotonic() - written < FRESH_WITHIN_S, f"{word} not found by qmd in {FRESH_WITHIN_S} s"
                time.sleep(0.25)
            timings["write_to_found"] = time.monotonic() - written

            # The floor and the budget hold on an answer qmd leads (both daily notes name Ana; the
            # rest is filled from Total Recall), and say what they left out.
            ana = {"query": "search for Ana", "minScore": 0, "maxResults": 10}
            everything = g.tool(ana)["results"]
            assert len(everything) >= 2 and from_qmd(everything[:1], ".md"), everything
            best = max(r["score"] for r in everything)
            assert best < 0.99
            none = g.tool({**ana, "minScore": best + 0.01})
            assert none["results"] == [] and none["abstained"]["dropped"] == len(everything), none
            budget = len(everything[0]["snippet"])
            cut = g.tool({**ana, "maxChars": budget})
            assert [r["snippet"] for r in cut["results"]] == [everything[0]["snippet"]]
            assert cut["budget"]["kept"] == 1 and cut["budget"]["cut"] == len(everything) - 1

            # Time windows: yesterday's note, not the one of ten days ago. qmd dates a note by its
            # file name, Total Recall by its own; the fill keeps one hit per file.
            yesterday, older = date.today() - timedelta(days=1), date.today() - timedelta(days=10)
            tag = f"walrusplan{os.getpid()}"
            for day, verb in ((yesterday, "chose"), (older, "dropped")):
                (workspace / "memory" / f"{day}.md").write_text(f"# {day}\n\n- Ana {verb} the {tag}.\n")
            ask = {"query": f"search for {tag}", "minScore": 0, "maxResults": 10}

            def days(results: list[dict[str, Any]]) -> set[str]:
                return {d for r in results for d in (str(yesterday), str(older)) if f"/{d}.md" in f"/{r['path']}"}

            written = time.monotonic()
            while days(found := g.tool(ask)["results"]) != {str(yesterday), str(older)} or not from_qmd(found, ".md"):
                assert time.monotonic() - written < FRESH_WITHIN_S, [
                    (r["memoryRouter"]["backend"], r["path"]) for r in found
                ]
                time.sleep(0.25)
            window = g.tool({**ask, "since": "yesterday", "until": "yesterday"})
            assert set(window["window"]) == {"since", "until"} and window["window"]["since"].startswith(str(yesterday))
            assert window["routing"]["routed_to"] == "qmd" and days(window["results"]) == {str(yesterday)}, window
            assert all(str(yesterday) in r["path"] for r in window["results"])
            assert days(g.tool({**ask, "since": "last week"})["results"]) == {str(yesterday)}
            assert days(g.tool({**ask, "until": str(older)})["results"]) == {str(older)}
            bad = g.tool({**ask, "since": "someday"})
            assert bad["results"] == [] and bad["code"] == "INVALID_TIME_RANGE" and "disabled" not in bad, bad
            code, cli_window, stderr = cli(
                env, home, "openclaw", "memory", "search", "--json", "--since", "yesterday", f"search for {tag}"
            )
            assert code == 0 and cli_window["window"]["since"].startswith(str(yesterday)), stderr[-2000:]
            assert cli_window["results"] and all(str(yesterday) in r["path"] for r in cli_window["results"])
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
