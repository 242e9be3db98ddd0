"""Every module and repository path the docstrings and the docs name exists.

Read: the docstrings (module, class, function) of ``memory_router/**/*.py``, and the whole text of
``docs/**/*.md``, ``README.md`` and ``SKILL.md``. What counts as a reference:

* **A dotted name** ``memory_router.x.y...``: its longest prefix that is a module must exist
  (``memory_router/x/y.py`` or ``memory_router/x/y/__init__.py``, or a package pyproject's
  ``package-dir`` maps in, such as ``memory_router.skill``); the name after it, if any, must be a
  submodule or a top-level name of that module (def, class, assignment, import) or a dunder.
* **A relative Sphinx reference** (``:mod:`.x.y```, ``:func:`~.x.f```...), read as Sphinx reads
  it: some module whose dotted name ends with the leading parts, then the rule above.
* **A path** in backticks (single or double): a word with a ``/`` whose first segment is a source
  folder of the repository (``memory_router``, ``backends``, ``tests``, ``bench``, ``docs``,
  ``openclaw-plugin``, ``examples``, ``skills``, ``.ci``) or a subpackage of memory_router/
  (``core/fallback.py``, ``backends/base.py``), and with none of ``* < > $ ~ { } ( ) [ ] = '"``
  (placeholders, globs, a user's files). It must exist relative to the repository root, to
  memory_router/ (``backends/base.py`` is ``memory_router/backends/base.py``) or to the page's own
  folder. A ``::test_name`` or ``:line`` suffix is dropped; a package-dir name
  (``memory_router/skill``) stands for the folder pyproject maps it from.

Paths outside backticks and names in comments are not read.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "memory_router"
PAGES = [ROOT / "README.md", ROOT / "SKILL.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCE_FOLDERS = {"memory_router", "backends", "tests", "bench", "docs", "openclaw-plugin", "examples", "skills", ".ci"}
FIRST_SEGMENTS = SOURCE_FOLDERS | {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
DOTTED = re.compile(r"(?<![\w./-])memory_router(?:\.[A-Za-z_]\w*)+")
RELATIVE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?(\.[\w.]+)`")
TICKED = re.compile(r"``?([^`\s]+?)``?")
NOT_A_PATH = re.compile(r"[*<>$~{}()\[\]=\"']|://")


@functools.cache
def mapped_packages() -> dict[str, Path]:
    """pyproject's package-dir: an installed package's dotted name -> the folder it is built from."""
    # One inline table on one line (tomllib is 3.11+; the project supports 3.10).
    line = re.search(r"^package-dir\s*=\s*\{(.*)\}", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    pairs = re.findall(r'"([^"]+)"\s*=\s*"([^"]+)"', line.group(1) if line else "")
    return {name: ROOT / folder for name, folder in pairs}


@functools.cache
def modules() -> dict[str, Path]:
    """Every module's dotted name -> its file (a package: its __init__.py; a mapped package: its folder)."""
    found: dict[str, Path] = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    for name, folder in mapped_packages().items():
        found.setdefault(name, folder)
    return found


@functools.cache
def top_level_names(path: Path) -> frozenset[str]:
    if path.is_dir():
        return frozenset(p.name for p in path.iterdir())
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [*tree.body, *(n for n in tree.body if isinstance(n, ast.If) for n in n.body)]
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def _rest_resolves(module: str, rest: list[str]) -> bool:
    if not rest or re.fullmatch(r"__\w+__", rest[0]):
        return True
    return f"{module}.{rest[0]}" in modules() or rest[0] in top_level_names(modules()[module])


def dotted_resolves(name: str) -> bool:
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        module = ".".join(parts[:k])
        if module in modules():
            return _rest_resolves(module, parts[k:])
    return False


def relative_resolves(ref: str) -> bool:
    parts = ref.lstrip(".").split(".")
    for module in modules():
        tail = module.split(".")
        for k in range(len(parts), 0, -1):
            if tail[-k:] == parts[:k] and _rest_resolves(module, parts[k:]):
                return True
    return False


def is_repo_path(word: str) -> bool:
    return "/" in word and not NOT_A_PATH.search(word) and word.split("/")[0] in FIRST_SEGMENTS


def path_resolves(word: str, page: Path) -> bool:
    path = re.split(r"::|:\d", word)[0].rstrip(".,;:")
    for name, folder in mapped_packages().items():
        prefix = name.replace(".", "/") + "/"
        if name != "memory_router" and (path + "/").startswith(prefix):
            path = str((folder / path[len(prefix) :]).relative_to(ROOT))
    return any((base / path).exists() for base in (ROOT, PKG, page.parent))


def texts() -> Iterator[tuple[Path, int, str]]:
    """(file, first line, text) for every docstring of the package and every page."""
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    yield path, node.body[0].lineno, doc
    for page in PAGES:
        yield page, 1, page.read_text(encoding="utf-8")


def broken_references() -> list[str]:
    broken = []
    for path, first, text in texts():
        where = str(path.relative_to(ROOT))

        def at(offset: int, what: str) -> str:
            return f"{where}:{first + text.count(chr(10), 0, offset)}: {what}"  # noqa: B023 - used at once

        for m in DOTTED.finditer(text):
            if not dotted_resolves(m.group(0)):
                broken.append(at(m.start(), m.group(0)))
        for m in RELATIVE.finditer(text):
            if not relative_resolves(m.group(1)):
                broken.append(at(m.start(), m.group(0)))
        for m in TICKED.finditer(text):
            if is_repo_path(m.group(1)) and not path_resolves(m.group(1), path):
                broken.append(at(m.start(), m.group(1)))
    return broken


def test_every_module_and_path_the_docs_name_exists() -> None:
    broken = broken_references()
    assert broken == [], "references to modules or files that do not exist (renamed? moved?):\n" + "\n".join(broken)


@pytest.mark.parametrize(
    "name, resolves",
    [
        ("memory_router.contract", True),
        ("memory_router.contract.ERROR_CODES", True),
        ("memory_router.backends.common.files", True),
        ("memory_router.__file__", True),
        ("memory_router.skill", True),
        ("memory_router.router", False),
        ("memory_router.contract.NO_SUCH_NAME", False),
    ],
)
def test_a_dotted_name_resolves_to_a_module_and_one_of_its_names(name: str, resolves: bool) -> None:
    assert dotted_resolves(name) is resolves


@pytest.mark.parametrize(
    "word, resolves",
    [
        ("memory_router/backends/common/files.py", True),
        ("backends/base.py", True),
        ("core/fallback.py", True),
        ("tests/unit/test_contract.py::test_backends_failing_exits_1", True),
        ("memory_router/skill/SKILL.md", True),
        ("backends/_process.py", False),
        ("tests/unit/test_client_copies.py", False),
    ],
)
def test_a_path_resolves_from_the_root_the_package_or_the_page(word: str, resolves: bool) -> None:
    assert is_repo_path(word)
    assert path_resolves(word, ROOT / "docs" / "cli.md") is resolves


@pytest.mark.parametrize("word", ["memory/daily/YYYY-MM-DD.md", "<state dir>/router.log", "~/.openclaw/state", "a/b"])
def test_what_is_not_a_repository_path_is_not_read_as_one(word: str) -> None:
    assert not is_repo_path(word)


def test_relative_references_are_read_as_sphinx_reads_them() -> None:
    assert relative_resolves(".common.process") and relative_resolves(".statedir.problem")
    assert not relative_resolves("._process")
