"""The commands the README and the docs/ pages give name files that exist and the interpreter
`.ci/setup` installs into; docs/benchmarks.md, the benchmarks' page, lists every bench script."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BENCHMARKS = (ROOT / "docs" / "benchmarks.md").read_text()
DOCS = {p: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]}


def test_every_bench_script_the_docs_name_exists_and_the_benchmarks_page_names_every_script() -> None:
    for page, text in DOCS.items():
        named = set(re.findall(r"\bbench/([\w-]+\.py)\b", text))
        missing = sorted(n for n in named if not (ROOT / "bench" / n).is_file())
        assert missing == [], f"{page.relative_to(ROOT)} names bench scripts that do not exist: {missing}"
    named = set(re.findall(r"\bbench/([\w-]+\.py)\b", BENCHMARKS))
    scripts = {p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_") and p.name != "corpus.py"}
    assert sorted(scripts - named) == [], "bench scripts docs/benchmarks.md does not list"


def test_the_first_lines_give_the_two_commands() -> None:
    """CI and a newcomer start from the README's first code block: setup + demo, then the tests."""
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["bash .ci/setup && memory-router demo", "python3 -m pytest -q"]
    run = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pytest -q" in run and "bash .ci/setup" in run


def test_commands_use_the_interpreter_ci_setup_installs_into() -> None:
    setup = (ROOT / ".ci" / "setup").read_text()
    assert "python3 -m pip install" in setup
    for page, text in DOCS.items():
        assert ".venv/bin/python" not in text, f"{page.relative_to(ROOT)} runs a .venv that .ci/setup does not create"
