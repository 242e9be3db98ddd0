"""SKILL.md is the agent-facing OpenClaw skill: its frontmatter must load in OpenClaw (and any
AgentSkills/YAML reader), every command it documents must parse against the real CLI, and its
worked examples must be what the router actually prints."""

from __future__ import annotations

import json
import re
import shlex
from itertools import pairwise
from pathlib import Path

import click
import pytest
import yaml

from memory_router.cli.main import main as cli_main

from ..support.client import run_cli, starter_workspace

SKILL = Path(__file__).resolve().parents[2] / "SKILL.md"
TEXT = SKILL.read_text(encoding="utf-8")


def frontmatter() -> tuple[list[str], dict]:
    lines = TEXT.split("\n")
    assert lines[0] == "---", "SKILL.md must start with a '---' frontmatter line"
    end = lines.index("---", 1)
    block = lines[1:end]
    return block, yaml.safe_load("\n".join(block))


def fenced_blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, body, end offset) of every ``` fenced block, in order."""
    return [(m.group(1), m.group(2), m.end()) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def test_frontmatter_is_an_openclaw_skill() -> None:
    block, meta = frontmatter()
    assert meta["name"] == "memory-router"
    # AgentSkills: lowercase letters, digits and hyphens; OpenClaw: one line, short.
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", meta["name"])
    assert isinstance(meta["description"], str) and 20 < len(meta["description"]) < 160
    assert meta["metadata"]["openclaw"]["requires"]["bins"] == ["memory-router"]
    # OpenClaw's embedded-agent parser reads single-line keys only, with metadata as one line of
    # JSON; a multi-line YAML block would silently lose requires.bins there.
    for line in block:
        assert re.fullmatch(r"[a-z][\w-]*: \S.*", line), f"frontmatter line is not a single-line key: {line!r}"
    metadata_line = next(line for line in block if line.startswith("metadata: "))
    assert json.loads(metadata_line.removeprefix("metadata: ")) == meta["metadata"]


def documented_commands() -> list[list[str]]:
    commands = []
    for lang, body, _ in fenced_blocks(TEXT):
        if lang != "sh":
            continue
        for line in body.splitlines():
            if not line.startswith("memory-router "):
                continue
            words = shlex.split(line, comments=True)[1:]
            for stop in ("<", ">", "|"):  # shell redirections are not arguments
                if stop in words:
                    words = words[: words.index(stop)]
            commands.append(words)
    return commands


def resolve(words: list[str]) -> tuple[click.Command, list[str], str]:
    command: click.Command = cli_main
    path = "memory-router"
    ctx = click.Context(cli_main, info_name="memory-router")
    while isinstance(command, click.Group):
        name, words = words[0], words[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"SKILL.md documents `{path} {name}`, which the CLI does not have"
        command, path = sub, f"{path} {name}"
    return command, words, path


def test_skill_documents_commands() -> None:
    names = {tuple(resolve(words)[2].split()[1:]) for words in documented_commands()}
    # The commands an agent needs are all there.
    assert {("query",), ("route",), ("backends",), ("config", "check")} <= names


@pytest.mark.parametrize("words", documented_commands(), ids=lambda w: " ".join(w)[:60])
def test_every_documented_command_parses_against_the_cli(words: list[str]) -> None:
    command, args, path = resolve(words)
    # make_context parses exactly as a real invocation would: an unknown flag, a missing
    # argument or a bad value raises a UsageError here.
    try:
        command.make_context(path, list(args))
    except click.UsageError as exc:  # pragma: no cover - the failure message is the point
        pytest.fail(f"`{path} {' '.join(args)}` from SKILL.md does not parse: {exc.format_message()}")


def worked_examples() -> list[tuple[list[str], dict]]:
    """Each ```sh block holding one `memory-router query` line that is directly followed by a
    ```json block: the command and the envelope SKILL.md says it prints."""
    blocks = fenced_blocks(TEXT)
    pairs = []
    for (lang, body, end), (next_lang, next_body, _) in pairwise(blocks):
        lines = body.strip().splitlines()
        if lang == "sh" and next_lang == "json" and len(lines) == 1 and lines[0].startswith("memory-router query"):
            between = TEXT[end : TEXT.index("```json\n" + next_body, end)]
            assert between.strip() == "", "a worked example's envelope must directly follow its command"
            pairs.append((shlex.split(lines[0])[1:], json.loads(next_body)))
    return pairs


def _comparable(envelope: dict) -> dict:
    """Drop what legitimately changes between runs: timings, dates, and the exact relevance
    figures (Total Recall's recency factor decays with the age of dated claims, so the third
    decimal moves from day to day; which side of the 0.4 threshold they fall on must not)."""
    env = json.loads(json.dumps(envelope))
    env.pop("router_duration_ms")
    env.pop("backend_duration_ms")
    env["normalized_relevance"] = env["normalized_relevance"] >= 0.4
    for attempt in env["attempts"]:
        attempt.pop("duration_ms")
        attempt["normalized_relevance"] = attempt["normalized_relevance"] >= 0.4
    for result in env["results"]:
        result.pop("timestamp")
        result["relevance"] = result["relevance"] >= 0.4
        if "native_relevance" in result:  # the adapter's own figure, before calibration: decays alike
            result["native_relevance"] = result["native_relevance"] >= 0.4
        result["path"] = re.sub(r"\d{4}-\d{2}-\d{2}", "DATE", result["path"])
    return env


