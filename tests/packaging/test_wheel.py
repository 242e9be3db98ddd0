"""The package as a user installs it (issue 24, item 4): a wheel built from this checkout,
installed in a fresh venv, must carry everything its features need and give hints that fit an
installed copy. CI installs the checkout in editable mode, which hides a missing package file;
these tests do not.

The venv sees the system's site-packages for the dependencies (the machine is offline), but
memory_router itself must come from the wheel: each test asserts where it was imported from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from memory_router.cli.openclaw_setup import plugin_files

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
QMD_PACKAGE = TOOLS / "qmd" / "node_modules" / "@tobilu" / "qmd"
NODE22 = sorted((TOOLS / "node22" / "node_modules").glob("node-*/bin/node"))

# What a feature needs besides the Python modules, by its path inside the wheel.
PACKAGE_FILES = {
    "memory_router/backends/qmd/qmd_engine.mjs": REPO / "memory_router/backends/qmd/qmd_engine.mjs",  # warm engine
    "memory_router/skill/SKILL.md": REPO / "SKILL.md",  # the OpenClaw skill
    "memory_router/router-config.json": REPO / "router-config.json",
}

pytestmark = pytest.mark.slow


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **kw)


def _clean_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's tracked files (and new ones not ignored), as a fresh clone has them: building
    in the checkout itself reads its memory_router.egg-info (an editable install's), whose file list
    puts modules in the wheel that pyproject.toml's package list leaves out."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    copy = tmp_path_factory.mktemp("checkout") / "memory-router"
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():  # a symlink to a file is copied as the link (router-config.json's)
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name, follow_symlinks=False)
    return copy


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(out),
            str(_clean_copy(tmp_path_factory)),
        ]
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = out.glob("memory_router-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed (dependencies from the system's site-packages)."""
    root = tmp_path_factory.mktemp("venv") / "v"
    base = getattr(sys, "_base_executable", sys.executable)
    made = _run([base, "-m", "venv", "--system-site-packages", str(root)])
    assert made.returncode == 0, made.stderr
    installed = _run([str(root / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)])
    assert installed.returncode == 0, installed.stderr[-3000:]
    return root


def installed_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_ROUTER_", "OPENCLAW_"))}
    env.pop("PYTHONPATH", None)
    return {**env, "MEMORY_ROUTER_DAEMON": "off", **extra}


def test_the_wheel_carries_the_engine_the_skill_and_the_licence(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for inside, source in PACKAGE_FILES.items():
            assert inside in names, f"the wheel lacks {inside}"
            assert z.read(inside) == source.read_bytes(), f"{inside} is not {source.relative_to(REPO)}"
        licences = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licences and z.read(licences[0]) == (REPO / "LICENSE").read_bytes()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata


def test_the_wheel_carries_every_module_of_the_package(wheel: Path) -> None:
    # pyproject.toml lists the packages by hand: a new folder missing there installs as nothing
    # (an installed `query` then fails with ModuleNotFoundError where a checkout works).
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "memory_router").rglob("*.py")}
    missing = sorted(m for m in modules if m not in names and "/openclaw_plugin/" not in m)
    assert not missing, f"the wheel lacks {missing}: add their packages to pyproject.toml"


PLUGIN = REPO / "openclaw-plugin"
PLUGIN_INSIDE = "memory_router/openclaw_plugin/"


def test_the_wheel_carries_the_plugin_as_npm_packs_it(wheel: Path) -> None:
    """The plugin's files in the wheel are the ones it ships (package.json's ``files``), byte for
    byte, with the wheel's version: never its tests, tsconfig.json, package-lock.json or node_modules
    (a checkout after ``npm ci`` has them)."""
    shipped = plugin_files(PLUGIN)
    with zipfile.ZipFile(wheel) as z:
        inside = sorted(n.removeprefix(PLUGIN_INSIDE) for n in z.namelist() if n.startswith(PLUGIN_INSIDE))
        assert inside == shipped
        for name in shipped:
            assert z.read(PLUGIN_INSIDE + name) == (PLUGIN / name).read_bytes(), f"the wheel's {name} differs"
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        package = json.loads(z.read(PLUGIN_INSIDE + "package.json"))
    assert f"\nVersion: {package['version']}\n" in metadata
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the wheel's list was checked against package.json's `files` only")
    # npm's own reading of `files`: what `npm pack` would publish.
    node_dirs = [str(p.parent) for p in (*NODE22, *sorted(TOOLS.glob("node24/node_modules/node-*/bin/node")))]
    env = {**installed_env(), "PATH": os.pathsep.join([*node_dirs, os.environ.get("PATH", "")])}
    packed = _run([npm, "pack", "--dry-run", "--json", "--ignore-scripts"], cwd=PLUGIN, env=env)
    assert packed.returncode == 0, packed.stderr[-2000:]
    assert sorted(f["path"] for f in json.loads(packed.stdout)[0]["files"]) == shipped


