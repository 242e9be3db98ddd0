"""Every environment variable an adapter reads is declared (memory_router.config.envvars, each adapter's
``ENV_VARS``), so the thin client compares it before trusting a warm daemon's answer.

The scan parses every module in ``backends/`` and finds each environment read: ``os.environ[...]``,
``os.environ.get(...)``, ``os.getenv(...)``, and the same on a mapping named ``environ``/``env``
(``context.environ.get``, ``env["HOME"]``). A read with a literal name must be declared by the
adapter owning the module; a read with a computed name must be one of the known ones below.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from memory_router.backends import ADAPTER_MODULES, adapter_module
from memory_router.config import envvars

BACKENDS = Path(__file__).resolve().parents[2] / "memory_router" / "backends"


# A module's adapter is its folder (backends/qmd/*.py reads what the qmd adapter declares); the
# modules outside an adapter's folder are shared code, whose reads must be in the router's own
# set or in every adapter's.
def owner(path: Path) -> str | None:
    folder = path.relative_to(BACKENDS).parts[0]
    return folder if folder in envvars.BY_ADAPTER else None


# Reads whose name is computed, by (file, enclosing function): what they may read, checked here.
DYNAMIC = {
    # the three model variables, from _qmd_locate.MODEL_ENV
    ("qmd/locate.py", "configured_models"): "qmd model variables",
    # $NAME in a configured db_path: published by the daemon via lossless.config_env_vars
    ("lossless/location.py", "_expand_vars"): "db_path variables",
    # _secret(setting, environ, "COGNEE_API_KEY"): the names its callers pass
    ("cognee/adapter.py", "_secret"): "cognee secret variables",
}

_MAPPINGS = ("environ", "env")


def _is_env(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text.split(".")[-1] in _MAPPINGS or text.endswith(".environ")


def env_reads(source: str) -> list[tuple[str | None, str, int]]:
    """(name or None if computed, enclosing function, line) of each environment read."""
    tree = ast.parse(source)
    reads: list[tuple[str | None, str, int]] = []

    def literal(node: ast.expr | None) -> str | None:
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            attr, target = node.func.attr, node.func.value
            if (attr in ("get", "pop") and _is_env(target)) or ast.unparse(node.func) == "os.getenv":
                reads.append((literal(node.args[0]), function, node.lineno))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_env(node.value):
            reads.append((literal(node.slice), function, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return reads


def test_the_scanner_finds_each_kind_of_read() -> None:
    src = (
        "import os\n"
        "def f(context, env):\n"
        "    os.environ['A']; os.environ.get('B'); os.getenv('C'); context.environ.get('D')\n"
        "    env['E']; env.get(name); env['X'] = 1; env.setdefault('Y', '1'); os.environ.pop('F', None)\n"
    )
    assert [r[0] for r in env_reads(src)] == ["A", "B", "C", "D", "E", None, "F"]


def test_every_environment_read_in_backends_is_declared() -> None:
    shared = envvars.ROUTER | frozenset.intersection(*envvars.BY_ADAPTER.values())
    undeclared, unknown_dynamic, scanned = [], [], 0
    for path in sorted(BACKENDS.rglob("*.py")):
        adapter, relative = owner(path), path.relative_to(BACKENDS).as_posix()
        declared = envvars.BY_ADAPTER[adapter] if adapter else shared
        for name, function, line in env_reads(path.read_text(encoding="utf-8")):
            scanned += 1
            where = f"backends/{relative}:{line} ({function})"
            if name is None:
                if (relative, function) not in DYNAMIC:
                    unknown_dynamic.append(where)
            elif name not in declared:
                undeclared.append(f"{where}: {name} (add it to memory_router/config/envvars.py)")
    assert scanned >= 10  # the scan sees the adapters' reads at all
    assert not undeclared, undeclared
    assert not unknown_dynamic, f"environment reads with computed names: {unknown_dynamic}"


def test_the_computed_reads_are_declared_too() -> None:
    from memory_router.backends.lossless import adapter as lossless
    from memory_router.backends.qmd.locate import MODEL_ENV

    assert set(MODEL_ENV.values()) <= envvars.QMD
    cognee = ast.parse((BACKENDS / "cognee" / "adapter.py").read_text(encoding="utf-8"))
    secret_names = {
        call.args[2].value
        for call in ast.walk(cognee)
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "_secret" and isinstance(call.args[2], ast.Constant)
    }
    assert secret_names == {"COGNEE_API_KEY", "COGNEE_PASSWORD"} and secret_names <= envvars.COGNEE
    settings = lossless.Settings(db_path="${LCM_HOME}/x/$OTHER_DIR/lcm.db")
    assert lossless.config_env_vars(settings) == {"LCM_HOME", "OTHER_DIR"}


def test_the_daemon_publishes_names_its_config_adds() -> None:
    import json

    from memory_router.config.paths import packaged_config
    from memory_router.config.router_config import parse_config
    from memory_router.daemon.socket_server import env_names

    data = json.loads(packaged_config().read_text())
    data["backends"]["lossless"]["db_path"] = "$MY_DB_DIR/lcm.db"
    config = parse_config(data, Path("router-config.json"))
    names = env_names(config)
    assert "MY_DB_DIR" in names and envvars.ALL <= names


@pytest.mark.parametrize("type_name", sorted(ADAPTER_MODULES))
def test_each_adapter_exposes_its_env_vars(type_name: str) -> None:
    module = adapter_module(type_name)
    assert isinstance(module.ENV_VARS, frozenset) and module.ENV_VARS == envvars.BY_ADAPTER[type_name]
    assert module.ENV_VARS <= envvars.ALL


@pytest.mark.slow
def test_the_client_imports_no_adapter() -> None:
    code = (
        "import sys, memory_router.client.thin\n"
        "bad = [m for m in sys.modules if m.startswith(('memory_router.backends', 'pydantic', 'click'))]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
