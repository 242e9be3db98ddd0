"""README.md's commands name files that exist and the interpreter `.ci/setup` installs into."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_bench_script_the_readme_names_exists_and_every_script_is_named() -> None:
    named = set(re.findall(r"\bbench/([\w-]+\.py)\b", README))
    missing = sorted(n for n in named if not (ROOT / "bench" / n).is_file())
    assert missing == [], f"README.md names bench scripts that do not exist: {missing}"
    scripts = {p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_") and p.name != "corpus.py"}
    assert sorted(scripts - named) == [], "bench scripts README.md's Benchmarks section does not list"


def test_commands_use_the_interpreter_ci_setup_installs_into() -> None:
    setup = (ROOT / ".ci" / "setup").read_text()
    assert "python3 -m pip install" in setup
    assert ".venv/bin/python" not in README, "README.md runs a .venv that .ci/setup does not create"
