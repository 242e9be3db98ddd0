"""A new user's first commands (issue 24, item 5): `init` writes backends.json from the adapters'
probes and never replaces one without --force, `config check` fails when a rule cannot be
answered, `backends` fails when backends.json promises a backend that cannot run, `route --json`
always prints JSON, and `--help` says where to start without cutting a line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_router.cli.help_text import TOP_LEVEL

from ..support.client import run_cli, starter_workspace

pytestmark = pytest.mark.slow  # starts programs: the slow tier (tests/support/tier_guard.py)

OFF = {"MEMORY_ROUTER_DAEMON": "off"}


@pytest.fixture
def fresh(tmp_path: Path) -> tuple[Path, Path]:
    """A starter workspace's config (Total Recall pointed at the demo memory) and an empty state
    dir: what a user has before `init`."""
    _, config = starter_workspace(tmp_path / "ws")
    state = tmp_path / "new-state"
    return state, config


def flags(state: Path, config: Path) -> list[str]:
    return ["--state-dir", str(state), "--config", str(config)]


def test_init_writes_backends_json_with_the_probes_reasons(fresh: tuple[Path, Path]) -> None:
    state, config = fresh
    # Before init the router refuses, and creates nothing: init never runs implicitly.
    before = run_cli("query", "auth", *flags(state, config), env=OFF)
    assert before.returncode == 2 and json.loads(before.stdout)["error_code"] == "BACKENDS_JSON_MISSING"
    assert "memory-router init" in before.stderr.decode() and not state.exists()

    proc = run_cli("init", *flags(state, config), env=OFF)
    assert proc.returncode == 0, proc.stderr
    written = json.loads((state / "backends.json").read_text())
    backends = written["backends"]
    assert backends["totalrecall"]["status"] == "ready" and "memory files" in backends["totalrecall"]["reason"]
    assert backends["cognee"]["status"] == "unavailable" and backends["cognee"]["reason"]
    assert set(backends) == set(json.loads(config.read_text())["backends"])
    out = proc.stdout.decode()
    assert f"wrote {state / 'backends.json'}" in out and "openclaw skills install" in out
    assert (state.stat().st_mode & 0o777) == 0o700

    # The router reads what init wrote.
    after = run_cli("query", "that thing with the tokens", *flags(state, config), env=OFF)
    assert after.returncode == 0 and json.loads(after.stdout)["status"] == "success"


def test_init_never_replaces_a_file_without_force(fresh: tuple[Path, Path]) -> None:
    state, config = fresh
    state.mkdir(mode=0o700)
    (state / "backends.json").write_text('{"backends": ["totalrecall"]}')
    refused = run_cli("init", "--json", *flags(state, config), env=OFF)
    assert refused.returncode == 2
    answer = json.loads(refused.stdout)
    assert answer["written"] is False and answer["error_code"] == "BACKENDS_JSON_EXISTS"
    assert "--force" in refused.stderr.decode()
    assert (state / "backends.json").read_text() == '{"backends": ["totalrecall"]}'

    forced = run_cli("init", "--json", "--force", *flags(state, config), env=OFF)
    assert forced.returncode == 0, forced.stderr
    answer = json.loads(forced.stdout)
    on_disk = json.loads((state / "backends.json").read_text())
    assert answer["written"] is True and answer["backends"] == on_disk["backends"]
    assert answer["backends_json"] == str(state / "backends.json")
    assert not [p.name for p in state.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_config_check_fails_when_a_rule_cannot_be_answered(fresh: tuple[Path, Path], tmp_path: Path) -> None:
    state, config = fresh
    state.mkdir(mode=0o700)
    (state / "backends.json").write_text('{"backends": {"totalrecall": "ready"}}')
    ok = run_cli("config", "check", *flags(state, config))
    assert ok.returncode == 0, ok.stderr
    assert "every rule has a backend that can run here" in ok.stdout.decode()

    empty_root = tmp_path / "no-memory"
    empty_root.mkdir()
    broken = json.loads(config.read_text())
    broken["backends"]["totalrecall"]["root"] = str(empty_root)
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    proc = run_cli("config", "check", *flags(state, tmp_path / "broken.json"))
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert "rule 1 (exact_symbol): no backend of its chain can run here" in err
    assert "totalrecall: does not run here: no memory files under" in err
    assert "qmd: not listed in backends.json" in err
    assert "7 of 7 rules would always fail" in err


def test_backends_exits_1_when_backends_json_promises_what_cannot_run(fresh: tuple[Path, Path]) -> None:
    state, config = fresh
    state.mkdir(mode=0o700)
    (state / "backends.json").write_text('{"backends": {"totalrecall": "ready"}}')
    assert run_cli("backends", *flags(state, config), env=OFF).returncode == 0
    (state / "backends.json").write_text('{"backends": {"totalrecall": "ready", "cognee": "ready"}}')
    proc = run_cli("backends", "--json", *flags(state, config), env=OFF)
    assert proc.returncode == 1
    rows = {row["backend"]: row for row in json.loads(proc.stdout)["backends"]}  # the table is still printed
    assert rows["cognee"]["usable"] and not rows["cognee"]["runs_here"]
    assert "cognee (ready)" in proc.stderr.decode() and "init --force" in proc.stderr.decode()


def test_route_json_without_backends_json_prints_a_json_error(tmp_path: Path) -> None:
    proc = run_cli("route", "--json", "find the function parseAuthToken", "--state-dir", str(tmp_path))
    assert proc.returncode == 2
    answer = json.loads(proc.stdout)
    assert answer["status"] == "error" and answer["error_code"] == "BACKENDS_JSON_MISSING"
    assert answer["query_echo"] == "find the function parseAuthToken"


def test_top_level_help_starts_you_off_and_cuts_no_line() -> None:
    assert "Start here: `memory-router init`" in TOP_LEVEL
    commands = TOP_LEVEL.split("Commands:\n", 1)[1].splitlines()
    # Each command's first sentence fits whole (click cuts a longer one with "..."); the text is
    # click's own rendering (tests/unit/test_cold_start.py).
    assert commands and not [line for line in commands if line.rstrip().endswith("...")]


def test_the_demo_says_what_to_run_next_and_that_answers(tmp_path: Path) -> None:
    """After `memory-router demo --dir D`, the command it suggests (`query ... --state-dir
    D/state`, no --config) answers from the demo's memory."""
    import shlex

    demo = run_cli("demo", "--dir", str(tmp_path / "d"), env={**OFF, "MEMORY_ROUTER_CONFIG": ""})
    assert demo.returncode == 0, demo.stderr
    (line,) = [x for x in demo.stdout.decode().splitlines() if x.startswith("Your turn: ")]
    argv = shlex.split(line.removeprefix("Your turn: "))
    assert argv[0] == "memory-router" and "--config" not in argv
    proc = run_cli(*argv[1:], env={**OFF, "MEMORY_ROUTER_CONFIG": ""})
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["status"] == "success" and answer["results"]
