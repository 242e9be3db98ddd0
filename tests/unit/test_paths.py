"""Where memory-router looks for its files (memory_router.config.paths; docs/configuration.md): flag >
MEMORY_ROUTER_* > OPENCLAW_* (read as OpenClaw reads it: the root) > defaults, the older layout
under $OPENCLAW_STATE_DIR, the config in the state dir, and OpenClaw's agent workspace."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_router.backends import BackendContext
from memory_router.backends.totalrecall.adapter import Settings, resolve_root
from memory_router.config import paths
from memory_router.config.json5 import JSON5Error, loads

from ..support.budget import examples
from ..support.client import run_cli, starter_workspace

HOME = "/home/u"
VALUES = st.one_of(st.none(), st.sampled_from(["", "  ", "/abs/dir", "~/rel", "~", "/abs/other"]))


def expected_state_dir(flag: str | None, own: str | None, openclaw: str | None) -> str:
    """The documented order, written out independently of the implementation."""

    def home(p: str) -> str:
        return HOME + p[1:] if p == "~" or p.startswith("~/") else p

    if flag:
        return home(flag)
    if own and own.strip():
        return home(own.strip())
    if openclaw and openclaw.strip():
        return os.path.join(home(openclaw.strip()), "state")
    return HOME + "/.openclaw/state"


@settings(max_examples=examples(300), deadline=None)
@given(flag=VALUES, own=VALUES, openclaw=VALUES)
def test_state_dir_precedence(flag: str | None, own: str | None, openclaw: str | None) -> None:
    environ = {"HOME": HOME}
    if own is not None:
        environ["MEMORY_ROUTER_STATE_DIR"] = own
    if openclaw is not None:
        environ["OPENCLAW_STATE_DIR"] = openclaw
    got = paths.resolve_state_dir(flag, environ)
    assert got == expected_state_dir(flag, own, openclaw)
    assert paths.state_dir(flag, environ) == Path(got)
    assert paths.resolve_backends_json(got) == os.path.join(got, "backends.json")


def test_openclaw_state_dir_is_the_root_and_lossless_agrees(tmp_path: Path) -> None:
    from memory_router.backends.lossless.adapter import Settings as LosslessSettings
    from memory_router.backends.lossless.adapter import resolve_db_path

    root = tmp_path / "oc"
    environ = {"HOME": str(tmp_path), "OPENCLAW_STATE_DIR": str(root)}
    assert paths.resolve_state_dir(None, environ) == str(root / "state")
    assert paths.openclaw_root(environ) == str(root)
    root.mkdir()
    (root / "lcm.db").write_bytes(b"")  # lossless-claw's own place: the root, not state/
    ctx = BackendContext(state_dir=root / "state", environ=environ, cwd=tmp_path)
    assert resolve_db_path("lossless", LosslessSettings(), ctx).path == root / "lcm.db"


@pytest.mark.slow
def test_the_older_layout_is_used_with_one_warning(tmp_path: Path) -> None:
    """$OPENCLAW_STATE_DIR used to be the state dir itself: a backends.json there (and none in
    state/) keeps working, with a warning that says how to move on."""
    (tmp_path / "backends.json").write_text('{"backends": ["totalrecall"]}')
    code = (
        "import os; from memory_router.config import paths\n"
        "print(paths.resolve_state_dir(None)); print(paths.resolve_state_dir(None))\n"
    )
    env = {**os.environ, "OPENCLAW_STATE_DIR": str(tmp_path)}
    env.pop("MEMORY_ROUTER_STATE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout.split() == [str(tmp_path), str(tmp_path)]
    assert proc.stderr.count("warning") == 1
    assert f"MEMORY_ROUTER_STATE_DIR={tmp_path}" in proc.stderr and str(tmp_path / "state") in proc.stderr
    # Once state/backends.json exists, the new layout wins and nothing is said.
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "backends.json").write_text("[]")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert proc.stdout.split() == [str(tmp_path / "state")] * 2 and proc.stderr == ""


def test_config_precedence_and_the_state_dirs_own_config(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    packaged = paths.packaged_config_str()
    assert paths.resolve_config(None, str(state), {}) == packaged
    assert paths.config_file(None, state, {}) is None  # None: the packaged default
    (state / "router-config.json").write_text("{}")
    assert paths.resolve_config(None, str(state), {}) == str(state / "router-config.json")
    env = {"MEMORY_ROUTER_CONFIG": "/env/c.json"}
    assert paths.resolve_config(None, str(state), env) == "/env/c.json"
    assert paths.resolve_config("/flag/c.json", str(state), env) == "/flag/c.json"


@pytest.mark.slow
def test_the_demo_state_dir_answers_with_state_dir_alone(tmp_path: Path) -> None:
    """After `memory-router demo --dir D`, `query --state-dir D/state` finds the demo's config."""
    state, _ = starter_workspace(tmp_path / "demo")
    env = {"MEMORY_ROUTER_DAEMON": "off", "MEMORY_ROUTER_CONFIG": ""}
    proc = run_cli("query", "that thing with the tokens", "--state-dir", str(state), env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "success"


# ---------------------------------------------------------------------- OpenClaw's workspace


def test_workspace_follows_openclaws_resolution(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env: dict[str, str] = {"HOME": str(home)}
    assert paths.openclaw_workspace(env)[0] == str(home / ".openclaw" / "workspace")
    env["OPENCLAW_PROFILE"] = "work"
    assert paths.openclaw_workspace(env)[0] == str(home / ".openclaw-work" / "workspace")
    env["OPENCLAW_STATE_DIR"] = str(tmp_path / "oc")
    assert paths.openclaw_workspace(env)[0] == str(tmp_path / "oc" / "workspace")
    env["OPENCLAW_WORKSPACE_DIR"] = str(tmp_path / "ws-env")
    assert paths.openclaw_workspace(env)[0] == str(tmp_path / "ws-env")
    # openclaw.json is JSON5, as OpenClaw writes and reads it.
    (tmp_path / "oc").mkdir()
    (tmp_path / "oc" / "openclaw.json").write_text(
        "// written by `openclaw config set`\n{\n  agents: {defaults: {workspace: '~/agent-ws', model: 'x',},},\n}\n"
    )
    assert paths.openclaw_workspace(env) == (
        str(home / "agent-ws"),
        f"agents.defaults.workspace in {tmp_path / 'oc' / 'openclaw.json'}",
    )
    env["OPENCLAW_CONFIG_PATH"] = str(tmp_path / "elsewhere.json")  # no such file: as if absent
    assert paths.openclaw_workspace(env)[0] == str(tmp_path / "ws-env")


@pytest.mark.parametrize("shape", ["entries", "list"])
def test_each_agent_s_workspace_is_read_from_either_roster_shape(tmp_path: Path, shape: str) -> None:
    """OpenClaw 2026.9 keeps the roster as ``agents.entries`` (keyed by id; what `openclaw config
    set agents.list ...` writes now) or the older ``agents.list[]``: both name each agent's
    workspace, and the agent marked default owns ``agents.defaults.workspace``."""
    from memory_router.config.openclaw import agent_workspace

    agents: dict[str, dict[str, object]] = {
        "alice": {"default": True, "workspace": "~/alice"},
        "Bob": {"workspace": str(tmp_path / "bob")},
    }
    agents["carol"] = {}
    roster = agents if shape == "entries" else [{"id": k, **v} for k, v in agents.items()]
    (tmp_path / "openclaw.json").write_text(
        json.dumps({"agents": {"defaults": {"workspace": "~/shared"}, shape: roster}})
    )
    env = {"HOME": str(tmp_path / "home"), "OPENCLAW_STATE_DIR": str(tmp_path)}
    where = "agents.entries.alice" if shape == "entries" else "agents.list[alice]"
    assert agent_workspace("alice", env) == (
        str(tmp_path / "home" / "alice"),
        f"{where}.workspace in {tmp_path}/openclaw.json",
    )
    assert agent_workspace("bob", env)[0] == str(tmp_path / "bob")  # ids compare case-insensitively
    assert agent_workspace("carol", env)[0] == str(tmp_path / "home" / "shared" / "carol")  # no workspace of its own
    # The entry marked default has a workspace of its own; without one it would own the default.
    del agents["alice"]["workspace"]
    roster = agents if shape == "entries" else [{"id": k, **v} for k, v in agents.items()]
    (tmp_path / "openclaw.json").write_text(
        json.dumps({"agents": {"defaults": {"workspace": "~/shared"}, shape: roster}})
    )
    assert agent_workspace("alice", env)[0] == str(tmp_path / "home" / "shared")


def test_broken_openclaw_json_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "openclaw.json").write_text("{agents: {defaults: {workspace: ")
    env = {"HOME": str(tmp_path), "OPENCLAW_STATE_DIR": str(tmp_path)}
    assert paths.openclaw_workspace(env)[0] == str(tmp_path / "workspace")


def test_total_recall_uses_the_workspace_when_there_is_no_git_repository(tmp_path: Path) -> None:
    home = tmp_path / "home"
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    env = {"HOME": str(home)}
    ctx = BackendContext(state_dir=tmp_path, environ=env, cwd=outside)
    assert resolve_root(Settings(), ctx) is None  # no workspace folder yet: nothing to read
    workspace = home / ".openclaw" / "workspace"
    (workspace / "memory").mkdir(parents=True)
    assert resolve_root(Settings(), ctx) == workspace
    # A git repository, OPENCLAW_REPO_ROOT and the setting still come first.
    (outside / ".git").mkdir()
    assert resolve_root(Settings(), ctx) == outside
    ctx_env = BackendContext(state_dir=tmp_path, environ={**env, "OPENCLAW_REPO_ROOT": "/r"}, cwd=outside)
    assert resolve_root(Settings(), ctx_env) == Path("/r")


# ---------------------------------------------------------------------- JSON5

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(300), deadline=None)
@given(value=JSON_VALUES)
def test_json5_reads_every_json_document(value: object) -> None:
    assert loads(json.dumps(value)) == value
    assert loads(json.dumps(value, indent=2, ensure_ascii=False)) == value


