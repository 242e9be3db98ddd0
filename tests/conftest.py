"""Shared fixtures: the packaged config, backends.json files, routers over mock backends."""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Mapping
from pathlib import Path

import orjson
import pytest
from hypothesis import settings

from memory_router.backends import BackendContext
from memory_router.backends.base import Backend
from memory_router.config.installed import Installed, parse_installed
from memory_router.config.router_config import RouterConfig, load_config
from memory_router.routing.router import Router
from memory_router.routing.routerlog import RouterLog

from .support.tier_guard import guarded_phase, install

# Property tests: `ci` replays the same examples on every run, so a red CI is reproducible and
# never a coin toss; `hunt` explores far more (run it locally: HYPOTHESIS_PROFILE=hunt); `fast`
# replays a tenth of every test's budget, so the fast tier stays under 30 s (the slow tier of
# .ci/run replays them in full). A budget a test sets itself scales with these: tests/support/budget.py.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("fast", max_examples=10, derandomize=True, print_blob=True)
settings.register_profile("hunt", max_examples=2000, print_blob=True)
FAST_TIER = "not slow"


def hypothesis_profile(environ: Mapping[str, str], markexpr: str) -> str:
    """HYPOTHESIS_PROFILE when set; otherwise `fast` for the fast tier's `-m "not slow"` (so the
    README's command for it keeps its promise), and hypothesis's `default` for any other run."""
    return environ.get("HYPOTHESIS_PROFILE") or ("fast" if markexpr.strip() == FAST_TIER else "default")


def pytest_configure(config: pytest.Config) -> None:
    # Before collection imports a test module: tests/support/budget.py reads the profile at decoration.
    if not config.getoption("hypothesis_profile", None):  # hypothesis's own --hypothesis-profile wins
        settings.load_profile(hypothesis_profile(os.environ, config.option.markexpr))


def pytest_report_header() -> str:
    # Which budgets this run replays: the fast tier's tenth, or every example.
    n = settings().max_examples  # the active profile's
    return f"hypothesis max_examples={n}: a test's budget examples(N) runs N * {n} / 100 (tests/support/budget.py)"


# The fast tier may not start programs: see tests/support/tier_guard.py.
install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from guarded_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from guarded_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from guarded_phase(item))


ALL_BACKENDS = ("qmd", "totalrecall", "cognee", "lossless")
STARTER = ("qmd", "totalrecall")


@pytest.fixture(scope="session")
def config() -> RouterConfig:
    """The packaged config, its chains walked as the spec's Fallback Logic does (``sequential``):
    what most tests check. The packaged strategy, ``fill``, decides the same way and fills the
    answer's list from every step: tests/unit/test_fallback_machine.py and test_fuse.py."""
    return load_config().replace(strategy="sequential")


def installed(*names: str, statuses: Mapping[str, str] | None = None) -> Installed:
    data: dict = {"backends": {n: {"status": "ready"} for n in names}}
    for name, status in (statuses or {}).items():
        data["backends"][name] = {"status": status}
    return parse_installed(data, Path("/virtual/backends.json"))


def make_router(config: RouterConfig, tmp_path: Path, backends: Mapping[str, Backend]) -> Router:
    state = tmp_path / "state"
    return Router(
        config, context=BackendContext(state_dir=state), log=RouterLog(state / "router.log"), backends=backends
    )


def write_json(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data))
    return path


def cli(*args: str) -> list[str]:
    """argv that runs this checkout's memory-router CLI."""
    return [sys.executable, "-m", "memory_router", *args]