def test_the_sdist_carries_what_the_wheel_is_built_from(tmp_path: Path) -> None:
    # Asked from tmp_path: in the checkout, the `build/` folder a wheel build leaves would pass for
    # the `build` package.
    probe = _run([sys.executable, "-c", "import build.__main__"], cwd=tmp_path)
    if probe.returncode != 0:
        pytest.skip("python -m build is not installed")
    built = _run([sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path / "dist"), str(REPO)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("memory_router-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name and m.isfile()}
    engine = "memory_router/backends/qmd/qmd_engine.mjs"
    for path in ("LICENSE", "SKILL.md", "skills/memory-router/SKILL.md", engine, "README.md"):
        assert path in names, f"the sdist lacks {path}"
    plugin = sorted(n.removeprefix("openclaw-plugin/") for n in names if n.startswith("openclaw-plugin/"))
    assert plugin == plugin_files(PLUGIN), "the sdist's plugin is not the files it ships"


@pytest.mark.skipif(not (QMD_PACKAGE.is_dir() and NODE22), reason="qmd is not installed (.ci/setup.d/20-qmd.sh)")
def test_an_installed_copy_serves_qmd_through_its_warm_engine(venv: Path, tmp_path: Path) -> None:
    """demo + serve from the installed copy, qmd found through $MEMORY_ROUTER_QMD/$MEMORY_ROUTER_NODE
    (an installed copy has no .tools): the warm engine (qmd_engine.mjs) must start and answer."""
    python = venv / "bin" / "python"
    where = _run([str(python), "-c", "import memory_router; print(memory_router.__file__)"], cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    env = installed_env(MEMORY_ROUTER_QMD=str(QMD_PACKAGE), MEMORY_ROUTER_NODE=str(NODE22[0]))
    demo = _run([str(venv / "bin" / "memory-router"), "demo", "--dir", str(tmp_path / "d")], env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr
    statuses = json.loads((tmp_path / "d" / "state" / "backends.json").read_text())["backends"]
    assert statuses["qmd"]["status"] == "ready", statuses["qmd"]

    # `serve --state-dir` alone: the demo's router-config.json is found in its state dir.
    serve = subprocess.Popen(
        [str(venv / "bin" / "memory-router"), "serve", "--state-dir", str(tmp_path / "d" / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    assert serve.stdin is not None and serve.stdout is not None
    try:
        serve.stdin.write(b'{"id": 1, "query": "find the function parseAuthToken"}\n')
        serve.stdin.flush()
        answer = json.loads(serve.stdout.readline())
        serve.stdin.write(b'{"id": 2, "op": "stats"}\n')
        serve.stdin.flush()
        stats = json.loads(serve.stdout.readline())
        serve.stdin.close()
        serve.wait(60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, 9)
            serve.wait()
    assert (answer["status"], answer["routed_to"], answer["error_code"]) == ("success", "qmd", None), answer
    assert answer["results"][0]["path"] == "src/auth/token.ts"
    engine = stats["stats"]["runtime"]["qmd"]
    assert engine["transport"] == "engine" and engine["engine"]["state"] == "running", engine


def test_an_installed_copys_hints_fit_an_installed_copy(venv: Path, tmp_path: Path) -> None:
    """No `.tools` under site-packages, no `.ci/setup.d` script: an installed copy says npm."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "backends.json").write_text('{"backends": {"qmd": "ready"}}')
    env = installed_env(PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin", HOME=str(tmp_path))
    proc = _run(
        [str(venv / "bin" / "memory-router"), "query", "find the function parseAuthToken", "--state-dir", str(state)],
        env=env,
        cwd=tmp_path,
    )
    message = json.loads(proc.stdout)["attempts"][0]["error_message"]
    assert "npm install -g @tobilu/qmd" in message, message
    assert ".ci/" not in message and ".tools" not in message and "site-packages" not in message