IDENT = st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$]{0,8}", fullmatch=True).filter(
    lambda k: k not in ("true", "false", "null", "Infinity", "NaN")
)


@settings(max_examples=examples(200), deadline=None)
@given(pairs=st.dictionaries(IDENT, st.integers() | st.text(alphabet="ab c'\"\\\n", max_size=6), max_size=5))
def test_json5_extensions(pairs: dict) -> None:
    """Unquoted keys, single quotes, comments and trailing commas, as OpenClaw's files have them."""

    def single_quoted(s: str) -> str:
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"

    body = "".join(f"  {k}: {single_quoted(v) if isinstance(v, str) else v}, // note\n" for k, v in pairs.items())
    assert loads(f"/* header */\n{{\n{body}}}\n") == pairs


def test_json5_numbers_and_errors() -> None:
    assert loads("[0x1F, +1, .5, 5., -Infinity, 1e3]") == [31, 1, 0.5, 5.0, -math.inf, 1000.0]
    assert math.isnan(loads("NaN"))
    assert loads('"a\\\nb"') == "ab"  # an escaped line break continues the string
    for bad, where in (("{a: 1", "line 1"), ("[1,\n 2 3]", "line 2"), ("'open", "line 1"), ("{} x", "line 1")):
        with pytest.raises(JSON5Error, match=where):
            loads(bad)
