"""No import cycles between the modules of memory_router/ (issue 23), and a pure core (issue 32).

The graph is read from the source with ``ast``, so it counts every ``import`` statement: at module
level, inside functions (the lazy imports that keep the one-shot query's cold start small) and under
``if TYPE_CHECKING:`` (not executed, but still a dependency of the design: a module that names
another's type depends on it). Left out: ``importlib.import_module("...")`` strings (cli's
LAZY_COMMANDS, which look subcommands up by name) and the implicit import of a package's
``__init__`` when one of its submodules is imported.

``memory_router/core/`` is the pipeline's decisions and nothing else: every module there imports
only what does no I/O (:data:`PURE_IMPORTS`, wherever the import stands; a name imported under
``if TYPE_CHECKING:`` is only a type) and, of the project, only core itself and what
:data:`CORE_READS` lists. The wiring (router, drivers, router.log) is ``memory_router/routing/``.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folder -> the package it installs as.
PACKAGES = {ROOT / "memory_router": "memory_router"}


def module_files(packages: Mapping[Path, str]) -> dict[str, Path]:
    """Every module's dotted name -> its file (a package is its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for folder, package in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            # A subfolder already mapped to a package of its own (backends/ inside memory_router/ never is).
            found.setdefault(name, path)
    return found


@functools.cache
def import_statements(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, wherever it stands (read once, then asked twice: for its
    imports, and for the packages it names only to reach a submodule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def from_target(node: ast.ImportFrom, path: Path, module: str) -> str:
    """The absolute name of the module a ``from ... import`` in ``path`` (module ``module``) reads."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_names(path: Path, module: str) -> Iterator[str]:
    """The dotted names each import statement of ``path`` can bind (candidates, resolved below)."""
    for node in import_statements(path):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = from_target(node, path, module)
            yield target
            # `from pkg import name`: name may be a submodule (then that module is the dependency).
            yield from (f"{target}.{alias.name}" for alias in node.names if alias.name != "*")


def import_graph(packages: Mapping[Path, str]) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    files = module_files(packages)
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for target in imported_names(path, name):
            if target in files and target != name:
                graph[name].add(target)
    return graph


def _only_submodules(path: Path, module: str, files: Mapping[str, Path]) -> set[str]:
    """Packages that ``path`` names only as ``from pkg import submodule[, submodule]``."""
    only: set[str] = set()
    other: set[str] = set()
    for node in import_statements(path):
        if isinstance(node, ast.ImportFrom):
            target = from_target(node, path, module)
            if all(f"{target}.{alias.name}" in files for alias in node.names):
                only.add(target)
            else:
                other.add(target)
        elif isinstance(node, ast.Import):
            other.update(alias.name for alias in node.names)
    return only - other


def project_graph(packages: Mapping[Path, str] = PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports; ``from pkg import submodule`` depends on the
    submodule, not on ``pkg`` (unless the file takes something else from ``pkg`` too)."""
    files = module_files(packages)
    graph = import_graph(packages)
    for name, path in files.items():
        graph[name] -= _only_submodules(path, name, files)
    return graph


def components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def connect(node: str) -> None:  # the graph has ~100 nodes: recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def shortest_cycle(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """``[start, ..., start]`` through the component's alphabetically first module (breadth-first)."""
    start = min(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in a component but on no cycle")


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One shortest cycle naming each tangle of modules that import each other, sorted."""
    return sorted(shortest_cycle(graph, component) for component in components(graph))


def test_the_modules_of_memory_router_and_backends_import_each_other_without_a_cycle():
    graph = project_graph()
    assert "memory_router.daemon.service" in graph and "memory_router.backends.qmd.adapter" in graph
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


def test_the_graph_counts_imports_in_functions_under_type_checking_and_relative_ones(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import C\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg import c\n")  # imports c, not the package: no edge to pkg
    graph = project_graph({pkg: "pkg"})
    assert graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]


def test_each_tangle_is_named_once_by_a_shortest_cycle_and_a_chain_is_no_cycle():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"b"}, "d": {"a"}, "x": {"y"}, "y": {"z"}, "z": {"x"}}
    assert cycles(graph) == [["a", "b", "a"], ["x", "y", "z", "x"]]
    assert cycles({"x": {"y"}, "y": {"z"}, "z": set()}) == []


# ---------------------------------------------------------------------------------- a pure core

CORE = "memory_router.core"
# What the core reads outside itself: the public contract's facts, the seam's values (the request,
# the response, a result and the backend codes the machine decides with; never an adapter), the
# shared word lists, and the JSON writer that escapes a name that is not UTF-8.
CORE_READS = frozenset(
    {
        "memory_router.contract",
        "memory_router.backends.base",
        "memory_router.backends.common.words",
        "memory_router.output.jsonout",
    }
)
# Every top-level module a core module may import at run time: computation only. Not here, on
# purpose: asyncio, threading, concurrent, subprocess, socket, select, signal, sqlite3, os, io,
# pathlib, shutil, tempfile, fcntl, urllib, http, httpx, pydantic, click.
PURE_IMPORTS = frozenset(
    {
        "__future__",
        "annotationlib",
        "bisect",
        "collections",
        "dataclasses",
        "datetime",
        "enum",
        "fnmatch",
        "functools",
        "heapq",
        "itertools",
        "math",
        "operator",
        "re",
        "string",
        "sys",  # sys.modules only (frozen asks whether typing is loaded); never sys.stdout/stdin
        "time",  # clocks only: the machine is told the time, the rule budget and cooldown read one
        "types",
        "typing",
        "typing_extensions",
        "unicodedata",
        "orjson",  # JSON encoding of the envelope
        "regex",  # the signal regexes, with their match timeout
        "memory_router",  # held to CORE_READS below
    }
)


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ``id`` of every import statement that stands under ``if TYPE_CHECKING:``."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def runtime_imports(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, top-level module)`` of every absolute import ``path`` runs (anywhere in the file,
    in functions too; not those under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.partition(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.partition(".")[0]


def impure_imports(files: Iterable[tuple[str, Path]]) -> list[str]:
    """``module:line imports name`` for each run-time import outside :data:`PURE_IMPORTS`."""
    return [
        f"{name}:{line} imports {top}"
        for name, path in files
        for line, top in runtime_imports(path)
        if top not in PURE_IMPORTS
    ]


def arrows_out_of(graph: Mapping[str, set[str]], package: str) -> dict[str, set[str]]:
    """``module -> the project modules outside package it imports``, for package's modules."""
    inside = (package, f"{package}.")
    out = {
        name: {t for t in targets if not t.startswith(inside) and t != package}
        for name, targets in graph.items()
        if name.startswith(inside)
    }
    return {name: targets for name, targets in out.items() if targets}


def test_the_core_does_no_io_it_imports_only_pure_modules():
    files = [(name, path) for name, path in module_files(PACKAGES).items() if name.startswith(CORE)]
    assert {"memory_router.core.fallback", "memory_router.core.rules", "memory_router.core.attempts"} <= {
        name for name, _ in files
    }
    found = impure_imports(files)
    assert not found, (
        "memory_router/core/ is the pipeline's decisions, without I/O; move the part that needs these to "
        "memory_router/routing/ (or import a name only under `if TYPE_CHECKING:`):\n" + "\n".join(found)
    )


def test_the_core_reads_only_the_contract_the_seams_values_and_the_word_lists():
    out = arrows_out_of(project_graph(), CORE)
    wrong = {name: sorted(targets - CORE_READS) for name, targets in out.items() if targets - CORE_READS}
    assert not wrong, f"core imports beyond {sorted(CORE_READS)} (the wiring belongs in routing/): {wrong}"
    # The arrows that used to point back up are gone: core reads no config, no adapter, no routing.
    everything = set().union(*out.values())
    assert not {t for t in everything if t.startswith(("memory_router.config", "memory_router.routing"))}


def test_the_purity_check_sees_imports_in_functions_and_lets_types_be(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from __future__ import annotations\n"
        "import re\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pathlib import Path\n"
        "def later():\n"
        "    import asyncio\n"
        "    from os import path\n"
    )
    assert impure_imports([("m", module)]) == ["m:7 imports asyncio", "m:8 imports os"]
    graph = {"p.a": {"p.b", "q.x"}, "p.b": set(), "q.x": {"p.a"}}
    assert arrows_out_of(graph, "p") == {"p.a": {"q.x"}}


# ---------------------------------------------------------------------------------- the seam

BACKENDS = "memory_router.backends"
# What sits above the seam: an adapter knows none of it (the router's wiring, the daemon, the
# command line, the thin client). What an adapter reports outside a query reaches router.log
# through BackendContext.report, which the daemon gives it.
ABOVE_THE_SEAM = ("memory_router.routing", "memory_router.daemon", "memory_router.cli", "memory_router.client")


def test_the_adapters_import_nothing_above_the_seam():
    out = arrows_out_of(project_graph(), BACKENDS)
    assert out, "the adapters read the contract, the config and the core's values"
    wrong = {name: sorted(t for t in targets if t.startswith(ABOVE_THE_SEAM)) for name, targets in out.items()}
    wrong = {name: targets for name, targets in wrong.items() if targets}
    assert not wrong, f"adapters importing what sits above the seam (pass it in through BackendContext): {wrong}"