@pytest.mark.slow
def test_worked_examples_are_what_the_router_prints(tmp_path: Path) -> None:
    examples = worked_examples()
    assert len(examples) >= 5
    assert {env["status"] for _, env in examples} == {"success", "partial", "empty", "error"}
    state, config = starter_workspace(tmp_path / "demo")
    env = {"MEMORY_ROUTER_STATE_DIR": str(state), "MEMORY_ROUTER_CONFIG": str(config), "MEMORY_ROUTER_DAEMON": "off"}
    for args, documented in examples:
        proc = run_cli(*args, env=env)
        actual = json.loads(proc.stdout)
        assert _comparable(actual) == _comparable(documented), f"SKILL.md example `{' '.join(args)}` is stale"
        want_exit = (
            2
            if documented["error_code"] in ("EMPTY_QUERY", "QUERY_TOO_LONG")
            else (1 if documented["status"] == "error" else 0)
        )
        assert proc.returncode == want_exit


def test_readme_points_at_the_spec_and_the_skill() -> None:
    readme = (SKILL.parent / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"specification\s+is\s+\[SKILL.md\]", readme)
    assert "](SKILL.md)" in readme  # the install notes link the skill


# ---------------------------------------------------------------------- OpenClaw install metadata

SKILL_FOLDER = SKILL.parent / "skills" / "memory-router"
INSTALL_KINDS = {"brew": "formula", "node": "package", "go": "module", "uv": "package", "download": "url"}


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((SKILL.parent / "pyproject.toml").read_text(encoding="utf-8"))


def test_openclaw_can_install_the_package_and_link_the_homepage() -> None:
    """metadata.openclaw.install offers `uv tool install <this package>`, and homepage is the
    project's: OpenClaw silently drops an install entry without its kind's field."""
    _, meta = frontmatter()
    openclaw = meta["metadata"]["openclaw"]
    project = _pyproject()["project"]
    assert openclaw["homepage"] == project["urls"]["Homepage"]
    for entry in openclaw["install"]:
        assert entry["kind"] in INSTALL_KINDS and entry[INSTALL_KINDS[entry["kind"]]], entry
        assert entry["bins"] == ["memory-router"]
    uv = [e for e in openclaw["install"] if e["kind"] == "uv"]
    assert [e["package"] for e in uv] == [project["name"]]
    assert list(project["scripts"]) == ["memory-router"]  # the bin the install provides


def test_the_skill_folder_holds_a_real_copy_of_skill_md() -> None:
    """`openclaw skills install skills/memory-router` copies that folder; it refuses a symlinked
    SKILL.md ("symlink-escape"), so the folder holds a copy, kept identical to the top one."""
    copy = SKILL_FOLDER / "SKILL.md"
    assert not copy.is_symlink() and copy.is_file()
    assert copy.read_bytes() == SKILL.read_bytes(), (
        "skills/memory-router/SKILL.md differs: cp SKILL.md skills/memory-router/"
    )
    assert sorted(p.name for p in SKILL_FOLDER.iterdir()) == ["SKILL.md"]


TOOLS = SKILL.parent / ".tools"
NODE24 = sorted((TOOLS / "node24" / "node_modules").glob("node-*/bin/node"))
OPENCLAW = TOOLS / "openclaw" / "node_modules" / "openclaw" / "openclaw.mjs"


@pytest.mark.slow
@pytest.mark.skipif(not (NODE24 and OPENCLAW.is_file()), reason="OpenClaw is not in .tools (Node 24 + npm openclaw)")
def test_the_real_openclaw_installs_the_skill_folder_and_finds_it_eligible(tmp_path: Path) -> None:
    """The real `openclaw` (npm) installs skills/memory-router and reads its metadata as written."""
    import os
    import subprocess
    import sys

    bin_dir = Path(sys.executable).parent  # where this environment's memory-router script is
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{bin_dir}:{NODE24[0].parent}:{os.environ['PATH']}"}
    env.pop("OPENCLAW_STATE_DIR", None)

    def openclaw(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(NODE24[0]), str(OPENCLAW), *args], env=env, capture_output=True, text=True, timeout=180, check=False
        )

    installed = openclaw("skills", "install", str(SKILL_FOLDER), "--global")
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / ".openclaw" / "skills" / "memory-router" / "SKILL.md").read_bytes() == SKILL.read_bytes()
    info = openclaw("skills", "info", "memory-router", "--json")
    assert info.returncode == 0, info.stderr
    seen = json.loads(info.stdout)
    _, meta = frontmatter()
    assert seen["eligible"] is True and seen["homepage"] == meta["metadata"]["openclaw"]["homepage"]
    assert [(e["kind"], e["bins"]) for e in seen["install"]] == [("uv", ["memory-router"])]
